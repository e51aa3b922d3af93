//! Nailgun's OpenStack configuration (`/openstack-config/`, `fuel2 openstack-config`): overrides
//! of the OpenStack services' configuration files for a whole environment, the nodes of one
//! role or one node, stored with their history (`store::openstack_configs`), merged into each
//! node's deployment data as Nailgun's LCM serializer did (`inject_configs`: environment <
//! role < node, each key of the top level merged one level deep), and pushed to the ready
//! nodes by `execute` (a deployment of their deployment phase, started by the caller).
//!
//! Each operation checks its input as Nailgun's `OpenstackConfigValidator` did, naming the
//! field of every refusal (the environment exists: 404; nodes are its own; `node_id`,
//! `node_ids` and `node_role` exclusive; nothing changes while the environment deploys: 403),
//! and is stricter where Nailgun was lax: unknown keys are refused by name instead of
//! stored, a role must be one the environment has, `configuration_options` must be an
//! object, `node_ids` must name at least one node and each once.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Map, Value as J, json};

use crate::model::{FieldError, NodeStatus, iso};
use crate::planner::{self, PlanningError};
use crate::store::{ConfigScope, OpenstackConfig, ReadTxn, Store, StoreError};

/// Why an operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The environment's roles could not be gathered (its plugins).
    #[error(transparent)]
    Planning(Box<PlanningError>),
}

impl From<PlanningError> for ConfigError {
    fn from(e: PlanningError) -> ConfigError {
        ConfigError::Planning(Box::new(e))
    }
}

type Result<T, E = ConfigError> = std::result::Result<T, E>;

const WHAT: &str = "OpenStack configuration";
/// Nailgun's `ROLE_NAME_MAX_SIZE`.
const MAX_ROLE: usize = 64;
/// At most this many nodes in one request (each gets a configuration of its own).
const MAX_NODES: usize = 10_000;

fn field(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

fn invalid(fields: Vec<FieldError>) -> StoreError {
    StoreError::Invalid { what: WHAT, fields }
}

/// A configuration as Nailgun's `OpenstackConfigSerializer` showed it.
pub fn to_json(c: &OpenstackConfig) -> J {
    json!({
        "id": c.id,
        "is_active": c.is_active,
        "config_type": c.config_type,
        "cluster_id": c.cluster_id,
        "node_id": c.node_id,
        "node_role": c.node_role,
        "created_at": iso(c.created_at),
        "configuration": c.configuration,
    })
}

// ---- what a request names ----

/// The nodes a request is about: the whole environment, a role's, or some by id (with the
/// field that named them, `node_id` or `node_ids`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Cluster,
    Role(String),
    Nodes { field: &'static str, ids: Vec<i64> },
}

impl Target {
    /// The request's field that named the nodes.
    fn field(&self) -> &'static str {
        match self {
            Target::Cluster => "cluster_id",
            Target::Role(_) => "node_role",
            Target::Nodes { field, .. } => field,
        }
    }
}

/// A positive integer id, or why not.
fn id_value(v: &J) -> Option<i64> {
    v.as_i64().filter(|id| *id > 0)
}

/// The keys shared by every request: `cluster_id` (required), and at most one of `node_id`,
/// `node_ids`, `node_role`. Problems go to `fields`.
fn common(o: &Map<String, J>, fields: &mut Vec<FieldError>) -> (i64, Target) {
    let cluster = match o.get("cluster_id") {
        None => {
            fields.push(field("cluster_id", "is required: the environment's id"));
            0
        }
        Some(v) => id_value(v).unwrap_or_else(|| {
            fields.push(field(
                "cluster_id",
                format!("{v} is not a positive integer id"),
            ));
            0
        }),
    };
    let mut given: Vec<(&'static str, Target)> = Vec::new();
    match o.get("node_id") {
        None => {}
        Some(v) => match id_value(v) {
            Some(id) => given.push((
                "node_id",
                Target::Nodes {
                    field: "node_id",
                    ids: vec![id],
                },
            )),
            None => fields.push(field(
                "node_id",
                format!("{v} is not a positive integer id"),
            )),
        },
    }
    match o.get("node_ids") {
        None | Some(J::Null) => {}
        Some(J::Array(list)) if list.is_empty() => fields.push(field(
            "node_ids",
            "names no node: give at least one, or leave it out for the whole environment",
        )),
        Some(J::Array(list)) if list.len() > MAX_NODES => fields.push(field(
            "node_ids",
            format!("{} nodes; at most {MAX_NODES} in one request", list.len()),
        )),
        Some(J::Array(list)) => {
            let mut ids = Vec::with_capacity(list.len());
            let mut ok = true;
            for (i, v) in list.iter().enumerate() {
                match id_value(v) {
                    Some(id) if ids.contains(&id) => {
                        ok = false;
                        fields.push(field(format!("node_ids[{i}]"), format!("node {id} twice")));
                    }
                    Some(id) => ids.push(id),
                    None => {
                        ok = false;
                        fields.push(field(
                            format!("node_ids[{i}]"),
                            format!("{v} is not a positive integer id"),
                        ));
                    }
                }
            }
            if ok {
                given.push((
                    "node_ids",
                    Target::Nodes {
                        field: "node_ids",
                        ids,
                    },
                ));
            }
        }
        Some(v) => fields.push(field("node_ids", format!("{v} is not a list of node ids"))),
    }
    match o.get("node_role") {
        None => {}
        Some(J::String(r)) if !r.is_empty() && r.chars().count() <= MAX_ROLE => {
            given.push(("node_role", Target::Role(r.clone())));
        }
        Some(J::String(_)) => fields.push(field(
            "node_role",
            format!("a role name of 1 to {MAX_ROLE} characters"),
        )),
        Some(v) => fields.push(field("node_role", format!("{v} is not a role name"))),
    }
    if given.len() > 1 {
        let names: Vec<&str> = given.iter().map(|(n, _)| *n).collect();
        fields.push(field(
            names[1],
            format!(
                "Parameter '{}' conflicts with '{}': give the nodes one way",
                names[0],
                names[1..].join(", ")
            ),
        ));
    }
    let target = given.into_iter().next().map_or(Target::Cluster, |(_, t)| t);
    (cluster, target)
}

/// Refuse every key of `o` outside `known`, naming it.
fn unknown_keys(o: &Map<String, J>, known: &[&str], fields: &mut Vec<FieldError>) {
    for k in o.keys().filter(|k| !known.contains(&k.as_str())) {
        fields.push(field(
            k.clone(),
            format!("unknown key (known: {})", known.join(", ")),
        ));
    }
}

fn object(body: &J) -> Result<&Map<String, J>, StoreError> {
    body.as_object()
        .ok_or_else(|| invalid(vec![field("$", "expected a JSON object")]))
}

/// A new configuration as `POST /openstack-config/` takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewConfig {
    pub cluster_id: i64,
    pub target: Target,
    pub configuration: J,
}

/// `POST /openstack-config/`'s body: `{cluster_id, configuration, node_id | node_ids |
/// node_role}`, each problem named.
pub fn parse_new(body: &J) -> Result<NewConfig, StoreError> {
    let o = object(body)?;
    let mut fields = Vec::new();
    unknown_keys(
        o,
        &[
            "cluster_id",
            "configuration",
            "node_id",
            "node_ids",
            "node_role",
        ],
        &mut fields,
    );
    let (cluster_id, target) = common(o, &mut fields);
    let configuration = match o.get("configuration") {
        Some(J::Object(c)) => {
            if let Some(opts) = c.get("configuration_options")
                && !opts.is_object()
            {
                fields.push(field(
                    "configuration.configuration_options",
                    "must be an object",
                ));
            }
            J::Object(c.clone())
        }
        Some(v) => {
            fields.push(field(
                "configuration",
                format!("expected an object, found {}", kind(v)),
            ));
            J::Null
        }
        None => {
            fields.push(field("configuration", "is required: an object"));
            J::Null
        }
    };
    if !fields.is_empty() {
        return Err(invalid(fields));
    }
    Ok(NewConfig {
        cluster_id,
        target,
        configuration,
    })
}

fn kind(v: &J) -> &'static str {
    match v {
        J::Null => "null",
        J::Bool(_) => "a boolean",
        J::Number(_) => "a number",
        J::String(_) => "a string",
        J::Array(_) => "a list",
        J::Object(_) => "an object",
    }
}

/// What `PUT /openstack-config/execute/` takes.
#[derive(Debug, Clone, PartialEq)]
pub struct Execute {
    pub cluster_id: i64,
    pub target: Target,
    /// Update an environment that is not operational and nodes that are not ready too
    /// (Nailgun's `force`); stoker also runs every task of the nodes again.
    pub force: bool,
}

/// `PUT /openstack-config/execute/`'s body: `{cluster_id, node_id | node_ids | node_role,
/// force}`, each problem named.
pub fn parse_execute(body: &J) -> Result<Execute, StoreError> {
    let o = object(body)?;
    let mut fields = Vec::new();
    unknown_keys(
        o,
        &["cluster_id", "node_id", "node_ids", "node_role", "force"],
        &mut fields,
    );
    let (cluster_id, target) = common(o, &mut fields);
    let force = match o.get("force") {
        None | Some(J::Null) => false,
        Some(J::Bool(b)) => *b,
        Some(v) => {
            fields.push(field("force", format!("{v} is not true or false")));
            false
        }
    };
    if !fields.is_empty() {
        return Err(invalid(fields));
    }
    Ok(Execute {
        cluster_id,
        target,
        force,
    })
}

/// The filters of `GET /openstack-config/?cluster_id=&node_id=|node_ids=|node_role=
/// &is_active=`.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    pub cluster_id: i64,
    pub target: Target,
    pub is_active: bool,
}

/// The list's query parameters (as `(name, value)` pairs), each problem named: `cluster_id`
/// required, one of `node_id`, `node_ids` (comma-separated), `node_role`, and `is_active`
/// (Nailgun's booleans; default true).
pub fn parse_filter(pairs: &[(String, String)]) -> Result<Filter, StoreError> {
    let mut o = Map::new();
    let mut fields = Vec::new();
    let mut is_active = true;
    let mut seen = BTreeSet::new();
    for (k, v) in pairs {
        if !seen.insert(k.as_str()) {
            fields.push(field(k.clone(), "given twice"));
            continue;
        }
        match k.as_str() {
            "cluster_id" | "node_id" => {
                o.insert(
                    k.clone(),
                    v.trim()
                        .parse::<i64>()
                        .map_or(J::String(v.clone()), J::from),
                );
            }
            "node_ids" => {
                let ids: Vec<J> = v
                    .split(',')
                    .map(str::trim)
                    .map(|s| s.parse::<i64>().map_or(J::String(s.to_string()), J::from))
                    .collect();
                o.insert(k.clone(), J::Array(ids));
            }
            "node_role" => {
                o.insert(k.clone(), J::String(v.clone()));
            }
            "is_active" => match v.trim().to_ascii_lowercase().as_str() {
                "1" | "t" | "true" | "yes" | "y" | "on" => is_active = true,
                "0" | "f" | "false" | "no" | "n" | "off" => is_active = false,
                _ => fields.push(field(
                    "is_active",
                    format!("{v:?} is not a boolean (1, 0, true, false)"),
                )),
            },
            _ => fields.push(field(
                k.clone(),
                "unknown parameter (known: cluster_id, node_id, node_ids, node_role, is_active)",
            )),
        }
    }
    let (cluster_id, target) = common(&o, &mut fields);
    if !fields.is_empty() {
        return Err(invalid(fields));
    }
    Ok(Filter {
        cluster_id,
        target,
        is_active,
    })
}

// ---- the operations ----

/// The roles environment `cluster` has (its release's, its enabled plugins', its own), when
/// `target` names one: gathered before the store transaction, as they come from the
/// installed packages too.
fn roles_for(
    store: &Store,
    data_dir: &Path,
    cluster: i64,
    target: &Target,
) -> Result<Option<BTreeSet<String>>> {
    match target {
        Target::Role(_) => Ok(Some(planner::accepts(store, data_dir, cluster)?.roles)),
        _ => Ok(None),
    }
}

/// A change is refused while the environment deploys (Nailgun's
/// `_check_no_running_deploy_tasks`: 403).
fn check_not_deploying(r: &ReadTxn<'_>, cluster: i64) -> Result<(), StoreError> {
    if let Some(d) = r.busy(cluster)? {
        return Err(StoreError::Forbidden(format!(
            "Cannot perform the action because there are running deployment tasks '{}'",
            d.id
        )));
    }
    Ok(())
}

/// The environment exists (404), the nodes named are its own, the role named is one it
/// has, and it is not deploying (403).
fn check_target(
    r: &ReadTxn<'_>,
    cluster: i64,
    target: &Target,
    roles: Option<&BTreeSet<String>>,
) -> Result<(), StoreError> {
    r.existing_cluster(cluster)?;
    match target {
        Target::Cluster => {}
        Target::Role(role) => {
            if let Some(known) = roles
                && !known.contains(role)
            {
                return Err(invalid(vec![field(
                    "node_role",
                    format!(
                        "environment {cluster} has no role {role:?} (it has: {})",
                        known.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                )]));
            }
        }
        Target::Nodes { field: name, ids } => {
            let members: BTreeSet<i64> = r.cluster_nodes(cluster)?.iter().map(|n| n.id).collect();
            let strangers: Vec<String> = ids
                .iter()
                .filter(|id| !members.contains(id))
                .map(ToString::to_string)
                .collect();
            if !strangers.is_empty() {
                return Err(invalid(vec![field(
                    *name,
                    format!(
                        "Nodes '{}' are not assigned to cluster '{cluster}'",
                        strangers.join(", ")
                    ),
                )]));
            }
        }
    }
    check_not_deploying(r, cluster)
}

/// `GET /openstack-config/`: the environment's configurations the filter selects, oldest
/// first (404 for an unknown environment).
pub fn list(r: &ReadTxn<'_>, f: &Filter) -> Result<Vec<J>, StoreError> {
    r.existing_cluster(f.cluster_id)?;
    Ok(r.openstack_configs(f.cluster_id, Some(f.is_active))?
        .iter()
        .filter(|c| match &f.target {
            Target::Cluster => true,
            Target::Role(role) => c.node_role.as_deref() == Some(role.as_str()),
            Target::Nodes { ids, .. } => c.node_id.is_some_and(|n| ids.contains(&n)),
        })
        .map(to_json)
        .collect())
}

/// `GET /openstack-config/{id}/`: one, active or not.
pub fn show(r: &ReadTxn<'_>, id: i64) -> Result<J, StoreError> {
    r.openstack_config(id)?
        .map(|c| to_json(&c))
        .ok_or_else(|| StoreError::NotFound {
            entity: "OpenStack configuration",
            id: id.to_string(),
        })
}

/// `POST /openstack-config/`: store the configuration for its scope (one per node for
/// `node_ids`, as Nailgun 10), each replacing the scope's active one; what was stored.
pub fn create(store: &Store, data_dir: &Path, body: &J, now: i64) -> Result<Vec<J>> {
    let new = parse_new(body)?;
    let roles = roles_for(store, data_dir, new.cluster_id, &new.target)?;
    Ok(store.write(|tx| {
        check_target(&tx.read(), new.cluster_id, &new.target, roles.as_ref())?;
        let scopes: Vec<ConfigScope> = match &new.target {
            Target::Cluster => vec![ConfigScope::Cluster],
            Target::Role(r) => vec![ConfigScope::Role(r.clone())],
            Target::Nodes { ids, .. } => ids.iter().map(|n| ConfigScope::Node(*n)).collect(),
        };
        let mut out = Vec::with_capacity(scopes.len());
        for scope in &scopes {
            let id = tx.add_openstack_config(new.cluster_id, scope, &new.configuration, now)?;
            out.push(show(&tx.read(), id)?);
        }
        tx.add_event(
            now,
            crate::store::About::cluster(new.cluster_id),
            "openstack_config.uploaded",
            &format!(
                "OpenStack configuration for {} of environment {} uploaded",
                describe(&new.target),
                new.cluster_id
            ),
        )?;
        Ok(out)
    })?)
}

fn describe(target: &Target) -> String {
    match target {
        Target::Cluster => "every node".to_string(),
        Target::Role(r) => format!("role {r}"),
        Target::Nodes { ids, .. } => format!(
            "nodes {}",
            ids.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `DELETE /openstack-config/{id}/`: the configuration goes inactive (its history stays); one
/// inactive already is refused (400, as Nailgun), and so is any while its environment deploys.
pub fn delete(store: &Store, id: i64, now: i64) -> Result<(), StoreError> {
    store.write(|tx| {
        let c = tx
            .read()
            .openstack_config(id)?
            .ok_or_else(|| StoreError::NotFound {
                entity: "OpenStack configuration",
                id: id.to_string(),
            })?;
        check_not_deploying(&tx.read(), c.cluster_id)?;
        if !tx.deactivate_openstack_config(id)? {
            return Err(invalid(vec![field(
                "id",
                format!("Configuration '{id}' has been already disabled."),
            )]));
        }
        tx.add_event(
            now,
            crate::store::About::cluster(c.cluster_id),
            "openstack_config.deleted",
            &format!(
                "OpenStack configuration {id} of environment {} deleted",
                c.cluster_id
            ),
        )
    })
}

/// What `execute` deploys: the environment and its ready nodes the request names.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub cluster_id: i64,
    pub nodes: BTreeSet<i64>,
    pub force: bool,
}

/// `PUT /openstack-config/execute/`, checked as Nailgun's `validate_execute`: the
/// environment operational (unless `force`), some named node ready, and none not ready
/// (unless `force`; those are left out). The caller deploys the ready ones.
pub fn execute(store: &Store, data_dir: &Path, body: &J) -> Result<Update> {
    let ex = parse_execute(body)?;
    let roles = roles_for(store, data_dir, ex.cluster_id, &ex.target)?;
    Ok(store.read(|r| {
        check_target(r, ex.cluster_id, &ex.target, roles.as_ref())?;
        let cluster = r.existing_cluster(ex.cluster_id)?;
        if !ex.force && cluster.status != "operational" {
            return Err(invalid(vec![field(
                "cluster_id",
                format!(
                    "Cluster should be in the status 'operational' (environment {} is '{}'); \
                     force updates it anyway",
                    cluster.id, cluster.status
                ),
            )]));
        }
        let nodes: Vec<_> = r
            .cluster_nodes(ex.cluster_id)?
            .into_iter()
            .filter(|n| !n.pending_deletion)
            .filter(|n| match &ex.target {
                Target::Cluster => true,
                Target::Role(role) => n.roles.contains(role),
                Target::Nodes { ids, .. } => ids.contains(&n.id),
            })
            .collect();
        let (ready, other): (Vec<_>, Vec<_>) =
            nodes.iter().partition(|n| n.status == NodeStatus::Ready);
        if ready.is_empty() {
            return Err(invalid(vec![field(
                ex.target.field(),
                "No nodes in status 'ready': nothing to update",
            )]));
        }
        if !ex.force && !other.is_empty() {
            let ids: Vec<String> = other.iter().map(|n| n.id.to_string()).collect();
            return Err(invalid(vec![field(
                ex.target.field(),
                format!(
                    "Nodes '{}' are not in status 'ready' and can not be updated directly \
                     (force updates the ready ones)",
                    ids.join(", ")
                ),
            )]));
        }
        Ok(Update {
            cluster_id: ex.cluster_id,
            nodes: ready.iter().map(|n| n.id).collect(),
            force: ex.force,
        })
    })?)
}

// ---- the deployment data (pure) ----

/// Nailgun's `utils.dict_update(target, patch, 1)`: each key of `patch` replaces its value in
/// `target`, except an object, whose keys are added to the object there (made one if it was
/// something else).
fn update_one_level(target: &mut Map<String, J>, patch: &Map<String, J>) {
    for (k, v) in patch {
        match v {
            J::Object(inner) => {
                let slot = target
                    .entry(k.clone())
                    .or_insert_with(|| J::Object(Map::new()));
                if !slot.is_object() {
                    *slot = J::Object(Map::new());
                }
                if let J::Object(o) = slot {
                    o.extend(inner.iter().map(|(a, b)| (a.clone(), b.clone())));
                }
            }
            other => {
                target.insert(k.clone(), other.clone());
            }
        }
    }
}

fn priority(c: &OpenstackConfig) -> u8 {
    match c.config_type.as_str() {
        "cluster" => 0,
        "role" => 1,
        _ => 2,
    }
}

/// A node's `configuration` and `configuration_options` from its environment's active
/// configurations (`configs`, oldest first), as Nailgun's `inject_configs`: the environment's,
/// then those of each of the node's roles (its plain roles: a primary controller is a
/// `controller`), then its own, each merged over the last one level deep; a configuration's
/// `configuration_options` key goes to `configuration_options`.
pub fn for_node(configs: &[OpenstackConfig], node_id: i64, roles: &[String]) -> (J, J) {
    let mut ordered: Vec<&OpenstackConfig> = configs.iter().filter(|c| c.is_active).collect();
    ordered.sort_by_key(|c| priority(c));
    let mut configuration = Map::new();
    let mut options = Map::new();
    for c in ordered {
        let applies = match c.config_type.as_str() {
            "cluster" => true,
            "role" => c
                .node_role
                .as_ref()
                .is_some_and(|r| roles.iter().any(|x| x == r)),
            _ => c.node_id == Some(node_id),
        };
        let Some(data) = c.configuration.as_object().filter(|_| applies) else {
            continue;
        };
        let mut data = data.clone();
        if let Some(J::Object(opts)) = data.remove("configuration_options") {
            update_one_level(&mut options, &opts);
        }
        update_one_level(&mut configuration, &data);
    }
    (J::Object(configuration), J::Object(options))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(id: i64, scope: &str, who: &str, configuration: J) -> OpenstackConfig {
        OpenstackConfig {
            id,
            cluster_id: 1,
            node_id: (scope == "node").then(|| who.parse().unwrap_or(0)),
            node_role: (scope == "role").then(|| who.to_string()),
            config_type: scope.to_string(),
            is_active: true,
            created_at: id,
            configuration,
        }
    }

    #[test]
    fn node_beats_role_beats_environment_one_level_deep() {
        let configs = vec![
            // The newest first: priority, not age, decides between kinds.
            config(
                1,
                "node",
                "7",
                json!({"nova_config": {"DEFAULT/debug": {"value": "node"}},
                                          "configuration_options": {"keep": "node"}}),
            ),
            config(
                2,
                "role",
                "controller",
                json!({
                "nova_config": {"DEFAULT/debug": {"value": "role"}, "DEFAULT/x": {"value": 1}},
                "keystone_config": {"a": {"value": "role"}}}),
            ),
            config(
                3,
                "cluster",
                "",
                json!({
                "nova_config": {"DEFAULT/debug": {"value": "cluster"}, "DEFAULT/y": {"value": 2}},
                "neutron_config": {"n": {"value": "cluster"}},
                "configuration_options": {"keep": "cluster", "other": 1}}),
            ),
            config(
                4,
                "role",
                "compute",
                json!({"nova_config": {"DEFAULT/z": {"value": 3}}}),
            ),
            config(
                5,
                "node",
                "8",
                json!({"nova_config": {"DEFAULT/debug": {"value": "8"}}}),
            ),
        ];
        let (c, o) = for_node(&configs, 7, &["controller".to_string()]);
        assert_eq!(
            c,
            json!({
                "nova_config": {"DEFAULT/debug": {"value": "node"}, "DEFAULT/x": {"value": 1},
                                "DEFAULT/y": {"value": 2}},
                "keystone_config": {"a": {"value": "role"}},
                "neutron_config": {"n": {"value": "cluster"}},
            })
        );
        assert_eq!(o, json!({"keep": "node", "other": 1}));
        // A node of no role with a configuration, nothing of its own: the environment's.
        let (c, _) = for_node(&configs, 9, &[]);
        assert_eq!(
            c["nova_config"]["DEFAULT/debug"],
            json!({"value": "cluster"})
        );
        assert!(c.get("keystone_config").is_none());
    }

    #[test]
    fn inactive_configurations_count_for_nothing() {
        let mut old = config(1, "cluster", "", json!({"a": {"b": 1}}));
        old.is_active = false;
        assert_eq!(for_node(&[old], 1, &[]), (json!({}), json!({})));
    }

    #[test]
    fn bodies_are_checked_by_field() {
        let err = parse_new(&json!({"cluster_id": 1, "configuration": [], "node_id": 2,
                                    "node_role": "controller", "id": 5}))
        .unwrap_err();
        let StoreError::Invalid { fields, .. } = err else {
            panic!("{err}")
        };
        let named: Vec<&str> = fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(named, ["id", "node_role", "configuration"], "{fields:?}");
        let ok =
            parse_new(&json!({"cluster_id": 1, "configuration": {}, "node_ids": [3, 4]})).unwrap();
        assert_eq!(
            ok.target,
            Target::Nodes {
                field: "node_ids",
                ids: vec![3, 4]
            }
        );
        for (body, named) in [
            (
                json!({"cluster_id": 1, "configuration": {}, "node_ids": []}),
                "node_ids",
            ),
            (
                json!({"cluster_id": 1, "configuration": {}, "node_ids": [3, 3]}),
                "node_ids[1]",
            ),
            (
                json!({"cluster_id": "1", "configuration": {}}),
                "cluster_id",
            ),
            (json!({"configuration": {}}), "cluster_id"),
            (
                json!({"cluster_id": 1, "configuration": {"configuration_options": 1}}),
                "configuration.configuration_options",
            ),
        ] {
            let Err(StoreError::Invalid { fields, .. }) = parse_new(&body) else {
                panic!("{body} accepted")
            };
            assert_eq!(fields[0].field, named, "{body}");
        }
        let ex = parse_execute(&json!({"cluster_id": 1, "force": true, "node_role": "compute"}))
            .unwrap();
        assert!(ex.force);
        assert!(parse_execute(&json!({"cluster_id": 1, "force": "yes"})).is_err());
        let pairs = |q: &[(&str, &str)]| -> Vec<(String, String)> {
            q.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        let f = parse_filter(&pairs(&[
            ("cluster_id", "1"),
            ("is_active", "False"),
            ("node_ids", "2,3"),
        ]))
        .unwrap();
        assert!(!f.is_active);
        assert!(parse_filter(&pairs(&[("cluster_id", "1"), ("bogus", "1")])).is_err());
        assert!(parse_filter(&pairs(&[("is_active", "1")])).is_err());
    }
}
