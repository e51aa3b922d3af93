//! JSON (or YAML through serde) into YAQL values, the way yaql's `convert_input_data` does it:
//! arrays become tuples, objects frozen dicts. A [`Converter`] builds values straight from the
//! parser's events (no `serde_json::Value` tree in between), keeps object key order, sizes
//! every tuple and dict exactly, and interns short strings, so the keys every node repeats
//! (`uid`, `roles`, `name` ...) are one shared allocation, not one per occurrence. Keep one
//! converter for many documents of one kind (the nodes of a plan, the lines of a JSON Lines
//! stream) to share their strings too; its table is bounded, so hostile input cannot grow it
//! past [`INTERN_MAX`] strings of at most [`INTERN_MAX_LEN`] bytes. JSON text goes through
//! `jsontext` (one pass, no tree), whose objects and arrays are shared between documents by
//! their text through the converter's bounded `share` table: documents that repeat sub-trees
//! (the nodes of one plan) get the same values for them, converted once. Must not evaluate.

use std::hash::BuildHasher;
use std::rc::Rc;

use hashbrown::HashTable;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::jsontext::{self, TextError};
use super::map::Map;
use super::share;
use super::value::{FxBuild, Value};

/// Strings longer than this are not interned (they are rarely repeated keys).
pub const INTERN_MAX_LEN: usize = 48;
/// Strings a converter keeps at most; past it, new strings are allocated as they come.
pub const INTERN_MAX: usize = 8192;

/// Converts documents into values; see the module's documentation.
#[derive(Default)]
pub struct Converter {
    strings: HashTable<Rc<str>>,
    /// Scratch stacks of the arrays and objects being read (reused, so a document's
    /// collections are allocated once, at their final size).
    pub(super) items: Vec<Value>,
    pub(super) entries: Vec<(Value, Value)>,
    /// Sub-trees of earlier texts, by their text.
    pub(super) share: share::Table,
}

impl Converter {
    pub fn new() -> Converter {
        Converter::default()
    }

    /// A converter whose table of shared sub-trees holds at most `limits` per generation
    /// ([`ShareLimits::OFF`]: no sharing, every text converted in full).
    ///
    /// [`ShareLimits::OFF`]: share::Limits::OFF
    pub fn with_sharing(limits: share::Limits) -> Converter {
        Converter {
            share: share::Table::new(limits),
            ..Converter::default()
        }
    }

    /// What the table of shared sub-trees did and holds.
    pub fn stats(&self) -> share::Stats {
        self.share.stats()
    }

    /// A string value, shared with earlier equal short strings.
    pub fn str(&mut self, s: &str) -> Value {
        if s.len() > INTERN_MAX_LEN {
            return Value::str(s);
        }
        let h = FxBuild.hash_one(s);
        if let Some(rc) = self.strings.find(h, |x| **x == *s) {
            return Value::Str(rc.clone());
        }
        let rc: Rc<str> = Rc::from(s);
        if self.strings.len() < INTERN_MAX {
            self.strings
                .insert_unique(h, rc.clone(), |x| FxBuild.hash_one(&**x));
        }
        Value::Str(rc)
    }

    /// Strings the converter holds.
    pub fn interned(&self) -> usize {
        self.strings.len()
    }

    /// A `serde` seed that deserialises one value with this converter.
    pub fn seed(&mut self) -> Seed<'_> {
        Seed(self)
    }

    /// Parse JSON text into a value (`jsontext`: RFC 8259 as `serde_json` reads it, numbers
    /// as Python's `json`), sharing sub-trees with earlier texts.
    pub fn convert_text(&mut self, text: &str) -> Result<Value, TextError> {
        jsontext::document(self, text)
    }

    /// Convert a `serde_json` value (its objects in `serde_json`'s order).
    pub fn convert(&mut self, v: &serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => number(n),
            serde_json::Value::String(s) => self.str(s),
            serde_json::Value::Array(a) => {
                Value::Tuple(a.iter().map(|x| self.convert(x)).collect())
            }
            serde_json::Value::Object(o) => {
                let mut entries = Vec::with_capacity(o.len());
                for (k, x) in o {
                    entries.push((self.str(k), self.convert(x)));
                }
                Value::frozen_dict(Map::from_entries(entries))
            }
        }
    }
}

fn number(n: &serde_json::Number) -> Value {
    if let Some(i) = n.as_i64() {
        Value::Int(i)
    } else if let Some(f) = n.as_f64() {
        // beyond i64: keep the magnitude as a float rather than fail
        Value::Float(f)
    } else {
        Value::Null
    }
}

/// One value deserialised by a [`Converter`].
pub struct Seed<'c>(&'c mut Converter);

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(i64::try_from(v)
            .map(Value::Int)
            .unwrap_or(Value::Float(v as f64)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(self.0.str(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let c = self.0;
        let start = c.items.len();
        while let Some(x) = seq.next_element_seed(Seed(&mut *c))? {
            c.items.push(x);
        }
        Ok(Value::Tuple(c.items.drain(start..).collect()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let c = self.0;
        let start = c.entries.len();
        while let Some(k) = map.next_key_seed(Seed(&mut *c))? {
            let v = map.next_value_seed(Seed(&mut *c))?;
            c.entries.push((k, v));
        }
        let entries: Vec<(Value, Value)> = c.entries.drain(start..).collect();
        Ok(Value::frozen_dict(Map::from_entries(entries)))
    }
}

/// Deserialise JSON (or YAML through serde) straight into values, keeping object key order
/// (a `serde_json::Value` without serde_json's `preserve_order` feature sorts keys); strings
/// are shared within the document.
impl<'de> serde::Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        Converter::new().seed().deserialize(d)
    }
}

/// Convert JSON input the way yaql's `convert_input_data` does.
pub fn from_json(v: &serde_json::Value) -> Value {
    Converter::new().convert(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_trees_convert_alike_and_keys_are_shared() {
        let text = r#"{"b": [1, 2.5, "x", null, true], "a": {"uid": "1", "k": 18446744073709551615},
                       "nodes": [{"uid": "1"}, {"uid": "2"}], "b": "again"}"#;
        let mut c = Converter::new();
        let v = c.convert_text(text).unwrap();
        // Order kept, a repeated key keeps its first place and takes the last value.
        let Value::Dict(d) = &v else { panic!() };
        let keys: Vec<_> = d.map.keys().map(|k| k.as_str().unwrap()).collect();
        assert_eq!(keys, ["b", "a", "nodes"]);
        assert_eq!(d.map.get_str("b"), Some(&Value::str("again")));
        assert_eq!(
            d.map.get_str("a").and_then(|a| match a {
                Value::Dict(a) => a.map.get_str("k").cloned(),
                _ => None,
            }),
            Some(Value::Float(18446744073709551615.0))
        );
        // Every "uid" key is the same allocation.
        let Some(Value::Tuple(nodes)) = d.map.get_str("nodes") else {
            panic!()
        };
        let uid = |n: &Value| match n {
            Value::Dict(n) => match n.map.get_index(0) {
                Some((Value::Str(s), _)) => s.clone(),
                _ => panic!(),
            },
            _ => panic!(),
        };
        assert!(Rc::ptr_eq(&uid(&nodes[0]), &uid(&nodes[1])));
        // The same document through a serde_json tree gives an equal value.
        let tree: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(c.convert(&tree), v);
        assert!(c.convert_text("[1,").is_err());
        assert!(c.convert_text("[1] x").is_err());
    }

    #[test]
    fn the_string_table_is_bounded() {
        let mut c = Converter::new();
        for i in 0..INTERN_MAX + 100 {
            c.str(&format!("s{i}"));
        }
        c.str(&"x".repeat(INTERN_MAX_LEN + 1));
        assert_eq!(c.interned(), INTERN_MAX);
        // Past the bound strings still convert.
        assert_eq!(c.str("fresh"), Value::str("fresh"));
    }
}
