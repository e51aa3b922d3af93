//! Sub-trees shared between documents by their text: the table a [`Converter`] keeps so that an
//! object or array it has converted before (a plan's `network_metadata`, the settings every
//! node's data repeats, the same document sent again) is handed out as the same reference-
//! counted value instead of being parsed and allocated again. What owns the idea "these bytes
//! were converted before, into this value".
//!
//! An entry is found by a hash of the first [`KEY_LEN`] bytes of its text and accepted only
//! when the input from there on starts with the entry's whole text, byte for byte. JSON
//! objects and arrays end where their text says, so that text is then exactly the input's
//! sub-tree and the value is the one converting it would give: a hash collision costs a
//! comparison, never a wrong value. Text is compared as it is (the same data written with
//! other spacing or key order is simply not found).
//!
//! Bounded, whatever the input: entries live in two generations; a new entry goes into the
//! current one, and when that holds [`Limits::entries`] entries or [`Limits::bytes`] bytes of
//! text it becomes the previous one and the previous one is dropped. An entry found in the
//! previous generation moves to the current one, so what documents keep sharing stays and
//! what they stopped sharing goes (an approximate LRU). At most [`PER_HASH`] entries share a
//! hash, so crafted collisions cannot make a look-up long. Must not parse or evaluate.
//!
//! [`Converter`]: super::Converter

use hashbrown::HashTable;

use super::value::Value;

/// Bytes of text an entry's look-up key is made from.
pub const KEY_LEN: usize = 32;
/// Containers whose text is shorter are not shared (converting them costs less than a look-up).
pub const MIN_TEXT: usize = 64;
/// Entries with the same hash at most (crafted collisions cost this many comparisons).
pub const PER_HASH: usize = 4;
/// Containers nested deeper than this (counting from the text's top level, 0) are neither
/// looked up nor offered. Each look-up compares at most the container's own text (plus a
/// byte) with up to 2 × [`PER_HASH`] entries, and each offer copies that text once, so a
/// text's byte is compared or copied at most this many times over, whatever its nesting:
/// reading stays linear in the text. Deployment data shares its sub-trees well above it
/// (a node's `network_metadata` is at depth 1).
pub const SHARE_DEPTH: u32 = 12;

/// How much one table may hold, per generation (two are kept).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Entries.
    pub entries: usize,
    /// Bytes of text (each entry counts its whole text, nested ones again, so this bounds the
    /// text kept and, with it, the values).
    pub bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            entries: 16_384,
            bytes: 8 << 20,
        }
    }
}

impl Limits {
    /// No sharing at all.
    pub const OFF: Limits = Limits {
        entries: 0,
        bytes: 0,
    };
}

struct Entry {
    hash: u64,
    text: Box<[u8]>,
    value: Value,
    /// Nesting depth of the value (1 for a container of scalars), so a shared value found
    /// deeper in a document still respects the reader's depth limit.
    height: u32,
}

/// What a table did (for tests and benchmarks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Containers found, and the bytes of text they spared.
    pub hits: u64,
    pub hit_bytes: u64,
    /// Containers converted and offered to the table.
    pub stored: u64,
    /// Entries and bytes of text held now (both generations).
    pub entries: usize,
    pub bytes: usize,
}

/// The table; see the module's documentation.
#[derive(Default)]
pub struct Table {
    limits: Limits,
    current: HashTable<Entry>,
    previous: HashTable<Entry>,
    current_bytes: usize,
    previous_bytes: usize,
    hits: u64,
    hit_bytes: u64,
    stored: u64,
}

/// A found entry: its value, the length of its text and its height.
pub struct Found {
    pub value: Value,
    pub len: usize,
    pub height: u32,
}

impl Table {
    pub fn new(limits: Limits) -> Table {
        Table {
            limits,
            ..Table::default()
        }
    }

    /// The look-up key of a container starting at `rest[0]`, if one that long could be shared.
    #[inline]
    pub fn key(&self, rest: &[u8]) -> Option<u64> {
        if self.limits.entries == 0 || rest.len() < MIN_TEXT {
            return None;
        }
        let mut h = 0u64;
        for chunk in rest[..KEY_LEN].chunks_exact(8) {
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
        // A product's low bits depend only on the factors' low bits: fold the high ones down
        // (the table picks buckets with the low bits).
        Some(h ^ (h >> 32))
    }

    /// The value of the container whose text `rest` starts with, if the table has it.
    pub fn find(&mut self, hash: u64, rest: &[u8]) -> Option<Found> {
        let matches = |e: &Entry| e.hash == hash && rest.starts_with(&e.text);
        let found = if let Some(e) = self.current.find(hash, matches) {
            Found {
                value: e.value.clone(),
                len: e.text.len(),
                height: e.height,
            }
        } else {
            let Ok(slot) = self.previous.find_entry(hash, matches) else {
                return None;
            };
            let (e, _) = slot.remove();
            self.previous_bytes -= e.text.len();
            let found = Found {
                value: e.value.clone(),
                len: e.text.len(),
                height: e.height,
            };
            self.insert(e);
            found
        };
        self.hits += 1;
        self.hit_bytes += found.len as u64;
        Some(found)
    }

    /// Keep `value`, converted from `text` (a whole object or array), for later documents.
    pub fn offer(&mut self, hash: u64, text: &[u8], value: &Value, height: u32) {
        if text.len() < MIN_TEXT || text.len() > self.limits.bytes {
            return;
        }
        if self
            .current
            .iter_hash(hash)
            .filter(|e| e.hash == hash)
            .take(PER_HASH)
            .count()
            >= PER_HASH
        {
            return;
        }
        self.stored += 1;
        self.insert(Entry {
            hash,
            text: text.into(),
            value: value.clone(),
            height,
        });
    }

    fn insert(&mut self, e: Entry) {
        if self.current.len() >= self.limits.entries
            || self.current_bytes + e.text.len() > self.limits.bytes
        {
            // The current generation is full: it becomes the previous one.
            self.previous = std::mem::take(&mut self.current);
            self.previous_bytes = std::mem::replace(&mut self.current_bytes, 0);
        }
        self.current_bytes += e.text.len();
        self.current.insert_unique(e.hash, e, |x| x.hash);
    }

    pub fn stats(&self) -> Stats {
        Stats {
            hits: self.hits,
            hit_bytes: self.hit_bytes,
            stored: self.stored,
            entries: self.current.len() + self.previous.len(),
            bytes: self.current_bytes + self.previous_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(i: usize) -> Vec<u8> {
        format!(
            "{{\"key\": \"{}\", \"padding\": \"{}\"}}",
            i,
            "x".repeat(60)
        )
        .into_bytes()
    }

    #[test]
    fn found_only_by_the_whole_text() {
        let mut t = Table::new(Limits::default());
        let a = text(1);
        let h = t.key(&a).unwrap();
        t.offer(h, &a, &Value::Int(1), 1);
        // Followed by more input: still found, with the length of its own text.
        let mut rest = a.clone();
        rest.extend_from_slice(b", 2]");
        let f = t.find(h, &rest).unwrap();
        assert_eq!((f.value, f.len), (Value::Int(1), a.len()));
        // Same hash, other text: not found.
        let mut other = a.clone();
        let last = other.len() - 2;
        other[last] = b'y';
        assert!(t.find(h, &other).is_none());
        // Too short to be worth sharing.
        assert!(t.key(b"[1, 2]").is_none());
        assert_eq!(t.stats().hits, 1);
    }

    #[test]
    fn crafted_collisions_are_capped() {
        let mut t = Table::new(Limits::default());
        for i in 0..10 {
            let a = text(i);
            // the same hash for all, as an attacker who found collisions would have it
            t.offer(7, &a, &Value::Int(i as i64), 1);
        }
        assert_eq!(t.stats().entries, PER_HASH);
    }

    #[test]
    fn bounded_and_what_is_used_stays() {
        let limits = Limits {
            entries: 8,
            bytes: 1 << 20,
        };
        let mut t = Table::new(limits);
        let hot = text(0);
        let hh = t.key(&hot).unwrap();
        t.offer(hh, &hot, &Value::Int(0), 1);
        for i in 1..1000 {
            let a = text(i);
            let h = t.key(&a).unwrap();
            t.offer(h, &a, &Value::Int(i as i64), 1);
            // The hot entry is used by every document, so it survives every rotation.
            assert!(t.find(hh, &hot).is_some(), "{i}");
            assert!(t.stats().entries <= 2 * limits.entries);
        }
        // An entry not used since two rotations is gone.
        let old = text(1);
        assert!(t.find(t.key(&old).unwrap(), &old).is_none());
        // Bytes bound it too.
        let mut t = Table::new(Limits {
            entries: 1000,
            bytes: 1000,
        });
        for i in 0..100 {
            let a = text(i);
            t.offer(t.key(&a).unwrap(), &a, &Value::Null, 1);
            assert!(t.stats().bytes <= 2000);
        }
        // Off: nothing is kept or looked for.
        let t = Table::new(Limits::OFF);
        assert!(t.key(&hot).is_none());
    }
}
