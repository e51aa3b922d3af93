//! The YAQL value model: what an expression computes with. Owns Python-compatible equality,
//! hashing, truthiness, `str()`/`repr()` and the conversions from and to `serde_json::Value`.
//! Must not evaluate expressions (that is `interp`) nor know any library function.
//!
//! Ints and floats stay apart (`3` vs `3.0`). Python's tuple and list are both kept because
//! they never compare equal (`'a b'.split() = [a, b]` is false in yaql); dicts and sets carry a
//! `frozen` flag because only frozen ones are hashable.

use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::rc::Rc;

use indexmap::IndexSet;

pub use super::map::Map;
/// Set storage.
pub type VSet = IndexSet<Value, FxBuild>;

/// The Fx hash (as in rustc): not DoS-resistant, which is fine for expression data.
#[derive(Default, Clone, Copy)]
pub struct FxBuild;

impl std::hash::BuildHasher for FxBuild {
    type Hasher = FxHasher;
    fn build_hasher(&self) -> FxHasher {
        FxHasher(0)
    }
}

pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut buf = [0u8; 8];
            buf.copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(buf));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.write_u64(u64::from_le_bytes(buf));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn write_i64(&mut self, i: i64) {
        self.write_u64(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

use super::error::{ErrorKind, YaqlError};
use super::interp::{Ctx, LazySeq, Memo, Ordered};

/// A runtime value. Collections are reference-counted and never mutated after construction.
#[derive(Clone, Default)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Rc<str>),
    /// Python tuple: what JSON arrays and list literals become.
    Tuple(Rc<[Value]>),
    /// Python list: what `split()`, `insert()`, `enumerate()` pairs... return.
    List(Rc<[Value]>),
    Dict(Rc<Dict>),
    Set(Rc<Set>),
    /// `dict.keys()`: set-like view.
    Keys(Rc<Dict>),
    /// `dict.values()`: neither a set nor a sequence.
    Values(Rc<Dict>),
    /// `dict.items()`: set-like view of `(key, value)` tuples.
    Items(Rc<Dict>),
    /// A single-use lazy sequence (a Python iterator).
    Iter(Rc<LazySeq>),
    /// `memorize()`: an iterator that can be iterated again.
    Memo(Rc<Memo>),
    /// `orderBy()` result (re-iterable, not an iterator).
    Ordered(Rc<Ordered>),
    Regex(Rc<RegexObj>),
    /// A context produced by `let`/`def`/`with`, consumed by `->`.
    Context(Rc<Ctx>),
    /// An evaluated `key => value` argument (`dict(a => 1)`, `$.set(a => 1)`).
    Rule(Rc<(Value, Value)>),
    /// Nailgun's marker for "old data had no such value".
    Undefined,
}

/// Insertion-ordered dict (Python dict / yaql FrozenDict).
pub struct Dict {
    pub map: Map,
    pub frozen: bool,
}

/// Set (Python set / frozenset). Iteration follows insertion order.
pub struct Set {
    pub items: VSet,
    pub frozen: bool,
}

/// A compiled regular expression with the pattern text it came from.
pub struct RegexObj {
    pub pattern: String,
    pub flags: u8,
    /// The translated pattern, with its groups' names by index (0 = the whole match).
    pub re: std::sync::Arc<super::stdlib::Compiled>,
}

impl Value {
    pub fn str(s: &str) -> Value {
        Value::Str(Rc::from(s))
    }
    pub fn string(s: String) -> Value {
        Value::Str(Rc::from(s))
    }
    pub fn tuple(v: Vec<Value>) -> Value {
        Value::Tuple(Rc::from(v))
    }
    pub fn list(v: Vec<Value>) -> Value {
        Value::List(Rc::from(v))
    }
    pub fn frozen_dict(map: Map) -> Value {
        Value::Dict(Rc::new(Dict { map, frozen: true }))
    }
    pub fn dict(map: Map) -> Value {
        Value::Dict(Rc::new(Dict { map, frozen: false }))
    }
    pub fn frozen_set(items: VSet) -> Value {
        Value::Set(Rc::new(Set {
            items,
            frozen: true,
        }))
    }
    pub fn set(items: VSet) -> Value {
        Value::Set(Rc::new(Set {
            items,
            frozen: false,
        }))
    }

    /// Python's type name, for messages and for Nailgun's "same type" test.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "NoneType",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Tuple(_) => "tuple",
            Value::List(_) => "list",
            Value::Dict(d) => {
                if d.frozen {
                    "FrozenDict"
                } else {
                    "dict"
                }
            }
            Value::Set(s) => {
                if s.frozen {
                    "frozenset"
                } else {
                    "set"
                }
            }
            Value::Keys(_) => "dict_keys",
            Value::Values(_) => "dict_values",
            Value::Items(_) => "dict_items",
            Value::Iter(_) => "generator",
            Value::Memo(_) => "RememberingIterator",
            Value::Ordered(_) => "OrderingIterable",
            Value::Regex(_) => "Pattern",
            Value::Context(_) => "Context",
            Value::Rule(_) => "MappingRule",
            Value::Undefined => "Undefined",
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// int or float, never bool.
    pub fn is_number(&self) -> bool {
        matches!(self, Value::Int(_) | Value::Float(_))
    }

    /// Python `isinstance(x, int)`: bools are ints.
    pub fn as_pyint(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// tuple or list (yaql's Sequence type).
    pub fn as_seq(&self) -> Option<&Rc<[Value]>> {
        match self {
            Value::Tuple(v) | Value::List(v) => Some(v),
            _ => None,
        }
    }

    pub fn is_mapping(&self) -> bool {
        matches!(self, Value::Dict(_))
    }

    /// collections.abc.Set: sets and the keys/items views.
    pub fn is_set_like(&self) -> bool {
        matches!(self, Value::Set(_) | Value::Keys(_) | Value::Items(_))
    }

    /// yaql's `utils.is_iterable`: iterable but not a string or a mapping.
    pub fn is_iterable(&self) -> bool {
        matches!(
            self,
            Value::Tuple(_)
                | Value::List(_)
                | Value::Set(_)
                | Value::Keys(_)
                | Value::Values(_)
                | Value::Items(_)
                | Value::Iter(_)
                | Value::Memo(_)
                | Value::Ordered(_)
        )
    }

    /// collections.abc.Iterator.
    pub fn is_iterator(&self) -> bool {
        matches!(self, Value::Iter(_) | Value::Memo(_))
    }

    /// Python truthiness.
    pub fn truthy(&self) -> bool {
        match self {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::Tuple(v) | Value::List(v) => !v.is_empty(),
            Value::Dict(d) | Value::Keys(d) | Value::Values(d) | Value::Items(d) => {
                !d.map.is_empty()
            }
            Value::Set(s) => !s.items.is_empty(),
            _ => true,
        }
    }

    /// Items of a set-like value (sets and keys/items views), for set algebra.
    pub fn set_items(&self) -> Option<VSet> {
        match self {
            Value::Set(s) => Some(s.items.clone()),
            Value::Keys(d) => Some(d.map.keys().cloned().collect()),
            Value::Items(d) => Some(
                d.map
                    .iter()
                    .map(|(k, v)| Value::tuple(vec![k.clone(), v.clone()]))
                    .collect(),
            ),
            _ => None,
        }
    }

    fn set_contains(&self, x: &Value) -> bool {
        match self {
            Value::Set(s) => s.items.contains(x),
            Value::Keys(d) => d.map.contains_key(x),
            Value::Items(d) => match x {
                Value::Tuple(t) if t.len() == 2 => {
                    d.map.get(&t[0]).is_some_and(|v| py_eq(v, &t[1]))
                }
                _ => false,
            },
            _ => false,
        }
    }

    fn set_len(&self) -> usize {
        match self {
            Value::Set(s) => s.items.len(),
            Value::Keys(d) | Value::Items(d) => d.map.len(),
            _ => 0,
        }
    }

    /// Whether Python could hash the value (so it may be a dict key or a set member).
    pub fn hashable(&self) -> bool {
        // shared sub-values are checked once, so a DAG costs its size, not its expansion
        fn walk(v: &Value, seen: &mut std::collections::HashSet<usize, FxBuild>) -> bool {
            match v {
                Value::List(_) | Value::Keys(_) | Value::Items(_) | Value::Rule(_) => false,
                Value::Set(s) => s.frozen,
                Value::Tuple(t) => {
                    !seen.insert(Rc::as_ptr(t) as *const u8 as usize)
                        || t.iter().all(|x| walk(x, seen))
                }
                Value::Dict(d) => {
                    d.frozen
                        && (!seen.insert(Rc::as_ptr(d) as *const u8 as usize)
                            || d.map.values().all(|x| walk(x, seen)))
                }
                _ => true,
            }
        }
        match self {
            Value::Tuple(_) | Value::Dict(_) => walk(self, &mut Default::default()),
            Value::List(_) | Value::Keys(_) | Value::Items(_) | Value::Rule(_) => false,
            Value::Set(s) => s.frozen,
            _ => true,
        }
    }

    pub fn check_hashable(&self) -> Result<(), YaqlError> {
        if self.hashable() {
            Ok(())
        } else {
            Err(YaqlError::new(
                ErrorKind::TypeError,
                format!("unhashable type: '{}'", self.type_name()),
            ))
        }
    }

    /// A hashable stand-in (lists become tuples, dicts and sets get frozen), as Nailgun's
    /// `_hashable` does before diffing.
    pub fn frozen_copy(&self) -> Value {
        match self {
            Value::List(v) | Value::Tuple(v) => {
                Value::tuple(v.iter().map(Value::frozen_copy).collect())
            }
            Value::Dict(d) => Value::frozen_dict(
                d.map
                    .iter()
                    .map(|(k, v)| (k.frozen_copy(), v.frozen_copy()))
                    .collect(),
            ),
            Value::Set(s) => Value::frozen_set(s.items.iter().map(Value::frozen_copy).collect()),
            Value::Keys(_) | Value::Items(_) => {
                Value::frozen_set(self.set_items().unwrap_or_default())
            }
            other => other.clone(),
        }
    }
}

fn num_eq(a: &Value, b: &Value) -> Option<bool> {
    let ai = a.as_pyint();
    let bi = b.as_pyint();
    match (ai, bi, a, b) {
        (Some(x), Some(y), _, _) => Some(x == y),
        (Some(x), None, _, Value::Float(f)) | (None, Some(x), Value::Float(f), _) => {
            Some(int_float_eq(x, *f))
        }
        (None, None, Value::Float(x), Value::Float(y)) => Some(x == y),
        _ => None,
    }
}

fn int_float_eq(i: i64, f: f64) -> bool {
    if f.fract() != 0.0 || !f.is_finite() {
        return false;
    }
    if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) {
        f as i64 == i
    } else {
        false
    }
}

/// Python `==`.
pub fn py_eq(a: &Value, b: &Value) -> bool {
    eq_at(a, b, 0, &mut None)
}

type EqMemo = Option<std::collections::HashSet<(usize, usize), FxBuild>>;

/// Below this depth, pairs of containers already found equal are remembered, so values that
/// share sub-values compare in time proportional to their size, not their expansion.
const EQ_MEMO_DEPTH: u32 = 6;

fn eq_at(a: &Value, b: &Value, depth: u32, memo: &mut EqMemo) -> bool {
    if let Some(r) = num_eq(a, b) {
        return r;
    }
    let key = |x: *const u8, y: *const u8| (x as usize, y as usize);
    let pair = match (a, b) {
        (Value::Tuple(x), Value::Tuple(y)) | (Value::List(x), Value::List(y))
            if depth >= EQ_MEMO_DEPTH =>
        {
            Some(key(Rc::as_ptr(x) as *const u8, Rc::as_ptr(y) as *const u8))
        }
        (Value::Dict(x), Value::Dict(y)) if depth >= EQ_MEMO_DEPTH => {
            Some(key(Rc::as_ptr(x) as *const u8, Rc::as_ptr(y) as *const u8))
        }
        _ => None,
    };
    if let Some(p) = pair
        && memo.as_ref().is_some_and(|m| m.contains(&p))
    {
        return true;
    }
    let r = eq_inner(a, b, depth, memo);
    if let (Some(p), true) = (pair, r) {
        memo.get_or_insert_with(Default::default).insert(p);
    }
    r
}

fn eq_inner(a: &Value, b: &Value, depth: u32, memo: &mut EqMemo) -> bool {
    let d = depth + 1;
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Undefined, Value::Undefined) => true,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Tuple(x), Value::Tuple(y)) | (Value::List(x), Value::List(y)) => {
            Rc::ptr_eq(x, y)
                || (x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| eq_at(p, q, d, memo)))
        }
        (Value::Dict(x), Value::Dict(y)) => {
            Rc::ptr_eq(x, y)
                || (x.map.len() == y.map.len()
                    && x.map
                        .iter()
                        .all(|(k, v)| y.map.get(k).is_some_and(|w| eq_at(v, w, d, memo))))
        }
        (x, y) if x.is_set_like() && y.is_set_like() => {
            x.set_len() == y.set_len() && {
                match x {
                    Value::Set(s) => s.items.iter().all(|i| y.set_contains(i)),
                    _ => x
                        .set_items()
                        .unwrap_or_default()
                        .iter()
                        .all(|i| y.set_contains(i)),
                }
            }
        }
        (Value::Values(x), Value::Values(y)) => Rc::ptr_eq(x, y),
        (Value::Iter(x), Value::Iter(y)) => Rc::ptr_eq(x, y),
        (Value::Memo(x), Value::Memo(y)) => Rc::ptr_eq(x, y),
        (Value::Ordered(x), Value::Ordered(y)) => Rc::ptr_eq(x, y),
        (Value::Context(x), Value::Context(y)) => Rc::ptr_eq(x, y),
        (Value::Regex(x), Value::Regex(y)) => x.pattern == y.pattern && x.flags == y.flags,
        (Value::Rule(x), Value::Rule(y)) => Rc::ptr_eq(x, y),
        _ => false,
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        py_eq(self, other)
    }
}
impl Eq for Value {}

/// Containers deeper than this hash by length only: equal values still hash equally, and a
/// value that shares sub-values (a DAG) cannot make hashing exponential.
const HASH_DEPTH: u8 = 4;

fn hash_at<H: Hasher>(v: &Value, state: &mut H, depth: u8) {
    let sub = |x: &Value| {
        let mut h = FxHasher(0);
        hash_at(x, &mut h, depth + 1);
        h.finish()
    };
    match v {
        Value::Null => state.write_u8(0),
        Value::Bool(b) => state.write_i64(i64::from(*b)),
        Value::Int(i) => state.write_i64(*i),
        Value::Float(f) => {
            if f.fract() == 0.0 && f.is_finite() && f.abs() < 9.2e18 {
                state.write_i64(*f as i64)
            } else {
                state.write_u64(f.to_bits())
            }
        }
        Value::Str(s) => s.hash(state),
        Value::Tuple(t) | Value::List(t) => {
            state.write_u8(3);
            state.write_usize(t.len());
            if depth < HASH_DEPTH {
                for x in t.iter() {
                    hash_at(x, state, depth + 1);
                }
            }
        }
        Value::Dict(d) => {
            state.write_usize(d.map.len());
            if depth < HASH_DEPTH {
                let mut acc = 0u64;
                for (k, x) in &d.map {
                    acc ^= sub(k).rotate_left(7) ^ sub(x);
                }
                state.write_u64(acc)
            }
        }
        Value::Set(_) | Value::Keys(_) | Value::Items(_) => {
            let items = v.set_items().unwrap_or_default();
            state.write_usize(items.len() ^ 0x5e7);
            if depth < HASH_DEPTH {
                let mut acc = 0u64;
                for x in &items {
                    acc ^= sub(x);
                }
                state.write_u64(acc)
            }
        }
        Value::Regex(r) => r.pattern.hash(state),
        Value::Undefined => state.write_u8(9),
        Value::Values(d) => state.write_usize(Rc::as_ptr(d) as *const u8 as usize),
        Value::Iter(x) => state.write_usize(Rc::as_ptr(x) as *const u8 as usize),
        Value::Memo(x) => state.write_usize(Rc::as_ptr(x) as *const u8 as usize),
        Value::Ordered(x) => state.write_usize(Rc::as_ptr(x) as *const u8 as usize),
        Value::Context(x) => state.write_usize(Rc::as_ptr(x) as *const u8 as usize),
        Value::Rule(x) => state.write_usize(Rc::as_ptr(x) as *const u8 as usize),
    }
}

impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        hash_at(self, state, 0)
    }
}

/// Python `repr(float)`: shortest round-trip digits, exponent outside 1e-4..1e16.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    // `{:e}` gives the shortest round-trip digits: d.ddddde[-]x
    let e = format!("{f:e}");
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp < 0 {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            let point = exp as usize + 1;
            if digits.len() <= point {
                out.push_str(&digits);
                for _ in digits.len()..point {
                    out.push('0');
                }
                out.push_str(".0");
            } else {
                out.push_str(&digits[..point]);
                out.push('.');
                out.push_str(&digits[point..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
    out
}

/// Python `repr(str)`.
pub fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c)
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python `str(x)`, refusing results longer than `max` bytes (shared structure can make a
/// small value print exponentially large).
pub fn py_str_limited(v: &Value, max: usize) -> Result<String, YaqlError> {
    fn size(v: &Value, budget: &mut usize) -> bool {
        let own = match v {
            Value::Str(s) => s.len() + 2,
            _ => 8,
        };
        if own > *budget {
            return false;
        }
        *budget -= own;
        match v {
            Value::Tuple(t) | Value::List(t) => t.iter().all(|x| size(x, budget)),
            Value::Dict(d) => d
                .map
                .iter()
                .all(|(k, x)| size(k, budget) && size(x, budget)),
            Value::Set(s) => s.items.iter().all(|x| size(x, budget)),
            _ => true,
        }
    }
    let mut budget = max;
    if !size(v, &mut budget) {
        return Err(YaqlError::new(
            ErrorKind::MemoryQuotaExceededException,
            "Expression consumed too much memory",
        ));
    }
    Ok(py_str(v))
}

/// Python `str(x)` (for non-strings it is `repr`).
pub fn py_str(v: &Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        other => py_repr(other),
    }
}

/// Python `repr(x)` of plain data, and a stand-in for other objects.
pub fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => float_repr(*f),
        Value::Str(s) => str_repr(s),
        Value::Tuple(t) => {
            let inner: Vec<String> = t.iter().map(py_repr).collect();
            if t.len() == 1 {
                format!("({},)", inner[0])
            } else {
                format!("({})", inner.join(", "))
            }
        }
        Value::List(t) => format!("[{}]", t.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Dict(d) => format!(
            "{{{}}}",
            d.map
                .iter()
                .map(|(k, v)| format!("{}: {}", py_repr(k), py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Set(s) => {
            let inner = s.items.iter().map(py_repr).collect::<Vec<_>>().join(", ");
            match (s.frozen, s.items.is_empty()) {
                (true, true) => "frozenset()".into(),
                (true, false) => format!("frozenset({{{inner}}})"),
                (false, true) => "set()".into(),
                (false, false) => format!("{{{inner}}}"),
            }
        }
        Value::Keys(d) => format!(
            "dict_keys([{}])",
            d.map.keys().map(py_repr).collect::<Vec<_>>().join(", ")
        ),
        Value::Values(d) => format!(
            "dict_values([{}])",
            d.map.values().map(py_repr).collect::<Vec<_>>().join(", ")
        ),
        Value::Items(d) => format!(
            "dict_items([{}])",
            d.map
                .iter()
                .map(|(k, v)| format!("({}, {})", py_repr(k), py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Regex(r) => format!("re.compile({})", str_repr(&r.pattern)),
        Value::Undefined => "<Undefined>".into(),
        other => format!("<{} object>", other.type_name()),
    }
}

impl std::fmt::Debug for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&py_repr(self))
    }
}

pub use super::convert::from_json;

impl Value {
    /// JSON for plain data (what `Engine::eval` returns); other values are
    /// `UnserializableResult`.
    pub fn to_json(&self) -> Result<serde_json::Value, YaqlError> {
        super::output::to_json(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_like_python() {
        for (f, want) in [
            (2.0, "2.0"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-1.5e-7, "-1.5e-07"),
            (1e22, "1e+22"),
            (123.456, "123.456"),
        ] {
            assert_eq!(float_repr(f), want);
        }
    }

    #[test]
    fn python_equality_and_hashing_agree() {
        use std::hash::BuildHasher;
        let h = |v: &Value| FxBuild.hash_one(v);
        let pairs = [
            (Value::Int(1), Value::Float(1.0)),
            (Value::Int(1), Value::Bool(true)),
            (Value::Int(0), Value::Bool(false)),
            (
                Value::tuple(vec![Value::Int(1)]),
                Value::tuple(vec![Value::Float(1.0)]),
            ),
        ];
        for (a, b) in &pairs {
            assert!(py_eq(a, b));
            assert_eq!(h(a), h(b));
        }
        assert!(!py_eq(&Value::tuple(vec![]), &Value::list(vec![])));
        assert!(!py_eq(&Value::str("1"), &Value::Int(1)));
        assert!(py_eq(&Value::Null, &Value::Null));
    }

    #[test]
    fn repr_like_python() {
        let v = Value::tuple(vec![
            Value::Int(1),
            Value::str("a'b"),
            Value::Null,
            Value::Bool(true),
        ]);
        assert_eq!(py_repr(&v), "(1, \"a'b\", None, True)");
        assert_eq!(py_repr(&Value::tuple(vec![Value::Int(1)])), "(1,)");
    }
}
