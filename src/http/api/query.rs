//! Nailgun's query parameters as its handlers read them: comma-separated lists
//! (`statuses=running,ready`), lists of ids (`nodes=1,2`), booleans (`utils.parse_bool`:
//! `1`/`0`, `true`/`false`, `yes`/`no`, `on`/`off`), and names checked against the known ones.
//! A bad value is `invalid_input` naming its parameter.

use crate::http::ApiError;

const WHAT: &str = "query";

/// A comma-separated list, blanks dropped.
pub fn list(raw: Option<&str>) -> Vec<String> {
    raw.unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// A comma-separated list of positive ids in parameter `name`.
pub fn ids(name: &str, raw: Option<&str>) -> Result<Vec<i64>, ApiError> {
    list(raw)
        .iter()
        .map(|s| {
            s.parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(|| {
                ApiError::field(WHAT, name, format!("{s:?} is not a positive integer id"))
            })
        })
        .collect()
}

/// Boolean parameter `name` (absent: false).
pub fn flag(name: &str, raw: Option<&str>) -> Result<bool, ApiError> {
    match raw.map(str::to_ascii_lowercase).as_deref() {
        None | Some("" | "0" | "false" | "no" | "off") => Ok(false),
        Some("1" | "true" | "yes" | "on") => Ok(true),
        Some(other) => Err(ApiError::field(
            WHAT,
            name,
            format!("{other:?} is not a boolean (1, 0, true, false)"),
        )),
    }
}

/// Refuse values of parameter `name` outside `known`, naming them.
pub fn known(name: &str, values: &[String], known: &[&str]) -> Result<(), ApiError> {
    let unknown: Vec<&str> = values
        .iter()
        .map(String::as_str)
        .filter(|v| !known.contains(v))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(ApiError::field(
        WHAT,
        name,
        format!(
            "unknown {} (known: {})",
            unknown.join(", "),
            known.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_parse_as_nailgun_and_bad_ones_are_named() {
        assert_eq!(list(Some(" a,,b ,")), ["a", "b"]);
        assert_eq!(ids("nodes", Some("1, 2")).unwrap(), [1, 2]);
        assert!(
            ids("nodes", Some("1,x"))
                .unwrap_err()
                .to_string()
                .contains("nodes")
        );
        assert!(ids("nodes", Some("0")).is_err());
        assert!(flag("force", Some("True")).unwrap() && !flag("force", None).unwrap());
        assert!(flag("force", Some("2")).is_err());
        assert!(known("statuses", &["done".into()], &["ready"]).is_err());
    }
}
