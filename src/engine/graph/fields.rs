//! Computed task fields, as Nailgun's `lcm/task_serializer.py` walked a task:
//!
//! - any mapping with the key `yaql_exp` is replaced, as a whole, by the value of that
//!   expression (its other keys ignored; the result is not walked again);
//! - any other string goes through Python's `str.format` with `CLUSTER_ID`,
//!   `OPENSTACK_VERSION`, `MASTER_IP` and `CN_HOSTNAME`; a string that would fail (an unknown
//!   name, a positional field, a lone brace, a format spec) is kept unchanged, as Nailgun kept
//!   it after logging; values under a key named `regex` are copied unchanged.
//!
//! Formatting depends on the cluster only, so it is applied once per task; YAQL is evaluated
//! per node by the caller's closure. Pure.

use serde_json::{Map, Value as J};

/// The names `str.format` may substitute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FormatContext {
    pub cluster_id: String,
    pub openstack_version: String,
    pub master_ip: String,
    pub cn_hostname: String,
}

impl FormatContext {
    fn get(&self, name: &str) -> Option<&str> {
        Some(match name {
            "CLUSTER_ID" => &self.cluster_id,
            "OPENSTACK_VERSION" => &self.openstack_version,
            "MASTER_IP" => &self.master_ip,
            "CN_HOSTNAME" => &self.cn_hostname,
            _ => return None,
        })
    }
}

/// Python `s.format(**ctx)`, or `None` where Python would raise (the caller keeps `s`).
pub fn python_format(s: &str, ctx: &FormatContext) -> Option<String> {
    if !s.contains(['{', '}']) {
        return None;
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(r) = tail.strip_prefix("{{") {
            out.push('{');
            rest = r;
        } else if let Some(r) = tail.strip_prefix("}}") {
            out.push('}');
            rest = r;
        } else if tail.starts_with('}') {
            return None;
        } else {
            let end = tail.find('}')?;
            let name = &tail[1..end];
            out.push_str(ctx.get(name)?);
            rest = &tail[end + 1..];
        }
    }
    out.push_str(rest);
    Some(out)
}

/// Format every string of a task (not `id`, not under `regex`, not inside YAQL mappings).
pub fn format_task(task: &J, ctx: &FormatContext) -> J {
    match task {
        J::Object(o) => {
            let mut out = Map::new();
            for (k, v) in o {
                let v = if k == "id" {
                    v.clone()
                } else {
                    format_value(v, ctx)
                };
                out.insert(k.clone(), v);
            }
            J::Object(out)
        }
        other => other.clone(),
    }
}

fn format_value(v: &J, ctx: &FormatContext) -> J {
    match v {
        J::String(s) => python_format(s, ctx).map_or_else(|| v.clone(), J::String),
        J::Array(items) => J::Array(items.iter().map(|i| format_value(i, ctx)).collect()),
        J::Object(o) if o.contains_key("yaql_exp") => v.clone(),
        J::Object(o) => J::Object(
            o.iter()
                .map(|(k, x)| {
                    let x = if k == "regex" {
                        x.clone()
                    } else {
                        format_value(x, ctx)
                    };
                    (k.clone(), x)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A YAQL field that failed, with the dotted path of the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub expression: String,
    pub message: String,
}

/// Replace every YAQL field under `v`; `path` names `v` in errors. `eval` evaluates one
/// expression.
pub fn eval_fields<F>(v: &J, path: &str, eval: &mut F) -> Result<J, FieldError>
where
    F: FnMut(&str) -> Result<J, String>,
{
    match v {
        J::Object(o) => {
            if let Some(expr) = o.get("yaql_exp") {
                let Some(text) = expr.as_str() else {
                    return Err(FieldError {
                        field: path.to_string(),
                        expression: expr.to_string(),
                        message: "yaql_exp must be a string".to_string(),
                    });
                };
                return eval(text).map_err(|message| FieldError {
                    field: path.to_string(),
                    expression: text.to_string(),
                    message,
                });
            }
            let mut out = Map::new();
            for (k, x) in o {
                let here = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                out.insert(k.clone(), eval_fields(x, &here, eval)?);
            }
            Ok(J::Object(out))
        }
        J::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, x) in items.iter().enumerate() {
                out.push(eval_fields(x, &format!("{path}.{i}"), eval)?);
            }
            Ok(J::Array(out))
        }
        other => Ok(other.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> FormatContext {
        FormatContext {
            cluster_id: "7".into(),
            openstack_version: "newton-10.0".into(),
            master_ip: "10.20.0.2".into(),
            cn_hostname: "fuel".into(),
        }
    }

    #[test]
    fn format_like_python() {
        let c = ctx();
        assert_eq!(
            python_format("rsync://{MASTER_IP}:/puppet/{OPENSTACK_VERSION}/m/", &c).as_deref(),
            Some("rsync://10.20.0.2:/puppet/newton-10.0/m/")
        );
        assert_eq!(
            python_format("{{x}} {CLUSTER_ID}", &c).as_deref(),
            Some("{x} 7")
        );
        for unchanged in [
            "{NOPE}",
            "{}",
            "{0}",
            "a } b",
            "{CLUSTER_ID:>4}",
            "{SETTINGS.x}",
            "{",
        ] {
            assert_eq!(python_format(unchanged, &c), None, "{unchanged}");
        }
    }

    #[test]
    fn format_skips_id_regex_and_yaql() {
        let t = json!({
            "id": "{CLUSTER_ID}",
            "parameters": {"path": "/etc/{CLUSTER_ID}/a", "regex": "{CLUSTER_ID}",
                           "data": {"yaql_exp": "'{CLUSTER_ID}'"}, "list": ["{CN_HOSTNAME}", 1]}
        });
        assert_eq!(
            format_task(&t, &ctx()),
            json!({
                "id": "{CLUSTER_ID}",
                "parameters": {"path": "/etc/7/a", "regex": "{CLUSTER_ID}",
                               "data": {"yaql_exp": "'{CLUSTER_ID}'"}, "list": ["fuel", 1]}
            })
        );
    }

    #[test]
    fn yaql_mappings_are_replaced_at_any_depth() {
        let t = json!({"a": [{"yaql_exp": "one", "ignored": 1}], "b": {"c": {"yaql_exp": "two"}}});
        let mut seen = Vec::new();
        let out = eval_fields(&t, "", &mut |e: &str| {
            seen.push(e.to_string());
            Ok(json!(e.len()))
        })
        .unwrap();
        assert_eq!(out, json!({"a": [3], "b": {"c": 3}}));
        let e = eval_fields(&t, "", &mut |_: &str| Err("boom".to_string())).unwrap_err();
        assert_eq!((e.field.as_str(), e.message.as_str()), ("a.0", "boom"));
    }
}
