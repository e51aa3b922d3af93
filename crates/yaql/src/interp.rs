//! The evaluator: contexts (`$` variables and `def` functions, layered like yaql's), lambdas
//! (lazy parameters re-evaluated with `$1..` bound), lazy sequences with Python iterator
//! semantics, the limits (items, memory, depth, steps) and overload resolution of every call.
//! Must not know individual library functions beyond `.`/`?.` (resolved inline, as the
//! reference's overloads would) nor do any I/O.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use super::error::{ErrorKind, Result, YaqlError, err};
use super::lexer::Lit;
use super::parser::{Arg, Ast, Node, NodeId};
use super::registry::{Def, FnDef, PKind, Param, Ty, registry};
use super::value::{Dict, Set, Value};
use super::{Limits, RegexCache};

/// A context layer: variables and functions defined by `def`.
pub struct Ctx {
    parent: Option<Rc<Ctx>>,
    vars: RefCell<Vec<(Rc<str>, Value)>>,
    funcs: RefCell<Vec<Rc<UserFn>>>,
}

impl Ctx {
    pub fn root() -> Rc<Ctx> {
        Rc::new(Ctx {
            parent: None,
            vars: RefCell::new(Vec::new()),
            funcs: RefCell::new(Vec::new()),
        })
    }

    pub fn child(parent: &Rc<Ctx>) -> Rc<Ctx> {
        Rc::new(Ctx {
            parent: Some(parent.clone()),
            vars: RefCell::new(Vec::new()),
            funcs: RefCell::new(Vec::new()),
        })
    }

    /// Bind `$name` (`name` without the `$`; `""` means `1`).
    pub fn set(&self, name: &str, value: Value) {
        let name = if name.is_empty() { "1" } else { name };
        let mut vars = self.vars.borrow_mut();
        if let Some(slot) = vars.iter_mut().find(|(n, _)| &**n == name) {
            slot.1 = value;
        } else {
            vars.push((Rc::from(name), value));
        }
    }

    pub fn get(&self, name: &str) -> Option<Value> {
        let mut c = Some(self);
        while let Some(ctx) = c {
            if let Some((_, v)) = ctx.vars.borrow().iter().find(|(n, _)| &**n == name) {
                return Some(v.clone());
            }
            c = ctx.parent.as_deref();
        }
        None
    }

    pub fn add_function(&self, f: Rc<UserFn>) {
        self.funcs.borrow_mut().push(f);
    }
}

/// A function defined by `def(name, body)`.
pub struct UserFn {
    pub def: FnDef,
    pub body: Lambda,
}

/// A lazy argument: an expression (or a plain value) evaluated on demand.
#[derive(Clone)]
pub struct Lambda {
    pub src: LamSrc,
    pub ctx: Rc<Ctx>,
}

#[derive(Clone)]
pub enum LamSrc {
    Node(NodeId),
    Val(Value),
}

/// A single-use lazy sequence (Python iterator / generator).
pub struct LazySeq {
    #[allow(clippy::type_complexity)]
    next_fn: RefCell<Option<Box<dyn FnMut() -> Option<Result<Value>>>>>,
}

impl LazySeq {
    pub fn next(&self) -> Option<Result<Value>> {
        let Ok(mut g) = self.next_fn.try_borrow_mut() else {
            return Some(err(ErrorKind::ValueError, "generator already executing"));
        };
        let f = g.as_mut()?;
        let r = f();
        if r.is_none() {
            *g = None;
        }
        r
    }
}

/// `memorize()`: remembers what it yielded so it can be iterated again.
pub struct Memo {
    src: RefCell<ValIter>,
    items: RefCell<Vec<Value>>,
}

/// `orderBy()`: sorted on first iteration by the fields added so far.
pub struct Ordered {
    pub coll: Value,
    pub order: RefCell<Vec<(Lambda, bool)>>,
    sorted: RefCell<Option<Rc<[Value]>>>,
}

impl Ordered {
    pub fn new(coll: Value, first: Lambda, ascending: bool) -> Ordered {
        Ordered {
            coll,
            order: RefCell::new(vec![(first, ascending)]),
            sorted: RefCell::new(None),
        }
    }
}

/// A cursor over any iterable value.
pub enum ValIter {
    Seq(Rc<[Value]>, usize),
    Keys(Rc<Dict>, usize),
    Vals(Rc<Dict>, usize),
    Items(Rc<Dict>, usize),
    SetI(Rc<Set>, usize),
    Lazy(Rc<LazySeq>),
    Memo(Rc<Memo>, usize),
    Owned(std::vec::IntoIter<Value>),
    Limited(Box<ValIter>, usize, usize),
}

impl ValIter {
    pub fn next(&mut self) -> Option<Result<Value>> {
        match self {
            ValIter::Seq(v, i) => {
                let r = v.get(*i).cloned();
                *i += 1;
                r.map(Ok)
            }
            ValIter::Keys(d, i) => {
                let r = d.map.get_index(*i).map(|(k, _)| k.clone());
                *i += 1;
                r.map(Ok)
            }
            ValIter::Vals(d, i) => {
                let r = d.map.get_index(*i).map(|(_, v)| v.clone());
                *i += 1;
                r.map(Ok)
            }
            ValIter::Items(d, i) => {
                let r = d
                    .map
                    .get_index(*i)
                    .map(|(k, v)| Value::tuple(vec![k.clone(), v.clone()]));
                *i += 1;
                r.map(Ok)
            }
            ValIter::SetI(s, i) => {
                let r = s.items.get_index(*i).cloned();
                *i += 1;
                r.map(Ok)
            }
            ValIter::Lazy(l) => l.next(),
            ValIter::Memo(m, i) => {
                if let Some(v) = m.items.borrow().get(*i) {
                    *i += 1;
                    return Some(Ok(v.clone()));
                }
                let Ok(mut src) = m.src.try_borrow_mut() else {
                    return Some(err(ErrorKind::ValueError, "generator already executing"));
                };
                match src.next()? {
                    Ok(v) => {
                        m.items.borrow_mut().push(v.clone());
                        *i += 1;
                        Some(Ok(v))
                    }
                    Err(e) => Some(Err(e)),
                }
            }
            ValIter::Owned(it) => it.next().map(Ok),
            ValIter::Limited(inner, count, limit) => {
                let r = inner.next()?;
                if *count >= *limit {
                    return Some(Err(too_large(*limit)));
                }
                *count += 1;
                Some(r)
            }
        }
    }

    /// Collect everything (errors stop the collection).
    pub fn collect_vec(mut self) -> Result<Vec<Value>> {
        let mut out = Vec::new();
        while let Some(v) = self.next() {
            out.push(v?);
        }
        Ok(out)
    }
}

pub fn too_large(limit: usize) -> YaqlError {
    YaqlError::new(
        ErrorKind::CollectionTooLargeException,
        format!("Collection length exceeds {limit} elements"),
    )
}

/// Per-evaluation state shared by everything an evaluation creates.
pub struct Run {
    pub ast: Arc<Ast>,
    consts: Vec<Value>,
    pub limits: Limits,
    depth: Cell<usize>,
    steps: Cell<u64>,
    pub regexes: Arc<RegexCache>,
    /// Finalised forms shared with other evaluations over the same data, when the caller
    /// gave one (see [`super::output::FinalMemo`]).
    pub memo: Option<Rc<super::output::FinalMemo>>,
}

/// A handle on the running evaluation; cheap to clone into lazy sequences.
#[derive(Clone)]
pub struct Interp(pub Rc<Run>);

/// An argument as given to the resolver.
#[derive(Clone)]
pub enum ArgIn {
    Node(NodeId),
    Rule(NodeId, NodeId),
    Val(Value),
    Skip,
}

/// An argument after the first pass and evaluation.
#[derive(Clone)]
enum Ev {
    Val(Value),
    /// A bare word kept as a keyword constant.
    Kw(Rc<str>),
    Lazy(ArgIn),
    Skip,
}

/// A resolved call's arguments, one per parameter of the chosen definition.
pub enum PArg {
    Val(Value),
    Absent,
    Lambda(Lambda),
    Rule(Lambda, Lambda),
    Many(Vec<PArg>),
    Kw(Vec<(Rc<str>, PArg)>),
}

/// What a library function receives.
pub struct Call<'a> {
    pub args: Vec<PArg>,
    pub ctx: &'a Rc<Ctx>,
    pub user: Option<&'a Lambda>,
    null: Value,
}

impl Call<'_> {
    pub fn val(&self, i: usize) -> &Value {
        match &self.args[i] {
            PArg::Val(v) => v,
            _ => &self.null,
        }
    }
    pub fn take(&mut self, i: usize) -> Value {
        match std::mem::replace(&mut self.args[i], PArg::Absent) {
            PArg::Val(v) => v,
            _ => Value::Null,
        }
    }
    pub fn absent(&self, i: usize) -> bool {
        matches!(self.args[i], PArg::Absent)
    }
    pub fn opt(&self, i: usize) -> Option<&Value> {
        match &self.args[i] {
            PArg::Val(v) => Some(v),
            _ => None,
        }
    }
    pub fn int(&self, i: usize) -> i64 {
        self.val(i).as_pyint().unwrap_or(0)
    }
    pub fn str(&self, i: usize) -> &str {
        self.val(i).as_str().unwrap_or("")
    }
    pub fn lambda(&self, i: usize) -> Option<&Lambda> {
        match &self.args[i] {
            PArg::Lambda(l) => Some(l),
            _ => None,
        }
    }
    pub fn many(&self, i: usize) -> &[PArg] {
        match &self.args[i] {
            PArg::Many(v) => v,
            _ => &[],
        }
    }
    pub fn many_vals(&self, i: usize) -> Vec<Value> {
        self.many(i)
            .iter()
            .map(|a| match a {
                PArg::Val(v) => v.clone(),
                _ => Value::Null,
            })
            .collect()
    }
    pub fn kwargs(&self, i: usize) -> Vec<(Rc<str>, Value)> {
        match &self.args[i] {
            PArg::Kw(v) => v
                .iter()
                .map(|(k, a)| {
                    (
                        k.clone(),
                        match a {
                            PArg::Val(v) => v.clone(),
                            _ => Value::Null,
                        },
                    )
                })
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// A candidate overload: a library definition or a user function.
#[derive(Clone, Copy)]
struct Cand<'a> {
    def: &'a FnDef,
    user: Option<&'a Lambda>,
}

struct Mapping {
    /// parameter index per positional argument
    slots: Vec<usize>,
    /// parameter index per keyword argument
    kw: Vec<usize>,
}

fn lit_value(l: &Lit) -> Value {
    match l {
        Lit::Null => Value::Null,
        Lit::Bool(b) => Value::Bool(*b),
        Lit::Int(i) => Value::Int(*i),
        Lit::Float(f) => Value::Float(*f),
        Lit::Str(s) => Value::str(s),
    }
}

/// Phase-2 type check of a value (yaql `SmartType.check` on an evaluated argument).
pub fn check_val(ty: Ty, nullable: bool, v: &Value) -> bool {
    if v.is_null() {
        return nullable || matches!(ty, Ty::NoneOnly | Ty::Lambda | Ty::LambdaCtx | Ty::Expr);
    }
    match ty {
        Ty::Any | Ty::Lambda | Ty::LambdaMethod | Ty::LambdaCtx | Ty::Expr => true,
        Ty::NoneOnly => false,
        Ty::Bool => matches!(v, Value::Bool(_)),
        Ty::PyInt => matches!(v, Value::Int(_) | Value::Bool(_)),
        Ty::Integer => matches!(v, Value::Int(_)),
        Ty::Number => v.is_number(),
        Ty::Str => matches!(v, Value::Str(_)),
        Ty::Iterable => v.is_iterable(),
        Ty::IterableNoSet => v.is_iterable() && !v.is_set_like(),
        Ty::Iterator => v.is_iterator(),
        Ty::Sequence => v.as_seq().is_some(),
        Ty::Mapping => v.is_mapping(),
        Ty::Set => v.is_set_like(),
        Ty::Regex => matches!(v, Value::Regex(_)),
        Ty::Context => matches!(v, Value::Context(_)),
        Ty::Ordered => matches!(v, Value::Ordered(_)),
        Ty::Rule => matches!(v, Value::Rule(_)),
        Ty::LazyRule | Ty::Keyword => false,
        Ty::DateTime | Ty::TimeSpan => false,
    }
}

impl Interp {
    pub fn new(ast: Arc<Ast>, limits: Limits, regexes: Arc<RegexCache>) -> Interp {
        Interp::with_memo(ast, limits, regexes, None)
    }

    /// [`Interp::new`] sharing a finalisation memo with other evaluations.
    pub fn with_memo(
        ast: Arc<Ast>,
        limits: Limits,
        regexes: Arc<RegexCache>,
        memo: Option<Rc<super::output::FinalMemo>>,
    ) -> Interp {
        let consts = ast
            .nodes
            .iter()
            .map(|n| match n {
                Node::Const(l) => lit_value(l),
                Node::Keyword(w) => Value::str(w),
                _ => Value::Null,
            })
            .collect();
        Interp(Rc::new(Run {
            ast,
            consts,
            limits,
            depth: Cell::new(0),
            steps: Cell::new(0),
            regexes,
            memo,
        }))
    }

    pub fn limits(&self) -> &Limits {
        &self.0.limits
    }

    fn ast(&self) -> &Ast {
        &self.0.ast
    }

    /// Evaluate the whole expression in `ctx`.
    pub fn eval_root(&self, ctx: &Rc<Ctx>) -> Result<Value> {
        let root = self.0.ast.root;
        self.eval(root, ctx, None)
    }

    fn enter(&self) -> Result<()> {
        let d = self.0.depth.get() + 1;
        if d > self.0.limits.max_depth {
            return err(
                ErrorKind::RecursionError,
                format!(
                    "maximum recursion depth ({}) exceeded",
                    self.0.limits.max_depth
                ),
            );
        }
        self.0.depth.set(d);
        Ok(())
    }

    fn leave(&self) {
        self.0.depth.set(self.0.depth.get().saturating_sub(1));
    }

    /// The units of work counted so far (see [`Interp::step`]).
    pub fn steps_used(&self) -> u64 {
        self.0.steps.get()
    }

    /// Count one unit of work against `max_steps`.
    pub fn step(&self) -> Result<()> {
        let s = self.0.steps.get() + 1;
        self.0.steps.set(s);
        if s > self.0.limits.max_steps {
            return err(
                ErrorKind::StepLimitExceeded,
                format!(
                    "evaluation took more than {} function calls",
                    self.0.limits.max_steps
                ),
            );
        }
        Ok(())
    }

    pub fn eval(&self, id: NodeId, ctx: &Rc<Ctx>, recv: Option<&Value>) -> Result<Value> {
        self.enter()?;
        let r = self.eval_inner(id, ctx, recv);
        self.leave();
        r.map_err(|e| e.or_at(self.ast().pos(id)))
    }

    fn eval_inner(&self, id: NodeId, ctx: &Rc<Ctx>, recv: Option<&Value>) -> Result<Value> {
        let run = self.0.clone();
        match run.ast.node(id) {
            Node::Const(_) | Node::Keyword(_) => Ok(run.consts[id as usize].clone()),
            Node::Var(name) => Ok(ctx.get(name).unwrap_or(Value::Null)),
            Node::Wrap(inner) => self.eval(*inner, ctx, recv),
            Node::Call {
                name,
                args,
                written,
            } => {
                if !*written {
                    if &**name == "#operator_." {
                        if let (Arg::Expr(l), Arg::Expr(r)) = (&args[0], &args[1]) {
                            return self.dot(*l, *r, ctx, None);
                        }
                    } else if &**name == "#operator_?."
                        && let (Arg::Expr(l), Arg::Expr(r)) = (&args[0], &args[1])
                    {
                        let left = self.eval(*l, ctx, None)?;
                        if left.is_null() {
                            return Ok(Value::Null);
                        }
                        return self.dot(*l, *r, ctx, Some(left));
                    }
                }
                let mut ins: Vec<ArgIn> = Vec::with_capacity(args.len() + 1);
                let receiver = if *written { recv } else { None };
                if let Some(r) = receiver {
                    ins.push(ArgIn::Val(r.clone()));
                }
                for a in args {
                    ins.push(match a {
                        Arg::Skip => ArgIn::Skip,
                        Arg::Expr(e) => ArgIn::Node(*e),
                        Arg::Rule(k, v) => ArgIn::Rule(*k, *v),
                    });
                }
                self.call(name, ins, Vec::new(), receiver.is_some(), ctx)
            }
        }
    }

    /// `left.right`: a method call when `right` is a written call, attribute access when it
    /// is a bare word; anything else matches no `#operator_.` overload.
    fn dot(&self, l: NodeId, r: NodeId, ctx: &Rc<Ctx>, left: Option<Value>) -> Result<Value> {
        match self.ast().node(r) {
            Node::Call { written: true, .. } => {
                let left = match left {
                    Some(v) => v,
                    None => self.eval(l, ctx, None)?,
                };
                self.eval(r, ctx, Some(&left))
            }
            Node::Keyword(name) => {
                let left = match left {
                    Some(v) => v,
                    None => self.eval(l, ctx, None)?,
                };
                let name: Rc<str> = Rc::from(&**name);
                self.attribute(left, name)
            }
            _ => err(
                ErrorKind::NoMatchingFunctionException,
                "No function \"#operator_.\" matches supplied arguments",
            ),
        }
    }

    /// `obj.name` for a bare word: dict key, a mapped attribute over a collection, or a
    /// `#property#name` function (none exist without date/time support).
    pub fn attribute(&self, obj: Value, name: Rc<str>) -> Result<Value> {
        match &obj {
            Value::Dict(d) => match d.map.get(&Value::Str(name.clone())) {
                Some(v) => Ok(v.clone()),
                None => err(ErrorKind::KeyError, format!("'{name}'")),
            },
            v if v.is_iterable() => {
                let mut it = self.iter(&self.limited(obj.clone())?)?;
                let me = self.clone();
                Ok(lazy(move || {
                    let item = it.next()?;
                    Some(item.and_then(|t| me.attribute(t, name.clone())))
                }))
            }
            _ => super::stdlib::property(self, &obj, &name).unwrap_or_else(|| {
                err(
                    ErrorKind::NoFunctionRegisteredException,
                    format!("Unknown function \"#property#{name}\""),
                )
            }),
        }
    }

    /// Call a function by name with plain values (yaql's `Delegate`).
    pub fn call_fn(&self, name: &str, args: Vec<Value>, ctx: &Rc<Ctx>) -> Result<Value> {
        self.call(
            name,
            args.into_iter().map(ArgIn::Val).collect(),
            Vec::new(),
            false,
            ctx,
        )
    }

    /// Call a method by name with plain values.
    pub fn call_method(
        &self,
        name: &str,
        receiver: Value,
        args: Vec<Value>,
        ctx: &Rc<Ctx>,
    ) -> Result<Value> {
        let mut ins = vec![ArgIn::Val(receiver)];
        ins.extend(args.into_iter().map(ArgIn::Val));
        self.call(name, ins, Vec::new(), true, ctx)
    }

    /// Resolve and run a call (yaql `runner.call` + `choose_overload`).
    pub fn call(
        &self,
        name: &str,
        mut args: Vec<ArgIn>,
        mut kwargs: Vec<(Rc<str>, ArgIn)>,
        receiver: bool,
        ctx: &Rc<Ctx>,
    ) -> Result<Value> {
        self.step()?;
        // candidates, layer by layer
        let user_fns: Vec<Vec<Rc<UserFn>>> = {
            let mut layers = Vec::new();
            let mut c = Some(ctx.as_ref());
            while let Some(cx) = c {
                let f = cx.funcs.borrow();
                if !f.is_empty() {
                    let matching: Vec<Rc<UserFn>> = f
                        .iter()
                        .filter(|u| {
                            u.def.name == name
                                && if receiver {
                                    u.def.method
                                } else {
                                    u.def.function
                                }
                        })
                        .cloned()
                        .collect();
                    if !matching.is_empty() {
                        layers.push(matching);
                    }
                }
                c = cx.parent.as_deref();
            }
            layers
        };
        let reg = registry();
        let mut levels: Vec<Vec<Cand>> = user_fns
            .iter()
            .map(|l| {
                l.iter()
                    .map(|u| Cand {
                        def: &u.def,
                        user: Some(&u.body),
                    })
                    .collect()
            })
            .collect();
        for layer in 0..3u8 {
            let lv: Vec<Cand> = reg
                .lookup(name)
                .iter()
                .map(|i| &reg.defs[*i])
                .filter(|d| d.layer == layer && if receiver { d.method } else { d.function })
                .map(|d| Cand { def: d, user: None })
                .collect();
            if !lv.is_empty() {
                levels.push(lv);
            }
        }
        if levels.is_empty() {
            return Err(if receiver {
                YaqlError::new(
                    ErrorKind::NoMethodRegisteredException,
                    format!("Unknown method \"{name}\""),
                )
            } else {
                YaqlError::new(
                    ErrorKind::NoFunctionRegisteredException,
                    format!("Unknown function \"{name}\""),
                )
            });
        }
        let ambiguous = || {
            if receiver {
                YaqlError::new(
                    ErrorKind::AmbiguousMethodException,
                    format!("Ambiguous method \"{name}\""),
                )
            } else {
                YaqlError::new(
                    ErrorKind::AmbiguousFunctionException,
                    format!("Ambiguous function \"{name}\""),
                )
            }
        };
        let not_found = || {
            if receiver {
                YaqlError::new(
                    ErrorKind::NoMatchingMethodException,
                    format!("No method \"{name}\" matches supplied arguments"),
                )
            } else {
                YaqlError::new(
                    ErrorKind::NoMatchingFunctionException,
                    format!("No function \"{name}\" matches supplied arguments"),
                )
            }
        };
        // translate `k => v` into keyword arguments unless the functions take rules
        let no_kwargs = levels[0][0].def.no_kwargs;
        if levels
            .iter()
            .flatten()
            .any(|c| c.def.no_kwargs != no_kwargs)
        {
            return Err(ambiguous());
        }
        if !no_kwargs && args.iter().any(|a| matches!(a, ArgIn::Rule(..))) {
            let mut pos = Vec::with_capacity(args.len());
            for a in args {
                match a {
                    ArgIn::Rule(k, v) => match self.ast().node(k) {
                        Node::Keyword(w) => {
                            let w: Rc<str> = Rc::from(&**w);
                            if let Some(slot) = kwargs.iter_mut().find(|(n, _)| *n == w) {
                                slot.1 = ArgIn::Node(v);
                            } else {
                                kwargs.push((w, ArgIn::Node(v)));
                            }
                        }
                        _ => {
                            return err(
                                ErrorKind::MappingTranslationException,
                                "Cannot convert mapping to keyword argument",
                            );
                        }
                    },
                    other => pos.push(other),
                }
            }
            args = pos;
        }
        // first pass: map unevaluated arguments
        let mut mapped: Vec<Vec<(Cand, Mapping)>> = Vec::new();
        let mut lazy: Option<(Vec<bool>, Vec<bool>)> = None;
        for level in &levels {
            let mut lv = Vec::new();
            for c in level {
                let Some(m) = self.map_args(c.def, &args, &kwargs) else {
                    continue;
                };
                let lp: Vec<bool> = m
                    .slots
                    .iter()
                    .map(|&pi| c.def.params[pi].ty.is_lazy())
                    .collect();
                let lk: Vec<bool> =
                    m.kw.iter()
                        .map(|&pi| c.def.params[pi].ty.is_lazy())
                        .collect();
                match &lazy {
                    None => lazy = Some((lp, lk)),
                    Some((a, b)) => {
                        if *a != lp || *b != lk {
                            return Err(ambiguous());
                        }
                    }
                }
                lv.push((*c, m));
            }
            if !lv.is_empty() {
                mapped.push(lv);
            }
        }
        let Some((lazy_pos, lazy_kw)) = lazy else {
            return Err(not_found());
        };
        // evaluate the eager arguments
        let mut evs: Vec<Ev> = Vec::with_capacity(args.len());
        for (i, a) in args.into_iter().enumerate() {
            evs.push(if lazy_pos[i] {
                Ev::Lazy(a)
            } else {
                self.eval_arg(a, ctx)?
            });
        }
        let mut kevs: Vec<(Rc<str>, Ev)> = Vec::with_capacity(kwargs.len());
        for (i, (k, a)) in kwargs.into_iter().enumerate() {
            kevs.push((
                k,
                if lazy_kw[i] {
                    Ev::Lazy(a)
                } else {
                    self.eval_arg(a, ctx)?
                },
            ));
        }
        // second pass: check values, pick the most specific candidate of the first level
        let mut winner: Option<(Cand, &Mapping)> = None;
        for level in &mapped {
            for (c, m) in level {
                if !self.check_mapping(c.def, m, &evs, &kevs) {
                    continue;
                }
                if let Some((wc, wm)) = winner {
                    if specializes(wm, m, wc.def, c.def) {
                        continue;
                    }
                    if !specializes(m, wm, c.def, wc.def) {
                        return Err(ambiguous());
                    }
                }
                winner = Some((*c, m));
            }
            if winner.is_some() {
                break;
            }
        }
        let Some((cand, m)) = winner else {
            return Err(not_found());
        };
        let mut call = Call {
            args: self.bind(cand.def, m, evs, kevs, ctx)?,
            ctx,
            user: cand.user,
            null: Value::Null,
        };
        let result = (cand.def.imp)(self, &mut call)?;
        self.check_memory(&result)?;
        Ok(result)
    }

    fn eval_arg(&self, a: ArgIn, ctx: &Rc<Ctx>) -> Result<Ev> {
        Ok(match a {
            ArgIn::Skip => Ev::Skip,
            ArgIn::Val(v) => Ev::Val(v),
            ArgIn::Node(id) => match self.ast().node(id) {
                Node::Keyword(w) => Ev::Kw(Rc::from(&**w)),
                _ => Ev::Val(self.eval(id, ctx, None)?),
            },
            ArgIn::Rule(k, v) => {
                let kv = self.eval(k, ctx, None)?;
                let vv = self.eval(v, ctx, None)?;
                Ev::Val(Value::Rule(Rc::new((kv, vv))))
            }
        })
    }

    /// First-pass check of an unevaluated argument.
    fn check_in(&self, p: &Param, a: &ArgIn) -> bool {
        match a {
            ArgIn::Val(v) => match p.ty {
                Ty::Keyword | Ty::LazyRule => false,
                _ => check_val(p.ty, p.nullable, v),
            },
            ArgIn::Skip => true,
            ArgIn::Rule(..) => !matches!(p.ty, Ty::Keyword | Ty::LambdaMethod),
            ArgIn::Node(id) => {
                let node = self.ast().node(*id);
                match p.ty {
                    Ty::Keyword => matches!(node, Node::Keyword(_)),
                    Ty::LazyRule => false,
                    Ty::LambdaMethod => matches!(node, Node::Call { written: true, .. }),
                    Ty::Lambda | Ty::LambdaCtx | Ty::Expr => true,
                    _ => match node {
                        Node::Const(_) | Node::Keyword(_) => {
                            check_val(p.ty, p.nullable, &self.0.consts[*id as usize])
                        }
                        _ => true,
                    },
                }
            }
        }
    }

    fn check_ev(&self, p: &Param, e: &Ev) -> bool {
        match e {
            Ev::Val(v) => match p.ty {
                Ty::Keyword | Ty::LazyRule => false,
                _ => check_val(p.ty, p.nullable, v),
            },
            Ev::Kw(w) => match p.ty {
                Ty::Keyword | Ty::Lambda | Ty::LambdaCtx | Ty::Expr => true,
                Ty::LazyRule | Ty::LambdaMethod => false,
                _ => check_val(p.ty, p.nullable, &Value::Str(w.clone())),
            },
            Ev::Lazy(a) => self.check_in(p, a),
            Ev::Skip => true,
        }
    }

    fn default_ok(p: &Param) -> bool {
        match p.default.value() {
            Some(v) => check_val(p.ty, p.nullable, &v),
            None => true,
        }
    }

    fn map_args(
        &self,
        def: &FnDef,
        args: &[ArgIn],
        kwargs: &[(Rc<str>, ArgIn)],
    ) -> Option<Mapping> {
        let varargs = def.params.iter().position(|p| p.kind == PKind::VarArgs);
        let varkw = def.params.iter().position(|p| p.kind == PKind::VarKw);
        let mut slots: Vec<Option<usize>> = vec![varargs; args.len()];
        let mut kw: Vec<Option<usize>> = vec![None; kwargs.len()];
        let mut position = 0usize;
        for (pi, p) in def.params.iter().enumerate() {
            match p.kind {
                PKind::Pos => {
                    let k = kwargs.iter().position(|(n, _)| &**n == p.name);
                    if position < args.len() && !matches!(args[position], ArgIn::Skip) {
                        if k.is_some() {
                            return None;
                        }
                        slots[position] = Some(pi);
                    } else if let Some(k) = k {
                        kw[k] = Some(pi);
                    } else if p.default == Def::Required {
                        return None;
                    } else if position < args.len() {
                        slots[position] = Some(pi);
                    }
                    position += 1;
                }
                PKind::KwOnly => {
                    if let Some(k) = kwargs.iter().position(|(n, _)| &**n == p.name) {
                        kw[k] = Some(pi);
                    } else if p.default == Def::Required {
                        return None;
                    }
                }
                PKind::VarArgs | PKind::VarKw => {}
            }
        }
        for slot in kw.iter_mut() {
            if slot.is_none() {
                *slot = Some(varkw?);
            }
        }
        let slots: Vec<usize> = slots.into_iter().collect::<Option<Vec<_>>>()?;
        for (i, &pi) in slots.iter().enumerate() {
            let p = &def.params[pi];
            let ok = match &args[i] {
                ArgIn::Skip => Self::default_ok(p),
                a => self.check_in(p, a),
            };
            if !ok {
                return None;
            }
        }
        let kw: Vec<usize> = kw.into_iter().collect::<Option<Vec<_>>>()?;
        for (i, &pi) in kw.iter().enumerate() {
            let p = &def.params[pi];
            if p.kind == PKind::VarKw && !self.check_in(p, &kwargs[i].1) {
                return None;
            }
        }
        Some(Mapping { slots, kw })
    }

    fn check_mapping(&self, def: &FnDef, m: &Mapping, evs: &[Ev], kevs: &[(Rc<str>, Ev)]) -> bool {
        for (i, &pi) in m.slots.iter().enumerate() {
            let p = &def.params[pi];
            let ok = match &evs[i] {
                Ev::Skip => Self::default_ok(p),
                e => self.check_ev(p, e),
            };
            if !ok {
                return false;
            }
        }
        for (i, &pi) in m.kw.iter().enumerate() {
            if !self.check_ev(&def.params[pi], &kevs[i].1) {
                return false;
            }
        }
        // unfilled optional parameters get their defaults, which must pass too
        for (pi, p) in def.params.iter().enumerate() {
            if matches!(p.kind, PKind::Pos | PKind::KwOnly)
                && !m.slots.contains(&pi)
                && !m.kw.contains(&pi)
                && !Self::default_ok(p)
            {
                return false;
            }
        }
        true
    }

    fn convert(&self, p: &Param, e: Ev, ctx: &Rc<Ctx>) -> Result<PArg> {
        Ok(match e {
            Ev::Skip => default_arg(p),
            Ev::Kw(w) => match p.ty {
                Ty::Lambda | Ty::LambdaCtx | Ty::Expr => PArg::Lambda(Lambda {
                    src: LamSrc::Val(Value::Str(w)),
                    ctx: ctx.clone(),
                }),
                _ => PArg::Val(Value::Str(w)),
            },
            Ev::Val(v) => match p.ty {
                Ty::Lambda | Ty::LambdaCtx | Ty::LambdaMethod | Ty::Expr => PArg::Lambda(Lambda {
                    src: LamSrc::Val(v),
                    ctx: ctx.clone(),
                }),
                Ty::Iterable | Ty::IterableNoSet if !v.is_null() => PArg::Val(self.limited(v)?),
                _ => PArg::Val(v),
            },
            Ev::Lazy(a) => {
                let lam = |src| Lambda {
                    src,
                    ctx: ctx.clone(),
                };
                match a {
                    ArgIn::Node(id) => PArg::Lambda(lam(LamSrc::Node(id))),
                    ArgIn::Val(v) => PArg::Lambda(lam(LamSrc::Val(v))),
                    ArgIn::Rule(k, v) => PArg::Rule(lam(LamSrc::Node(k)), lam(LamSrc::Node(v))),
                    ArgIn::Skip => default_arg(p),
                }
            }
        })
    }

    fn bind(
        &self,
        def: &FnDef,
        m: &Mapping,
        evs: Vec<Ev>,
        kevs: Vec<(Rc<str>, Ev)>,
        ctx: &Rc<Ctx>,
    ) -> Result<Vec<PArg>> {
        let mut out: Vec<PArg> = def
            .params
            .iter()
            .map(|p| match p.kind {
                PKind::VarArgs => PArg::Many(Vec::new()),
                PKind::VarKw => PArg::Kw(Vec::new()),
                _ => default_arg(p),
            })
            .collect();
        for (i, e) in evs.into_iter().enumerate() {
            let pi = m.slots[i];
            let p = &def.params[pi];
            let a = self.convert(p, e, ctx)?;
            match &mut out[pi] {
                PArg::Many(v) if p.kind == PKind::VarArgs => v.push(a),
                slot => *slot = a,
            }
        }
        for (i, (k, e)) in kevs.into_iter().enumerate() {
            let pi = m.kw[i];
            let p = &def.params[pi];
            let a = self.convert(p, e, ctx)?;
            match &mut out[pi] {
                PArg::Kw(v) if p.kind == PKind::VarKw => v.push((k, a)),
                slot => *slot = a,
            }
        }
        Ok(out)
    }

    /// yaql's Iterable conversion: sized collections over the limit fail at once, iterators
    /// are wrapped to fail when the limit is passed.
    pub fn limited(&self, v: Value) -> Result<Value> {
        let limit = self.0.limits.max_items;
        let len = match &v {
            Value::Tuple(t) | Value::List(t) => Some(t.len()),
            Value::Dict(d) | Value::Keys(d) | Value::Items(d) => Some(d.map.len()),
            Value::Set(s) => Some(s.items.len()),
            Value::Str(_) | Value::Null => return Ok(v),
            _ => None,
        };
        match len {
            Some(n) if n > limit => Err(too_large(limit)),
            Some(_) => Ok(v),
            None => {
                let it = self.iter(&v)?;
                let mut it = ValIter::Limited(Box::new(it), 0, limit);
                Ok(lazy(move || it.next()))
            }
        }
    }

    /// Iterate any iterable value (dicts yield keys, strings characters).
    pub fn iter(&self, v: &Value) -> Result<ValIter> {
        Ok(match v {
            Value::Tuple(t) | Value::List(t) => ValIter::Seq(t.clone(), 0),
            Value::Dict(d) | Value::Keys(d) => ValIter::Keys(d.clone(), 0),
            Value::Values(d) => ValIter::Vals(d.clone(), 0),
            Value::Items(d) => ValIter::Items(d.clone(), 0),
            Value::Set(s) => ValIter::SetI(s.clone(), 0),
            Value::Iter(l) => ValIter::Lazy(l.clone()),
            Value::Memo(m) => ValIter::Memo(m.clone(), 0),
            Value::Str(s) => ValIter::Owned(
                s.chars()
                    .map(|c| Value::string(c.to_string()))
                    .collect::<Vec<_>>()
                    .into_iter(),
            ),
            Value::Ordered(o) => ValIter::Seq(self.sorted(o)?, 0),
            other => {
                return err(
                    ErrorKind::TypeError,
                    format!("'{}' object is not iterable", other.type_name()),
                );
            }
        })
    }

    /// Materialise an iterable into a vector.
    /// Materialise an iterable into a vector (at most `max_items` items).
    pub fn to_vec(&self, v: &Value) -> Result<Vec<Value>> {
        match v {
            Value::Tuple(t) | Value::List(t) => Ok(t.to_vec()),
            _ => {
                let limit = self.0.limits.max_items;
                ValIter::Limited(Box::new(self.iter(v)?), 0, limit).collect_vec()
            }
        }
    }

    pub fn memo(&self, v: Value) -> Result<Value> {
        if !v.is_iterator() || matches!(v, Value::Memo(_)) {
            return Ok(v);
        }
        Ok(Value::Memo(Rc::new(Memo {
            src: RefCell::new(self.iter(&v)?),
            items: RefCell::new(Vec::new()),
        })))
    }

    fn sorted(&self, o: &Ordered) -> Result<Rc<[Value]>> {
        if let Some(s) = o.sorted.borrow().as_ref() {
            return Ok(s.clone());
        }
        let items = self.to_vec(&self.limited(o.coll.clone())?)?;
        let order: Vec<(Lambda, bool)> = o.order.borrow().clone();
        let n = items.len();
        let mut keys: Vec<Vec<Option<Value>>> = vec![vec![None; order.len()]; n];
        let mut idx: Vec<usize> = (0..n).collect();
        let mut failure: Option<YaqlError> = None;
        let ctx = order
            .first()
            .map(|(l, _)| l.ctx.clone())
            .unwrap_or_else(Ctx::root);
        let key = |i: usize, f: usize, keys: &mut Vec<Vec<Option<Value>>>| -> Result<Value> {
            if let Some(v) = &keys[i][f] {
                return Ok(v.clone());
            }
            let v = self.call_lambda(&order[f].0, vec![items[i].clone()])?;
            keys[i][f] = Some(v.clone());
            Ok(v)
        };
        idx.sort_by(|&a, &b| {
            if failure.is_some() {
                return std::cmp::Ordering::Equal;
            }
            let r = (|| -> Result<std::cmp::Ordering> {
                for (f, (_, ascending)) in order.iter().enumerate() {
                    let ka = key(a, f, &mut keys)?;
                    let kb = key(b, f, &mut keys)?;
                    let mut r = if self
                        .call_fn("#operator_<", vec![ka.clone(), kb.clone()], &ctx)?
                        .truthy()
                    {
                        std::cmp::Ordering::Less
                    } else if self.call_fn("#operator_>", vec![ka, kb], &ctx)?.truthy() {
                        std::cmp::Ordering::Greater
                    } else {
                        continue;
                    };
                    if !ascending {
                        r = r.reverse();
                    }
                    return Ok(r);
                }
                Ok(std::cmp::Ordering::Equal)
            })();
            r.unwrap_or_else(|e| {
                failure = Some(e);
                std::cmp::Ordering::Equal
            })
        });
        if let Some(e) = failure {
            return Err(e);
        }
        let sorted: Rc<[Value]> = idx.into_iter().map(|i| items[i].clone()).collect();
        *o.sorted.borrow_mut() = Some(sorted.clone());
        Ok(sorted)
    }

    /// Invoke a lambda with positional arguments bound to `$1, $2, ...` (`$` = `$1`).
    pub fn call_lambda(&self, l: &Lambda, args: Vec<Value>) -> Result<Value> {
        self.call_lambda_kw(l, args, Vec::new())
    }

    pub fn call_lambda_kw(
        &self,
        l: &Lambda,
        args: Vec<Value>,
        kwargs: Vec<(Rc<str>, Value)>,
    ) -> Result<Value> {
        match &l.src {
            LamSrc::Val(v) => Ok(v.clone()),
            LamSrc::Node(id) => {
                let ctx = Ctx::child(&l.ctx);
                {
                    let mut vars = ctx.vars.borrow_mut();
                    for (i, a) in args.into_iter().enumerate() {
                        vars.push((Rc::from((i + 1).to_string().as_str()), a));
                    }
                    for (k, v) in kwargs {
                        vars.push((k, v));
                    }
                }
                self.eval(*id, &ctx, None)
            }
        }
    }

    /// Evaluate a lambda in a given context (yaql `Lambda(with_context=True)`).
    pub fn call_lambda_in(&self, l: &Lambda, ctx: &Rc<Ctx>) -> Result<Value> {
        match &l.src {
            LamSrc::Val(v) => Ok(v.clone()),
            LamSrc::Node(id) => self.eval(*id, ctx, None),
        }
    }

    /// Evaluate without binding anything (`and`, `or`, `switch`...): a child context of the
    /// lambda's own.
    pub fn force(&self, l: &Lambda) -> Result<Value> {
        self.call_lambda(l, Vec::new())
    }

    /// yaql's memory quota, approximated by the shallow size Python would report.
    pub fn check_memory(&self, v: &Value) -> Result<()> {
        let size = match v {
            Value::Str(s) => 49 + s.len(),
            Value::Tuple(t) | Value::List(t) => 56 + 8 * t.len(),
            Value::Dict(d) => 64 + 40 * d.map.len(),
            Value::Set(s) => 200 + 30 * s.items.len(),
            _ => 0,
        };
        self.check_quota(size)
    }

    pub fn check_quota(&self, bytes: usize) -> Result<()> {
        if bytes > self.0.limits.memory_quota {
            return err(
                ErrorKind::MemoryQuotaExceededException,
                "Expression consumed too much memory",
            );
        }
        Ok(())
    }
}

/// yaql `_is_specialization_of(m1, m2)`.
fn specializes(m1: &Mapping, m2: &Mapping, d1: &FnDef, d2: &FnDef) -> bool {
    let mut res = false;
    for (a, b) in m1.slots.iter().zip(m2.slots.iter()) {
        let t1 = d1.params[*a].ty;
        let t2 = d2.params[*b].ty;
        if t2.specializes(t1) {
            return false;
        } else if t1.specializes(t2) {
            res = true;
        }
    }
    for (a, b) in m1.kw.iter().zip(m2.kw.iter()) {
        let t1 = d1.params[*a].ty;
        let t2 = d2.params[*b].ty;
        if t2.specializes(t1) {
            return false;
        } else if t1.specializes(t2) {
            res = true;
        }
    }
    res
}

fn default_arg(p: &Param) -> PArg {
    match p.default.value() {
        Some(v) => PArg::Val(v),
        None => PArg::Absent,
    }
}

/// A lazy sequence from a generator closure.
pub fn lazy(f: impl FnMut() -> Option<Result<Value>> + 'static) -> Value {
    Value::Iter(Rc::new(LazySeq {
        next_fn: RefCell::new(Some(Box::new(f))),
    }))
}

/// A lazy sequence over a cursor.
pub fn lazy_iter(mut it: ValIter) -> Value {
    lazy(move || it.next())
}
