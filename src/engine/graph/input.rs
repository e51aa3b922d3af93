//! What a plan is made from, besides the graphs: the cluster (settings, master address), its
//! nodes (roles, status, per-node data) and the deployed state (what ran successfully before,
//! with the data it ran with). Also the cluster file format `stoker graph plan --cluster` reads,
//! parsed with positions so a bad field is reported with its line. Pure: text in, values out.
//!
//! ```yaml
//! id: 1                      # CLUSTER_ID, and $.deployment_id (default 1)
//! name: env-1
//! status: new                # $.cluster.status (default new)
//! mode: ha_compact           # $.cluster.mode, $.deployment_mode (default ha_compact)
//! fuel_version: '10.0'       # default: from the release's version (newton-10.0 -> 10.0)
//! master_ip: 10.20.0.2       # MASTER_IP
//! settings:                  # common deployment data ($common): Nailgun's flattened settings
//!   deployed_before: {value: false}
//!   public_ssl: {horizon: true, services: true, cert_source: self_signed}
//! nodes:
//!   - {uid: 1, roles: [controller]}
//!   - {uid: 2, roles: [compute], status: provisioned, data: {network_scheme: {}}}
//!   - {uid: 3, roles: [cinder], user_node_name: 'Untitled (0a:01)', online: false}
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value as J;

use crate::engine::plugin::yaml::{self, Node};

/// Node statuses after which Nailgun forgets old data (the node must be redeployed whole).
pub const REDEPLOY_STATUSES: [&str; 6] = [
    "discover",
    "provisioning",
    "provisioned",
    "error",
    "stopped",
    "removing",
];

fn one() -> i64 {
    1
}
fn default_name() -> String {
    "cluster".to_string()
}
fn default_master_ip() -> String {
    "10.20.0.2".to_string()
}
fn default_hostname() -> String {
    "fuel".to_string()
}
fn ready() -> String {
    "ready".to_string()
}
fn new_status() -> String {
    "new".to_string()
}
fn ha_compact() -> String {
    "ha_compact".to_string()
}
fn yes() -> bool {
    true
}
fn empty_object() -> J {
    J::Object(Default::default())
}

fn empty_data() -> Arc<J> {
    Arc::new(empty_object())
}

/// An environment, as far as planning needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    #[serde(default = "one")]
    pub id: i64,
    #[serde(default = "default_name")]
    pub name: String,
    /// Nailgun's cluster status: `new`, `deployment`, `operational`, `error` ...
    #[serde(default = "new_status")]
    pub status: String,
    /// Nailgun's cluster mode (`ha_compact`, the only one since Fuel 7).
    #[serde(default = "ha_compact")]
    pub mode: String,
    /// The Fuel version the environment was made with; by default the release's
    /// ([`super::data::fuel_version`]).
    #[serde(default)]
    pub fuel_version: Option<String>,
    #[serde(default = "default_master_ip")]
    pub master_ip: String,
    /// `CN_HOSTNAME`.
    #[serde(default = "default_hostname")]
    pub master_hostname: String,
    /// Common deployment data, over the release's setting defaults.
    #[serde(default = "empty_object")]
    pub settings: J,
    /// Ignore old data everywhere (`$%old` is `{}`), as a forced deployment does.
    #[serde(default)]
    pub force: bool,
    /// Override the release's `roles_metadata` (role → tags, has_primary).
    #[serde(default)]
    pub roles_metadata: J,
    /// Override the release's `tags_metadata` (tag → has_primary).
    #[serde(default)]
    pub tags_metadata: J,
    /// The environment's own graph of the type planned (uploaded through Nailgun's API),
    /// merged last: a task replaces the release's or a plugin's of the same id. Not part of
    /// the cluster file.
    #[serde(skip)]
    pub tasks: Vec<(J, super::task::Source)>,
    /// The network keys of the deployment data, from the environment's stored networks
    /// (`engine::network::scheme::facts`). Not part of the cluster file.
    #[serde(skip)]
    pub network: Option<crate::engine::network::scheme::Facts>,
    /// Deployment facts an operator uploaded (`fuel2 env deployment-facts upload`). Not part
    /// of the cluster file.
    #[serde(skip)]
    pub replaced: Replaced,
}

/// Deployment facts an operator uploaded, as Nailgun's serializer applies them: `common` is
/// merged over the generated common part (`dict_update`), and a node's replace its whole
/// generated part.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Replaced {
    pub common: Option<J>,
    pub nodes: BTreeMap<String, J>,
}

impl Replaced {
    pub fn is_empty(&self) -> bool {
        self.common.is_none() && self.nodes.is_empty()
    }
}

impl Default for Cluster {
    fn default() -> Cluster {
        Cluster {
            id: 1,
            name: default_name(),
            status: new_status(),
            mode: ha_compact(),
            fuel_version: None,
            master_ip: default_master_ip(),
            master_hostname: default_hostname(),
            settings: empty_object(),
            force: false,
            roles_metadata: J::Null,
            tags_metadata: J::Null,
            tasks: Vec::new(),
            network: None,
            replaced: Replaced::default(),
        }
    }
}

fn uid_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match J::deserialize(d)? {
        J::String(s) if !s.is_empty() => Ok(s),
        J::Number(n) => Ok(n.to_string()),
        other => Err(serde::de::Error::custom(format!(
            "uid must be a non-empty string or a number, not {other}"
        ))),
    }
}

/// A node of the environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    #[serde(deserialize_with = "uid_string")]
    pub uid: String,
    /// The host name; default `node-<uid>`.
    #[serde(default)]
    pub name: Option<String>,
    /// The name an operator gave the node (Nailgun's `user_node_name`); default the host name.
    #[serde(default)]
    pub user_node_name: Option<String>,
    /// Default `<name>.domain.tld`.
    #[serde(default)]
    pub fqdn: Option<String>,
    /// Plain roles (`controller`); stoker chooses the primaries.
    pub roles: Vec<String>,
    /// `ready`, `discover`, `provisioned`, `error` ... (see [`REDEPLOY_STATUSES`]).
    #[serde(default = "ready")]
    pub status: String,
    #[serde(default)]
    pub pending_addition: bool,
    #[serde(default)]
    pub pending_deletion: bool,
    /// Tags this node keeps as primary (Nailgun's choice is sticky).
    #[serde(default)]
    pub primary: Vec<String>,
    /// Whether the node's agent is in touch (default true).
    #[serde(default = "yes")]
    pub online: bool,
    /// Node-specific deployment data, over the generated part. Shared: nodes alike (in a rack,
    /// most are) hold one copy of what can be tens of kilobytes (their volumes).
    #[serde(default = "empty_data")]
    pub data: Arc<J>,
    /// Its attributes pin CPUs for Nova (`network_metadata.nodes.<node>.nova_cpu_pinning_enabled`).
    #[serde(default)]
    pub nova_cpu_pinning: bool,
    /// Its attributes give Nova huge pages (`network_metadata.nodes.<node>.nova_hugepages_enabled`).
    #[serde(default)]
    pub nova_hugepages: bool,
}

impl NodeSpec {
    pub fn new(uid: &str, roles: &[&str]) -> NodeSpec {
        NodeSpec {
            uid: uid.to_string(),
            name: None,
            user_node_name: None,
            fqdn: None,
            roles: roles.iter().map(|r| r.to_string()).collect(),
            status: ready(),
            pending_addition: false,
            pending_deletion: false,
            primary: Vec::new(),
            online: true,
            data: empty_data(),
            nova_cpu_pinning: false,
            nova_hugepages: false,
        }
    }

    pub fn name(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("node-{}", self.uid))
    }

    /// The operator's name for the node, else its host name.
    pub fn user_node_name(&self) -> String {
        self.user_node_name.clone().unwrap_or_else(|| self.name())
    }

    pub fn fqdn(&self) -> String {
        self.fqdn
            .clone()
            .unwrap_or_else(|| format!("{}.domain.tld", self.name()))
    }

    /// Whether old data is ignored for this node (Nailgun's "needs redeploy").
    pub fn needs_redeploy(&self) -> bool {
        self.pending_addition || REDEPLOY_STATUSES.contains(&self.status.as_str())
    }
}

/// One successful deployment's data: the common part and each node's part.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub common: J,
    /// Node parts, kept as text ([`super::data::Part`]): a plan reads back the snapshot of
    /// every node a deployment ran, and 10,000 nodes' parts took some 500 MB as values.
    pub nodes: BTreeMap<String, super::data::Part>,
}

/// What ran successfully before: per node and task, the deployment that last ran it, and
/// the data of those deployments. Fed back into the next plan as `$%old`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deployed {
    /// Deployment id → its data.
    #[serde(default)]
    pub deployments: BTreeMap<String, Snapshot>,
    /// Node uid → task id → the deployment that last ran it successfully. The task ids and
    /// deployment ids are shared texts ([`Deployed::record_run`]): 10,000 nodes of 20 tasks
    /// are 200,000 entries naming a few dozen tasks and a few deployments.
    #[serde(default)]
    pub tasks: BTreeMap<String, BTreeMap<Arc<str>, Arc<str>>>,
}

impl Deployed {
    /// The deployment that last ran `task` on node `uid`, if any.
    pub fn last_run(&self, uid: &str, task: &str) -> Option<&str> {
        self.last_deployment(uid, task).map(|d| &**d)
    }

    /// [`Deployed::last_run`] as the shared text the state holds (a plan's steps hold it too:
    /// [`super::Step::compared_with`]).
    pub fn last_deployment(&self, uid: &str, task: &str) -> Option<&Arc<str>> {
        self.tasks.get(uid)?.get(task)
    }

    /// Node `uid`'s parts in the deployed snapshots.
    pub fn parts_of<'a>(&'a self, uid: &'a str) -> impl Iterator<Item = &'a super::data::Part> {
        self.deployments
            .values()
            .filter_map(move |s| s.nodes.get(uid))
    }

    /// Add deployment `id`'s snapshot; a node's part with the same text as in a snapshot
    /// already added shares that text ([`super::data::Part::same_as`]).
    pub fn add_snapshot(&mut self, id: String, mut snapshot: Snapshot) {
        for (uid, part) in snapshot.nodes.iter_mut() {
            *part = part.clone().same_as(self.parts_of(uid));
        }
        self.deployments.insert(id, snapshot);
    }

    /// Record that deployment `deployment` last ran `task` on node `uid`, sharing the texts
    /// of task and deployment ids already recorded through `names` (one map for a whole
    /// read: what it holds is only ever a copy of an id).
    pub fn record_run(
        &mut self,
        names: &mut std::collections::HashSet<Arc<str>>,
        uid: &str,
        task: &str,
        deployment: &str,
    ) {
        let mut shared = |text: &str| match names.get(text) {
            Some(t) => Arc::clone(t),
            None => {
                let t: Arc<str> = Arc::from(text);
                names.insert(Arc::clone(&t));
                t
            }
        };
        let (task, deployment) = (shared(task), shared(deployment));
        match self.tasks.get_mut(uid) {
            Some(node) => {
                node.insert(task, deployment);
            }
            None => {
                self.tasks
                    .insert(uid.to_string(), BTreeMap::from([(task, deployment)]));
            }
        }
    }

    /// Drop snapshots no task refers to, and node parts no task of that node refers to.
    pub fn prune(&mut self) {
        let mut used: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (uid, tasks) in &self.tasks {
            for dep in tasks.values() {
                used.entry(&**dep).or_default().push(uid.as_str());
            }
        }
        let used: BTreeMap<String, Vec<String>> = used
            .into_iter()
            .map(|(d, u)| (d.to_string(), u.into_iter().map(str::to_string).collect()))
            .collect();
        self.deployments.retain(|id, snap| match used.get(id) {
            Some(uids) => {
                snap.nodes.retain(|uid, _| uids.contains(uid));
                true
            }
            None => false,
        });
    }
}

/// A cluster file that cannot be used, with the position of the culprit when known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
pub struct InputError {
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub message: String,
}

const CLUSTER_KEYS: [&str; 12] = [
    "id",
    "name",
    "status",
    "mode",
    "fuel_version",
    "master_ip",
    "master_hostname",
    "settings",
    "force",
    "roles_metadata",
    "tags_metadata",
    "nodes",
];

/// Find the node a serde path (`nodes[2].roles`) points at, for its position.
fn locate<'a>(root: &'a Node, path: &str) -> &'a Node {
    let mut node = root;
    for seg in path.split('.') {
        let (key, idx) = match seg.split_once('[') {
            Some((k, rest)) => (k, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (seg, None),
        };
        if !key.is_empty() {
            match node.get(key) {
                Some(n) => node = n,
                None => return node,
            }
        }
        if let Some(i) = idx {
            match node.as_seq().and_then(|s| s.get(i)) {
                Some(n) => node = n,
                None => return node,
            }
        }
    }
    node
}

/// Parse a cluster file (YAML or JSON): the cluster and its nodes. It may produce as many
/// YAML nodes as it has bytes (at least [`yaml::MAX_NODES`]): ten thousand nodes that each
/// take the network scheme through an alias are 300,000, and an alias bomb still stops
/// within a small multiple of the file's size.
pub fn parse_cluster(file: &str, text: &str) -> Result<(Cluster, Vec<NodeSpec>), InputError> {
    let budget = yaml::Budget::new(yaml::MAX_NODES.max(text.len() as u64));
    let parsed = yaml::parse_within(file, text, &budget).map_err(|e| InputError {
        file: file.to_string(),
        line: e.pos.line,
        column: e.pos.column,
        message: e.message,
    })?;
    let root = parsed.root;
    let at = |n: &Node, message: String| InputError {
        file: file.to_string(),
        line: n.pos.line,
        column: n.pos.column,
        message,
    };
    let Some(entries) = root.as_map() else {
        return Err(at(
            &root,
            format!("a cluster file is a mapping, not {}", root.type_name()),
        ));
    };
    for (k, _) in entries {
        if !CLUSTER_KEYS.contains(&k.text.as_str()) {
            return Err(InputError {
                file: file.to_string(),
                line: k.pos.line,
                column: k.pos.column,
                message: format!(
                    "unknown key {:?}; a cluster file has {}",
                    k.text,
                    CLUSTER_KEYS.join(", ")
                ),
            });
        }
    }
    let mut json = root.to_json();
    let nodes_json = json
        .as_object_mut()
        .and_then(|o| o.remove("nodes"))
        .unwrap_or(J::Array(Vec::new()));
    let cluster: Cluster = serde_path_to_error::deserialize(&json).map_err(|e| {
        let path = e.path().to_string();
        at(locate(&root, &path), format!("{path}: {}", e.inner()))
    })?;
    let nodes: Vec<NodeSpec> = serde_path_to_error::deserialize(&nodes_json).map_err(|e| {
        let inner = e.path().to_string();
        let path = if inner == "." {
            "nodes".to_string()
        } else {
            format!("nodes{inner}")
        };
        at(locate(&root, &path), format!("{path}: {}", e.inner()))
    })?;
    if !cluster.settings.is_object() {
        return Err(at(
            root.get("settings").unwrap_or(&root),
            "settings must be a mapping".to_string(),
        ));
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, n) in nodes.iter().enumerate() {
        let here = root
            .get("nodes")
            .and_then(Node::as_seq)
            .and_then(|s| s.get(i))
            .unwrap_or(&root);
        if let Some(j) = seen.insert(&n.uid, i) {
            return Err(at(
                here,
                format!("node uid {:?} is used by nodes {j} and {i}", n.uid),
            ));
        }
        if matches!(n.uid.as_str(), "master" | "null") {
            return Err(at(
                here,
                format!("node uid {:?} is reserved for a pseudo node", n.uid),
            ));
        }
        if !n.data.is_object() {
            return Err(at(here, format!("nodes[{i}].data must be a mapping")));
        }
    }
    Ok((cluster, nodes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_cluster_file_with_defaults() {
        let (c, nodes) = parse_cluster(
            "c.yaml",
            "name: e\nsettings: {a: 1}\nnodes:\n  - {uid: 1, roles: [controller]}\n  - uid: '2'\n    roles: [compute]\n    status: provisioned\n",
        )
        .unwrap();
        assert_eq!(
            (c.id, c.name.as_str(), c.master_ip.as_str()),
            (1, "e", "10.20.0.2")
        );
        assert_eq!(nodes[0].uid, "1");
        assert_eq!(nodes[0].name(), "node-1");
        assert_eq!(nodes[0].fqdn(), "node-1.domain.tld");
        assert!(!nodes[0].needs_redeploy() && nodes[1].needs_redeploy());
    }

    #[test]
    fn errors_point_at_the_line() {
        let e = parse_cluster(
            "c.yaml",
            "nodes:\n  - {uid: 1, roles: [controller]}\n  - {uid: 2, roles: compute}\n",
        )
        .unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.contains("nodes[1].roles"), "{e}");
        // A big cluster may alias its network scheme into every node; a bomb still stops.
        let mut big = String::from(
            "nodes:\n  - {uid: 1, roles: [x], data: {s: &s {a: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30]}}}\n",
        );
        for uid in 2..=10_000 {
            big.push_str(&format!(
                "  - {{uid: {uid}, roles: [x], data: {{s: *s}}}}\n"
            ));
        }
        assert_eq!(parse_cluster("big.yaml", &big).unwrap().1.len(), 10_000);
        let mut bomb = String::from("settings:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            bomb.push_str(&format!("  a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n", p = i - 1));
        }
        let e = parse_cluster("bomb.yaml", &bomb).unwrap_err();
        assert!(e.message.contains("YAML nodes"), "{e:?}");
        let e = parse_cluster("c.yaml", "name: x\nnodez: []\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 1));
        let e = parse_cluster(
            "c.yaml",
            "nodes:\n  - {uid: 1, roles: []}\n  - {uid: 1, roles: []}\n",
        )
        .unwrap_err();
        assert!(e.message.contains("used by nodes 0 and 1"), "{e}");
        let e =
            parse_cluster("c.yaml", "nodes:\n  - {uid: 1, roles: [], colour: red}\n").unwrap_err();
        assert!(e.message.contains("colour"), "{e}");
    }

    #[test]
    fn snapshots_added_share_the_texts_of_unchanged_parts() {
        use super::super::data::Part;
        let snap = |two: i64| Snapshot {
            common: J::Null,
            nodes: BTreeMap::from([
                ("1".to_string(), Part::of(&serde_json::json!({"uid": "1"}))),
                (
                    "2".to_string(),
                    Part::of(&serde_json::json!({"uid": "2", "n": two})),
                ),
            ]),
        };
        let mut d = Deployed::default();
        d.add_snapshot("1".into(), snap(1));
        d.add_snapshot("2".into(), snap(2));
        let (a, b) = (&d.deployments["1"], &d.deployments["2"]);
        assert!(a.nodes["1"].shares_text_with(&b.nodes["1"]));
        assert!(!a.nodes["2"].shares_text_with(&b.nodes["2"]));
        assert_eq!(b.nodes["2"].text(), r#"{"n":2,"uid":"2"}"#);
    }

    #[test]
    fn prune_keeps_what_tasks_refer_to() {
        let mut d = Deployed::default();
        for id in ["1", "2"] {
            let mut s = Snapshot::default();
            s.nodes
                .insert("1".into(), super::super::data::Part::of(&J::Null));
            s.nodes
                .insert("2".into(), super::super::data::Part::of(&J::Null));
            d.deployments.insert(id.into(), s);
        }
        d.tasks
            .entry("1".into())
            .or_default()
            .insert("a".into(), "2".into());
        d.prune();
        assert_eq!(d.deployments.keys().collect::<Vec<_>>(), ["2"]);
        assert_eq!(d.deployments["2"].nodes.keys().collect::<Vec<_>>(), ["1"]);
    }
}
