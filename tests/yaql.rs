//! YAQL: cases checked against the reference (yaql 3.2.0 + Nailgun's functions, run through
//! `yaql-oracle.py`), in `tests/fixtures/yaql/*.jsonl`, plus the CLI and the limits.

use serde_json::{Value as Json, json};
use stoker::yaql::{Context, Engine, ErrorKind, Limits};

fn eval(expr: &str, data: Json) -> Result<Json, String> {
    let engine = Engine::new(Limits::default());
    engine
        .eval_json(expr, &Context::new(&data))
        .map_err(|e| e.kind.name().to_string())
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
