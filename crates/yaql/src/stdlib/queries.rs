//! yaql's `queries` module: the LINQ-like functions over iterables (`where`, `select`,
//! `selectMany`, `orderBy`/`thenBy`, `groupBy`, `distinct`, `any`/`all`, `first`/`last`,
//! `sum`/`min`/`max`, `skip`/`take`, `zip`, `join`, `aggregate`, `mergeWith`, `generate`...).
//! Lazy results are real single-use iterators, as in the reference. Must not do I/O.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use indexmap::IndexMap;

use crate::error::{ErrorKind, Result, YaqlError, err};
use crate::interp::{Call, Interp, Lambda, Ordered, ValIter, lazy, lazy_iter};
use crate::registry::{Def, Form, Registry, Ty, p};
use crate::value::{FxBuild, Map, VSet, Value, py_eq};

/// A lazy sequence over already computed values.
pub fn from_vec(v: Vec<Value>) -> Value {
    lazy_iter(ValIter::Owned(v.into_iter()))
}

/// `itertools.chain` of iterables (errors surface when consumed).
pub fn concat_values(it: &Interp, colls: Vec<Value>) -> Value {
    let me = it.clone();
    let mut colls: VecDeque<Value> = colls.into();
    let mut cur: Option<ValIter> = None;
    lazy(move || {
        loop {
            if let Some(c) = cur.as_mut() {
                match c.next() {
                    Some(v) => return Some(v),
                    None => cur = None,
                }
            }
            let next = colls.pop_front()?;
            match me.iter(&next) {
                Ok(i) => cur = Some(i),
                Err(e) => return Some(Err(e)),
            }
        }
    })
}

fn stop(msg: &str) -> YaqlError {
    YaqlError::new(ErrorKind::StopIteration, msg.to_string())
}

fn lam(c: &Call, i: usize) -> Option<Lambda> {
    c.lambda(i).cloned()
}

fn call1(it: &Interp, l: &Lambda, v: Value) -> Result<Value> {
    it.call_lambda(l, vec![v])
}

fn islice_arg(n: i64) -> Result<usize> {
    if n < 0 {
        return err(
            ErrorKind::ValueError,
            "Indices for islice() must be None or an integer: 0 <= x <= sys.maxsize.",
        );
    }
    Ok(n as usize)
}

fn reduce(
    it: &Interp,
    coll: &Value,
    seed: Option<Value>,
    f: &dyn Fn(Value, Value) -> Result<Value>,
) -> Result<Value> {
    let mut src = it.iter(coll)?;
    let mut acc = match seed {
        Some(s) => s,
        None => match src.next() {
            Some(v) => v?,
            None => {
                return err(
                    ErrorKind::TypeError,
                    "reduce() of empty iterable with no initial value",
                );
            }
        },
    };
    while let Some(v) = src.next() {
        acc = f(acc, v?)?;
    }
    Ok(acc)
}

fn index_where(
    it: &Interp,
    coll: &Value,
    last: bool,
    pred: &dyn Fn(&Value) -> Result<bool>,
) -> Result<Value> {
    let mut src = it.iter(coll)?;
    let mut i = 0i64;
    let mut found = -1i64;
    while let Some(v) = src.next() {
        if pred(&v?)? {
            found = i;
            if !last {
                break;
            }
        }
        i += 1;
    }
    Ok(Value::Int(found))
}

fn order(c: &Call, ascending: bool) -> Result<Value> {
    let Some(l) = lam(c, 1) else {
        return Ok(Value::Null);
    };
    Ok(Value::Ordered(Rc::new(Ordered::new(
        c.val(0).clone(),
        l,
        ascending,
    ))))
}

fn then(c: &Call, ascending: bool) -> Result<Value> {
    let v = c.val(0).clone();
    if let (Value::Ordered(o), Some(l)) = (&v, lam(c, 1)) {
        o.order.borrow_mut().push((l, ascending));
    }
    Ok(v)
}

pub fn register(r: &mut Registry) {
    let coll_pred = |n: &'static str| vec![p("collection", Ty::Iterable), p(n, Ty::Lambda)];
    for name in ["where", "filter"] {
        r.add(name, Form::Method, coll_pred("predicate"), |it, c| {
            let mut src = it.iter(c.val(0))?;
            let Some(pred) = lam(c, 1) else {
                return Ok(Value::Null);
            };
            let me = it.clone();
            Ok(lazy(move || {
                loop {
                    let v = match src.next()? {
                        Ok(v) => v,
                        Err(e) => return Some(Err(e)),
                    };
                    match call1(&me, &pred, v.clone()) {
                        Ok(r) if r.truthy() => return Some(Ok(v)),
                        Ok(_) => {}
                        Err(e) => return Some(Err(e)),
                    }
                }
            }))
        });
    }
    for name in ["select", "map"] {
        r.add(name, Form::Method, coll_pred("selector"), |it, c| {
            let mut src = it.iter(c.val(0))?;
            let Some(sel) = lam(c, 1) else {
                return Ok(Value::Null);
            };
            let me = it.clone();
            Ok(lazy(move || {
                let v = src.next()?;
                Some(v.and_then(|v| call1(&me, &sel, v)))
            }))
        });
    }
    r.add(
        "skip",
        Form::Method,
        vec![
            p("collection", Ty::Iterable),
            p("count", Ty::PyInt).not_null(),
        ],
        |it, c| {
            let mut n = islice_arg(c.int(1))?;
            let mut src = it.iter(c.val(0))?;
            Ok(lazy(move || {
                while n > 0 {
                    n -= 1;
                    match src.next()? {
                        Ok(_) => {}
                        Err(e) => return Some(Err(e)),
                    }
                }
                src.next()
            }))
        },
    );
    for name in ["limit", "take"] {
        r.add(
            name,
            Form::Method,
            vec![
                p("collection", Ty::Iterable),
                p("count", Ty::PyInt).not_null(),
            ],
            |it, c| {
                let mut n = islice_arg(c.int(1))?;
                let mut src = it.iter(c.val(0))?;
                Ok(lazy(move || {
                    if n == 0 {
                        return None;
                    }
                    n -= 1;
                    src.next()
                }))
            },
        );
    }
    r.add(
        "append",
        Form::Both,
        vec![p("collection", Ty::Iterable), p("args", Ty::Any).many()],
        |it, c| {
            Ok(concat_values(
                it,
                vec![c.val(0).clone(), Value::tuple(c.many_vals(1))],
            ))
        },
    );
    r.add(
        "distinct",
        Form::Both,
        vec![
            p("collection", Ty::Iterable),
            p("keySelector", Ty::Lambda).def(Def::Null),
        ],
        |it, c| {
            let mut src = it.iter(c.val(0))?;
            let sel = lam(c, 1);
            let me = it.clone();
            let mut seen: VSet = VSet::default();
            Ok(lazy(move || {
                loop {
                    let t = match src.next()? {
                        Ok(v) => v,
                        Err(e) => return Some(Err(e)),
                    };
                    let key = match &sel {
                        Some(l) => match call1(&me, l, t.clone()) {
                            Ok(k) => k,
                            Err(e) => return Some(Err(e)),
                        },
                        None => t.clone(),
                    };
                    if let Err(e) = key.check_hashable() {
                        return Some(Err(e));
                    }
                    if seen.insert(key) {
                        return Some(Ok(t));
                    }
                }
            }))
        },
    );
    r.add(
        "enumerate",
        Form::Both,
        vec![
            p("collection", Ty::Iterable),
            p("start", Ty::PyInt).null().def(Def::Int(0)),
        ],
        |it, c| {
            let Some(mut i) = c.val(1).as_pyint() else {
                return err(
                    ErrorKind::TypeError,
                    "'NoneType' object cannot be interpreted as an integer",
                );
            };
            let mut src = it.iter(c.val(0))?;
            Ok(lazy(move || {
                let v = src.next()?;
                let idx = i;
                i += 1;
                Some(v.map(|v| Value::list(vec![Value::Int(idx), v])))
            }))
        },
    );
    r.add(
        "any",
        Form::Both,
        vec![
            p("collection", Ty::Iterable),
            p("predicate", Ty::Lambda).def(Def::Null),
        ],
        |it, c| {
            let pred = lam(c, 1);
            let mut src = it.iter(c.val(0))?;
            while let Some(v) = src.next() {
                let v = v?;
                let ok = match &pred {
                    None => true,
                    Some(l) => call1(it, l, v)?.truthy(),
                };
                if ok {
                    return Ok(Value::Bool(true));
                }
            }
            Ok(Value::Bool(false))
        },
    );
    r.add(
        "all",
        Form::Both,
        vec![
            p("collection", Ty::Iterable),
            p("predicate", Ty::Lambda).def(Def::Null),
        ],
        |it, c| {
            let pred = lam(c, 1);
            let mut src = it.iter(c.val(0))?;
            while let Some(v) = src.next() {
                let v = v?;
                let ok = match &pred {
                    None => v.truthy(),
                    Some(l) => call1(it, l, v)?.truthy(),
                };
                if !ok {
                    return Ok(Value::Bool(false));
                }
            }
            Ok(Value::Bool(true))
        },
    );
    r.add(
        "concat",
        Form::Both,
        vec![p("collections", Ty::Iterable).many()],
        |it, c| Ok(concat_values(it, c.many_vals(0))),
    );
    r.add(
        "len",
        Form::Both,
        vec![p("collection", Ty::Iterator)],
        |it, c| {
            let mut src = it.iter(c.val(0))?;
            let mut n = 0i64;
            // an Iterator (not Iterable) parameter is not limited: count the work instead
            while let Some(v) = src.next() {
                v?;
                it.step()?;
                n += 1;
            }
            Ok(Value::Int(n))
        },
    );
    r.add(
        "count",
        Form::Method,
        vec![p("collection", Ty::Iterable)],
        |it, c| {
            let mut src = it.iter(c.val(0))?;
            let mut n = 0i64;
            while let Some(v) = src.next() {
                v?;
                n += 1;
            }
            Ok(Value::Int(n))
        },
    );
    r.add(
        "memorize",
        Form::Method,
        vec![p("collection", Ty::Iterable)],
        |it, c| it.memo(c.take(0)),
    );
    r.add(
        "sum",
        Form::Method,
        vec![p("collection", Ty::Iterable), p("initial", Ty::Any).opt()],
        |it, c| {
            let seed = c.opt(1).cloned();
            reduce(it, c.val(0), seed, &|a, b| {
                it.call_fn("#operator_+", vec![a, b], c.ctx)
            })
        },
    );
    for (name, delegate) in [("max", "max"), ("min", "min")] {
        let imp: fn(&Interp, &mut Call) -> Result<Value> = if delegate == "max" {
            |it, c| {
                let seed = c.opt(1).cloned();
                reduce(it, c.val(0), seed, &|a, b| {
                    it.call_fn("max", vec![a, b], c.ctx)
                })
            }
        } else {
            |it, c| {
                let seed = c.opt(1).cloned();
                reduce(it, c.val(0), seed, &|a, b| {
                    it.call_fn("min", vec![a, b], c.ctx)
                })
            }
        };
        r.add(
            name,
            Form::Method,
            vec![p("collection", Ty::Iterable), p("initial", Ty::Any).opt()],
            imp,
        );
    }
    r.add(
        "first",
        Form::Method,
        vec![p("collection", Ty::Iterable), p("default", Ty::Any).opt()],
        |it, c| {
            let mut src = it.iter(c.val(0))?;
            match src.next() {
                Some(v) => v,
                None => c.opt(1).cloned().ok_or_else(|| stop("")),
            }
        },
    );
    r.add(
        "single",
        Form::Method,
        vec![p("collection", Ty::Iterable)],
        |it, c| {
            let mut src = it.iter(c.val(0))?;
            let first = src.next().ok_or_else(|| stop(""))??;
            match src.next() {
                None => Ok(first),
                Some(v) => {
                    v?;
                    Err(stop("Collection contains more than one item"))
                }
            }
        },
    );
    r.add(
        "last",
        Form::Method,
        vec![p("collection", Ty::Iterable), p("default", Ty::Any).opt()],
        |it, c| {
            let mut last = c.opt(1).cloned();
            let mut src = it.iter(c.val(0))?;
            let seq = c.val(0).as_seq().is_some();
            if seq {
                if let Some(v) = c.val(0).as_seq().and_then(|s| s.last().cloned()) {
                    return Ok(v);
                }
                return last.ok_or_else(|| stop(""));
            }
            while let Some(v) = src.next() {
                last = Some(v?);
            }
            last.ok_or_else(|| stop(""))
        },
    );
    r.add(
        "selectMany",
        Form::Method,
        coll_pred("selector"),
        |it, c| {
            let mut src = it.iter(c.val(0))?;
            let Some(sel) = lam(c, 1) else {
                return Ok(Value::Null);
            };
            let me = it.clone();
            let mut inner: Option<ValIter> = None;
            Ok(lazy(move || {
                loop {
                    if let Some(i) = inner.as_mut() {
                        match i.next() {
                            Some(v) => return Some(v),
                            None => inner = None,
                        }
                    }
                    let item = match src.next()? {
                        Ok(v) => v,
                        Err(e) => return Some(Err(e)),
                    };
                    match call1(&me, &sel, item) {
                        Ok(v) if v.is_iterable() => match me.iter(&v) {
                            Ok(i) => inner = Some(i),
                            Err(e) => return Some(Err(e)),
                        },
                        other => return Some(other),
                    }
                }
            }))
        },
    );
    r.add(
        "range",
        Form::Function,
        vec![p("stop", Ty::PyInt)],
        |_, c| range(0, c.int(0), 1),
    );
    r.add(
        "range",
        Form::Function,
        vec![
            p("start", Ty::PyInt),
            p("stop", Ty::PyInt),
            p("step", Ty::PyInt).def(Def::Int(1)),
        ],
        |_, c| range(c.int(0), c.int(1), c.int(2)),
    );
    r.add(
        "sequence",
        Form::Function,
        vec![
            p("start", Ty::PyInt).def(Def::Int(0)),
            p("step", Ty::PyInt).def(Def::Int(1)),
        ],
        |_, c| {
            let mut cur = c.int(0);
            let step = c.int(1);
            Ok(lazy(move || {
                let v = cur;
                cur = cur.checked_add(step)?;
                Some(Ok(Value::Int(v)))
            }))
        },
    );
    r.add("orderBy", Form::Method, coll_pred("selector"), |_, c| {
        order(c, true)
    });
    r.add(
        "orderByDescending",
        Form::Method,
        coll_pred("selector"),
        |_, c| order(c, false),
    );
    r.add(
        "thenBy",
        Form::Method,
        vec![p("collection", Ty::Ordered), p("selector", Ty::Lambda)],
        |_, c| then(c, true),
    );
    r.add(
        "thenByDescending",
        Form::Method,
        vec![p("collection", Ty::Ordered), p("selector", Ty::Lambda)],
        |_, c| then(c, false),
    );
    r.add(
        "groupBy",
        Form::Method,
        vec![
            p("collection", Ty::Iterable),
            p("keySelector", Ty::Lambda),
            p("valueSelector", Ty::Lambda).def(Def::Null),
            p("aggregator", Ty::Lambda).def(Def::Null),
        ],
        group_by,
    );
    r.add(
        "zip",
        Form::Method,
        vec![p("collections", Ty::Iterable).many()],
        |it, c| {
            let mut iters = Vec::new();
            for v in c.many_vals(0) {
                iters.push(it.iter(&v)?);
            }
            Ok(lazy(move || {
                if iters.is_empty() {
                    return None;
                }
                let mut row = Vec::with_capacity(iters.len());
                for i in iters.iter_mut() {
                    match i.next()? {
                        Ok(v) => row.push(v),
                        Err(e) => return Some(Err(e)),
                    }
                }
                Some(Ok(Value::tuple(row)))
            }))
        },
    );
    r.add(
        "zipLongest",
        Form::Method,
        vec![
            p("collections", Ty::Iterable).many(),
            p("kwargs", Ty::Any).var_kw(),
        ],
        |it, c| {
            let fill = c
                .kwargs(1)
                .into_iter()
                .find(|(k, _)| &**k == "default")
                .map(|(_, v)| v)
                .unwrap_or(Value::Null);
            let mut iters: Vec<Option<ValIter>> = Vec::new();
            for v in c.many_vals(0) {
                iters.push(Some(it.iter(&v)?));
            }
            Ok(lazy(move || {
                let mut row = Vec::with_capacity(iters.len());
                let mut any = false;
                for slot in iters.iter_mut() {
                    let next = slot.as_mut().and_then(|i| i.next());
                    match next {
                        Some(Ok(v)) => {
                            any = true;
                            row.push(v)
                        }
                        Some(Err(e)) => return Some(Err(e)),
                        None => {
                            *slot = None;
                            row.push(fill.clone())
                        }
                    }
                }
                if any {
                    Some(Ok(Value::tuple(row)))
                } else {
                    None
                }
            }))
        },
    );
    r.add(
        "join",
        Form::Method,
        vec![
            p("collection1", Ty::Iterable),
            p("collection2", Ty::Iterable),
            p("predicate", Ty::Lambda),
            p("selector", Ty::Lambda),
        ],
        |it, c| {
            let other = it.memo(c.val(1).clone())?;
            let (Some(pred), Some(sel)) = (lam(c, 2), lam(c, 3)) else {
                return Ok(Value::Null);
            };
            let mut outer = it.iter(c.val(0))?;
            let me = it.clone();
            let mut cur: Option<(Value, ValIter)> = None;
            Ok(lazy(move || {
                loop {
                    if let Some((a, inner)) = cur.as_mut() {
                        match inner.next() {
                            Some(Ok(b)) => {
                                match me.call_lambda(&pred, vec![a.clone(), b.clone()]) {
                                    Ok(ok) if ok.truthy() => {
                                        return Some(me.call_lambda(&sel, vec![a.clone(), b]));
                                    }
                                    Ok(_) => continue,
                                    Err(e) => return Some(Err(e)),
                                }
                            }
                            Some(Err(e)) => return Some(Err(e)),
                            None => cur = None,
                        }
                    }
                    let a = match outer.next()? {
                        Ok(a) => a,
                        Err(e) => return Some(Err(e)),
                    };
                    match me.iter(&other) {
                        Ok(i) => cur = Some((a, i)),
                        Err(e) => return Some(Err(e)),
                    }
                }
            }))
        },
    );
    r.add(
        "repeat",
        Form::Method,
        vec![p("value", Ty::Any), p("times", Ty::PyInt).def(Def::Int(-1))],
        |_, c| {
            let v = c.val(0).clone();
            let mut times = c.int(1);
            Ok(lazy(move || {
                if times == 0 {
                    return None;
                }
                if times > 0 {
                    times -= 1;
                }
                Some(Ok(v.clone()))
            }))
        },
    );
    r.add(
        "cycle",
        Form::Method,
        vec![p("collection", Ty::Iterable)],
        |it, c| {
            let mut src = Some(it.iter(c.val(0))?);
            let mut saved: Vec<Value> = Vec::new();
            let mut i = 0usize;
            Ok(lazy(move || {
                if let Some(s) = src.as_mut() {
                    match s.next() {
                        Some(Ok(v)) => {
                            saved.push(v.clone());
                            return Some(Ok(v));
                        }
                        Some(Err(e)) => return Some(Err(e)),
                        None => src = None,
                    }
                }
                if saved.is_empty() {
                    return None;
                }
                let v = saved[i % saved.len()].clone();
                i += 1;
                Some(Ok(v))
            }))
        },
    );
    r.add(
        "takeWhile",
        Form::Method,
        coll_pred("predicate"),
        |it, c| {
            let mut src = it.iter(c.val(0))?;
            let Some(pred) = lam(c, 1) else {
                return Ok(Value::Null);
            };
            let me = it.clone();
            let mut done = false;
            Ok(lazy(move || {
                if done {
                    return None;
                }
                let v = match src.next()? {
                    Ok(v) => v,
                    Err(e) => return Some(Err(e)),
                };
                match call1(&me, &pred, v.clone()) {
                    Ok(r) if r.truthy() => Some(Ok(v)),
                    Ok(_) => {
                        done = true;
                        None
                    }
                    Err(e) => Some(Err(e)),
                }
            }))
        },
    );
    r.add(
        "skipWhile",
        Form::Method,
        coll_pred("predicate"),
        |it, c| {
            let mut src = it.iter(c.val(0))?;
            let Some(pred) = lam(c, 1) else {
                return Ok(Value::Null);
            };
            let me = it.clone();
            let mut dropping = true;
            Ok(lazy(move || {
                loop {
                    let v = match src.next()? {
                        Ok(v) => v,
                        Err(e) => return Some(Err(e)),
                    };
                    if !dropping {
                        return Some(Ok(v));
                    }
                    match call1(&me, &pred, v.clone()) {
                        Ok(r) if r.truthy() => {}
                        Ok(_) => {
                            dropping = false;
                            return Some(Ok(v));
                        }
                        Err(e) => return Some(Err(e)),
                    }
                }
            }))
        },
    );
    r.add(
        "indexOf",
        Form::Method,
        vec![p("collection", Ty::Iterable), p("item", Ty::Any)],
        |it, c| index_where(it, c.val(0), false, &|v| Ok(py_eq(v, c.val(1)))),
    );
    r.add(
        "lastIndexOf",
        Form::Method,
        vec![p("collection", Ty::Iterable), p("item", Ty::Any)],
        |it, c| index_where(it, c.val(0), true, &|v| Ok(py_eq(v, c.val(1)))),
    );
    r.add(
        "indexWhere",
        Form::Method,
        coll_pred("predicate"),
        |it, c| {
            let Some(l) = lam(c, 1) else {
                return Ok(Value::Int(-1));
            };
            index_where(it, c.val(0), false, &|v| {
                Ok(call1(it, &l, v.clone())?.truthy())
            })
        },
    );
    r.add(
        "lastIndexWhere",
        Form::Method,
        coll_pred("predicate"),
        |it, c| {
            let Some(l) = lam(c, 1) else {
                return Ok(Value::Int(-1));
            };
            index_where(it, c.val(0), true, &|v| {
                Ok(call1(it, &l, v.clone())?.truthy())
            })
        },
    );
    r.add(
        "slice",
        Form::Method,
        vec![p("collection", Ty::Iterable), p("length", Ty::PyInt)],
        |it, c| {
            let n = islice_arg(c.int(1))?;
            let mut src = it.iter(c.val(0))?;
            Ok(lazy(move || {
                let mut chunk = Vec::new();
                while chunk.len() < n {
                    match src.next() {
                        Some(Ok(v)) => chunk.push(v),
                        Some(Err(e)) => return Some(Err(e)),
                        None => break,
                    }
                }
                if chunk.is_empty() {
                    None
                } else {
                    Some(Ok(Value::tuple(chunk)))
                }
            }))
        },
    );
    r.add(
        "splitWhere",
        Form::Method,
        coll_pred("predicate"),
        |it, c| {
            let lst = it.to_vec(c.val(0))?;
            let Some(l) = lam(c, 1) else {
                return Ok(Value::Null);
            };
            let me = it.clone();
            let (mut start, mut end) = (0usize, 0usize);
            let mut finished = false;
            Ok(lazy(move || {
                while end < lst.len() {
                    let e = end;
                    end += 1;
                    match call1(&me, &l, lst[e].clone()) {
                        Ok(r) if r.truthy() => {
                            let part = Value::tuple(lst[start..e].to_vec());
                            start = e + 1;
                            return Some(Ok(part));
                        }
                        Ok(_) => {}
                        Err(err) => return Some(Err(err)),
                    }
                }
                if !finished && start != end {
                    finished = true;
                    return Some(Ok(Value::tuple(lst[start..end].to_vec())));
                }
                None
            }))
        },
    );
    r.add(
        "sliceWhere",
        Form::Method,
        coll_pred("predicate"),
        |it, c| {
            let lst = it.to_vec(c.val(0))?;
            let Some(l) = lam(c, 1) else {
                return Ok(Value::Null);
            };
            let me = it.clone();
            let (mut start, mut end) = (0usize, 0usize);
            let mut prev: Option<Value> = None;
            let mut finished = false;
            Ok(lazy(move || {
                while end < lst.len() {
                    let p2 = match call1(&me, &l, lst[end].clone()) {
                        Ok(v) => v,
                        Err(e) => return Some(Err(e)),
                    };
                    let cut = prev.as_ref().is_some_and(|p1| !py_eq(&p2, p1));
                    let e = end;
                    end += 1;
                    prev = Some(p2);
                    if cut {
                        let part = Value::tuple(lst[start..e].to_vec());
                        start = e;
                        return Some(Ok(part));
                    }
                }
                if !finished && start != end {
                    finished = true;
                    return Some(Ok(Value::tuple(lst[start..end].to_vec())));
                }
                None
            }))
        },
    );
    r.add(
        "splitAt",
        Form::Method,
        vec![p("collection", Ty::Iterable), p("index", Ty::PyInt)],
        |it, c| {
            let lst = it.to_vec(c.val(0))?;
            let n = lst.len() as i64;
            let mut i = c.int(1);
            if i < 0 {
                i = (i + n).max(0);
            }
            let i = i.min(n) as usize;
            Ok(Value::list(vec![
                Value::tuple(lst[..i].to_vec()),
                Value::tuple(lst[i..].to_vec()),
            ]))
        },
    );
    for name in ["aggregate", "reduce"] {
        r.add(
            name,
            Form::Method,
            vec![
                p("collection", Ty::Iterable),
                p("selector", Ty::Lambda),
                p("seed", Ty::Any).opt(),
            ],
            |it, c| {
                let Some(l) = lam(c, 1) else {
                    return Ok(Value::Null);
                };
                let seed = c.opt(2).cloned();
                reduce(it, c.val(0), seed, &|a, b| it.call_lambda(&l, vec![a, b]))
            },
        );
    }
    r.add(
        "accumulate",
        Form::Method,
        vec![
            p("collection", Ty::Iterable),
            p("selector", Ty::Lambda),
            p("seed", Ty::Any).opt(),
        ],
        |it, c| {
            let mut src = it.iter(c.val(0))?;
            let Some(l) = lam(c, 1) else {
                return Ok(Value::Null);
            };
            let mut total: Option<Value> = c.opt(2).cloned();
            let mut started = false;
            let me = it.clone();
            Ok(lazy(move || {
                if !started {
                    started = true;
                    if total.is_none() {
                        match src.next() {
                            Some(Ok(v)) => total = Some(v),
                            Some(Err(e)) => return Some(Err(e)),
                            None => {
                                return Some(err(
                                    ErrorKind::TypeError,
                                    "accumulate() of empty sequence with no initial value",
                                ));
                            }
                        }
                    }
                    return total.clone().map(Ok);
                }
                let x = match src.next()? {
                    Ok(x) => x,
                    Err(e) => return Some(Err(e)),
                };
                let acc = total.take().unwrap_or(Value::Null);
                match me.call_lambda(&l, vec![acc, x]) {
                    Ok(v) => {
                        total = Some(v.clone());
                        Some(Ok(v))
                    }
                    Err(e) => Some(Err(e)),
                }
            }))
        },
    );
    r.add(
        "reverse",
        Form::Method,
        vec![p("collection", Ty::Iterable)],
        |it, c| {
            let mut v = it.to_vec(c.val(0))?;
            v.reverse();
            Ok(from_vec(v))
        },
    );
    r.add(
        "mergeWith",
        Form::Method,
        vec![
            p("dict", Ty::Mapping),
            p("another", Ty::Mapping),
            p("listMerger", Ty::Lambda).def(Def::Null),
            p("itemMerger", Ty::Lambda).def(Def::Null),
            p("maxLevels", Ty::PyInt).def(Def::Int(0)),
        ],
        |it, c| {
            let lm = lam(c, 2);
            let im = lam(c, 3);
            merge_dicts(it, c.val(0), c.val(1), &lm, &im, c.int(4))
        },
    );
    r.add(
        "isIterable",
        Form::Function,
        vec![p("value", Ty::Any)],
        |_, c| Ok(Value::Bool(c.val(0).is_iterable())),
    );
    r.add(
        "generate",
        Form::Function,
        vec![
            p("initial", Ty::Any),
            p("predicate", Ty::Lambda),
            p("producer", Ty::Lambda),
            p("selector", Ty::Lambda).def(Def::Null),
            p("decycle", Ty::Bool).def(Def::Bool(false)),
        ],
        |it, c| {
            let mut cur = c.val(0).clone();
            let (Some(pred), Some(prod)) = (lam(c, 1), lam(c, 2)) else {
                return Ok(Value::Null);
            };
            let sel = lam(c, 3);
            let mut past: Option<VSet> = if c.val(4).truthy() {
                Some(VSet::default())
            } else {
                None
            };
            let me = it.clone();
            let mut first = true;
            Ok(lazy(move || {
                if !first {
                    match call1(&me, &prod, cur.clone()) {
                        Ok(v) => cur = v,
                        Err(e) => return Some(Err(e)),
                    }
                }
                first = false;
                match call1(&me, &pred, cur.clone()) {
                    Ok(ok) if ok.truthy() => {}
                    Ok(_) => return None,
                    Err(e) => return Some(Err(e)),
                }
                if let Some(p) = past.as_mut() {
                    if let Err(e) = cur.check_hashable() {
                        return Some(Err(e));
                    }
                    if !p.insert(cur.clone()) {
                        return None;
                    }
                }
                Some(match &sel {
                    Some(s) => call1(&me, s, cur.clone()),
                    None => Ok(cur.clone()),
                })
            }))
        },
    );
    r.add(
        "generateMany",
        Form::Function,
        vec![
            p("initial", Ty::Any),
            p("producer", Ty::Lambda),
            p("selector", Ty::Lambda).def(Def::Null),
            p("decycle", Ty::Bool).def(Def::Bool(false)),
            p("depthFirst", Ty::Bool).def(Def::Bool(false)),
        ],
        |it, c| {
            let Some(prod) = lam(c, 1) else {
                return Ok(Value::Null);
            };
            let sel = lam(c, 2);
            let mut past: Option<VSet> = if c.val(3).truthy() {
                Some(VSet::default())
            } else {
                None
            };
            let depth_first = c.val(4).truthy();
            let mut queue: VecDeque<Value> = VecDeque::from(vec![c.val(0).clone()]);
            let me = it.clone();
            Ok(lazy(move || {
                loop {
                    let item = queue.pop_front()?;
                    if let Some(p) = past.as_mut() {
                        if let Err(e) = item.check_hashable() {
                            return Some(Err(e));
                        }
                        if !p.insert(item.clone()) {
                            continue;
                        }
                    }
                    let out = match &sel {
                        Some(s) => call1(&me, s, item.clone()),
                        None => Ok(item.clone()),
                    };
                    let produced = match call1(&me, &prod, item).and_then(|v| me.to_vec(&v)) {
                        Ok(v) => v,
                        Err(e) => return Some(Err(e)),
                    };
                    if depth_first {
                        for v in produced.into_iter().rev() {
                            queue.push_front(v);
                        }
                    } else {
                        queue.extend(produced);
                    }
                    if let Err(e) = me.check_quota(queue.len() * 8) {
                        return Some(Err(e));
                    }
                    return Some(out);
                }
            }))
        },
    );
    r.add(
        "defaultIfEmpty",
        Form::Method,
        vec![p("collection", Ty::Iterable), p("default", Ty::Iterable)],
        |it, c| {
            let coll = c.val(0).clone();
            if coll.as_seq().is_some() || coll.is_set_like() {
                let empty = match &coll {
                    Value::Tuple(t) | Value::List(t) => t.is_empty(),
                    other => other.set_items().is_none_or(|s| s.is_empty()),
                };
                return Ok(if empty { c.val(1).clone() } else { coll });
            }
            let m = it.memo(coll)?;
            let mut i = it.iter(&m)?;
            match i.next() {
                Some(Ok(_)) => Ok(m),
                Some(Err(e)) => Err(e),
                None => Ok(c.val(1).clone()),
            }
        },
    );
}

fn range(start: i64, stop: i64, step: i64) -> Result<Value> {
    if step == 0 {
        return err(ErrorKind::ValueError, "range() arg 3 must not be zero");
    }
    let mut cur = start;
    Ok(lazy(move || {
        if (step > 0 && cur >= stop) || (step < 0 && cur <= stop) {
            return None;
        }
        let v = cur;
        cur = cur.saturating_add(step);
        Some(Ok(Value::Int(v)))
    }))
}

fn group_by(it: &Interp, c: &mut Call) -> Result<Value> {
    let Some(key_sel) = lam(c, 1) else {
        return Ok(Value::Null);
    };
    let val_sel = lam(c, 2);
    let agg = lam(c, 3);
    let mut groups: IndexMap<Value, Vec<Value>, FxBuild> = Default::default();
    let mut src = it.iter(c.val(0))?;
    while let Some(t) = src.next() {
        let t = t?;
        let value = match &val_sel {
            Some(l) => call1(it, l, t.clone())?,
            None => t.clone(),
        };
        let key = call1(it, &key_sel, t)?;
        key.check_hashable()?;
        groups.entry(key).or_default().push(value);
    }
    let items: Vec<(Value, Value)> = groups
        .into_iter()
        .map(|(k, v)| (k, Value::list(v)))
        .collect();
    let me = it.clone();
    let state = Rc::new(RefCell::new((None::<YaqlError>, true)));
    let mut items = items.into_iter();
    Ok(lazy(move || {
        let (key, values) = items.next()?;
        let group_item = Value::tuple(vec![key.clone(), values.clone()]);
        let Some(agg) = &agg else {
            return Some(Ok(group_item));
        };
        let failed = state.borrow().0.is_some();
        if !failed {
            match call1(&me, agg, values.clone()) {
                Ok(result) => {
                    let vl = values.as_seq().cloned().unwrap_or_default();
                    let keeps = vl.len() == 2
                        && result
                            .as_seq()
                            .is_some_and(|r| r.len() == 2 && py_eq(&r[0], &vl[0]));
                    if !keeps {
                        state.borrow_mut().1 = false;
                    }
                    return Some(Ok(Value::tuple(vec![key, result])));
                }
                Err(e)
                    if matches!(
                        e.kind,
                        ErrorKind::NoMatchingMethodException
                            | ErrorKind::NoMatchingFunctionException
                            | ErrorKind::IndexError
                    ) =>
                {
                    state.borrow_mut().0 = Some(e);
                }
                Err(e) => return Some(Err(e)),
            }
        }
        if state.borrow().1
            && let Ok(result) = call1(&me, agg, group_item)
        {
            let len = match &result {
                Value::Tuple(t) | Value::List(t) => Some(t.len()),
                Value::Str(s) => Some(s.chars().count()),
                Value::Dict(d) => Some(d.map.len()),
                _ => None,
            };
            if len == Some(2) {
                return Some(Ok(result));
            }
        }
        let e = state
            .borrow()
            .0
            .clone()
            .unwrap_or_else(|| YaqlError::new(ErrorKind::TypeError, "aggregator failed"));
        Some(Err(e))
    }))
}

fn merge_dicts(
    it: &Interp,
    d1: &Value,
    d2: &Value,
    lm: &Option<Lambda>,
    im: &Option<Lambda>,
    max_levels: i64,
) -> Result<Value> {
    let (Value::Dict(a), Value::Dict(b)) = (d1, d2) else {
        return Ok(Value::Null);
    };
    let mut result: Map = Default::default();
    for (key, v1) in &a.map {
        result.insert(key.clone(), v1.clone());
        if let Some(v2) = b.map.get(key) {
            let merged = if max_levels != 1 && v2.is_mapping() {
                if !v1.is_mapping() {
                    return err(
                        ErrorKind::TypeError,
                        format!("Cannot merge {} with {}", v1.type_name(), v2.type_name()),
                    );
                }
                merge_dicts(
                    it,
                    v1,
                    v2,
                    lm,
                    im,
                    if max_levels == 0 { 0 } else { max_levels - 1 },
                )?
            } else if max_levels != 1 && v2.as_seq().is_some() {
                if v1.as_seq().is_none() {
                    return err(
                        ErrorKind::TypeError,
                        format!("Cannot merge {} with {}", v1.type_name(), v2.type_name()),
                    );
                }
                match lm {
                    Some(l) => it.call_lambda(l, vec![v1.clone(), v2.clone()])?,
                    None => {
                        if std::mem::discriminant(v1) != std::mem::discriminant(v2) {
                            return err(
                                ErrorKind::TypeError,
                                format!(
                                    "can only concatenate {} (not \"{}\") to {}",
                                    v1.type_name(),
                                    v2.type_name(),
                                    v1.type_name()
                                ),
                            );
                        }
                        let mut seen = VSet::default();
                        for x in v1
                            .as_seq()
                            .into_iter()
                            .flat_map(|v| v.iter())
                            .chain(v2.as_seq().into_iter().flat_map(|v| v.iter()))
                        {
                            x.check_hashable()?;
                            seen.insert(x.clone());
                        }
                        Value::tuple(seen.into_iter().collect())
                    }
                }
            } else {
                match im {
                    Some(l) => it.call_lambda(l, vec![v1.clone(), v2.clone()])?,
                    None => v2.clone(),
                }
            };
            result.insert(key.clone(), merged);
        }
    }
    for (k, v) in &b.map {
        if !result.contains_key(k) {
            result.insert(k.clone(), v.clone());
        }
    }
    Ok(Value::dict(result))
}
