//! yaql's `system`, `common`, `boolean` and `branching` modules: `let`, `with`, `def`,
//! `unpack`, `->`, `assert`, `call`; `=` / `!=` and the null orderings; `and`, `or`, `not`,
//! `bool`, `isBoolean`; `switch`, `selectCase`, `selectAllCases`, `examine`, `switchCase`,
//! `coalesce`. Must not do I/O.

use std::rc::Rc;

use crate::error::{ErrorKind, Result, err};
use crate::interp::{ArgIn, Call, Ctx, Interp, Lambda, PArg, UserFn, lazy};
use crate::registry::{Def, FnDef, Form, PKind, Registry, Ty, p};
use crate::value::{Value, py_eq};

/// yaql's CamelCaseConvention for function names given to `def`.
pub fn camel_case(name: &str) -> String {
    let name = name.trim_end_matches('_');
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    let mut first = true;
    while let Some(c) = chars.next() {
        if c == '_'
            && !first
            && let Some(&n) = chars.peek()
            && (n.is_alphanumeric() || n == '_')
        {
            chars.next();
            out.extend(n.to_uppercase());
            first = false;
            continue;
        }
        out.push(c);
        first = false;
    }
    out
}

pub fn register(r: &mut Registry) {
    // ---- system
    r.add(
        "unpack",
        Form::Method,
        vec![p("sequence", Ty::Iterable), p("args", Ty::Str).many()],
        |it, c| {
            let names: Vec<Value> = c.many_vals(1);
            let ctx = Ctx::child(c.ctx);
            let mut src = it.iter(c.val(0))?;
            let mut first = Vec::new();
            while first.len() < names.len() + 1 {
                match src.next() {
                    Some(v) => first.push(v?),
                    None => break,
                }
            }
            if !names.is_empty() && names.len() != first.len() {
                return err(
                    ErrorKind::ValueError,
                    format!(
                        "Cannot unpack {} elements into {}",
                        first.len(),
                        names.len()
                    ),
                );
            }
            if !names.is_empty() {
                for (n, v) in names.iter().zip(first) {
                    ctx.set(n.as_str().unwrap_or(""), v);
                }
            } else {
                let mut all = it.iter(c.val(0))?;
                let mut i = 1;
                while let Some(v) = all.next() {
                    ctx.set(&i.to_string(), v?);
                    i += 1;
                }
            }
            Ok(Value::Context(ctx))
        },
    );
    r.add(
        "with",
        Form::Function,
        vec![p("args", Ty::Any).many()],
        |_, c| {
            let ctx = Ctx::child(c.ctx);
            for (i, v) in c.many_vals(0).into_iter().enumerate() {
                ctx.set(&(i + 1).to_string(), v);
            }
            Ok(Value::Context(ctx))
        },
    );
    r.add(
        "let",
        Form::Function,
        vec![p("args", Ty::Any).many(), p("kwargs", Ty::Any).var_kw()],
        |_, c| {
            let ctx = Ctx::child(c.ctx);
            for (i, v) in c.many_vals(0).into_iter().enumerate() {
                ctx.set(&(i + 1).to_string(), v);
            }
            for (k, v) in c.kwargs(1) {
                ctx.set(&k, v);
            }
            Ok(Value::Context(ctx))
        },
    );
    r.add(
        "def",
        Form::Function,
        vec![p("name", Ty::Str), p("func", Ty::Lambda)],
        |_, c| {
            let ctx = Ctx::child(c.ctx);
            let name = camel_case(c.str(0));
            let Some(body) = c.lambda(1).cloned() else {
                return Ok(Value::Context(ctx));
            };
            // the body sees the context `def` created (so it can call itself)
            let body = Lambda {
                src: body.src,
                ctx: ctx.clone(),
            };
            ctx.add_function(Rc::new(UserFn {
                def: FnDef {
                    name,
                    function: true,
                    method: false,
                    no_kwargs: false,
                    layer: 0,
                    params: vec![p("args", Ty::Any).many(), p("kwargs", Ty::Any).var_kw()],
                    imp: call_user,
                },
                body,
            }));
            Ok(Value::Context(ctx))
        },
    );
    r.add(
        "#operator_->",
        Form::Function,
        vec![p("left", Ty::Context), p("right", Ty::LambdaCtx)],
        |it, c| {
            let Value::Context(ctx) = c.val(0).clone() else {
                return Ok(Value::Null);
            };
            match c.lambda(1) {
                Some(l) => it.call_lambda_in(l, &ctx),
                None => Ok(Value::Null),
            }
        },
    );
    r.add(
        "assert",
        Form::Method,
        vec![
            p("obj", Ty::Any),
            p("condition", Ty::Lambda),
            p("message", Ty::Str).def(Def::Str("Assertion failed")),
        ],
        |it, c| {
            let obj = it.memo(c.take(0))?;
            let ok = match c.lambda(1) {
                Some(l) => it.call_lambda(l, vec![obj.clone()])?.truthy(),
                None => false,
            };
            if !ok {
                return err(ErrorKind::AssertionError, c.str(2).to_string());
            }
            Ok(obj)
        },
    );
    r.add(
        "call",
        Form::Function,
        vec![
            p("name", Ty::Str),
            p("args", Ty::Sequence),
            p("kwargs", Ty::Mapping),
            p("receiver", Ty::Any).opt(),
        ],
        |it, c| {
            let name = c.str(0).to_string();
            let args: Vec<ArgIn> = c
                .val(1)
                .as_seq()
                .map(|v| v.iter().cloned().map(ArgIn::Val).collect())
                .unwrap_or_default();
            let mut kwargs = Vec::new();
            if let Value::Dict(d) = c.val(2) {
                for (k, v) in &d.map {
                    if let Value::Str(k) = k
                        && is_keyword(k)
                    {
                        kwargs.push((k.clone(), ArgIn::Val(v.clone())));
                    }
                }
            }
            match c.opt(3) {
                Some(recv) => {
                    let mut all = vec![ArgIn::Val(recv.clone())];
                    all.extend(args);
                    it.call(&name, all, kwargs, true, c.ctx)
                }
                None => it.call(&name, args, kwargs, false, c.ctx),
            }
        },
    );

    // ---- common: equality and null ordering
    r.add(
        "*equal",
        Form::Function,
        vec![p("left", Ty::Any), p("right", Ty::Any)],
        |_, c| Ok(Value::Bool(py_eq(c.val(0), c.val(1)))),
    );
    r.add(
        "*not_equal",
        Form::Function,
        vec![p("left", Ty::Any), p("right", Ty::Any)],
        |_, c| Ok(Value::Bool(!py_eq(c.val(0), c.val(1)))),
    );
    type Cmp = fn(&Interp, &mut Call) -> Result<Value>;
    let table: [(&str, Cmp, Cmp, Cmp); 4] = [
        (
            "#operator_<",
            |_, _| Ok(Value::Bool(false)),
            |_, _| Ok(Value::Bool(true)),
            |_, _| Ok(Value::Bool(false)),
        ),
        (
            "#operator_<=",
            |_, _| Ok(Value::Bool(false)),
            |_, _| Ok(Value::Bool(true)),
            |_, _| Ok(Value::Bool(true)),
        ),
        (
            "#operator_>",
            |_, _| Ok(Value::Bool(true)),
            |_, _| Ok(Value::Bool(false)),
            |_, _| Ok(Value::Bool(false)),
        ),
        (
            "#operator_>=",
            |_, _| Ok(Value::Bool(true)),
            |_, _| Ok(Value::Bool(false)),
            |_, _| Ok(Value::Bool(true)),
        ),
    ];
    for (name, left_null, null_right, null_null) in table {
        r.add(
            name,
            Form::Function,
            vec![
                p("left", Ty::Any).not_null(),
                p("right", Ty::NoneOnly).null(),
            ],
            left_null,
        );
        r.add(
            name,
            Form::Function,
            vec![
                p("left", Ty::NoneOnly).null(),
                p("right", Ty::Any).not_null(),
            ],
            null_right,
        );
        r.add(
            name,
            Form::Function,
            vec![
                p("left", Ty::NoneOnly).null(),
                p("right", Ty::NoneOnly).null(),
            ],
            null_null,
        );
    }

    // ---- boolean
    r.add(
        "#operator_and",
        Form::Function,
        vec![p("left", Ty::Lambda), p("right", Ty::Lambda)],
        |it, c| {
            let l = force(it, c, 0)?;
            if !l.truthy() {
                return Ok(l);
            }
            force(it, c, 1)
        },
    );
    r.add(
        "#operator_or",
        Form::Function,
        vec![p("left", Ty::Lambda), p("right", Ty::Lambda)],
        |it, c| {
            let l = force(it, c, 0)?;
            if l.truthy() {
                return Ok(l);
            }
            force(it, c, 1)
        },
    );
    r.add(
        "#unary_operator_not",
        Form::Function,
        vec![p("arg", Ty::Any)],
        |_, c| Ok(Value::Bool(!c.val(0).truthy())),
    );
    r.add("bool", Form::Function, vec![p("value", Ty::Any)], |_, c| {
        Ok(Value::Bool(c.val(0).truthy()))
    });
    r.add(
        "isBoolean",
        Form::Function,
        vec![p("value", Ty::Any)],
        |_, c| Ok(Value::Bool(matches!(c.val(0), Value::Bool(_)))),
    );

    // ---- branching
    r.add_nokw(
        "switch",
        Form::Function,
        vec![p("args", Ty::LazyRule).many()],
        |it, c| {
            for a in c.many(0) {
                if let PArg::Rule(k, v) = a
                    && it.call_lambda_in(k, &k.ctx)?.truthy()
                {
                    return it.call_lambda_in(v, &v.ctx);
                }
            }
            Ok(Value::Null)
        },
    );
    r.add(
        "selectCase",
        Form::Function,
        vec![p("args", Ty::Lambda).many()],
        |it, c| {
            let mut i = 0;
            for a in c.many(0) {
                if let PArg::Lambda(l) = a
                    && it.force(l)?.truthy()
                {
                    return Ok(Value::Int(i));
                }
                i += 1;
            }
            Ok(Value::Int(i))
        },
    );
    r.add(
        "selectAllCases",
        Form::Function,
        vec![p("args", Ty::Lambda).many()],
        |it, c| {
            let lambdas = lambdas(c.many(0));
            let it = it.clone();
            let mut i = 0;
            Ok(lazy(move || {
                while i < lambdas.len() {
                    let idx = i;
                    i += 1;
                    match it.force(&lambdas[idx]) {
                        Ok(v) if v.truthy() => return Some(Ok(Value::Int(idx as i64))),
                        Ok(_) => {}
                        Err(e) => return Some(Err(e)),
                    }
                }
                None
            }))
        },
    );
    r.add(
        "examine",
        Form::Function,
        vec![p("args", Ty::Lambda).many()],
        |it, c| {
            let lambdas = lambdas(c.many(0));
            let it = it.clone();
            let mut i = 0;
            Ok(lazy(move || {
                let l = lambdas.get(i)?;
                i += 1;
                Some(it.force(l).map(|v| Value::Bool(v.truthy())))
            }))
        },
    );
    r.add(
        "switchCase",
        Form::Method,
        vec![p("case", Ty::PyInt), p("args", Ty::Lambda).many()],
        |it, c| {
            let case = c.int(0);
            let ls = lambdas(c.many(1));
            if case >= 0 && (case as usize) < ls.len() {
                return it.force(&ls[case as usize]);
            }
            match ls.last() {
                Some(l) => it.force(l),
                None => Ok(Value::Null),
            }
        },
    );
    r.add(
        "coalesce",
        Form::Function,
        vec![p("args", Ty::Lambda).many()],
        |it, c| {
            for l in lambdas(c.many(0)) {
                let v = it.force(&l)?;
                if !v.is_null() {
                    return Ok(v);
                }
            }
            Ok(Value::Null)
        },
    );
}

fn force(it: &Interp, c: &Call, i: usize) -> Result<Value> {
    match c.lambda(i) {
        Some(l) => it.force(l),
        None => Ok(Value::Null),
    }
}

fn lambdas(args: &[PArg]) -> Vec<Lambda> {
    args.iter()
        .filter_map(|a| match a {
            PArg::Lambda(l) => Some(l.clone()),
            _ => None,
        })
        .collect()
}

/// A `def`-defined function: bind positional and keyword arguments and run the body.
fn call_user(it: &Interp, c: &mut Call) -> Result<Value> {
    let args = c.many_vals(0);
    let kwargs = c.kwargs(1);
    match c.user {
        Some(body) => it.call_lambda_kw(body, args, kwargs),
        None => Ok(Value::Null),
    }
}

fn is_keyword(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if (c.is_alphabetic() || c == '_') && !s.starts_with("__") => {
            chars.all(|c| c.is_alphanumeric() || c == '_')
        }
        _ => false,
    }
}

#[allow(dead_code)]
fn unused(_: PKind) {}
