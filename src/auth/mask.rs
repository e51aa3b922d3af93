//! Masking secrets in JSON documents (environment settings, task and deployment data) for roles
//! that do not need them, and keeping the stored value when a masked document comes back.
//!
//! A value is secret when its key says so (`password`, `passwd`, `secret`, `token`, a `_key`
//! suffix, …) or when it is the `value` of a Fuel attribute whose `type` is `password`.

use serde_json::Value;

/// What a masked value reads as.
pub const MASK: &str = "******";

/// Whether a key names a secret: a credential's ([`is_credential_key`]) or a `private` value.
pub fn is_secret_key(key: &str) -> bool {
    is_credential_key(key) || key.to_ascii_lowercase().contains("private")
}

/// Whether a key names a credential (every value under it is one): a password, a secret, a
/// token, a key.
pub fn is_credential_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("password")
        || k.contains("passwd")
        || k.contains("secret")
        || k.contains("token")
        || k.ends_with("_key")
        || k == "key"
        || k.contains("credential")
}

fn masked(v: &Value) -> Value {
    match v {
        Value::Null => Value::Null,
        Value::String(s) if s.is_empty() => Value::String(String::new()),
        _ => Value::String(MASK.to_string()),
    }
}

/// Replace every secret value in `doc` with [`MASK`] (empty strings and nulls stay as they are,
/// so a viewer can still see that nothing is set): a scalar under a key that names a secret,
/// the `value` of an attribute whose `type` is `password`, and every value nested under a key
/// that names a credential (OpenStack configurations nest theirs:
/// `{"DEFAULT/admin_token": {"value": ...}}`; of a Fuel attribute under such a key, its
/// `value`, so the form still has its label and type).
pub fn mask(doc: &mut Value) {
    mask_into(doc, &mut Vec::new());
}

/// [`mask`] for a document that leaves the master (a diagnostic snapshot): the credentials'
/// string values it hid go to `hidden`, so they can be looked for where they were copied into
/// other text.
pub fn mask_everywhere(doc: &mut Value, hidden: &mut Vec<String>) {
    mask_into(doc, hidden);
}

fn mask_into(doc: &mut Value, hidden: &mut Vec<String>) {
    match doc {
        Value::Object(map) => {
            let password_attr = map.get("type").and_then(Value::as_str) == Some("password");
            for (k, v) in map.iter_mut() {
                if password_attr && k == "value" {
                    hide_all(v, hidden);
                } else if is_credential_key(k) {
                    match v {
                        Value::Object(attr) if attr.contains_key("value") => {
                            attr.values_mut().for_each(|x| mask_into(x, hidden));
                            if let Some(value) = attr.get_mut("value") {
                                hide_all(value, hidden);
                            }
                        }
                        _ => hide_all(v, hidden),
                    }
                } else if is_secret_key(k) && !v.is_object() && !v.is_array() {
                    *v = masked(v);
                } else {
                    mask_into(v, hidden);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|x| mask_into(x, hidden)),
        _ => {}
    }
}

/// Every scalar under `v` masked; the non-empty strings go to `hidden`.
fn hide_all(v: &mut Value, hidden: &mut Vec<String>) {
    match v {
        Value::Object(map) => map.values_mut().for_each(|x| hide_all(x, hidden)),
        Value::Array(items) => items.iter_mut().for_each(|x| hide_all(x, hidden)),
        Value::Null => {}
        Value::String(s) if s.is_empty() => {}
        other => {
            if let Value::String(s) = other {
                hidden.push(s.clone());
            }
            *other = masked(other);
        }
    }
}

/// In a document sent back by a client, put the stored value back wherever the client sent
/// [`MASK`] itself: what it read masked it did not mean to change.
pub fn unmask(incoming: &mut Value, stored: &Value) {
    match (incoming, stored) {
        (Value::Object(new), Value::Object(old)) => {
            for (k, v) in new.iter_mut() {
                if let Some(o) = old.get(k) {
                    unmask(v, o);
                }
            }
        }
        (Value::Array(new), Value::Array(old)) => {
            for (v, o) in new.iter_mut().zip(old) {
                unmask(v, o);
            }
        }
        (v @ Value::String(_), old) if v.as_str() == Some(MASK) => *v = old.clone(),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_by_key_and_by_attribute_type() {
        let mut doc = json!({
            "access": {"user": "admin", "password": "s3cret", "email": "a@b"},
            "keystone": {"admin_token": "abc", "auth_key": "k"},
            "empty": {"password": ""},
            "attr": {"type": "password", "value": "pw", "label": "Root password"},
            "text": {"type": "text", "value": "visible"},
            "list": [{"db_password": "x"}],
            "nested_secret": {"secret": {"value": "deep"}}
        });
        mask(&mut doc);
        assert_eq!(doc["access"]["password"], MASK);
        assert_eq!(doc["access"]["user"], "admin");
        assert_eq!(doc["keystone"]["admin_token"], MASK);
        assert_eq!(doc["keystone"]["auth_key"], MASK);
        assert_eq!(doc["empty"]["password"], "");
        assert_eq!(doc["attr"]["value"], MASK);
        assert_eq!(doc["attr"]["label"], "Root password");
        assert_eq!(doc["text"]["value"], "visible");
        assert_eq!(doc["list"][0]["db_password"], MASK);
        assert_eq!(doc["nested_secret"]["secret"]["value"], MASK);
    }

    #[test]
    fn a_viewer_sees_no_credential_nested_under_its_key() {
        let mut doc = json!({
            "configuration": {"keystone": {"DEFAULT/admin_token": {"value": "tok", "ensure": "present"}}},
            "tokens": ["a", "b"],
            "access": {"password": {"type": "text", "value": "pw", "label": "Password"}},
        });
        mask(&mut doc);
        assert_eq!(
            doc["configuration"]["keystone"]["DEFAULT/admin_token"],
            json!({"value": MASK, "ensure": "present"})
        );
        assert_eq!(doc["tokens"], json!([MASK, MASK]));
        assert_eq!(
            doc["access"]["password"],
            json!({"type": "text", "value": MASK, "label": "Password"}),
            "an attribute under a credential's key keeps its form"
        );
    }

    #[test]
    fn masking_everywhere_also_hides_what_credentials_nest_and_says_what() {
        let mut doc = json!({
            "keystone_config": {"DEFAULT/admin_token": {"value": "tok-123"}},
            "access": {"password": "s3cret", "user": "admin"},
            "quantum": {"private": "br-prv"},
            "attr": {"type": "password", "value": "pw"},
        });
        let mut hidden = Vec::new();
        mask_everywhere(&mut doc, &mut hidden);
        assert_eq!(doc["keystone_config"]["DEFAULT/admin_token"]["value"], MASK);
        assert_eq!(doc["access"], json!({"password": MASK, "user": "admin"}));
        assert_eq!(doc["quantum"]["private"], MASK);
        assert_eq!(doc["attr"]["value"], MASK);
        hidden.sort();
        assert_eq!(
            hidden,
            ["pw", "s3cret", "tok-123"],
            "not br-prv: no credential"
        );
    }

    #[test]
    fn unmask_restores_what_came_back_masked() {
        let stored = json!({"access": {"password": "s3cret", "user": "admin"}});
        let mut sent = json!({"access": {"password": MASK, "user": "root"}});
        unmask(&mut sent, &stored);
        assert_eq!(
            sent,
            json!({"access": {"password": "s3cret", "user": "root"}})
        );
        let mut changed = json!({"access": {"password": "new"}});
        unmask(&mut changed, &stored);
        assert_eq!(changed["access"]["password"], "new");
    }
}
