//! The JSON Lines protocol of `stoker yaql --jsonl` (and of `yaql-check.py`): one request
//! line `{"expr", "data", "old"?, "vars"?}` in, one answer line out, `{"ok": true, "value":
//! ...}` or `{"ok": false, "error": "<yaql exception class>"}`. The request's values are
//! converted straight from the line's text by a [`Converter`] and the answer is written
//! straight from the result, with no `serde_json::Value` tree on either side. Pure: text in,
//! bytes out; the CLI does the reading and writing.

use super::jsontext::{Fail, Reader};
use super::{Context, Converter, Engine, ErrorKind, Json, Value};

/// A request line's expression and the context it asks for (`None`: not a request: not one
/// JSON object, `expr` missing or not a string, a field given twice). Read in one pass by
/// `jsontext`, so `data`, `old` and `vars` share the sub-trees `conv` has read before (the
/// same `network_metadata` on every node's line is one value, converted once); fields other
/// than those four are read and dropped.
pub fn request(conv: &mut Converter, line: &str) -> Option<(String, Context)> {
    let (mut expr, mut data, mut old, mut vars) = (None, None, None, None);
    let mut r = Reader::new(line);
    r.fields(conv, |r, conv, key| {
        fn once<T>(r: &Reader, slot: &mut Option<T>, v: T) -> Result<(), Fail> {
            match slot.replace(v) {
                Some(_) => Err(r.fail("a field given twice")),
                None => Ok(()),
            }
        }
        match key {
            "expr" => {
                let e = r.string_value()?.into_owned();
                once(r, &mut expr, e)
            }
            "data" | "old" | "vars" => {
                let v = r.value(conv)?;
                let slot = match key {
                    "data" => &mut data,
                    "old" => &mut old,
                    _ => &mut vars,
                };
                once(r, slot, v)
            }
            _ => r.value(conv).map(drop),
        }
    })
    .and_then(|()| r.end())
    .ok()?;
    let mut ctx = Context::from_value(data.unwrap_or_default());
    // `"old": null` is no old data, as when it is absent
    if let Some(old) = old.filter(|o: &Value| !o.is_null()) {
        ctx = ctx.with_old_value(old);
    }
    if let Some(Value::Dict(vars)) = &vars {
        for (k, v) in &vars.map {
            if let Some(k) = k.as_str() {
                ctx = ctx.with_var_value(k, v.clone());
            }
        }
    }
    Some((expr?, ctx))
}

/// One JSON Lines request → one result line (without its newline) appended to `out`,
/// converting with `conv`.
pub fn answer(engine: &Engine, conv: &mut Converter, line: &str, out: &mut Vec<u8>) {
    let Some((expr, ctx)) = request(conv, line) else {
        return error_line(out, "BadInput");
    };
    match engine.eval(&expr, &ctx) {
        Ok(v) => {
            let start = out.len();
            out.extend_from_slice(br#"{"ok":true,"value":"#);
            if serde_json::to_writer(&mut *out, &Json(&v)).is_ok() {
                out.push(b'}');
            } else {
                out.truncate(start);
                error_line(out, ErrorKind::UnserializableResult.name());
            }
        }
        Err(e) => error_line(out, e.kind.name()),
    }
}

fn error_line(out: &mut Vec<u8>, kind: &str) {
    out.extend_from_slice(br#"{"ok":false,"error":"#);
    // a kind is a plain identifier; written through serde_json all the same
    let _ = serde_json::to_writer(&mut *out, kind);
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limits;

    fn ask(conv: &mut Converter, line: &str) -> serde_json::Value {
        let mut out = Vec::new();
        answer(&Engine::new(Limits::default()), conv, line, &mut out);
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn requests_and_answers() {
        let mut conv = Converter::new();
        for (line, want) in [
            (
                r#"{"expr": "$.b", "data": {"a": 1, "b": [1, 2.0, "x", {"k": null}]}}"#,
                serde_json::json!({"ok": true, "value": [1, 2.0, "x", {"k": null}]}),
            ),
            // `"old": null` is no old data; unknown fields are ignored
            (
                r#"{"id": 3, "expr": "changed($.a)", "data": {"a": 1}, "old": null}"#,
                serde_json::json!({"ok": true, "value": true}),
            ),
            (
                r#"{"expr": "$common.x + $.y", "data": {"y": 1}, "vars": {"common": {"x": 2}}}"#,
                serde_json::json!({"ok": true, "value": 3}),
            ),
            // non-string keys as Python's json writes them; sets sorted
            (
                r#"{"expr": "dict(1 => set(3, 1), null => true)"}"#,
                serde_json::json!({"ok": true, "value": {"1": [1, 3], "null": true}}),
            ),
            (
                r#"{"expr": "1 / 0"}"#,
                serde_json::json!({"ok": false, "error": "ZeroDivisionError"}),
            ),
            (
                r#"{"expr": "float(inf)"}"#,
                serde_json::json!({"ok": false, "error": "UnserializableResult"}),
            ),
            (
                r#"{"expr": "regex(a)"}"#,
                serde_json::json!({"ok": false, "error": "UnserializableResult"}),
            ),
            (
                r#"{"data": {}}"#,
                serde_json::json!({"ok": false, "error": "BadInput"}),
            ),
            (
                r#"{"expr": "1", "expr": "2"}"#,
                serde_json::json!({"ok": false, "error": "BadInput"}),
            ),
            (
                r#"{"expr": 1}"#,
                serde_json::json!({"ok": false, "error": "BadInput"}),
            ),
            (
                r#"{"expr": "1"} trailing"#,
                serde_json::json!({"ok": false, "error": "BadInput"}),
            ),
            ("", serde_json::json!({"ok": false, "error": "BadInput"})),
            (
                r#"{"expr": "$", "data": "\ud800"}"#,
                serde_json::json!({"ok": false, "error": "BadInput"}),
            ),
            (
                r#"{"expr": "$", "data": 1e999}"#,
                serde_json::json!({"ok": false, "error": "BadInput"}),
            ),
            (
                r#"[{"expr": "1"}]"#,
                serde_json::json!({"ok": false, "error": "BadInput"}),
            ),
        ] {
            assert_eq!(ask(&mut conv, line), want, "{line}");
        }
    }

    /// The request object is a level of nesting, as it was to `serde_json`: data may nest
    /// 126 deep inside it.
    #[test]
    fn nesting_counts_the_request() {
        let mut conv = Converter::new();
        let line = |n: usize| {
            format!(
                r#"{{"expr": "$.len()", "data": {}1{}}}"#,
                "[".repeat(n),
                "]".repeat(n)
            )
        };
        assert_eq!(ask(&mut conv, &line(126))["ok"], true);
        assert_eq!(ask(&mut conv, &line(127))["error"], "BadInput");
    }

    /// Lines that repeat sub-trees get them from the converter's table, and the answers are
    /// those of lines read alone.
    #[test]
    fn repeated_sub_trees_are_shared_between_lines() {
        let meta = r#"{"nodes": {"node-1": {"uid": "1", "roles": ["controller"]}, "node-2": {"uid": "2", "roles": ["compute"]}}}"#;
        let mut conv = Converter::new();
        for uid in 1..=2 {
            let line = format!(
                r#"{{"expr": "$.network_metadata.nodes.values().where($.uid = $uid2).roles", "data": {{"uid": "{uid}", "network_metadata": {meta}}}, "vars": {{"uid2": "{uid}"}}}}"#
            );
            let alone = ask(&mut Converter::with_sharing(crate::ShareLimits::OFF), &line);
            assert_eq!(ask(&mut conv, &line), alone);
        }
        assert!(conv.stats().hits >= 1, "{:?}", conv.stats());
    }

    #[test]
    fn the_answer_keeps_dict_order() {
        let mut out = Vec::new();
        let line = r#"{"expr": "$", "data": {"b": 1, "a": {"d": 2, "c": 3}}}"#;
        answer(&Engine::default(), &mut Converter::new(), line, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"ok":true,"value":{"b":1,"a":{"d":2,"c":3}}}"#
        );
    }
}
