//! The JSON Lines protocol of `stoker yaql --jsonl` (and of `yaql-check.py`): one request
//! line `{"expr", "data", "old"?, "vars"?}` in, one answer line out, `{"ok": true, "value":
//! ...}` or `{"ok": false, "error": "<yaql exception class>"}`. The request's values are
//! converted straight from the line's text by a [`Converter`] and the answer is written
//! straight from the result, with no `serde_json::Value` tree on either side. Pure: text in,
//! bytes out; the CLI does the reading and writing.

use super::{Context, Converter, Engine, ErrorKind, Json, Value};

/// One `--jsonl` request, its values converted straight from the line's text.
struct Request {
    expr: String,
    data: Value,
    old: Option<Value>,
    vars: Value,
}

/// Reads a [`Request`] with a [`Converter`] (shared by the lines of a stream, so their
/// repeated keys are converted once).
struct RequestSeed<'c>(&'c mut Converter);

enum Field {
    Expr,
    Data,
    Old,
    Vars,
    Other,
}

impl<'de> serde::Deserialize<'de> for Field {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Field, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Field;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E>(self, v: &str) -> Result<Field, E> {
                Ok(match v {
                    "expr" => Field::Expr,
                    "data" => Field::Data,
                    "old" => Field::Old,
                    "vars" => Field::Vars,
                    _ => Field::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for RequestSeed<'_> {
    type Value = Request;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Request, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for RequestSeed<'_> {
    type Value = Request;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a request object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Request, A::Error> {
        use serde::de::Error;
        let (mut expr, mut data, mut old, mut vars) = (None, None, None, None);
        fn once<T, E: Error>(slot: &mut Option<T>, v: T, name: &'static str) -> Result<(), E> {
            if slot.replace(v).is_some() {
                return Err(E::duplicate_field(name));
            }
            Ok(())
        }
        while let Some(field) = m.next_key::<Field>()? {
            match field {
                Field::Expr => once(&mut expr, m.next_value::<String>()?, "expr")?,
                Field::Data => once(&mut data, m.next_value_seed(self.0.seed())?, "data")?,
                Field::Old => once(&mut old, m.next_value_seed(self.0.seed())?, "old")?,
                Field::Vars => once(&mut vars, m.next_value_seed(self.0.seed())?, "vars")?,
                Field::Other => {
                    m.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(Request {
            expr: expr.ok_or_else(|| A::Error::missing_field("expr"))?,
            data: data.unwrap_or_default(),
            // `"old": null` is no old data, as when it is absent
            old: old.filter(|o| !o.is_null()),
            vars: vars.unwrap_or_default(),
        })
    }
}

/// A request line's expression and the context it asks for (`None`: not a request).
pub fn request(conv: &mut Converter, line: &str) -> Option<(String, Context)> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_str(line);
    let req = RequestSeed(conv).deserialize(&mut de).ok()?;
    de.end().ok()?;
    let mut ctx = Context::from_value(req.data);
    if let Some(old) = req.old {
        ctx = ctx.with_old_value(old);
    }
    if let Value::Dict(vars) = &req.vars {
        for (k, v) in &vars.map {
            if let Some(k) = k.as_str() {
                ctx = ctx.with_var_value(k, v.clone());
            }
        }
    }
    Some((req.expr, ctx))
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
    use crate::yaql::Limits;

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
        ] {
            assert_eq!(ask(&mut conv, line), want, "{line}");
        }
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
