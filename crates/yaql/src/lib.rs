//! YAQL, the query language of Fuel task conditions and `yaql_exp` values: a pure
//! re-implementation of yaql 3.2.0 (non-legacy mode, Fuel's engine options) plus Nailgun's
//! helpers (`new`, `old`, `changed`, `changedAny`, `changedAll`, `added`, `deleted`,
//! `isUndef`, `toYaml`, `toJson`). Must not do I/O: data comes in as `serde_json` values.
//!
//! ```
//! use stoker_yaql::{Context, Engine, Limits};
//! let engine = Engine::new(Limits::default());
//! let ctx = Context::new(&serde_json::json!({"roles": ["controller"]}));
//! let v = engine.eval("'controller' in $.roles", &ctx).unwrap();
//! assert_eq!(v.to_json().unwrap(), serde_json::json!(true));
//! ```
//!
//! Layout: `lexer` → `parser` (operator table as data, operators lowered to calls) →
//! `interp` (contexts, lambdas, lazy sequences, overload resolution as `yaql.language.runner`
//! does it) → `lib/` (the standard library and Nailgun's functions) → `output` (yaql's
//! `#finalize`: plain data and JSON). Data comes in through `convert` ([`Converter`]: JSON
//! text or `serde_json` values into [`Value`]s, with no tree in between and short strings
//! shared); `jsontext` reads JSON text in one pass, `share` keeps the sub-trees a converter
//! has read by their text so later documents get the same values; `map` is dict storage;
//! `jsonl` is the `--jsonl` protocol.
//!
//! Sharing data between contexts: a [`Value`] is immutable and reference-counted, so a
//! sub-tree converted once (a plan's common part) can be placed in any number of contexts
//! (`Context::from_value`, `with_var_value`, `with_old_value`) without copying; keep one
//! [`Converter`] for all the documents of a plan so their keys are shared too, and so that
//! `convert_text` hands out the same value for a sub-tree whose text it has read before (its
//! table is bounded: [`ShareLimits`]).
//!
//! Known gaps, on purpose:
//! * Integers are 64-bit: where Python would grow a big integer stoker raises `OverflowError`.
//! * Regular expressions run on the `regex` crate after translating Python syntax
//!   (`(?P<n>...)`, `\Z`, `\N{NAME}`, `$` before a final newline, `\g<n>` in replacements).
//!   Lookaround, backreferences and a `$` followed by more pattern are not supported (an
//!   `error`, like a bad pattern); no Fuel expression uses them.
//! * Date/time functions (`now`, `datetime`, `timespan`, ...) are not provided: the pure core
//!   has no clock and Fuel does not use them. `random` is not provided either.
//! * Lazy-iterator quirks (`quirks-lazy.jsonl`): lazy results are real single-use iterators,
//!   so every quirk of the corpus is emulated: a lazy result is truthy even when empty, is never
//!   `=` to a list, cannot be indexed, and a `let`-bound query read twice is empty the second
//!   time; `values()` is neither a set nor a sequence, `keys()`/`items()` are set-like views.
//! * Values that share sub-values (`generate(x, true, [$, $])`) expand exponentially when
//!   printed or returned: output and `str()` are charged against the memory quota (the
//!   reference would run out of time instead); comparing and hashing them stays linear.
//! * `Context::new` takes `serde_json` values, whose objects are key-sorted unless serde_json's
//!   `preserve_order` feature is on; deserialise into [`Value`] (it implements
//!   `Deserialize` and keeps order) and use `Context::from_value` to keep the input's order.

mod charname;
mod convert;
mod error;
mod interp;
pub mod jsonl;
mod jsontext;
pub mod lexer;
mod map;
mod output;
mod parser;
mod registry;
mod share;
mod stdlib;
mod value;

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

pub use convert::{Converter, INTERN_MAX, INTERN_MAX_LEN, Seed};
pub use error::{ErrorKind, YaqlError};
pub use jsontext::{MAX_DEPTH as JSON_MAX_DEPTH, TextError};
pub use output::{FinalMemo, Json};
pub use share::{Limits as ShareLimits, Stats as ShareStats};
pub use value::Value;

use interp::{Ctx, Interp};
use parser::Ast;

/// Evaluation limits. The defaults are Fuel's (`yaql.limitIterators` 10,000,
/// `yaql.memoryQuota` 100 MiB) plus stoker's guards against deep recursion and runaway work.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Items one collection may have when iterated or returned.
    pub max_items: usize,
    /// Approximate bytes one value may take.
    pub memory_quota: usize,
    /// Nested evaluation depth (expression nesting plus function calls).
    pub max_depth: usize,
    /// Function calls in one evaluation.
    pub max_steps: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_items: 10_000,
            memory_quota: 104_857_600,
            max_depth: 400,
            max_steps: 20_000_000,
        }
    }
}

/// The data an expression sees: `$` (= `$%new`), `$%old` and named variables (`$node`...).
#[derive(Clone)]
pub struct Context {
    data: Value,
    old: Value,
    vars: Vec<(String, Value)>,
    memo: Option<Rc<output::FinalMemo>>,
}

impl Context {
    /// `$` is `data`; `$%old` is `{}` (nothing deployed before).
    pub fn new(data: &serde_json::Value) -> Context {
        Context {
            data: value::from_json(data),
            old: Value::frozen_dict(Default::default()),
            vars: Vec::new(),
            memo: None,
        }
    }

    /// Like `new`, from a value already converted (e.g. deserialised with key order kept).
    pub fn from_value(data: Value) -> Context {
        Context {
            data,
            old: Value::frozen_dict(Default::default()),
            vars: Vec::new(),
            memo: None,
        }
    }

    /// Share finalised forms of unchanged sub-trees with every context given the same memo
    /// (`changed($.network_metadata)` on a thousand nodes whose data share that sub-tree
    /// finalises and compares it once). Results are the same with or without it.
    pub fn with_memo(mut self, memo: Rc<output::FinalMemo>) -> Context {
        self.memo = Some(memo);
        self
    }

    /// Like `with_old`, from a value.
    pub fn with_old_value(mut self, old: Value) -> Context {
        self.old = old;
        self
    }

    /// Like `with_var`, from a value.
    pub fn with_var_value(mut self, name: &str, value: Value) -> Context {
        self.vars
            .push((name.trim_start_matches('$').to_string(), value));
        self
    }

    /// The previous deployment's data, for `old()`, `changed()`, `added()`, `deleted()`.
    pub fn with_old(mut self, old: &serde_json::Value) -> Context {
        self.old = value::from_json(old);
        self
    }

    /// Bind `$name` (e.g. `node`, `common`).
    pub fn with_var(mut self, name: &str, value: &serde_json::Value) -> Context {
        self.vars.push((
            name.trim_start_matches('$').to_string(),
            value::from_json(value),
        ));
        self
    }

    fn root(&self) -> Rc<Ctx> {
        let ctx = Ctx::root();
        ctx.set("%new", self.data.clone());
        ctx.set("%old", self.old.clone());
        for (k, v) in &self.vars {
            ctx.set(k, v.clone());
        }
        ctx.set("1", self.data.clone());
        ctx
    }
}

/// Compiled regular expressions shared by evaluations (internal to the engine).
#[derive(Default)]
pub struct RegexCache {
    map: Mutex<HashMap<(String, u8), Arc<stdlib::Compiled>>>,
}

const PARSE_CACHE_MAX: usize = 10_000;

/// Check that `text` is a YAQL expression, without an engine (validators use this).
pub fn check_syntax(text: &str) -> Result<(), YaqlError> {
    parser::parse(text).map(|_| ())
}

/// A YAQL engine: the limits and a cache of parsed expressions (by text). Share it freely
/// between threads; evaluation state is per call.
pub struct Engine {
    limits: Limits,
    cache: Mutex<HashMap<String, Arc<Ast>>>,
    regexes: Arc<RegexCache>,
}

impl Engine {
    pub fn new(limits: Limits) -> Engine {
        Engine {
            limits,
            cache: Mutex::new(HashMap::new()),
            regexes: Arc::new(RegexCache::default()),
        }
    }

    fn parse(&self, text: &str) -> Result<Arc<Ast>, YaqlError> {
        if let Ok(cache) = self.cache.lock()
            && let Some(ast) = cache.get(text)
        {
            return Ok(ast.clone());
        }
        let ast = Arc::new(parser::parse(text)?);
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= PARSE_CACHE_MAX {
                cache.clear();
            }
            cache.insert(text.to_string(), ast.clone());
        }
        Ok(ast)
    }

    /// Check that `text` parses (errors carry the position).
    pub fn check(&self, text: &str) -> Result<(), YaqlError> {
        self.parse(text).map(|_| ())
    }

    /// Evaluate `text` and return the result as plain data (lists, dicts with string keys,
    /// sets sorted into lists), as yaql's `#finalize` would.
    pub fn eval(&self, text: &str, ctx: &Context) -> Result<Value, YaqlError> {
        self.eval_metered(text, ctx, u64::MAX).0
    }

    /// [`Engine::eval`] allowed at most `allowance` steps (function calls and counted
    /// iterations, never more than the engine's `max_steps`), with the steps it took, so a
    /// caller can bound the work of many evaluations together. Over the allowance the error is
    /// `StepLimitExceeded` and the steps are `allowance + 1`. Deterministic: the same
    /// expression on the same data takes the same steps.
    pub fn eval_metered(
        &self,
        text: &str,
        ctx: &Context,
        allowance: u64,
    ) -> (Result<Value, YaqlError>, u64) {
        let ast = match self.parse(text) {
            Ok(ast) => ast,
            Err(e) => return (Err(e), 0),
        };
        let mut limits = self.limits.clone();
        limits.max_steps = limits.max_steps.min(allowance);
        let interp = Interp::with_memo(ast, limits, self.regexes.clone(), ctx.memo.clone());
        let root = ctx.root();
        let result = interp
            .eval_root(&root)
            .and_then(|v| output::finalize(&interp, &v));
        (result, interp.steps_used())
    }

    /// The engine's limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// `eval` then JSON.
    pub fn eval_json(&self, text: &str, ctx: &Context) -> Result<serde_json::Value, YaqlError> {
        self.eval(text, ctx)?.to_json()
    }

    /// The public names of the library (for documentation and tests).
    pub fn function_names() -> Vec<&'static str> {
        registry::registry().public_names()
    }
}

impl Default for Engine {
    fn default() -> Engine {
        Engine::new(Limits::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metered_evaluation_counts_steps_and_stops_at_the_allowance() {
        let engine = Engine::default();
        let ctx = Context::new(&serde_json::json!({}));
        let text = "range(0, 100).select($ + 1).len()";
        let (v, steps) = engine.eval_metered(text, &ctx, u64::MAX);
        assert_eq!(v.unwrap().to_json().unwrap(), serde_json::json!(100));
        assert!(steps > 200, "{steps}");
        // Deterministic: the same steps again, and exactly enough is enough.
        assert_eq!(engine.eval_metered(text, &ctx, steps).1, steps);
        let (v, over) = engine.eval_metered(text, &ctx, steps - 1);
        assert_eq!(v.unwrap_err().kind, ErrorKind::StepLimitExceeded);
        assert_eq!(over, steps);
        // A syntax error costs nothing.
        assert_eq!(engine.eval_metered("(", &ctx, 10).1, 0);
    }
}
