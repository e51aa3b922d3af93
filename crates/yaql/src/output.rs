//! yaql's `#finalize` as Fuel's oracle does it: turn a result into plain data (lists, dicts
//! with JSON string keys, sets sorted), enforcing the item limit; and JSON rendering, both
//! as `serde_json` values and as Python's `json.dumps` text (for `toJson`). Must not evaluate.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::rc::{Rc, Weak};

use super::error::{ErrorKind, Result, YaqlError, err};
use super::interp::{Interp, too_large};
use super::value::{FxBuild, Map, Value, float_repr};

fn unserializable(what: &str) -> YaqlError {
    YaqlError::new(ErrorKind::UnserializableResult, what.to_string())
}

/// Plain data: null, bool, int, float, str, list and dict with string keys.
pub fn finalize(it: &Interp, v: &Value) -> Result<Value> {
    let mut budget = it.limits().memory_quota;
    fin(it, v, &mut budget).map(|v| as_list(&v))
}

/// Containers smaller than this are finalised and compared afresh (cheaper than a lookup).
const MEMO_MIN: usize = 8;

/// Finalised forms of immutable containers (dicts, lists, tuples holding only plain data),
/// shared by evaluations over the same data, and the outcome of comparing two finalised
/// containers. Keyed by the containers' addresses. Results, errors and budget charges are
/// exactly those of finalising afresh.
///
/// Under a memo, a container that is plain data already (string keys, finite numbers, no
/// sets or views) is its own finalised form: a tuple stands for the list it would become and
/// a frozen dict for the dict, so finalising the deployment data shared by thousands of
/// nodes copies nothing. Consumers of memoised forms ([`final_eq`], [`to_json`], [`Json`],
/// [`python_json`], the YAML writer) treat tuples as lists; [`finalize`]'s own result is a
/// list at the top.
///
/// The memo holds its keys weakly: an entry does not keep its container (a node's data, say)
/// alive after the evaluations that made it are gone, and the allocation it still pins
/// cannot be reused, so an address names one container for as long as its entry lives.
/// Entries whose containers are gone are dropped as the memo grows (each purge at twice the
/// size the previous one left).
#[derive(Default)]
pub struct FinalMemo {
    /// (address, item limit) → the finalised form and the budget it charged.
    fin: RefCell<Purged<Finalised>>,
    /// (address, address) → whether the two finalised containers are equal.
    eq: RefCell<Purged<bool>>,
}

/// A container the memo names without keeping it alive.
enum Held {
    Dict(Weak<super::value::Dict>),
    Seq(Weak<[Value]>),
}

impl Held {
    fn of(v: &Value) -> Option<Held> {
        match v {
            Value::Dict(d) => Some(Held::Dict(Rc::downgrade(d))),
            Value::Tuple(t) | Value::List(t) => Some(Held::Seq(Rc::downgrade(t))),
            _ => None,
        }
    }

    fn alive(&self) -> bool {
        match self {
            Held::Dict(d) => d.strong_count() > 0,
            Held::Seq(s) => s.strong_count() > 0,
        }
    }
}

/// A finalisation remembered: its form unless that is the container, and its cost.
struct Finalised {
    copy: Option<Value>,
    cost: usize,
}

/// The one or two containers a memo entry is about, held weakly.
type About = (Held, Option<Held>);

/// A memo map. Each entry names the one or two containers it is about without keeping them
/// alive; those whose containers are gone are dropped when the map has doubled.
struct Purged<T> {
    map: HashMap<(usize, usize), (About, T), FxBuild>,
    next_purge: usize,
}

impl<T> Default for Purged<T> {
    fn default() -> Self {
        Purged {
            map: HashMap::default(),
            next_purge: PURGE_MIN,
        }
    }
}

/// A memo map is not purged below this many entries.
const PURGE_MIN: usize = 4096;

impl<T> Purged<T> {
    fn get(&self, k: &(usize, usize)) -> Option<&T> {
        self.map.get(k).map(|(_, v)| v)
    }

    fn insert(&mut self, k: (usize, usize), about: About, v: T) {
        if self.map.len() >= self.next_purge {
            self.map
                .retain(|_, ((a, b), _)| a.alive() && b.as_ref().is_none_or(Held::alive));
            self.next_purge = (self.map.len() * 2).max(PURGE_MIN);
        }
        self.map.insert(k, (about, v));
    }
}

/// The address of a container worth memoising.
fn memo_key(v: &Value) -> Option<usize> {
    match v {
        Value::Dict(d) if d.map.len() >= MEMO_MIN => Some(Rc::as_ptr(d) as *const () as usize),
        Value::Tuple(t) | Value::List(t) if t.len() >= MEMO_MIN => {
            Some(Rc::as_ptr(t) as *const () as usize)
        }
        _ => None,
    }
}

/// Python `==` of two finalised values (see [`super::value::py_eq`]), remembering the outcome
/// for large containers in the evaluation's memo.
pub fn final_eq(it: &Interp, a: &Value, b: &Value) -> bool {
    let Some(memo) = it.0.memo.as_deref() else {
        return super::value::py_eq(a, b);
    };
    eq_m(memo, a, b)
}

fn eq_m(memo: &FinalMemo, a: &Value, b: &Value) -> bool {
    let key = match (memo_key(a), memo_key(b)) {
        (Some(x), Some(y)) => Some((x, y)),
        _ => None,
    };
    if let Some(k) = key
        && let Some(&equal) = memo.eq.borrow().get(&k)
    {
        return equal;
    }
    let r = match (a, b) {
        // Finalised sequences are lists; a memoised form may still be the tuple it stands for.
        (Value::List(x) | Value::Tuple(x), Value::List(y) | Value::Tuple(y)) => {
            Rc::ptr_eq(x, y)
                || (x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| eq_m(memo, p, q)))
        }
        (Value::Dict(x), Value::Dict(y)) => {
            Rc::ptr_eq(x, y)
                || (x.map.len() == y.map.len()
                    && x.map
                        .iter()
                        .all(|(k, v)| y.map.get(k).is_some_and(|w| eq_m(memo, v, w))))
        }
        _ => super::value::py_eq(a, b),
    };
    if let Some(k) = key
        && let (Some(x), Some(y)) = (Held::of(a), Held::of(b))
    {
        memo.eq.borrow_mut().insert(k, (x, Some(y)), r);
    }
    r
}

/// Charge `bytes` to the output budget (shared structure is expanded by finalisation, so a
/// small value can stand for an exponentially large result).
fn charge(budget: &mut usize, bytes: usize) -> Result<()> {
    if bytes > *budget {
        return err(
            ErrorKind::MemoryQuotaExceededException,
            "Expression consumed too much memory",
        );
    }
    *budget -= bytes;
    Ok(())
}

fn fin(it: &Interp, v: &Value, budget: &mut usize) -> Result<Value> {
    fin_m(it, v, budget).map(|(v, _)| v)
}

/// Finalise through the memo: the value, and whether it depends on immutable data only (so
/// finalising it again would give the same result).
fn fin_m(it: &Interp, v: &Value, budget: &mut usize) -> Result<(Value, bool)> {
    let limit = it.limits().max_items;
    let key = match (&it.0.memo, memo_key(v)) {
        (Some(m), Some(k)) => Some((m, (k, limit))),
        _ => None,
    };
    if let Some((m, k)) = &key
        && let Some(f) = m.fin.borrow().get(k)
    {
        charge(budget, f.cost)?;
        return Ok((f.copy.clone().unwrap_or_else(|| as_list(v)), true));
    }
    let before = *budget;
    let (out, pure) = fin_once(it, v, budget)?;
    if pure
        && let Some((m, k)) = key
        && let Some(held) = Held::of(v)
    {
        let copy = (!same(v, &out)).then(|| out.clone());
        m.fin.borrow_mut().insert(
            k,
            (held, None),
            Finalised {
                copy,
                cost: before - *budget,
            },
        );
    }
    Ok((out, pure))
}

/// A container as its own finalised form: a tuple is the list it stands for.
fn as_list(v: &Value) -> Value {
    match v {
        Value::Tuple(t) => Value::List(t.clone()),
        _ => v.clone(),
    }
}

/// Whether `out`, the finalised form of `v`, is `v` itself (a scalar, the same container, or
/// the list a tuple stands for).
fn same(v: &Value, out: &Value) -> bool {
    match (v, out) {
        (Value::Dict(x), Value::Dict(y)) => Rc::ptr_eq(x, y),
        (Value::Tuple(x) | Value::List(x), Value::Tuple(y) | Value::List(y)) => Rc::ptr_eq(x, y),
        (Value::Null, Value::Null)
        | (Value::Bool(_), Value::Bool(_))
        | (Value::Int(_), Value::Int(_))
        | (Value::Float(_), Value::Float(_))
        | (Value::Str(_), Value::Str(_)) => true,
        _ => false,
    }
}

fn fin_once(it: &Interp, v: &Value, budget: &mut usize) -> Result<(Value, bool)> {
    let limit = it.limits().max_items;
    // Under a memo, plain containers are their own finalised forms (see [`FinalMemo`]):
    // nothing is copied until an item's form differs from the item.
    let share = it.0.memo.is_some();
    charge(
        budget,
        16 + match v {
            Value::Str(s) => s.len(),
            _ => 0,
        },
    )?;
    match v {
        Value::Null | Value::Bool(_) | Value::Int(_) | Value::Str(_) => Ok((v.clone(), true)),
        Value::Float(f) => {
            if f.is_finite() {
                Ok((v.clone(), true))
            } else {
                Err(unserializable("NaN or Infinity"))
            }
        }
        Value::Dict(d) => {
            if d.map.len() > limit {
                return Err(too_large(limit));
            }
            let mut out = (!share).then(|| Vec::with_capacity(d.map.len()));
            let mut pure = true;
            for (i, (k, val)) in d.map.iter().enumerate() {
                let (fk, pk) = fin_m(it, k, budget)?;
                let fk = match fk {
                    Value::Str(_) => fk,
                    k => Value::string(json_key(&k)?),
                };
                let (fv, pv) = fin_m(it, val, budget)?;
                pure &= pk && pv;
                if out.is_none() && !(same(k, &fk) && same(val, &fv)) {
                    let mut copy = Vec::with_capacity(d.map.len());
                    copy.extend(d.map.iter().take(i).map(|(k, v)| (k.clone(), v.clone())));
                    out = Some(copy);
                }
                if let Some(o) = &mut out {
                    o.push((fk, fv));
                }
            }
            Ok(match out {
                Some(o) => (Value::dict(Map::from_entries(o)), pure),
                None => (v.clone(), pure),
            })
        }
        Value::Set(_) => {
            let items = v.set_items().unwrap_or_default();
            if items.len() > limit {
                return Err(too_large(limit));
            }
            let mut out = Vec::with_capacity(items.len());
            for x in &items {
                out.push(fin(it, x, budget)?);
            }
            sort_set_items(&mut out);
            Ok((Value::list(out), false))
        }
        Value::Tuple(t) | Value::List(t) => {
            if t.len() > limit {
                return Err(too_large(limit));
            }
            let mut out = (!share).then(|| Vec::with_capacity(t.len()));
            let mut pure = true;
            for (i, x) in t.iter().enumerate() {
                let (fx, px) = fin_m(it, x, budget)?;
                pure &= px;
                if out.is_none() && !same(x, &fx) {
                    let mut copy = Vec::with_capacity(t.len());
                    copy.extend(t.iter().take(i).cloned());
                    out = Some(copy);
                }
                if let Some(o) = &mut out {
                    o.push(fx);
                }
            }
            Ok(match out {
                Some(o) => (Value::list(o), pure),
                None => (Value::List(t.clone()), pure),
            })
        }
        Value::Keys(_)
        | Value::Items(_)
        | Value::Values(_)
        | Value::Iter(_)
        | Value::Memo(_)
        | Value::Ordered(_) => {
            let mut src = it.iter(v)?;
            let mut out = Vec::new();
            while let Some(x) = src.next() {
                if out.len() >= limit {
                    return Err(too_large(limit));
                }
                out.push(fin(it, &x?, budget)?);
            }
            Ok((Value::list(out), false))
        }
        other => Err(unserializable(other.type_name())),
    }
}

/// How Python's json module writes a non-string key.
fn json_key(k: &Value) -> Result<String> {
    Ok(match k {
        Value::Str(s) => s.to_string(),
        Value::Null => "null".into(),
        Value::Bool(true) => "true".into(),
        Value::Bool(false) => "false".into(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => float_repr(*f),
        _ => return Err(unserializable("a collection as a dict key")),
    })
}

/// The oracle's order for sets: numeric if all numbers, by code point if all strings,
/// otherwise by canonical JSON text.
pub fn sort_set_items(items: &mut [Value]) {
    if items.iter().all(Value::is_number) {
        items.sort_by(|a, b| {
            let fa = match a {
                Value::Int(i) => *i as f64,
                Value::Float(f) => *f,
                _ => 0.0,
            };
            let fb = match b {
                Value::Int(i) => *i as f64,
                Value::Float(f) => *f,
                _ => 0.0,
            };
            fa.partial_cmp(&fb).unwrap_or(std::cmp::Ordering::Equal)
        });
    } else if items.iter().all(|x| matches!(x, Value::Str(_))) {
        items.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    } else {
        items.sort_by_cached_key(|x| python_json(x, true, false, false));
    }
}

/// Plain data to `serde_json` (ints stay ints, floats stay floats).
pub fn to_json(v: &Value) -> Result<serde_json::Value> {
    Ok(match v {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Int(i) => serde_json::Value::from(*i),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .ok_or_else(|| unserializable("NaN or Infinity"))?,
        Value::Str(s) => serde_json::Value::String(s.to_string()),
        Value::Tuple(t) | Value::List(t) => {
            serde_json::Value::Array(t.iter().map(to_json).collect::<Result<_>>()?)
        }
        Value::Dict(d) => {
            let mut m = serde_json::Map::new();
            for (k, val) in &d.map {
                m.insert(json_key(k)?, to_json(val)?);
            }
            serde_json::Value::Object(m)
        }
        Value::Set(_) => {
            let mut items = v
                .set_items()
                .unwrap_or_default()
                .into_iter()
                .collect::<Vec<_>>();
            sort_set_items(&mut items);
            serde_json::Value::Array(items.iter().map(to_json).collect::<Result<_>>()?)
        }
        other => return err(ErrorKind::UnserializableResult, other.type_name()),
    })
}

/// Plain data as `serde` serialises it (the same JSON as [`to_json`], written as it goes,
/// without a `serde_json::Value` tree; dict keys keep their order). Serialising a value that
/// [`to_json`] refuses fails with the same reason.
pub struct Json<'a>(pub &'a Value);

impl serde::Serialize for Json<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeMap, SerializeSeq};
        match self.0 {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => s.serialize_i64(*i),
            Value::Float(f) if f.is_finite() => s.serialize_f64(*f),
            Value::Str(x) => s.serialize_str(x),
            Value::Tuple(t) | Value::List(t) => {
                let mut seq = s.serialize_seq(Some(t.len()))?;
                for x in t.iter() {
                    seq.serialize_element(&Json(x))?;
                }
                seq.end()
            }
            Value::Dict(d) => {
                let mut m = s.serialize_map(Some(d.map.len()))?;
                for (k, x) in &d.map {
                    match k {
                        Value::Str(k) => m.serialize_key(&**k)?,
                        k => m.serialize_key(&json_key(k).map_err(S::Error::custom)?)?,
                    }
                    m.serialize_value(&Json(x))?;
                }
                m.end()
            }
            Value::Set(_) => {
                let mut items: Vec<Value> =
                    self.0.set_items().unwrap_or_default().into_iter().collect();
                sort_set_items(&mut items);
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for x in &items {
                    seq.serialize_element(&Json(x))?;
                }
                seq.end()
            }
            Value::Float(_) => Err(S::Error::custom(unserializable("NaN or Infinity"))),
            other => Err(S::Error::custom(unserializable(other.type_name()))),
        }
    }
}

/// Python's `json.dumps` of plain data. `canonical` = `sort_keys` with `(',', ':')`
/// separators; otherwise the defaults `(', ', ': ')`.
pub fn python_json(v: &Value, canonical: bool, ensure_ascii: bool, _pretty: bool) -> String {
    let mut out = String::new();
    write_json(&mut out, v, canonical, ensure_ascii);
    out
}

fn write_json(out: &mut String, v: &Value, canonical: bool, ascii: bool) {
    let (item_sep, kv_sep) = if canonical { (",", ":") } else { (", ", ": ") };
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => {
            if f.is_nan() {
                out.push_str("NaN")
            } else if f.is_infinite() {
                out.push_str(if *f > 0.0 { "Infinity" } else { "-Infinity" })
            } else {
                out.push_str(&float_repr(*f))
            }
        }
        Value::Str(s) => write_json_str(out, s, ascii),
        Value::Tuple(t) | Value::List(t) => {
            out.push('[');
            for (i, x) in t.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                write_json(out, x, canonical, ascii);
            }
            out.push(']');
        }
        Value::Dict(d) => {
            let mut entries: Vec<(String, &Value)> = d
                .map
                .iter()
                .map(|(k, v)| (json_key(k).unwrap_or_else(|_| super::value::py_str(k)), v))
                .collect();
            if canonical {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
            }
            out.push('{');
            for (i, (k, x)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                write_json_str(out, k, ascii);
                out.push_str(kv_sep);
                write_json(out, x, canonical, ascii);
            }
            out.push('}');
        }
        other => write_json_str(out, &super::value::py_str(other), ascii),
    }
}

fn write_json_str(out: &mut String, s: &str, ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ascii && (c as u32) > 0x7f => {
                let mut buf = [0u16; 2];
                for u in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{:04x}", u);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use serde_json::json;

    use super::FinalMemo;
    use crate::{Context, Engine, Limits, Value, value::from_json};

    /// A memo shared by contexts over the same sub-trees gives what evaluating afresh gives:
    /// results, and the memory quota (a cached finalisation still charges its cost).
    #[test]
    fn memo_changes_nothing_but_the_work() {
        let nodes: Vec<_> = (0..50)
            .map(|i| json!({"uid": i.to_string(), "roles": ["compute"]}))
            .collect();
        let shared = from_json(&json!({"nodes": nodes, "net": {"a": 1, "b": [1, 2, 3]}}));
        let old_same = from_json(&json!({"nodes": nodes, "net": {"a": 1, "b": [1, 2, 3]}}));
        let old_other = from_json(&json!({"nodes": nodes[1..], "net": {"a": 1}}));
        // The same data with lists where JSON gives tuples, and mutable dicts: what
        // expressions build. Finalised, both are lists and dicts.
        let old_lists = as_lists(&old_same);
        let exprs = [
            "changed($.nodes)",
            "changed($.net)",
            "changed($)",
            "changedAny($.nodes, $.net)",
            "$.nodes.len()",
            "'3' in added($.nodes).uid",
            "changed($.nodes.select($))",
            "changed($.nodes.toSet())",
            "changed($.net.b.toList())",
            "$.nodes.where($.uid = '1')",
            "toJson($.net)",
        ];
        for limits in [
            Limits::default(),
            Limits {
                memory_quota: 2_000,
                ..Limits::default()
            },
        ] {
            let engine = Engine::new(limits);
            let memo = Rc::new(FinalMemo::default());
            for old in [&old_same, &old_other, &old_lists, &Value::Null] {
                for round in 0..3 {
                    for e in exprs {
                        let plain = Context::from_value(shared.clone()).with_old_value(old.clone());
                        let memoised = plain.clone().with_memo(memo.clone());
                        let a = engine.eval_json(e, &plain).map_err(|x| x.to_string());
                        let b = engine.eval_json(e, &memoised).map_err(|x| x.to_string());
                        assert_eq!(a, b, "{e} (round {round})");
                    }
                }
            }
        }
        // The quota is still enforced on a cached value.
        let engine = Engine::new(Limits {
            memory_quota: 2_000,
            ..Limits::default()
        });
        let memo = Rc::new(FinalMemo::default());
        let ctx = Context::from_value(shared).with_memo(memo);
        for _ in 0..2 {
            let e = engine.eval("changed($.nodes)", &ctx).unwrap_err();
            assert!(e.to_string().contains("too much memory"), "{e}");
        }
    }

    /// `v` with every tuple a list and every dict mutable.
    fn as_lists(v: &Value) -> Value {
        match v {
            Value::Tuple(t) | Value::List(t) => Value::list(t.iter().map(as_lists).collect()),
            Value::Dict(d) => Value::dict(
                d.map
                    .iter()
                    .map(|(k, v)| (k.clone(), as_lists(v)))
                    .collect(),
            ),
            v => v.clone(),
        }
    }

    /// Under a memo, plain data is its own finalised form: the shared deployment data of a
    /// plan is not copied once per evaluation (nor once per plan), and a tuple at the top of
    /// a result is still given as a list.
    #[test]
    fn a_memo_finalises_plain_data_without_copying_it() {
        let data = from_json(
            &json!({"nodes": (0..20).map(|i| json!({"uid": i})).collect::<Vec<_>>(), "set": [1, 2, 3, 4, 5, 6, 7, 8, 9]}),
        );
        let engine = Engine::new(Limits::default());
        let ctx = Context::from_value(data.clone()).with_memo(Rc::new(FinalMemo::default()));
        let Value::Dict(d) = &data else { panic!() };
        let nodes = d.map.get(&Value::string("nodes".into())).cloned();
        let Some(Value::Tuple(nodes)) = nodes else {
            panic!("{nodes:?}")
        };
        for _ in 0..2 {
            match engine.eval("$.nodes", &ctx).unwrap() {
                Value::List(got) => assert!(Rc::ptr_eq(&got, &nodes)),
                other => panic!("{other:?}"),
            }
            match engine.eval("$", &ctx).unwrap() {
                Value::Dict(got) => assert!(Rc::ptr_eq(&got, d)),
                other => panic!("{other:?}"),
            }
        }
        // A set inside is sorted into a new list, and its container copied.
        let got = engine.eval("$.set(set => $.set.toSet())", &ctx);
        let got = got.unwrap().to_json().unwrap();
        assert_eq!(got["set"], json!([1, 2, 3, 4, 5, 6, 7, 8, 9]));
        // Without a memo, results are lists and dicts made afresh, as before.
        let plain = Context::from_value(data.clone());
        match engine.eval("$.nodes", &plain).unwrap() {
            Value::List(got) => assert!(!Rc::ptr_eq(&got, &nodes)),
            other => panic!("{other:?}"),
        }
    }

    /// The memo does not keep the data it finalised alive: each node's data is freed when its
    /// evaluations are done, not when the plan is.
    #[test]
    fn a_memo_does_not_keep_finalised_data_alive() {
        let engine = Engine::new(Limits::default());
        let memo = Rc::new(FinalMemo::default());
        let mut gone = Vec::new();
        // Enough nodes that both maps pass their first purge (each node adds two
        // finalisations and one comparison of its 10-item list).
        for n in 0..5000 {
            let node = from_json(
                &json!({"uid": n, "scheme": (0..10).map(|i| json!({"i": i, "n": n})).collect::<Vec<_>>()}),
            );
            let old = from_json(
                &json!({"uid": n, "scheme": (0..10).map(|i| json!({"i": i})).collect::<Vec<_>>()}),
            );
            let ctx = Context::from_value(node.clone())
                .with_old_value(old)
                .with_memo(memo.clone());
            assert_eq!(
                engine.eval("changed($.scheme)", &ctx).unwrap(),
                Value::Bool(true)
            );
            assert_eq!(
                engine.eval("changed($.scheme)", &ctx).unwrap(),
                Value::Bool(true)
            );
            let Value::Dict(d) = &node else { panic!() };
            gone.push(Rc::downgrade(d));
        }
        assert!(gone.iter().all(|w| w.strong_count() == 0));
        // Entries for the dead ones are dropped as the memo grows: kept, there would be
        // 10,000 and 5,000.
        assert!(memo.fin.borrow().map.len() < super::PURGE_MIN);
        assert!(memo.eq.borrow().map.len() < super::PURGE_MIN);
    }
}
