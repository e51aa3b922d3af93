//! An operator's node actions in the JSON API: `DELETE /api/v1/nodes/{id}` (refused with 409
//! while the node is in an environment or a running deployment, as Nailgun refuses it; its
//! MACs, inventory and boot tokens go with it, and a node that boots again is discovered anew)
//! and `POST /api/v1/nodes/{id}/approve` (a node discovered under `discovery.approval =
//! manual` gets its boot token from its next boot on). Thin: the store checks and writes; the
//! dashboard's buttons call the same two functions.
//!
//! Nailgun's node edits too: `PUT /nodes/{id}` and its collection form `PUT /nodes` (a list of
//! `{id, ...}`) change a node's `name`, `hostname` and `labels` (what `fuel2 node update` and
//! `node label set/delete` send), validated as Nailgun's `NodeValidator` and node schema;
//! every other field Nailgun's handler took is refused by name, saying where stoker does it;
//! `DELETE /nodes?ids=` (`fuel2 node undiscover`) deletes several nodes, all or none. The
//! node page's rename form goes through the same edit ([`edit`]).

use std::collections::BTreeMap;

use actix_web::{HttpResponse, web};
use serde_json::Value;

use crate::http::api::catalog::node_json;
use crate::http::api::query;
use crate::http::{ApiError, AppState};
use crate::model::{FieldError, Node, NodeId};
use crate::store::NodeEdit;

const WHAT: &str = "node";

/// Delete node `id`; the node as it was.
pub(crate) async fn delete_node(state: &AppState, id: NodeId) -> Result<Node, ApiError> {
    let now = crate::clock::now();
    let node = state
        .store(move |s| s.write(|tx| tx.delete_node(id, now)))
        .await?;
    tracing::info!(node = id, mac = %node.mac, "node deleted");
    Ok(node)
}

/// Approve node `id`; the node now, and whether it was waiting.
pub(crate) async fn approve_node(state: &AppState, id: NodeId) -> Result<(Node, bool), ApiError> {
    let now = crate::clock::now();
    let (node, was_waiting) = state
        .store(move |s| {
            s.write(|tx| {
                let changed = tx.approve_node(id, now)?;
                let node = tx.read().existing_node(id)?;
                Ok((node, changed))
            })
        })
        .await?;
    if was_waiting {
        tracing::info!(node = id, mac = %node.mac, "node approved");
    }
    Ok((node, was_waiting))
}

/// `DELETE /api/v1/nodes/{id}`: 204.
pub async fn delete(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    delete_node(&state, id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `POST /api/v1/nodes/{id}/approve`: the node (approving an approved node changes nothing).
pub async fn approve(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    let (node, _) = approve_node(&state, id).await?;
    Ok(HttpResponse::Ok().json(node))
}

/// Nailgun's node fields stoker does not take through `PUT /nodes`, with why (or where).
const REFUSED: &[(&str, &str)] = &[
    (
        "cluster_id",
        "assign with POST /clusters/{id}/assignment, remove with /unassignment",
    ),
    (
        "pending_roles",
        "assign with POST /clusters/{id}/assignment",
    ),
    ("roles", "roles become deployed when a deployment succeeds"),
    ("pending_addition", "follows from the assignment"),
    (
        "pending_deletion",
        "remove with POST /clusters/{id}/unassignment",
    ),
    ("status", "the node's state follows its deployments"),
    ("error_type", "the node's state follows its deployments"),
    ("error_msg", "the node's state follows its deployments"),
    ("progress", "the node's state follows its deployments"),
    ("online", "follows from its agent's calls"),
    ("meta", "the inventory is its agent's"),
    ("mac", "the inventory is its agent's"),
    ("ip", "the address is its agent's"),
    ("manufacturer", "the inventory is its agent's"),
    ("platform_name", "the inventory is its agent's"),
    ("os_platform", "the inventory is its agent's"),
    ("is_agent", "only a node's agent reports"),
    ("agent_checksum", "only a node's agent reports"),
    (
        "kernel_params",
        "stoker's boot script sets the kernel command line",
    ),
    ("group_id", "stoker has one node group per environment"),
];

/// Nailgun's `base_types.FQDN`: dot-separated labels of letters, digits and inner minus signs,
/// each 1 to 63 characters.
fn is_fqdn(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            (1..=63).contains(&b.len())
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

/// One node's edit from a `PUT` body (`prefix` names it in a list: `[0].`), every bad field
/// named. `id` is the node the collection form names.
fn parse_edit(
    doc: &Value,
    prefix: &str,
    fields: &mut Vec<FieldError>,
) -> (Option<NodeId>, NodeEdit) {
    let mut bad = |field: &str, message: String| {
        fields.push(FieldError {
            field: format!("{prefix}{field}"),
            message,
        })
    };
    let mut edit = NodeEdit::default();
    let mut id = None;
    let Some(obj) = doc.as_object() else {
        bad(
            "$",
            format!("expected an object of node fields, found {doc}"),
        );
        return (None, edit);
    };
    for (key, value) in obj {
        match key.as_str() {
            "id" => match value.as_i64().filter(|i| *i > 0) {
                Some(i) => id = Some(i),
                None => bad("id", format!("expected a node id, found {value}")),
            },
            "name" => match value.as_str() {
                Some(n) if !n.trim().is_empty() && n.chars().count() <= 100 => {
                    edit.name = Some(n.to_string())
                }
                _ => bad(
                    "name",
                    format!("expected 1 to 100 characters, found {value}"),
                ),
            },
            "hostname" => match value.as_str() {
                Some(h) if is_fqdn(h) => edit.hostname = Some(h.to_string()),
                _ => bad(
                    "hostname",
                    format!(
                        "hostname must consist of english characters, digits, minus signs and \
                         periods (labels of 1 to 63 characters, not starting or ending with a \
                         minus), found {value}"
                    ),
                ),
            },
            "labels" => match parse_labels(value) {
                Ok(labels) => edit.labels = Some(labels),
                Err((field, message)) => bad(&format!("labels{field}"), message),
            },
            other => match REFUSED.iter().find(|(k, _)| *k == other) {
                Some((_, why)) => bad(other, format!("cannot be changed here: {why}")),
                None => bad(
                    other,
                    "unknown node field (stoker changes name, hostname, labels)".to_string(),
                ),
            },
        }
    }
    (id, edit)
}

/// Nailgun's labels schema: names of 1 to 100 characters, each to a string of 1 to 100
/// characters or null.
fn parse_labels(value: &Value) -> Result<BTreeMap<String, Option<String>>, (String, String)> {
    let Some(obj) = value.as_object() else {
        return Err((
            String::new(),
            format!("expected an object of label names to values, found {value}"),
        ));
    };
    let mut out = BTreeMap::new();
    for (k, v) in obj {
        if !(1..=100).contains(&k.chars().count()) {
            return Err((
                format!(".{k}"),
                "a label name has 1 to 100 characters".to_string(),
            ));
        }
        match v {
            Value::Null => {
                out.insert(k.clone(), None);
            }
            Value::String(s) if (1..=100).contains(&s.chars().count()) => {
                out.insert(k.clone(), Some(s.clone()));
            }
            other => {
                return Err((
                    format!(".{k}"),
                    format!("expected a string of 1 to 100 characters or null, found {other}"),
                ));
            }
        }
    }
    Ok(out)
}

fn invalid(fields: Vec<FieldError>) -> Result<(), ApiError> {
    if fields.is_empty() {
        Ok(())
    } else {
        Err(ApiError::InvalidInput { what: WHAT, fields })
    }
}

/// Node `id`'s edit from `doc` (a `PUT /nodes/{id}` body), checked and applied: the node as
/// it is after. The API's `PUT` and the node page's rename form both go through here.
pub(crate) async fn edit(state: &AppState, id: NodeId, doc: &Value) -> Result<Node, ApiError> {
    let mut fields = Vec::new();
    let (named, edit) = parse_edit(doc, "", &mut fields);
    if let Some(other) = named.filter(|n| *n != id) {
        fields.push(FieldError {
            field: "id".into(),
            message: format!("the body names node {other}, the path node {id}"),
        });
    }
    invalid(fields)?;
    let now = crate::clock::now();
    state
        .store(move |s| s.write(|tx| tx.edit_node(id, &edit, now)))
        .await
}

/// `PUT /api/v1/nodes/{id}`: the node as Nailgun serializes it.
pub async fn update(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    let doc: Value = ApiError::parse(&body)?;
    let node = edit(&state, id, &doc).await?;
    Ok(HttpResponse::Ok().json(node_json(&node)))
}

/// `PUT /api/v1/nodes`: a list of edits, each naming its node by `id`; all are applied or
/// none. The edited nodes as Nailgun lists them.
pub async fn update_many(
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let doc: Value = ApiError::parse(&body)?;
    let Some(items) = doc.as_array() else {
        return Err(ApiError::field(WHAT, "$", "expected a list of node edits"));
    };
    let mut fields = Vec::new();
    let mut edits = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let prefix = format!("[{i}].");
        let (id, edit) = parse_edit(item, &prefix, &mut fields);
        match id {
            Some(id) => edits.push((id, edit)),
            None if item.is_object() && item.get("id").is_none() => fields.push(FieldError {
                field: format!("{prefix}id"),
                message: "each edit names its node by id (stoker does not find nodes by MAC \
                          here)"
                    .into(),
            }),
            None => {}
        }
    }
    invalid(fields)?;
    let now = crate::clock::now();
    let nodes = state
        .store(move |s| {
            s.write(|tx| {
                edits
                    .iter()
                    .map(|(id, edit)| tx.edit_node(*id, edit, now))
                    .collect::<Result<Vec<_>, _>>()
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(nodes.iter().map(node_json).collect::<Vec<_>>()))
}

/// `DELETE /api/v1/nodes?ids=1,2` (`fuel2 node undiscover`): 200 with Nailgun's finished
/// `node_deletion` task. Refused, nothing deleted, when a node is missing (404 naming them)
/// or in an environment (409 naming them: remove them from it first).
pub async fn delete_many(
    state: web::Data<AppState>,
    q: web::Query<BTreeMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let ids = query::ids("ids", q.get("ids").map(String::as_str))?;
    if ids.is_empty() {
        return Err(ApiError::field("query", "ids", "name at least one node id"));
    }
    let now = crate::clock::now();
    let gone = state
        .store(move |s| s.write(|tx| tx.delete_nodes(&ids, now)))
        .await?;
    for n in &gone {
        tracing::info!(node = n.id, mac = %n.mac, "node deleted");
    }
    let ids: Vec<NodeId> = gone.iter().map(|n| n.id).collect();
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "id": null,
        "uuid": null,
        "name": "node_deletion",
        "status": "ready",
        "progress": 100,
        "message": format!("nodes {} deleted", ids.iter().map(i64::to_string)
            .collect::<Vec<_>>().join(", ")),
        "cluster": null,
        "result": {"nodes": ids},
        "parent_id": null,
        "dry_run": false,
        "graph_type": null,
        "time_start": null,
        "time_end": null,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_follow_nailgun_fqdn_pattern() {
        assert!(is_fqdn("ctrl-01") && is_fqdn("a.b-c.d"));
        for bad in ["", "-a", "a-", "a..b", "a_b", "é", &"a".repeat(64)] {
            assert!(!is_fqdn(bad), "{bad:?}");
        }
    }

    #[test]
    fn an_edit_names_every_bad_field() {
        let mut fields = Vec::new();
        let doc = serde_json::json!({"name": "", "hostname": "a_b", "labels": {"k": 1},
                                      "status": "ready", "bogus": 1, "id": 3});
        let (id, edit) = parse_edit(&doc, "[0].", &mut fields);
        assert_eq!(id, Some(3));
        assert_eq!(edit, NodeEdit::default());
        let named: Vec<&str> = fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            named,
            [
                "[0].bogus",
                "[0].hostname",
                "[0].labels.k",
                "[0].name",
                "[0].status"
            ]
        );
        let mut fields = Vec::new();
        let doc = serde_json::json!({"name": "db", "hostname": "db-1",
                                      "labels": {"rack": "r1", "spare": null}});
        let (_, edit) = parse_edit(&doc, "", &mut fields);
        assert!(fields.is_empty());
        assert_eq!(edit.labels.unwrap().get("spare"), Some(&None));
    }
}
