//! Function definitions and yaql's overload resolution. A definition lists its parameters
//! with yaql's parameter types (what `specs.parameter` declares); `Interp::call` resolves a
//! call exactly as `yaql.language.runner` does: candidates layer by layer, a first pass that
//! maps unevaluated arguments (which also decides which ones are lazy), evaluation, a second
//! pass on the values, then the most specific candidate of the innermost layer that has one.
//! Must not implement library functions (those live in `lib/`).

use std::collections::HashMap;
use std::sync::OnceLock;

use super::error::Result;
use super::interp::{Call, Interp};
use super::value::Value;

/// Parameter types (yaql's `yaqltypes` and the Python types used with `specs.parameter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// `object`: anything.
    Any,
    /// `type(None)`.
    NoneOnly,
    /// Python `bool`.
    Bool,
    /// Python `int` (a bool is an int).
    PyInt,
    /// `yaqltypes.Integer`: int but not bool.
    Integer,
    /// `yaqltypes.Number`: int or float, not bool.
    Number,
    /// `yaqltypes.String`.
    Str,
    /// `yaqltypes.Iterable`: not a string nor a dict; iterators are limited to 10,000 items.
    Iterable,
    /// `Iterable` that also refuses sets (`insert`).
    IterableNoSet,
    /// `collections.abc.Iterator` (no limit applied).
    Iterator,
    /// `yaqltypes.Sequence`: tuple or list.
    Sequence,
    /// `collections.abc.Mapping`.
    Mapping,
    /// `collections.abc.Set` (sets and keys/items views).
    Set,
    Regex,
    Context,
    /// `OrderingIterable` (`thenBy`).
    Ordered,
    /// `utils.MappingRule` (an eagerly evaluated `k => v`).
    Rule,
    /// `yaqltypes.Lambda()`: lazy.
    Lambda,
    /// `yaqltypes.Lambda(method=True)`: lazy, must be a written call.
    LambdaMethod,
    /// `yaqltypes.Lambda(with_context=True)`: lazy, evaluated in a given context.
    LambdaCtx,
    /// `yaqltypes.MappingRule()`: lazy `k => v`.
    LazyRule,
    /// `yaqltypes.Keyword()`: a bare word, passed as its text.
    Keyword,
    /// `yaqltypes.YaqlExpression()`: lazy, any expression.
    Expr,
    /// date and time values
    DateTime,
    TimeSpan,
}

impl Ty {
    pub fn is_lazy(self) -> bool {
        matches!(
            self,
            Ty::Lambda | Ty::LambdaMethod | Ty::LambdaCtx | Ty::LazyRule | Ty::Expr
        )
    }

    /// Python-type parameters of a single class, for `is_specialization_of`.
    fn class(self) -> Option<u8> {
        Some(match self {
            Ty::Any => 0,
            Ty::NoneOnly => 1,
            Ty::Bool => 2,
            Ty::PyInt => 3,
            Ty::Integer => 3,
            Ty::Str => 4,
            Ty::Iterable | Ty::IterableNoSet => 5,
            Ty::Iterator => 6,
            Ty::Sequence => 7,
            Ty::Mapping => 8,
            Ty::Set => 9,
            Ty::Regex => 10,
            Ty::Context => 11,
            Ty::Ordered => 12,
            Ty::Rule => 13,
            Ty::DateTime => 14,
            Ty::TimeSpan => 15,
            _ => return None,
        })
    }

    /// `issubclass(a, b) and not issubclass(b, a)` for the classes above.
    pub fn specializes(self, other: Ty) -> bool {
        let (Some(a), Some(b)) = (self.class(), other.class()) else {
            return false;
        };
        if a == b {
            return false;
        }
        match b {
            0 => true,
            3 => a == 2,
            5 => matches!(a, 4 | 6 | 7 | 8 | 9 | 12),
            7 => a == 4,
            _ => false,
        }
    }
}

/// A parameter's default value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Def {
    Required,
    /// Optional; the function sees "no value" (yaql's `NO_VALUE` default).
    Absent,
    Null,
    Bool(bool),
    Int(i64),
    Str(&'static str),
}

impl Def {
    pub fn value(self) -> Option<Value> {
        match self {
            Def::Required | Def::Absent => None,
            Def::Null => Some(Value::Null),
            Def::Bool(b) => Some(Value::Bool(b)),
            Def::Int(i) => Some(Value::Int(i)),
            Def::Str(s) => Some(Value::str(s)),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PKind {
    Pos,
    VarArgs,
    KwOnly,
    VarKw,
}

#[derive(Debug, Clone)]
pub struct Param {
    /// The name a keyword argument uses (yaql's camelCase alias).
    pub name: &'static str,
    pub ty: Ty,
    pub nullable: bool,
    pub default: Def,
    pub kind: PKind,
}

impl Param {
    pub fn null(mut self) -> Param {
        self.nullable = true;
        self
    }
    pub fn not_null(mut self) -> Param {
        self.nullable = false;
        self
    }
    pub fn def(mut self, d: Def) -> Param {
        self.default = d;
        self
    }
    pub fn opt(self) -> Param {
        self.def(Def::Absent)
    }
    pub fn many(mut self) -> Param {
        self.kind = PKind::VarArgs;
        self
    }
    pub fn kw_only(mut self) -> Param {
        self.kind = PKind::KwOnly;
        self
    }
    pub fn var_kw(mut self) -> Param {
        self.kind = PKind::VarKw;
        self
    }
}

/// A positional parameter; nullable only for untyped (`Any`) and lazy ones, as in yaql.
pub fn p(name: &'static str, ty: Ty) -> Param {
    Param {
        name,
        ty,
        nullable: matches!(ty, Ty::Any | Ty::Lambda | Ty::LambdaMethod | Ty::LambdaCtx),
        default: Def::Required,
        kind: PKind::Pos,
    }
}

pub type Imp = fn(&Interp, &mut Call) -> Result<Value>;

/// Where a function lives; inner layers are searched first.
pub const LAYER_FUEL: u8 = 0;
pub const LAYER_STD: u8 = 1;

pub struct FnDef {
    pub name: String,
    pub function: bool,
    pub method: bool,
    pub no_kwargs: bool,
    pub layer: u8,
    pub params: Vec<Param>,
    pub imp: Imp,
}

impl FnDef {
    pub fn positional_count(&self) -> usize {
        self.params.iter().filter(|p| p.kind == PKind::Pos).count()
    }
}

/// Registration flags.
#[derive(Clone, Copy)]
pub enum Form {
    /// `f(x)` only.
    Function,
    /// `x.f()` only.
    Method,
    /// both (an extension method).
    Both,
}

#[derive(Default)]
pub struct Registry {
    pub defs: Vec<FnDef>,
    pub by_name: HashMap<String, Vec<usize>, super::value::FxBuild>,
}

impl Registry {
    pub fn add(&mut self, name: &str, form: Form, params: Vec<Param>, imp: Imp) -> &mut FnDef {
        self.add_full(name, form, false, LAYER_STD, params, imp)
    }

    pub fn add_nokw(&mut self, name: &str, form: Form, params: Vec<Param>, imp: Imp) -> &mut FnDef {
        self.add_full(name, form, true, LAYER_STD, params, imp)
    }

    pub fn add_full(
        &mut self,
        name: &str,
        form: Form,
        no_kwargs: bool,
        layer: u8,
        params: Vec<Param>,
        imp: Imp,
    ) -> &mut FnDef {
        let (function, method) = match form {
            Form::Function => (true, false),
            Form::Method => (false, true),
            Form::Both => (true, true),
        };
        let idx = self.defs.len();
        self.defs.push(FnDef {
            name: name.to_string(),
            function,
            method,
            no_kwargs,
            layer,
            params,
            imp,
        });
        self.by_name.entry(name.to_string()).or_default().push(idx);
        &mut self.defs[idx]
    }

    pub fn lookup(&self, name: &str) -> &[usize] {
        self.by_name.get(name).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Every public name (no `#` or `*` operator functions).
    pub fn public_names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self
            .by_name
            .keys()
            .map(String::as_str)
            .filter(|n| !n.starts_with('#') && !n.starts_with('*'))
            .collect();
        v.sort_unstable();
        v
    }
}

/// The standard library plus Nailgun's functions, built once.
pub fn registry() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(|| {
        let mut r = Registry::default();
        super::stdlib::register_all(&mut r);
        r
    })
}
