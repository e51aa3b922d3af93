//! yaql's `#finalize` as Fuel's oracle does it: turn a result into plain data (lists, dicts
//! with JSON string keys, sets sorted), enforcing the item limit; and JSON rendering, both
//! as `serde_json` values and as Python's `json.dumps` text (for `toJson`). Must not evaluate.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::rc::Rc;

use super::error::{ErrorKind, Result, YaqlError, err};
use super::interp::{Interp, too_large};
use super::value::{FxBuild, Map, Value, float_repr};

fn unserializable(what: &str) -> YaqlError {
    YaqlError::new(ErrorKind::UnserializableResult, what.to_string())
}

/// Plain data: null, bool, int, float, str, list and dict with string keys.
pub fn finalize(it: &Interp, v: &Value) -> Result<Value> {
    let mut budget = it.limits().memory_quota;
    fin(it, v, &mut budget)
}

/// Containers smaller than this are finalised and compared afresh (cheaper than a lookup).
const MEMO_MIN: usize = 8;

/// Finalised forms of immutable containers (dicts, lists, tuples holding only plain data),
/// shared by evaluations over the same data, and the outcome of comparing two finalised
/// containers. Keyed by the containers' addresses; every entry holds the containers it is
/// about, so an address cannot be reused while the memo lives. Results, errors and budget
/// charges are exactly those of finalising afresh.
#[derive(Default)]
pub struct FinalMemo {
    /// (address, item limit) → (the container, its finalised form, the budget it charged).
    fin: RefCell<MemoMap<usize>>,
    /// (address, address) → (both containers, whether they are equal).
    eq: RefCell<MemoMap<bool>>,
}

/// Two addresses (or an address and a limit) → two values kept alive, and what was learnt.
type MemoMap<T> = HashMap<(usize, usize), (Value, Value, T), FxBuild>;

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
        && let Some((_, _, r)) = memo.eq.borrow().get(&k)
    {
        return *r;
    }
    let r = match (a, b) {
        (Value::List(x), Value::List(y)) => {
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
    if let Some(k) = key {
        memo.eq.borrow_mut().insert(k, (a.clone(), b.clone(), r));
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
        && let Some((_, out, cost)) = m.fin.borrow().get(k)
    {
        charge(budget, *cost)?;
        return Ok((out.clone(), true));
    }
    let before = *budget;
    let (out, pure) = fin_once(it, v, budget)?;
    if pure && let Some((m, k)) = key {
        m.fin
            .borrow_mut()
            .insert(k, (v.clone(), out.clone(), before - *budget));
    }
    Ok((out, pure))
}

fn fin_once(it: &Interp, v: &Value, budget: &mut usize) -> Result<(Value, bool)> {
    let limit = it.limits().max_items;
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
            let mut out = Vec::with_capacity(d.map.len());
            let mut pure = true;
            for (k, val) in &d.map {
                let (k, pk) = fin_m(it, k, budget)?;
                let k = match k {
                    Value::Str(_) => k,
                    k => Value::string(json_key(&k)?),
                };
                let (val, pv) = fin_m(it, val, budget)?;
                pure &= pk && pv;
                out.push((k, val));
            }
            Ok((Value::dict(Map::from_entries(out)), pure))
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
            let mut out = Vec::with_capacity(t.len());
            let mut pure = true;
            for x in t.iter() {
                let (x, px) = fin_m(it, x, budget)?;
                pure &= px;
                out.push(x);
            }
            Ok((Value::list(out), pure))
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
    use crate::yaql::{Context, Engine, Limits, Value, value::from_json};

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
        let exprs = [
            "changed($.nodes)",
            "changed($.net)",
            "changed($)",
            "changedAny($.nodes, $.net)",
            "$.nodes.len()",
            "'3' in added($.nodes).uid",
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
            for old in [&old_same, &old_other, &Value::Null] {
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
}
