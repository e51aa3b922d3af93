//! yaql's `#finalize` as Fuel's oracle does it: turn a result into plain data (lists, dicts
//! with JSON string keys, sets sorted), enforcing the item limit; and JSON rendering, both
//! as `serde_json` values and as Python's `json.dumps` text (for `toJson`). Must not evaluate.

use std::fmt::Write as _;

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
    let limit = it.limits().max_items;
    charge(
        budget,
        16 + match v {
            Value::Str(s) => s.len(),
            _ => 0,
        },
    )?;
    match v {
        Value::Null | Value::Bool(_) | Value::Int(_) | Value::Str(_) => Ok(v.clone()),
        Value::Float(f) => {
            if f.is_finite() {
                Ok(v.clone())
            } else {
                Err(unserializable("NaN or Infinity"))
            }
        }
        Value::Dict(d) => {
            if d.map.len() > limit {
                return Err(too_large(limit));
            }
            let mut out = Map::with_capacity_and_hasher(d.map.len(), FxBuild);
            for (k, val) in &d.map {
                let k = json_key(&fin(it, k, budget)?)?;
                out.insert(Value::string(k), fin(it, val, budget)?);
            }
            Ok(Value::dict(out))
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
            Ok(Value::list(out))
        }
        Value::Tuple(t) | Value::List(t) => {
            if t.len() > limit {
                return Err(too_large(limit));
            }
            let mut out = Vec::with_capacity(t.len());
            for x in t.iter() {
                out.push(fin(it, x, budget)?);
            }
            Ok(Value::list(out))
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
            Ok(Value::list(out))
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
