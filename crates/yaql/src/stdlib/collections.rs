//! yaql's `collections` module: `list`/`#list`, `flatten`, `toList`, `dict`/`#map`,
//! `toDict`, dict access (`[key]`, `[key, default]`, `get`, `set`, `keys`, `values`,
//! `items`), `in`, `contains*`, `+` and `*` on collections, `is*`, `len`, `delete*`,
//! `insert*`, `replace*`, and the set functions. Must not do I/O.

use std::rc::Rc;

use crate::error::{ErrorKind, Result, err};
use crate::interp::{Call, Interp, ValIter, lazy};
use crate::registry::{Def, Form, Registry, Ty, p};
use crate::value::{Map, VSet, Value, py_eq};

use super::queries::concat_values;

/// Flatten lazy arguments one level as `list(...)`/`set(...)` do.
fn rec_args(it: &Interp, args: Vec<Value>) -> Result<Vec<Value>> {
    let limit = it.limits().max_items;
    let mut out = Vec::new();
    for a in args {
        if a.is_iterator() {
            let mut src = it.iter(&a)?;
            while let Some(v) = src.next() {
                let v = v?;
                if v.is_iterator() {
                    out.extend(rec_args(it, vec![v])?);
                } else {
                    out.push(v);
                }
                if out.len() > limit {
                    return Err(crate::interp::too_large(limit));
                }
            }
        } else {
            out.push(a);
        }
    }
    Ok(out)
}

pub fn to_set(it: &Interp, v: &Value) -> Result<Value> {
    let mut items = VSet::default();
    let mut src = it.iter(v)?;
    while let Some(x) = src.next() {
        let x = x?;
        x.check_hashable()?;
        items.insert(x);
    }
    Ok(Value::frozen_set(items))
}

fn key_error(k: &Value) -> crate::error::YaqlError {
    crate::error::YaqlError::new(ErrorKind::KeyError, crate::value::py_repr(k))
}

fn dict_get(d: &Value, k: &Value) -> Result<Option<Value>> {
    let Value::Dict(d) = d else {
        return Ok(None);
    };
    if !k.hashable() {
        k.check_hashable()?;
    }
    Ok(d.map.get(k).cloned())
}

fn rule_pairs(args: Vec<Value>) -> Vec<(Value, Value)> {
    args.into_iter()
        .filter_map(|a| match a {
            Value::Rule(r) => Some((r.0.clone(), r.1.clone())),
            _ => None,
        })
        .collect()
}

fn build_dict(pairs: impl IntoIterator<Item = (Value, Value)>, frozen: bool) -> Result<Value> {
    let mut map = Map::default();
    for (k, v) in pairs {
        k.check_hashable()?;
        map.insert(k, v);
    }
    Ok(if frozen {
        Value::frozen_dict(map)
    } else {
        Value::dict(map)
    })
}

fn set_op(c: &Call, f: fn(&VSet, &VSet) -> VSet) -> Result<Value> {
    let a = c.val(0).set_items().unwrap_or_default();
    let b = c.val(1).set_items().unwrap_or_default();
    Ok(Value::frozen_set(f(&a, &b)))
}

fn seq_len(v: &Value) -> usize {
    v.as_seq().map(|s| s.len()).unwrap_or(0)
}

pub fn register(r: &mut Registry) {
    r.add(
        "list",
        Form::Function,
        vec![p("args", Ty::Any).null().many()],
        |it, c| {
            let items = rec_args(it, c.many_vals(0))?;
            Ok(Value::tuple(items))
        },
    );
    r.add(
        "#list",
        Form::Function,
        vec![p("args", Ty::Any).null().many()],
        |it, c| {
            let v = Value::tuple(c.many_vals(0));
            it.check_memory(&v)?;
            Ok(v)
        },
    );
    r.add(
        "flatten",
        Form::Method,
        vec![p("collection", Ty::Iterable)],
        |it, c| {
            let me = it.clone();
            let mut stack: Vec<ValIter> = vec![it.iter(c.val(0))?];
            Ok(lazy(move || {
                loop {
                    let top = stack.last_mut()?;
                    match top.next() {
                        None => {
                            stack.pop();
                        }
                        Some(Err(e)) => return Some(Err(e)),
                        Some(Ok(v)) => {
                            if v.is_iterable() {
                                if stack.len() > me.limits().max_depth {
                                    return Some(err(
                                        ErrorKind::RecursionError,
                                        "flatten nests too deep",
                                    ));
                                }
                                match me.iter(&v) {
                                    Ok(i) => stack.push(i),
                                    Err(e) => return Some(Err(e)),
                                }
                            } else {
                                return Some(Ok(v));
                            }
                        }
                    }
                }
            }))
        },
    );
    r.add(
        "toList",
        Form::Method,
        vec![p("collection", Ty::Iterable)],
        |it, c| {
            let v = c.take(0);
            if let Value::Tuple(_) = v {
                return Ok(v);
            }
            Ok(Value::tuple(it.to_vec(&v)?))
        },
    );
    for name in ["dict", "#map"] {
        r.add_nokw(
            name,
            Form::Function,
            vec![p("args", Ty::Rule).many()],
            |it, c| {
                let v = build_dict(rule_pairs(c.many_vals(0)), true)?;
                it.check_memory(&v)?;
                Ok(v)
            },
        );
    }
    r.add_nokw(
        "dict",
        Form::Function,
        vec![p("items", Ty::Iterable)],
        |it, c| {
            let mut pairs = Vec::new();
            let mut src = it.iter(c.val(0))?;
            while let Some(t) = src.next() {
                let t = t?;
                let mut inner = it.iter(&t)?;
                let stop = || crate::error::YaqlError::new(ErrorKind::StopIteration, "");
                let k = inner.next().ok_or_else(stop)??;
                let v = inner.next().ok_or_else(stop)??;
                pairs.push((k, v));
            }
            build_dict(pairs, true)
        },
    );
    r.add(
        "toDict",
        Form::Method,
        vec![
            p("collection", Ty::Iterable),
            p("keySelector", Ty::Lambda),
            p("valueSelector", Ty::Lambda).null().def(Def::Null),
        ],
        |it, c| {
            let mut pairs = Vec::new();
            let mut src = it.iter(c.val(0))?;
            while let Some(t) = src.next() {
                let t = t?;
                let k = match c.lambda(1) {
                    Some(l) => it.call_lambda(l, vec![t.clone()])?,
                    None => Value::Null,
                };
                let v = match c.lambda(2) {
                    Some(l) => it.call_lambda(l, vec![t])?,
                    None => t,
                };
                pairs.push((k, v));
            }
            build_dict(pairs, false)
        },
    );
    r.add(
        "#indexer",
        Form::Function,
        vec![p("dict", Ty::Mapping), p("key", Ty::Any)],
        |_, c| dict_get(c.val(0), c.val(1))?.ok_or_else(|| key_error(c.val(1))),
    );
    r.add(
        "#indexer",
        Form::Function,
        vec![
            p("dict", Ty::Mapping),
            p("key", Ty::Any),
            p("default", Ty::Any),
        ],
        |_, c| Ok(dict_get(c.val(0), c.val(1))?.unwrap_or_else(|| c.val(2).clone())),
    );
    r.add(
        "get",
        Form::Method,
        vec![
            p("dict", Ty::Mapping),
            p("key", Ty::Any),
            p("default", Ty::Any).def(Def::Null),
        ],
        |_, c| Ok(dict_get(c.val(0), c.val(1))?.unwrap_or_else(|| c.val(2).clone())),
    );
    r.add_nokw(
        "set",
        Form::Method,
        vec![
            p("dict", Ty::Mapping),
            p("key", Ty::Any),
            p("value", Ty::Any),
        ],
        |_, c| {
            let Value::Dict(d) = c.val(0) else {
                return Ok(Value::Null);
            };
            let mut pairs: Vec<(Value, Value)> =
                d.map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            pairs.push((c.val(1).clone(), c.val(2).clone()));
            build_dict(pairs, true)
        },
    );
    r.add_nokw(
        "set",
        Form::Method,
        vec![p("dict", Ty::Mapping), p("replacements", Ty::Mapping)],
        |_, c| {
            let (Value::Dict(d), Value::Dict(e)) = (c.val(0), c.val(1)) else {
                return Ok(Value::Null);
            };
            build_dict(
                d.map
                    .iter()
                    .chain(e.map.iter())
                    .map(|(k, v)| (k.clone(), v.clone())),
                true,
            )
        },
    );
    r.add_nokw(
        "set",
        Form::Method,
        vec![p("dict", Ty::Mapping), p("args", Ty::Rule).many()],
        |_, c| {
            let Value::Dict(d) = c.val(0) else {
                return Ok(Value::Null);
            };
            let mut pairs: Vec<(Value, Value)> =
                d.map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            pairs.extend(rule_pairs(c.many_vals(1)));
            build_dict(pairs, true)
        },
    );
    r.add(
        "keys",
        Form::Method,
        vec![p("dict", Ty::Mapping)],
        |_, c| match c.val(0) {
            Value::Dict(d) => Ok(Value::Keys(d.clone())),
            _ => Ok(Value::Null),
        },
    );
    r.add(
        "values",
        Form::Method,
        vec![p("dict", Ty::Mapping)],
        |_, c| match c.val(0) {
            Value::Dict(d) => Ok(Value::Values(d.clone())),
            _ => Ok(Value::Null),
        },
    );
    r.add(
        "items",
        Form::Method,
        vec![p("dict", Ty::Mapping)],
        |_, c| match c.val(0) {
            Value::Dict(d) => Ok(Value::Items(d.clone())),
            _ => Ok(Value::Null),
        },
    );
    r.add(
        "#indexer",
        Form::Function,
        vec![p("list", Ty::Sequence), p("index", Ty::PyInt).not_null()],
        |_, c| {
            let seq = c.val(0).as_seq().cloned().unwrap_or_default();
            let n = seq.len() as i64;
            let mut i = c.int(1);
            if i < 0 {
                i += n;
            }
            if i < 0 || i >= n {
                return err(ErrorKind::IndexError, "tuple index out of range");
            }
            Ok(seq[i as usize].clone())
        },
    );
    r.add(
        "#operator_in",
        Form::Function,
        vec![p("value", Ty::Any), p("collection", Ty::Iterable)],
        |it, c| contains(it, c.val(1), c.val(0)),
    );
    r.add(
        "contains",
        Form::Method,
        vec![p("collection", Ty::Iterable), p("value", Ty::Any)],
        |it, c| contains(it, c.val(0), c.val(1)),
    );
    r.add(
        "containsKey",
        Form::Method,
        vec![p("dict", Ty::Mapping), p("key", Ty::Any)],
        |_, c| Ok(Value::Bool(dict_get(c.val(0), c.val(1))?.is_some())),
    );
    r.add(
        "containsValue",
        Form::Method,
        vec![p("dict", Ty::Mapping), p("value", Ty::Any)],
        |_, c| match c.val(0) {
            Value::Dict(d) => Ok(Value::Bool(d.map.values().any(|v| py_eq(v, c.val(1))))),
            _ => Ok(Value::Bool(false)),
        },
    );
    r.add(
        "#operator_+",
        Form::Function,
        vec![p("left", Ty::Iterable), p("right", Ty::Iterable)],
        |it, c| match (c.val(0), c.val(1)) {
            (Value::Tuple(a), Value::Tuple(b)) => {
                it.check_quota(8 * (a.len() + b.len()))?;
                let mut v = a.to_vec();
                v.extend(b.iter().cloned());
                Ok(Value::tuple(v))
            }
            (Value::Set(a), Value::Set(b)) if a.frozen && b.frozen => {
                let mut s = a.items.clone();
                s.extend(b.items.iter().cloned());
                Ok(Value::frozen_set(s))
            }
            _ => Ok(concat_values(it, vec![c.val(0).clone(), c.val(1).clone()])),
        },
    );
    r.add(
        "#operator_*",
        Form::Function,
        vec![p("left", Ty::Sequence), p("right", Ty::PyInt)],
        |it, c| repeat_seq(it, c.val(0), c.int(1)),
    );
    r.add(
        "#operator_*",
        Form::Function,
        vec![p("left", Ty::PyInt), p("right", Ty::Sequence)],
        |it, c| repeat_seq(it, c.val(1), c.int(0)),
    );
    r.add(
        "#operator_+",
        Form::Function,
        vec![p("left", Ty::Mapping), p("right", Ty::Mapping)],
        |_, c| {
            let (Value::Dict(d), Value::Dict(e)) = (c.val(0), c.val(1)) else {
                return Ok(Value::Null);
            };
            build_dict(
                d.map
                    .iter()
                    .chain(e.map.iter())
                    .map(|(k, v)| (k.clone(), v.clone())),
                true,
            )
        },
    );
    r.add("isDict", Form::Function, vec![p("arg", Ty::Any)], |_, c| {
        Ok(Value::Bool(c.val(0).is_mapping()))
    });
    r.add("isList", Form::Function, vec![p("arg", Ty::Any)], |_, c| {
        Ok(Value::Bool(c.val(0).as_seq().is_some()))
    });
    r.add("isSet", Form::Function, vec![p("arg", Ty::Any)], |_, c| {
        Ok(Value::Bool(c.val(0).is_set_like()))
    });
    r.add(
        "len",
        Form::Both,
        vec![p("dict", Ty::Mapping)],
        |_, c| match c.val(0) {
            Value::Dict(d) => Ok(Value::Int(d.map.len() as i64)),
            _ => Ok(Value::Int(0)),
        },
    );
    r.add(
        "len",
        Form::Both,
        vec![p("sequence", Ty::Sequence)],
        |_, c| Ok(Value::Int(seq_len(c.val(0)) as i64)),
    );
    r.add("len", Form::Both, vec![p("set", Ty::Set)], |_, c| {
        Ok(Value::Int(
            c.val(0).set_items().map(|s| s.len()).unwrap_or(0) as i64,
        ))
    });
    r.add(
        "delete",
        Form::Method,
        vec![
            p("collection", Ty::Iterable),
            p("position", Ty::PyInt),
            p("count", Ty::PyInt).def(Def::Int(1)),
        ],
        |it, c| {
            let (pos, count) = (c.int(1), c.int(2));
            let mut src = it.iter(c.val(0))?;
            let mut i: i64 = -1;
            Ok(lazy(move || {
                loop {
                    let t = src.next()?;
                    i += 1;
                    let keep = if count >= 0 {
                        !(pos <= i && i < pos.saturating_add(count))
                    } else {
                        i < pos
                    };
                    if keep {
                        return Some(t);
                    }
                }
            }))
        },
    );
    r.add(
        "replace",
        Form::Method,
        vec![
            p("collection", Ty::Iterable),
            p("position", Ty::PyInt),
            p("value", Ty::Any),
            p("count", Ty::PyInt).def(Def::Int(1)),
        ],
        |it, c| {
            let (pos, count) = (c.int(1), c.int(3));
            let value = c.val(2).clone();
            let mut src = it.iter(c.val(0))?;
            let mut i: i64 = -1;
            let mut yielded = false;
            Ok(lazy(move || {
                loop {
                    let t = src.next()?;
                    i += 1;
                    let hit = if count >= 0 {
                        pos <= i && i < pos.saturating_add(count)
                    } else {
                        i >= pos
                    };
                    if hit {
                        if !yielded {
                            yielded = true;
                            return Some(Ok(value.clone()));
                        }
                    } else {
                        return Some(t);
                    }
                }
            }))
        },
    );
    r.add(
        "replaceMany",
        Form::Method,
        vec![
            p("collection", Ty::Iterable),
            p("position", Ty::PyInt),
            p("values", Ty::Iterable),
            p("count", Ty::PyInt).def(Def::Int(1)),
        ],
        |it, c| {
            let (pos, count) = (c.int(1), c.int(3));
            let values = c.val(2).clone();
            let me = it.clone();
            let mut src = it.iter(c.val(0))?;
            let mut i: i64 = -1;
            let mut pending: Option<ValIter> = None;
            let mut yielded = false;
            Ok(lazy(move || {
                loop {
                    if let Some(p) = pending.as_mut() {
                        match p.next() {
                            Some(v) => return Some(v),
                            None => pending = None,
                        }
                    }
                    let t = src.next()?;
                    i += 1;
                    let hit = if count >= 0 {
                        pos <= i && i < pos.saturating_add(count)
                    } else {
                        i >= pos
                    };
                    if hit {
                        if !yielded {
                            yielded = true;
                            match me.iter(&values) {
                                Ok(v) => pending = Some(v),
                                Err(e) => return Some(Err(e)),
                            }
                        }
                    } else {
                        return Some(t);
                    }
                }
            }))
        },
    );
    r.add(
        "delete",
        Form::Method,
        vec![p("dict", Ty::Mapping), p("keys", Ty::Any).many()],
        |_, c| delete_keys(c.val(0), c.many_vals(1)),
    );
    r.add(
        "deleteAll",
        Form::Method,
        vec![p("dict", Ty::Mapping), p("keys", Ty::Iterable)],
        |it, c| {
            let keys = it.to_vec(c.val(1))?;
            delete_keys(c.val(0), keys)
        },
    );
    r.add(
        "insert",
        Form::Method,
        vec![
            p("collection", Ty::IterableNoSet),
            p("position", Ty::PyInt),
            p("value", Ty::Any),
        ],
        |it, c| {
            let pos = c.int(1);
            let value = c.val(2).clone();
            let mut src = it.iter(c.val(0))?;
            let mut i: i64 = -1;
            let mut held: Option<Value> = None;
            let mut done = false;
            Ok(lazy(move || {
                if let Some(h) = held.take() {
                    return Some(Ok(h));
                }
                if done {
                    return None;
                }
                match src.next() {
                    Some(Ok(t)) => {
                        i += 1;
                        if i == pos {
                            held = Some(t);
                            Some(Ok(value.clone()))
                        } else {
                            Some(Ok(t))
                        }
                    }
                    Some(Err(e)) => Some(Err(e)),
                    None => {
                        done = true;
                        if pos > i {
                            Some(Ok(value.clone()))
                        } else {
                            None
                        }
                    }
                }
            }))
        },
    );
    r.add(
        "insert",
        Form::Method,
        vec![
            p("collection", Ty::Sequence),
            p("position", Ty::PyInt),
            p("value", Ty::Any),
        ],
        |_, c| {
            let mut v = c.val(0).as_seq().map(|s| s.to_vec()).unwrap_or_default();
            let n = v.len() as i64;
            let mut pos = c.int(1);
            if pos < 0 {
                pos = (pos + n).max(0);
            }
            let pos = pos.min(n) as usize;
            v.insert(pos, c.val(2).clone());
            Ok(Value::list(v))
        },
    );
    r.add(
        "insertMany",
        Form::Method,
        vec![
            p("collection", Ty::Iterable),
            p("position", Ty::PyInt),
            p("values", Ty::Iterable),
        ],
        |it, c| {
            let pos = c.int(1);
            let items = it.to_vec(c.val(0))?;
            let values = it.to_vec(c.val(2))?;
            let mut out = Vec::new();
            if pos < 0 {
                out.extend(values.iter().cloned());
            }
            let mut last: i64 = -1;
            for (i, t) in items.into_iter().enumerate() {
                if i as i64 == pos {
                    out.extend(values.iter().cloned());
                }
                out.push(t);
                last = i as i64;
            }
            if pos > last {
                out.extend(values.iter().cloned());
            }
            Ok(super::queries::from_vec(out))
        },
    );
    r.add(
        "set",
        Form::Function,
        vec![p("args", Ty::Any).null().many()],
        |it, c| {
            let items = rec_args(it, c.many_vals(0))?;
            to_set(it, &Value::tuple(items))
        },
    );
    r.add(
        "toSet",
        Form::Method,
        vec![p("collection", Ty::Iterable)],
        |it, c| to_set(it, c.val(0)),
    );
    let s2 = || vec![p("left", Ty::Set), p("right", Ty::Set)];
    r.add("union", Form::Method, s2(), |_, c| {
        if let Value::Keys(_) | Value::Items(_) = c.val(0) {
            return err(
                ErrorKind::AttributeError,
                "'dict_keys' object has no attribute 'union'",
            );
        }
        set_op(c, |a, b| a.union(b).cloned().collect())
    });
    // Python's Set comparisons test membership element by element, so a dict_items view
    // unpacks each candidate (and fails like Python on anything but pairs)
    r.add("#operator_<", Form::Function, s2(), |it, c| {
        let (a, b) = (c.val(0), c.val(1));
        Ok(Value::Bool(set_len(a) < set_len(b) && subset(it, a, b)?))
    });
    r.add("#operator_<=", Form::Function, s2(), |it, c| {
        Ok(Value::Bool(subset(it, c.val(0), c.val(1))?))
    });
    r.add("#operator_>=", Form::Function, s2(), |it, c| {
        let (a, b) = (c.val(0), c.val(1));
        Ok(Value::Bool(set_len(a) >= set_len(b) && subset(it, b, a)?))
    });
    r.add("#operator_>", Form::Function, s2(), |it, c| {
        let (a, b) = (c.val(0), c.val(1));
        Ok(Value::Bool(set_len(a) > set_len(b) && subset(it, b, a)?))
    });
    r.add("intersect", Form::Method, s2(), |_, c| {
        if let Value::Keys(_) | Value::Items(_) = c.val(0) {
            return err(
                ErrorKind::AttributeError,
                "'dict_keys' object has no attribute 'intersection'",
            );
        }
        set_op(c, |a, b| a.intersection(b).cloned().collect())
    });
    for name in ["difference", "#operator_-"] {
        let form = if name == "difference" {
            Form::Method
        } else {
            Form::Function
        };
        r.add(name, form, s2(), |_, c| {
            if let Value::Keys(_) | Value::Items(_) = c.val(0) {
                return err(
                    ErrorKind::AttributeError,
                    "'dict_keys' object has no attribute 'difference'",
                );
            }
            set_op(c, |a, b| a.difference(b).cloned().collect())
        });
    }
    r.add("symmetricDifference", Form::Method, s2(), |_, c| {
        if let Value::Keys(_) | Value::Items(_) = c.val(0) {
            return err(
                ErrorKind::AttributeError,
                "'dict_keys' object has no attribute 'symmetric_difference'",
            );
        }
        set_op(c, |a, b| a.symmetric_difference(b).cloned().collect())
    });
    r.add(
        "add",
        Form::Method,
        vec![p("set", Ty::Set), p("values", Ty::Any).many()],
        |_, c| {
            if let Value::Keys(_) | Value::Items(_) = c.val(0) {
                return err(
                    ErrorKind::AttributeError,
                    "'dict_keys' object has no attribute 'union'",
                );
            }
            let mut s = c.val(0).set_items().unwrap_or_default();
            for v in c.many_vals(1) {
                v.check_hashable()?;
                s.insert(v);
            }
            Ok(Value::frozen_set(s))
        },
    );
    r.add(
        "remove",
        Form::Method,
        vec![p("set", Ty::Set), p("values", Ty::Any).many()],
        |_, c| {
            if let Value::Keys(_) | Value::Items(_) = c.val(0) {
                return err(
                    ErrorKind::AttributeError,
                    "'dict_keys' object has no attribute 'difference'",
                );
            }
            let mut s = c.val(0).set_items().unwrap_or_default();
            for v in c.many_vals(1) {
                v.check_hashable()?;
                s.shift_remove(&v);
            }
            Ok(Value::frozen_set(s))
        },
    );
}

fn delete_keys(d: &Value, keys: Vec<Value>) -> Result<Value> {
    let Value::Dict(d) = d else {
        return Ok(Value::Null);
    };
    let mut map = d.map.clone();
    for k in keys {
        if k.hashable() {
            map.shift_remove(&k);
        } else {
            k.check_hashable()?;
        }
    }
    Ok(Value::dict(map))
}

fn repeat_seq(it: &Interp, v: &Value, n: i64) -> Result<Value> {
    let seq = v.as_seq().cloned().unwrap_or_default();
    let n = n.max(0) as usize;
    it.check_quota(n.saturating_mul(8 * seq.len()))?;
    let mut out = Vec::with_capacity(seq.len() * n);
    for _ in 0..n {
        out.extend(seq.iter().cloned());
    }
    Ok(match v {
        Value::List(_) => Value::list(out),
        _ => Value::tuple(out),
    })
}

fn set_len(v: &Value) -> usize {
    match v {
        Value::Set(s) => s.items.len(),
        Value::Keys(d) | Value::Items(d) => d.map.len(),
        _ => 0,
    }
}

/// `a <= b` for set-likes, with `b`'s own membership test.
fn subset(it: &Interp, a: &Value, b: &Value) -> Result<bool> {
    if set_len(a) > set_len(b) {
        return Ok(false);
    }
    let mut src = it.iter(a)?;
    while let Some(x) = src.next() {
        if !contains(it, b, &x?)?.truthy() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `x in dict.items()`: `x` is unpacked into `(key, value)` first.
fn items_contains(it: &Interp, d: &crate::value::Dict, x: &Value) -> Result<bool> {
    let pair: Vec<Value> = match x {
        v if v.is_iterable() => it.to_vec(v)?,
        Value::Str(s) => s.chars().map(|c| Value::string(c.to_string())).collect(),
        Value::Dict(d) => d.map.keys().cloned().collect(),
        other => {
            return err(
                ErrorKind::TypeError,
                format!("cannot unpack non-iterable {} object", other.type_name()),
            );
        }
    };
    match pair.len() {
        2 => {}
        n if n < 2 => {
            return err(
                ErrorKind::ValueError,
                format!("not enough values to unpack (expected 2, got {n})"),
            );
        }
        _ => {
            return err(
                ErrorKind::ValueError,
                "too many values to unpack (expected 2)",
            );
        }
    }
    pair[0].check_hashable()?;
    Ok(d.map.get(&pair[0]).is_some_and(|v| py_eq(v, &pair[1])))
}

fn contains(it: &Interp, coll: &Value, x: &Value) -> Result<Value> {
    match coll {
        Value::Items(d) => return Ok(Value::Bool(items_contains(it, d, x)?)),
        Value::Set(s) if x.hashable() => return Ok(Value::Bool(s.items.contains(x))),
        Value::Keys(d) if x.hashable() => return Ok(Value::Bool(d.map.contains_key(x))),
        Value::Set(_) | Value::Keys(_) => {
            x.check_hashable()?;
        }
        _ => {}
    }
    let mut src = it.iter(coll)?;
    while let Some(v) = src.next() {
        if py_eq(&v?, x) {
            return Ok(Value::Bool(true));
        }
    }
    Ok(Value::Bool(false))
}

#[allow(dead_code)]
fn unused(_: Rc<()>) {}
