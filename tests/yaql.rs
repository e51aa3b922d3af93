//! YAQL: cases checked against the reference (yaql 3.2.0 + Nailgun's functions, run through
//! `yaql-oracle.py`), in `tests/fixtures/yaql/*.jsonl`, plus the CLI and the limits.

use serde_json::{Value as Json, json};
use stoker::yaql::{Context, Engine, ErrorKind, Limits, Value};

fn eval(expr: &str, data: Json) -> Result<Json, String> {
    let engine = Engine::new(Limits::default());
    engine
        .eval_json(expr, &Context::new(&data))
        .map_err(|e| e.kind.name().to_string())
}

/// JSON equality as `yaql-check.py` does it: ints and floats differ, floats compare with a
/// relative tolerance of 1e-12, object key order does not matter.
fn json_equal(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            if x.is_f64() != y.is_f64() {
                return false;
            }
            match (x.as_f64(), y.as_f64()) {
                (Some(p), Some(q)) if x.is_f64() => {
                    p == q || (p - q).abs() <= 1e-12 * p.abs().max(q.abs())
                }
                _ => x == y,
            }
        }
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Cases written for stoker and answered by the reference (yaql 3.2.0 + Nailgun's functions
/// through `yaql-oracle.py`); the first line holds the data they all run against.
#[test]
fn reference_cases() {
    let text = include_str!("fixtures/yaql/reference.jsonl");
    let mut lines = text.lines();
    // deserialised into yaql values directly, so that key order is kept
    let env: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    let Value::Dict(env) = env else {
        panic!("first line is an object")
    };
    let field = |k: &str| env.map.get(&Value::str(k)).cloned().unwrap();
    let mut ctx = Context::from_value(field("data")).with_old_value(field("old"));
    if let Value::Dict(vars) = field("vars") {
        for (k, v) in &vars.map {
            ctx = ctx.with_var_value(k.as_str().unwrap(), v.clone());
        }
    }
    let engine = Engine::new(Limits::default());
    let mut failures = Vec::new();
    let mut n = 0;
    for line in lines {
        let case: Json = serde_json::from_str(line).unwrap();
        let expr = case["expr"].as_str().unwrap();
        let expect = &case["expect"];
        let got = match engine.eval_json(expr, &ctx) {
            Ok(v) => json!({"ok": true, "value": v}),
            Err(e) => json!({"ok": false, "error": e.kind.name()}),
        };
        if !json_equal(&got, expect) {
            failures.push(format!("{expr}\n  expected {expect}\n  got      {got}"));
        }
        n += 1;
    }
    assert!(n > 150);
    assert!(
        failures.is_empty(),
        "{} of {n} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// What stoker refuses where Python answers: a `$` followed by pattern that could take the final
/// newline (Python's `re.search('a$\\n', 'a\\n')` matches); an `error`, as a bad pattern is.
#[test]
fn a_dollar_followed_by_more_pattern_is_refused() {
    for expr in [
        r"'a\n'.matches(`a$\n`)",
        r"regex(`$\s*`).replace('a\n', 'X')",
    ] {
        let engine = Engine::new(Limits::default());
        let e = engine
            .eval(expr, &Context::new(&Json::Null))
            .expect_err(expr);
        assert_eq!(e.kind, ErrorKind::error, "{expr}");
        assert!(
            e.message.contains("a $ followed by more pattern"),
            "{expr}: {e}"
        );
    }
}

#[test]
fn basics() {
    assert_eq!(
        eval("$.a.where($ > 1)", json!({"a": [1, 2, 3]})),
        Ok(json!([2, 3]))
    );
    assert_eq!(eval("7 / 2", Json::Null), Ok(json!(3)));
    assert_eq!(eval("7.0 / 2", Json::Null), Ok(json!(3.5)));
    assert_eq!(eval("null or 'x'", Json::Null), Ok(json!("x")));
    assert_eq!(eval("$.missing", json!({})), Err("KeyError".into()));
}

#[test]
fn limits_are_errors_not_crashes() {
    assert_eq!(
        eval("range(20000)", Json::Null),
        Err("CollectionTooLargeException".into())
    );
    let engine = Engine::new(Limits::default());
    let deep = format!("{}1{}", "(".repeat(5000), ")".repeat(5000));
    let e = engine.eval(&deep, &Context::new(&Json::Null)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::RecursionError);
    let e = engine
        .eval("def(f, f($)) -> f(1)", &Context::new(&Json::Null))
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::RecursionError);
}

mod fuzz {
    //! Parse + evaluate random expressions: no panic, no stack overflow, no hang. Runs a few
    //! hundred cases in `cargo test`; `YAQL_FUZZ_SECS=600 cargo test --profile ci --test
    //! integration yaql::fuzz -- --ignored --nocapture` runs for ten minutes.

    use std::time::{Duration, Instant};

    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    use serde_json::json;
    use stoker::yaql::{Context, Engine, Limits};

    const ATOMS: &[&str] = &[
        "$",
        "$x",
        "$1",
        "$2",
        "$.a",
        "$.l",
        "$.d",
        "$.s",
        "$.n",
        "1",
        "0",
        "-1",
        "2.5",
        "'abc'",
        "\"a b\"",
        "`v\\`x`",
        "true",
        "false",
        "null",
        "ready",
        "[]",
        "{}",
        "[1, 2, 3]",
        "{a => 1, b => [2]}",
        "'\\n\\x41\\101'",
        "range(5)",
        "sequence()",
        "set(1, 2)",
    ];
    const OPS: &[&str] = &[
        " + ", " - ", " * ", " / ", " mod ", " = ", " != ", " < ", " > ", " <= ", " >= ", " in ",
        " and ", " or ", " =~ ", " !~ ", " -> ", ".", "?.",
    ];
    const TOKENS: &[&str] = &[
        "$", ".", "?.", "(", ")", "[", "]", "{", "}", ",", "=>", "->", "+", "-", "*", "/", "mod",
        "=", "!=", "<", ">", "not", "and", "or", "in", "1", "2.0", "'s'", "x", "$.a", "#", "\\",
        "'", "\"", "len(", "where(", "select(", "let(", "def(", "switch(", "@", "1e3", " ",
    ];

    fn names() -> Vec<&'static str> {
        Engine::function_names()
    }

    fn expr() -> impl Strategy<Value = String> {
        let names = names();
        let leaf = prop::sample::select(ATOMS).prop_map(str::to_string);
        leaf.prop_recursive(5, 48, 4, move |inner| {
            let names = names.clone();
            prop_oneof![
                (inner.clone(), prop::sample::select(OPS), inner.clone())
                    .prop_map(|(a, o, b)| format!("{a}{o}{b}")),
                (
                    prop::sample::select(names.clone()),
                    prop::collection::vec(inner.clone(), 0..4)
                )
                    .prop_map(|(f, a)| format!("{f}({})", a.join(", "))),
                (
                    inner.clone(),
                    prop::sample::select(names),
                    prop::collection::vec(inner.clone(), 0..3)
                )
                    .prop_map(|(r, f, a)| format!("{r}.{f}({})", a.join(", "))),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}[{b}]")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("let(x => {a}) -> {b}")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} => {b}")),
                inner.clone().prop_map(|a| format!("not ({a})")),
                inner.clone().prop_map(|a| format!("-{a}")),
                inner.prop_map(|a| format!("[{a}, {a}]")),
            ]
        })
    }

    fn soup() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(TOKENS), 0..24).prop_map(|t| t.join(""))
    }

    fn run(cases: u32, budget: Duration) -> u64 {
        let engine = Engine::new(Limits {
            max_steps: 200_000,
            ..Limits::default()
        });
        let data = json!({
            "a": [1, 2, {"b": "c"}], "l": ["x", "y", "y"], "d": {"k": {"k2": [1, 2.5]}},
            "s": "some text 12", "n": null
        });
        let ctx = Context::new(&data)
            .with_old(&json!({"a": [1]}))
            .with_var("x", &json!([3, 1]));
        let start = Instant::now();
        let mut total = 0u64;
        while total == 0 || start.elapsed() < budget {
            // a fresh runner (and random seed) per batch: a runner stops after `cases`
            let mut runner = TestRunner::new(Config {
                cases,
                failure_persistence: None,
                ..Config::default()
            });
            runner
                .run(&prop_oneof![expr(), soup()], |e| {
                    if let Ok(path) = std::env::var("YAQL_FUZZ_LOG") {
                        use std::io::Write;
                        if let Ok(mut f) = std::fs::File::create(path) {
                            let _ = writeln!(f, "{e}");
                        }
                    }
                    let _ = engine.eval(&e, &ctx);
                    Ok(())
                })
                .unwrap();
            total += u64::from(cases);
        }
        total
    }

    #[test]
    fn random_expressions_never_panic() {
        run(300, Duration::ZERO);
    }

    #[test]
    #[ignore = "long fuzz run; set YAQL_FUZZ_SECS"]
    fn long_fuzz() {
        let secs: u64 = std::env::var("YAQL_FUZZ_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(60);
        let start = Instant::now();
        let n = run(2000, Duration::from_secs(secs));
        println!("{n} expressions in {:?} without a panic", start.elapsed());
    }
}

/// The 144 public names of yaql 3.2.0's standard library (non-legacy), as the reference
/// registers them.
const REFERENCE_NAMES: &[&str] = &[
    "abs",
    "accumulate",
    "add",
    "aggregate",
    "all",
    "any",
    "append",
    "assert",
    "bitwiseAnd",
    "bitwiseNot",
    "bitwiseOr",
    "bitwiseXor",
    "bool",
    "call",
    "characters",
    "coalesce",
    "concat",
    "contains",
    "containsKey",
    "containsValue",
    "count",
    "cycle",
    "datetime",
    "def",
    "defaultIfEmpty",
    "delete",
    "deleteAll",
    "dict",
    "difference",
    "distinct",
    "endsWith",
    "enumerate",
    "escapeRegex",
    "examine",
    "filter",
    "first",
    "flatten",
    "float",
    "format",
    "generate",
    "generateMany",
    "get",
    "groupBy",
    "hex",
    "indexOf",
    "indexWhere",
    "insert",
    "insertMany",
    "int",
    "intersect",
    "isBoolean",
    "isDatetime",
    "isDict",
    "isEmpty",
    "isInteger",
    "isIterable",
    "isList",
    "isNumber",
    "isRegex",
    "isSet",
    "isString",
    "isTimespan",
    "items",
    "join",
    "keys",
    "last",
    "lastIndexOf",
    "lastIndexWhere",
    "len",
    "let",
    "limit",
    "list",
    "localtz",
    "map",
    "matches",
    "max",
    "memorize",
    "mergeWith",
    "min",
    "norm",
    "now",
    "orderBy",
    "orderByDescending",
    "pow",
    "random",
    "range",
    "reduce",
    "regex",
    "remove",
    "repeat",
    "replace",
    "replaceBy",
    "replaceMany",
    "reverse",
    "rightSplit",
    "round",
    "search",
    "searchAll",
    "select",
    "selectAllCases",
    "selectCase",
    "selectMany",
    "sequence",
    "set",
    "shiftBitsLeft",
    "shiftBitsRight",
    "sign",
    "single",
    "skip",
    "skipWhile",
    "slice",
    "sliceWhere",
    "split",
    "splitAt",
    "splitWhere",
    "startsWith",
    "str",
    "substring",
    "sum",
    "switch",
    "switchCase",
    "symmetricDifference",
    "take",
    "takeWhile",
    "thenBy",
    "thenByDescending",
    "timespan",
    "toCharArray",
    "toDict",
    "toList",
    "toLower",
    "toSet",
    "toUpper",
    "trim",
    "trimLeft",
    "trimRight",
    "union",
    "unpack",
    "utctz",
    "values",
    "where",
    "with",
    "zip",
    "zipLongest",
];

#[test]
fn the_whole_library_is_there() {
    let ours = Engine::function_names();
    let missing: Vec<&str> = REFERENCE_NAMES
        .iter()
        .copied()
        .filter(|n| !ours.contains(n))
        .collect();
    // the date/time constructors need a clock and `random` is not deterministic (module docs)
    assert_eq!(
        missing,
        ["datetime", "localtz", "now", "random", "timespan", "utctz"]
    );
    for nailgun in [
        "new",
        "old",
        "changed",
        "changedAll",
        "changedAny",
        "added",
        "deleted",
        "isUndef",
        "toJson",
        "toYaml",
    ] {
        assert!(ours.contains(&nailgun), "{nailgun}");
    }
}

mod cli {
    use std::io::Write;
    use std::process::Stdio;

    use crate::common::bin::stoker;

    #[test]
    fn eval_prints_json_or_the_error_with_a_caret() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("d.yaml"),
            "roles: [controller, mongo]\nuid: '2'\n",
        )
        .unwrap();
        let out = stoker(dir.path())
            .args([
                "yaql",
                "eval",
                "$.roles.select('primary-' + $)",
                "--data",
                "d.yaml",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            v,
            serde_json::json!(["primary-controller", "primary-mongo"])
        );

        let out = stoker(dir.path())
            .args(["yaql", "eval", "1 + $.x # y"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("YaqlLexicalException"), "{err}");
        assert!(err.contains("  1 + $.x # y\n          ^"), "{err}");
    }

    #[test]
    fn jsonl_answers_line_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = stoker(dir.path())
            .args(["yaql", "--jsonl"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let input = concat!(
            r#"{"expr": "changed($.a)", "data": {"b": 1, "a": [1]}, "old": {"a": [2]}}"#,
            "\n",
            r#"{"expr": "$node.name", "data": null, "vars": {"node": {"name": "n1"}}}"#,
            "\n",
            r#"{"expr": "$.x", "data": {}}"#,
            "\n",
            "not json\n",
            r#"{"expr": "$.keys()", "data": {"b": 1, "a": 2}}"#,
            "\n",
        );
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines,
            [
                serde_json::json!({"ok": true, "value": true}),
                serde_json::json!({"ok": true, "value": "n1"}),
                serde_json::json!({"ok": false, "error": "KeyError"}),
                serde_json::json!({"ok": false, "error": "BadInput"}),
                serde_json::json!({"ok": true, "value": ["b", "a"]}),
            ]
        );
    }
}

/// Deep recursion through every kind of frame stays an error on a 2 MiB thread (the size of
/// test and tokio blocking threads).
#[test]
fn deep_recursion_fits_a_small_stack() {
    let exprs = [
        "def(f, f($)) -> f(1)",
        "def(f, [$].where(f($)).first()) -> f(1)",
        "def(f, [$].select(f($)).toList()) -> f(1)",
        "def(f, switch(true => f($))) -> f(1)",
        "def(f, let(x => $) -> f($x)) -> f(1)",
        "def(f, {a => f($)}) -> f(1)",
        "def(f, [1, 2].orderBy(f($)).toList()) -> f(1)",
        "def(f, [$].select($ + 1).select(f($)).first()) -> f(1)",
        "def(f, f([$])) -> f(1).flatten()",
    ];
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let engine = Engine::new(Limits::default());
            for e in exprs {
                let r = engine.eval(e, &Context::new(&Json::Null));
                assert!(r.is_err(), "{e}");
            }
            let nested = format!("{}1{}", "len([".repeat(95), "])".repeat(95));
            assert!(engine.eval(&nested, &Context::new(&Json::Null)).is_ok());
        })
        .unwrap()
        .join()
        .unwrap();
}
