//! A release's repositories, as `fuel2 release repos list|update` reads and changes them:
//! through the release's whole `attributes_metadata` (`GET/PUT
//! /releases/{id}/attributes_metadata`), of which only `editable.repo_setup.repos.value` may
//! change here; the rest is the release package's, and a change to it is refused, naming where.
//! The repositories set are kept as the release's `repos` override (`store::roles`) and stand
//! in for the package's wherever the release's attributes are read: the environments'
//! settings defaults and checks (`planner::accepts`) and the deployment data of the release's
//! environments that did not set their own (the planner, through `roles::PlanMeta`).

use serde_json::Value as J;

use crate::model::FieldError;
use crate::store::{MetaKind, MetaOwner, ReadTxn, StoreError, WriteTxn};

/// The override's name.
const REPOS: &str = "repos";
/// Where the repositories are in `attributes_metadata`.
const VALUE: &str = "/editable/repo_setup/repos/value";
/// At most this many repositories.
const MAX_REPOS: usize = 1000;
/// The keys of a repository, as Fuel's `custom_repo_configuration` has them.
const KEYS: &[&str] = &["name", "type", "uri", "suite", "section", "priority"];

/// The repositories set on release `release` through the API, if any.
pub fn stored(r: &ReadTxn<'_>, release: i64) -> Result<Option<J>, StoreError> {
    Ok(r.overrides(MetaOwner::Release(release), MetaKind::Repos)?
        .into_iter()
        .find(|(name, _)| name == REPOS)
        .and_then(|(_, body)| body))
}

/// `attributes` (a release's `attributes_metadata`) with `repos` as its repositories; one
/// without a repositories attribute stays as it is.
pub fn apply(attributes: &mut J, repos: &J) {
    if let Some(slot) = attributes.pointer_mut(VALUE) {
        *slot = repos.clone();
    }
}

/// `settings` (a release's settings as deployment data has them, `{group: {name: value}}`)
/// with `repos` as `repo_setup.repos`, when the release has that setting.
pub fn apply_to_settings(settings: &mut J, repos: &J) {
    if let Some(slot) = settings.pointer_mut("/repo_setup/repos") {
        *slot = repos.clone();
    }
}

/// Release `id`'s `attributes_metadata` as Nailgun shows it: the package's, with the
/// repositories set through the API.
pub fn attributes_metadata(r: &ReadTxn<'_>, id: i64) -> Result<J, StoreError> {
    if r.release(id)?.is_none() {
        return Err(StoreError::NotFound {
            entity: "release",
            id: id.to_string(),
        });
    }
    let (_, mut attributes) = r
        .release_roles_and_attributes(id)?
        .unwrap_or((J::Null, J::Null));
    if let Some(repos) = stored(r, id)? {
        apply(&mut attributes, &repos);
    }
    Ok(attributes)
}

fn invalid(field: &str, message: String) -> StoreError {
    StoreError::Invalid {
        what: "release attributes",
        fields: vec![FieldError {
            field: field.to_string(),
            message,
        }],
    }
}

/// The first place where `a` and `b` differ, as a dotted path under `at`.
fn first_difference(a: &J, b: &J, at: &str) -> Option<String> {
    let join = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    match (a, b) {
        (J::Object(x), J::Object(y)) => x
            .iter()
            .find_map(|(k, v)| match y.get(k) {
                Some(w) => first_difference(v, w, &join(k)),
                None => Some(join(k)),
            })
            .or_else(|| y.keys().find(|k| !x.contains_key(*k)).map(|k| join(k))),
        (J::Array(x), J::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (v, w))| first_difference(v, w, &format!("{at}[{i}]"))),
        _ if a == b => None,
        _ => Some(if at.is_empty() {
            "(the document)".into()
        } else {
            at.into()
        }),
    }
}

/// Each problem of `repos` (the new value), named by its field.
fn check_repos(repos: &J) -> Vec<FieldError> {
    const AT: &str = "editable.repo_setup.repos.value";
    let mut errors = Vec::new();
    let mut bad = |field: String, message: String| errors.push(FieldError { field, message });
    let Some(list) = repos.as_array() else {
        bad(AT.into(), "expected a list of repositories".into());
        return errors;
    };
    if list.len() > MAX_REPOS {
        bad(
            AT.into(),
            format!("{} repositories; at most {MAX_REPOS}", list.len()),
        );
        return errors;
    }
    let mut names = std::collections::BTreeSet::new();
    for (i, repo) in list.iter().enumerate() {
        let at = format!("{AT}[{i}]");
        let Some(o) = repo.as_object() else {
            bad(
                at,
                "expected a repository: {name, type, uri, suite, section, priority}".into(),
            );
            continue;
        };
        for k in o.keys().filter(|k| !KEYS.contains(&k.as_str())) {
            bad(
                format!("{at}.{k}"),
                format!("unknown key; a repository has {}", KEYS.join(", ")),
            );
        }
        let text = |k: &str| o.get(k).and_then(J::as_str).map(str::trim);
        match text("name") {
            Some(n) if !n.is_empty() && n.len() <= 255 => {
                if !names.insert(n.to_string()) {
                    bad(
                        format!("{at}.name"),
                        format!("{n:?} names two repositories"),
                    );
                }
            }
            _ => bad(
                format!("{at}.name"),
                "required: a name of 1-255 characters".into(),
            ),
        }
        match text("type") {
            Some("deb" | "rpm") => {}
            _ => bad(format!("{at}.type"), "required: \"deb\" or \"rpm\"".into()),
        }
        match text("uri") {
            Some(u)
                if ["http://", "https://", "ftp://", "file://"]
                    .iter()
                    .any(|s| u.starts_with(s))
                    && u.len() <= 2048
                    && !u.chars().any(char::is_whitespace) =>
            {
                for deb in ["suite", "section"] {
                    if text("type") == Some("deb") && o.get(deb).is_some_and(|v| !v.is_string()) {
                        bad(format!("{at}.{deb}"), "expected a string".into());
                    }
                }
            }
            _ => bad(
                format!("{at}.uri"),
                "required: an http://, https://, ftp:// or file:// URL without spaces".into(),
            ),
        }
        if text("type") == Some("deb") && text("suite").is_none_or(str::is_empty) {
            bad(
                format!("{at}.suite"),
                "required for a deb repository (e.g. \"xenial\")".into(),
            );
        }
        match o.get("priority") {
            None | Some(J::Null) => {}
            Some(p) if p.as_i64().is_some() => {}
            Some(_) => bad(
                format!("{at}.priority"),
                "expected an integer or null".into(),
            ),
        }
    }
    errors
}

/// Set release `id`'s repositories from `doc`, its whole `attributes_metadata` as `fuel2
/// release repos update` sends it back: `editable.repo_setup.repos.value` checked and kept,
/// anything else changed refused, naming the first place that differs. The document as it is
/// now.
pub fn update(tx: &WriteTxn<'_>, id: i64, doc: &J, now: i64) -> Result<J, StoreError> {
    let current = attributes_metadata(&tx.read(), id)?;
    if current.pointer(VALUE).is_none() {
        return Err(invalid(
            "editable.repo_setup.repos",
            format!("release {id} has no repositories attribute to change"),
        ));
    }
    let Some(repos) = doc.pointer(VALUE) else {
        return Err(invalid(
            "editable.repo_setup.repos.value",
            "required: the release's repositories".into(),
        ));
    };
    let (mut sent, mut kept) = (doc.clone(), current.clone());
    for d in [&mut sent, &mut kept] {
        if let Some(slot) = d.pointer_mut(VALUE) {
            *slot = J::Null;
        }
    }
    if let Some(at) = first_difference(&sent, &kept, "") {
        return Err(invalid(
            &at,
            "only editable.repo_setup.repos.value can be changed: the rest of a release's \
             attributes is its package's"
                .into(),
        ));
    }
    let errors = check_repos(repos);
    if !errors.is_empty() {
        return Err(StoreError::Invalid {
            what: "release attributes",
            fields: errors,
        });
    }
    tx.set_override(MetaOwner::Release(id), MetaKind::Repos, REPOS, Some(repos))?;
    let count = repos.as_array().map_or(0, Vec::len);
    tx.add_history(
        now,
        None,
        "release.repos_updated",
        &format!("release {id}: {count} repositories set"),
    )?;
    let mut updated = current;
    apply(&mut updated, repos);
    Ok(updated)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_difference_is_named_by_its_path() {
        let a = json!({"editable": {"a": {"value": 1}, "b": [1, 2]}, "generated": {}});
        assert_eq!(first_difference(&a, &a.clone(), ""), None);
        let mut b = a.clone();
        b["editable"]["a"]["value"] = json!(2);
        assert_eq!(
            first_difference(&b, &a, "").as_deref(),
            Some("editable.a.value")
        );
        let mut c = a.clone();
        c["editable"]["b"][1] = json!(3);
        assert_eq!(
            first_difference(&c, &a, "").as_deref(),
            Some("editable.b[1]")
        );
        let mut d = a.clone();
        d["extra"] = json!(1);
        assert_eq!(first_difference(&d, &a, "").as_deref(), Some("extra"));
        assert_eq!(first_difference(&a, &d, "").as_deref(), Some("extra"));
    }

    #[test]
    fn repositories_are_checked_each_problem_named() {
        let good = json!([{"name": "ubuntu", "type": "deb", "uri": "http://mirror/ubuntu/",
                           "suite": "xenial", "section": "main universe", "priority": null},
                          {"name": "mos", "type": "deb", "uri": "https://m/mos", "suite": "mos10.0",
                           "section": "main", "priority": 1050}]);
        assert!(check_repos(&good).is_empty());
        let bad = json!([{"name": "", "type": "zip", "uri": "gopher://x", "suite": "s"},
                         {"name": "a", "type": "deb", "uri": "http://x", "color": 1, "priority": "hi"},
                         {"name": "a", "type": "rpm", "uri": "http://y"},
                         "deb http://x"]);
        let fields: Vec<String> = check_repos(&bad).into_iter().map(|f| f.field).collect();
        let at = |s: &str| format!("editable.repo_setup.repos.value{s}");
        assert_eq!(
            fields,
            [
                at("[0].name"),
                at("[0].type"),
                at("[0].uri"),
                at("[1].color"),
                at("[1].suite"),
                at("[1].priority"),
                at("[2].name"),
                at("[3]"),
            ]
        );
        assert_eq!(check_repos(&json!("x"))[0].field, at(""));
    }
}
