//! Dict storage ([`Map`]): insertion-ordered entries with Python key equality, whose hash
//! index is built only when a dict is large and first looked up. Most dicts of deployment data
//! are small (a node, a network role, a disk) and many are never looked up at all, so building
//! one costs an exactly-sized vector, not a hash table; a small dict is searched linearly,
//! which for a few short string keys is quicker than hashing. Must not know how values
//! compare or hash beyond `Value`'s `Eq` and `Hash`.

use std::cell::OnceCell;
use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::value::{FxBuild, Value};

/// Dicts with at most this many entries are searched linearly and never get an index.
const LINEAR_MAX: usize = 8;

/// An insertion-ordered map from values to values (a Python dict's storage).
#[derive(Default)]
pub struct Map {
    entries: Vec<(Value, Value)>,
    /// Positions in `entries` by key hash; built on the first lookup of a large map.
    index: OnceCell<HashTable<usize>>,
}

fn hash(k: &Value) -> u64 {
    FxBuild.hash_one(k)
}

/// Key equality, with a quick path for the common case of two strings.
#[inline]
fn same_key(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => x.len() == y.len() && **x == **y,
        _ => a == b,
    }
}

impl Clone for Map {
    fn clone(&self) -> Map {
        Map {
            entries: self.entries.clone(),
            index: self.index.clone(),
        }
    }
}

impl Map {
    pub fn new() -> Map {
        Map::default()
    }

    pub fn with_capacity(n: usize) -> Map {
        Map {
            entries: Vec::with_capacity(n),
            index: OnceCell::new(),
        }
    }

    /// A map of `entries` whose keys may repeat: a later value replaces an earlier one and
    /// keeps its position (what inserting them one by one does).
    pub fn from_entries(entries: Vec<(Value, Value)>) -> Map {
        if entries.len() <= LINEAR_MAX {
            let dup = entries
                .iter()
                .enumerate()
                .any(|(i, (k, _))| entries[..i].iter().any(|(j, _)| same_key(j, k)));
            if !dup {
                return Map {
                    entries,
                    index: OnceCell::new(),
                };
            }
            let mut m = Map::with_capacity(entries.len());
            m.extend(entries);
            return m;
        }
        // Large: the index is built now, as duplicates are looked for.
        let mut t: HashTable<usize> = HashTable::with_capacity(entries.len());
        let mut hashes = Vec::with_capacity(entries.len());
        let mut kept: Vec<(Value, Value)> = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            let h = hash(&k);
            match t.find(h, |&i| same_key(&kept[i].0, &k)) {
                Some(&i) => kept[i].1 = v,
                None => {
                    t.insert_unique(h, kept.len(), |&i| hashes[i]);
                    hashes.push(h);
                    kept.push((k, v));
                }
            }
        }
        Map {
            entries: kept,
            index: OnceCell::from(t),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn table(&self) -> &HashTable<usize> {
        self.index.get_or_init(|| {
            let mut t = HashTable::with_capacity(self.entries.len());
            for (i, (k, _)) in self.entries.iter().enumerate() {
                t.insert_unique(hash(k), i, |&j| hash(&self.entries[j].0));
            }
            t
        })
    }

    /// The position of `key`.
    pub fn get_index_of(&self, key: &Value) -> Option<usize> {
        if self.entries.len() <= LINEAR_MAX {
            return self.entries.iter().position(|(k, _)| same_key(k, key));
        }
        self.table()
            .find(hash(key), |&i| same_key(&self.entries[i].0, key))
            .copied()
    }

    pub fn get(&self, key: &Value) -> Option<&Value> {
        self.get_index_of(key).map(|i| &self.entries[i].1)
    }

    /// `get` for a string key, without making a value of it.
    pub fn get_str(&self, key: &str) -> Option<&Value> {
        let is = |k: &Value| matches!(k, Value::Str(s) if **s == *key);
        if self.entries.len() <= LINEAR_MAX {
            return self.entries.iter().find(|(k, _)| is(k)).map(|(_, v)| v);
        }
        self.table()
            .find(FxBuild.hash_one(key), |&i| is(&self.entries[i].0))
            .map(|&i| &self.entries[i].1)
    }

    pub fn contains_key(&self, key: &Value) -> bool {
        self.get_index_of(key).is_some()
    }

    pub fn get_index(&self, i: usize) -> Option<(&Value, &Value)> {
        self.entries.get(i).map(|(k, v)| (k, v))
    }

    /// Insert or replace (a replaced key keeps its position); the old value.
    pub fn insert(&mut self, key: Value, value: Value) -> Option<Value> {
        if let Some(i) = self.get_index_of(&key) {
            return Some(std::mem::replace(&mut self.entries[i].1, value));
        }
        let i = self.entries.len();
        if let Some(t) = self.index.get_mut() {
            let entries = &self.entries;
            t.insert_unique(hash(&key), i, |&j| hash(&entries[j].0));
        }
        self.entries.push((key, value));
        None
    }

    /// Remove `key`, keeping the order of the others; its value.
    pub fn shift_remove(&mut self, key: &Value) -> Option<Value> {
        let i = self.get_index_of(key)?;
        self.index.take();
        Some(self.entries.remove(i).1)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&Value, &Value)> + ExactSizeIterator {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &Value> + ExactSizeIterator {
        self.entries.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Value> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }
}

type Pair<'a> = fn(&'a (Value, Value)) -> (&'a Value, &'a Value);

fn pair(e: &(Value, Value)) -> (&Value, &Value) {
    (&e.0, &e.1)
}

impl<'a> IntoIterator for &'a Map {
    type Item = (&'a Value, &'a Value);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (Value, Value)>, Pair<'a>>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(pair as Pair<'a>)
    }
}

impl IntoIterator for Map {
    type Item = (Value, Value);
    type IntoIter = std::vec::IntoIter<(Value, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl FromIterator<(Value, Value)> for Map {
    fn from_iter<I: IntoIterator<Item = (Value, Value)>>(it: I) -> Map {
        let it = it.into_iter();
        let mut m = Map::with_capacity(it.size_hint().0);
        m.extend(it);
        m
    }
}

impl Extend<(Value, Value)> for Map {
    fn extend<I: IntoIterator<Item = (Value, Value)>>(&mut self, it: I) {
        for (k, v) in it {
            self.insert(k, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Value {
        Value::str(x)
    }

    #[test]
    fn small_and_large_maps_agree_with_python_dicts() {
        for n in [0, 1, LINEAR_MAX, LINEAR_MAX + 1, 100] {
            let mut m = Map::new();
            for i in 0..n {
                assert!(
                    m.insert(s(&format!("k{i}")), Value::Int(i as i64))
                        .is_none()
                );
            }
            // Replacing keeps the position; 1 == 1.0 == True as keys.
            if n > 0 {
                assert!(m.insert(s("k0"), Value::Int(-1)).is_some());
                assert_eq!(m.get_index(0).map(|(_, v)| v.clone()), Some(Value::Int(-1)));
            }
            m.insert(Value::Int(1), s("one"));
            assert_eq!(m.get(&Value::Float(1.0)), Some(&s("one")));
            assert_eq!(m.get(&Value::Bool(true)), Some(&s("one")));
            assert_eq!(m.len(), n + 1);
            for i in 1..n {
                let k = format!("k{i}");
                assert_eq!(m.get_str(&k), Some(&Value::Int(i as i64)));
                assert!(m.contains_key(&s(&k)));
                assert_eq!(m.get_index_of(&s(&k)), Some(i));
            }
            assert_eq!(m.get_str("absent"), None);
            let keys: Vec<_> = m.keys().cloned().collect();
            assert_eq!(keys.len(), n + 1);
            assert_eq!(keys.last(), Some(&Value::Int(1)));
        }
    }

    #[test]
    fn from_entries_keeps_the_first_position_and_the_last_value() {
        for n in [3, 20] {
            let mut entries: Vec<_> = (0..n).map(|i| (Value::Int(i), Value::Int(i))).collect();
            entries.push((Value::Float(1.0), s("last")));
            let m = Map::from_entries(entries);
            assert_eq!(m.len(), n as usize);
            assert_eq!(m.get_index(1).map(|(_, v)| v.clone()), Some(s("last")));
            // An index built after the fact and one kept up by inserts agree.
            let mut grown = m.clone();
            grown.insert(Value::Int(1000), Value::Null);
            assert_eq!(grown.get(&Value::Int(1)), Some(&s("last")));
            assert_eq!(grown.get(&Value::Int(1000)), Some(&Value::Null));
        }
    }
}
