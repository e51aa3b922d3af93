//! Role resolution, as Nailgun's `TagResolver` did it.
//!
//! A node's **tags** are the tags of its roles (`roles_metadata[role].tags`, default `[role]`).
//! For every tag that has a primary (`tags_metadata[tag].has_primary`, or the role's own
//! `has_primary`), exactly one node carrying it gets `primary-<tag>` *instead of* `<tag>`: the
//! node pinned with `primary: [tag]`, else the first ready node in node order, else the first
//! node. So the primary controller carries `primary-controller` and not `controller`, and tasks
//! meant for every controller list both names.
//!
//! A role value resolves to places (cluster nodes, the `master` pseudo node, the sync node):
//! `"*"` is every cluster node (not the master), `"master"` the master, `"/re/"` every tag that
//! Python's `re.match` accepts (anchored at the start only: `/controller/` matches
//! `controller-x` but not `primary-controller`), any other string one exact tag, a list the
//! union of its items. `policy: any` keeps the first node in node order (Fuel kept an arbitrary
//! one). `self` and `null` exist only in cross-depends and are handled by the graph builder.
//! Pure.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value as J;

/// Tags Fuel newton gives a primary when the release says nothing (`tags_metadata`).
pub const DEFAULT_PRIMARY_TAGS: [&str; 6] = [
    "controller",
    "rabbitmq",
    "database",
    "keystone",
    "neutron",
    "mongo",
];

/// Role → tags Fuel newton used when the release says nothing (`roles_metadata[..].tags`).
pub const DEFAULT_ROLE_TAGS: [(&str, &[&str]); 1] = [(
    "controller",
    &["controller", "rabbitmq", "database", "keystone", "neutron"],
)];

/// Fuel newton's role and tag metadata as a release would write them (`roles_metadata`,
/// `tags_metadata`), for a release that has none (a fuel-library tree), so that plugins'
/// roles merge over them instead of replacing them.
pub fn default_metadata() -> (J, J) {
    let mut roles = serde_json::Map::new();
    for (role, tags) in DEFAULT_ROLE_TAGS {
        roles.insert(
            role.to_string(),
            serde_json::json!({"tags": tags, "has_primary": DEFAULT_PRIMARY_TAGS.contains(&role)}),
        );
    }
    let tags = DEFAULT_PRIMARY_TAGS
        .iter()
        .map(|t| (t.to_string(), serde_json::json!({"has_primary": true})))
        .collect();
    (J::Object(roles), J::Object(tags))
}

/// What the resolver needs of a node.
#[derive(Debug, Clone)]
pub struct NodeRoles<'a> {
    pub roles: &'a [String],
    /// Ready nodes win the primary tags.
    pub ready: bool,
    /// Tags this node already holds as primary (sticky choice).
    pub primary: &'a [String],
    /// Pending deletion: never chosen as primary.
    pub pending_deletion: bool,
}

/// A node's final roles and tags, primaries applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assigned {
    /// Roles as deployment data shows them (`primary-controller` for the primary controller).
    pub roles: Vec<String>,
    /// Tags used to place tasks.
    pub tags: Vec<String>,
}

/// Why roles cannot be assigned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RolesError {
    #[error(
        "node {node}: role {role:?} is chosen by stoker, not assigned; give the node the role \
         {plain:?} and pin it with `primary: [{plain}]` if it must be the primary"
    )]
    PrimaryAssigned {
        node: String,
        role: String,
        plain: String,
    },
    #[error("node {node}: pinned as primary for {tag:?}, which {reason}")]
    BadPin {
        node: String,
        tag: String,
        reason: String,
    },
    #[error("nodes {first} and {second} are both pinned as primary for {tag:?}")]
    TwoPins {
        tag: String,
        first: String,
        second: String,
    },
}

/// Role and tag metadata of a release (with Fuel newton's defaults when it has none).
#[derive(Debug, Clone, Default)]
pub struct RoleMeta {
    pub role_tags: BTreeMap<String, Vec<String>>,
    pub primary_tags: BTreeSet<String>,
}

impl RoleMeta {
    /// From a release's `roles_metadata` and `tags_metadata` (either may be null).
    pub fn from_release(roles_metadata: &J, tags_metadata: &J) -> RoleMeta {
        let mut meta = RoleMeta::default();
        let roles = roles_metadata.as_object();
        let tags = tags_metadata.as_object();
        if roles.is_none() {
            for (role, t) in DEFAULT_ROLE_TAGS {
                meta.role_tags
                    .insert(role.to_string(), t.iter().map(|s| s.to_string()).collect());
            }
        }
        for (role, m) in roles.into_iter().flatten() {
            let t = super::task::names(m.get("tags"));
            if !t.is_empty() {
                meta.role_tags.insert(role.clone(), t);
            }
            if m.get("has_primary").and_then(J::as_bool) == Some(true) {
                meta.primary_tags.insert(role.clone());
            }
        }
        match tags {
            Some(tags) => {
                for (tag, m) in tags {
                    match m.get("has_primary").and_then(J::as_bool) {
                        Some(true) => {
                            meta.primary_tags.insert(tag.clone());
                        }
                        Some(false) => {
                            meta.primary_tags.remove(tag);
                        }
                        None => {}
                    }
                }
            }
            None if roles.is_none() => {
                meta.primary_tags = DEFAULT_PRIMARY_TAGS.iter().map(|s| s.to_string()).collect();
            }
            None => {}
        }
        meta
    }

    fn tags_of(&self, role: &str) -> Vec<String> {
        self.role_tags
            .get(role)
            .cloned()
            .unwrap_or_else(|| vec![role.to_string()])
    }
}

/// Give every node its tags and choose the primaries. `names[i]` names node `i` in errors.
pub fn assign(
    nodes: &[NodeRoles<'_>],
    names: &[String],
    meta: &RoleMeta,
) -> Result<Vec<Assigned>, RolesError> {
    let name = |i: usize| names.get(i).cloned().unwrap_or_else(|| i.to_string());
    let mut tags: Vec<Vec<String>> = Vec::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        let mut t: Vec<String> = Vec::new();
        for role in n.roles {
            if let Some(plain) = role.strip_prefix("primary-") {
                return Err(RolesError::PrimaryAssigned {
                    node: name(i),
                    role: role.clone(),
                    plain: plain.to_string(),
                });
            }
            for tag in meta.tags_of(role) {
                if !t.contains(&tag) {
                    t.push(tag);
                }
            }
        }
        tags.push(t);
    }
    // Pins first: each must name a primary tag the node carries, once per tag.
    let mut primary_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for tag in n.primary {
            let reason = if !meta.primary_tags.contains(tag) {
                Some("has no primary in this release")
            } else if !tags[i].contains(tag) {
                Some("the node does not carry")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(RolesError::BadPin {
                    node: name(i),
                    tag: tag.clone(),
                    reason: reason.to_string(),
                });
            }
            if let Some(&j) = primary_of.get(tag.as_str()) {
                return Err(RolesError::TwoPins {
                    tag: tag.clone(),
                    first: name(j),
                    second: name(i),
                });
            }
            primary_of.insert(tag, i);
        }
    }
    for tag in &meta.primary_tags {
        if primary_of.contains_key(tag.as_str()) {
            continue;
        }
        let candidates: Vec<usize> = (0..nodes.len())
            .filter(|&i| !nodes[i].pending_deletion && tags[i].contains(tag))
            .collect();
        let chosen = candidates
            .iter()
            .copied()
            .find(|&i| nodes[i].ready)
            .or_else(|| candidates.first().copied());
        if let Some(i) = chosen {
            primary_of.insert(tag, i);
        }
    }
    let mut out = Vec::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        let is_primary = |tag: &str| primary_of.get(tag) == Some(&i);
        let t = tags[i]
            .iter()
            .map(|tag| {
                if is_primary(tag) {
                    format!("primary-{tag}")
                } else {
                    tag.clone()
                }
            })
            .collect();
        let roles = n
            .roles
            .iter()
            .map(|role| {
                if is_primary(role) {
                    format!("primary-{role}")
                } else {
                    role.clone()
                }
            })
            .collect();
        out.push(Assigned { roles, tags: t });
    }
    Ok(out)
}

/// Places: `0..n` are cluster nodes, `n` the master, `n + 1` the sync node.
pub type Place = usize;

/// Resolves role values to places.
pub struct Resolver {
    n: usize,
    by_tag: BTreeMap<String, Vec<Place>>,
    all: Vec<Place>,
    regexes: RefCell<HashMap<String, Option<regex::Regex>>>,
}

/// How a role value resolved.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resolved {
    pub places: Vec<Place>,
    /// Set when the value had a shape Fuel warned about (and resolved to nothing).
    pub warning: Option<String>,
}

impl Resolver {
    pub fn new(assigned: &[Assigned]) -> Resolver {
        let mut by_tag: BTreeMap<String, Vec<Place>> = BTreeMap::new();
        let mut all = Vec::new();
        for (i, a) in assigned.iter().enumerate() {
            if !a.tags.is_empty() {
                all.push(i);
            }
            for t in &a.tags {
                by_tag.entry(t.clone()).or_default().push(i);
            }
        }
        Resolver {
            n: assigned.len(),
            by_tag,
            all,
            regexes: RefCell::new(HashMap::new()),
        }
    }

    pub fn master(&self) -> Place {
        self.n
    }

    pub fn sync(&self) -> Place {
        self.n + 1
    }

    /// Every tag some node carries.
    pub fn tags(&self) -> impl Iterator<Item = &str> {
        self.by_tag.keys().map(String::as_str)
    }

    /// Python `re.match(pattern, text)` (anchored at the start only), cached; `None` when the
    /// pattern does not compile.
    pub fn regex_match(&self, pattern: &str, text: &str) -> Option<bool> {
        let mut cache = self.regexes.borrow_mut();
        let re = cache
            .entry(pattern.to_string())
            .or_insert_with(|| regex::Regex::new(&format!("^(?:{pattern})")).ok());
        re.as_ref().map(|re| re.is_match(text))
    }

    fn add_item(&self, item: &str, out: &mut BTreeSet<Place>, warn: &mut Option<String>) {
        if item == "*" {
            out.extend(self.all.iter().copied());
        } else if item == "master" {
            out.insert(self.master());
        } else if let Some(pattern) = regex_name(item) {
            for (tag, places) in &self.by_tag {
                match self.regex_match(pattern, tag) {
                    Some(true) => out.extend(places.iter().copied()),
                    Some(false) => {}
                    None => {
                        *warn = Some(format!("{item:?} is not a valid regular expression"));
                        return;
                    }
                }
            }
        } else if let Some(places) = self.by_tag.get(item) {
            out.extend(places.iter().copied());
        }
    }

    /// Resolve a role value. `any` keeps the first place only.
    pub fn resolve(&self, roles: &J, any: bool) -> Resolved {
        let mut out = BTreeSet::new();
        let mut warning = None;
        match roles {
            J::String(s) => self.add_item(s, &mut out, &mut warning),
            J::Array(items) => {
                for item in items {
                    match item {
                        J::String(s) => self.add_item(s, &mut out, &mut warning),
                        other => {
                            warning = Some(format!(
                                "role list item {other} is not a string and matches no node"
                            ));
                        }
                    }
                }
            }
            other => {
                return Resolved {
                    places: Vec::new(),
                    warning: Some(format!(
                        "roles must be a string or a list of strings, not {other}; no node \
                         matches"
                    )),
                };
            }
        }
        let mut places: Vec<Place> = out.into_iter().collect();
        if any {
            places.truncate(1);
        }
        Resolved { places, warning }
    }
}

/// The pattern of a `/regex/` name.
pub fn regex_name(name: &str) -> Option<&str> {
    name.strip_prefix('/')
        .and_then(|s| s.strip_suffix('/'))
        .filter(|_| name.len() >= 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node<'a>(roles: &'a [String], ready: bool) -> NodeRoles<'a> {
        NodeRoles {
            roles,
            ready,
            primary: &[],
            pending_deletion: false,
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn exactly_one_primary_controller_preferring_ready_nodes() {
        let c = strings(&["controller"]);
        let k = strings(&["compute"]);
        let nodes = [
            node(&c, false),
            node(&c, true),
            node(&k, true),
            node(&c, true),
        ];
        let names = strings(&["1", "2", "3", "4"]);
        let meta = RoleMeta::from_release(&J::Null, &J::Null);
        let a = assign(&nodes, &names, &meta).unwrap();
        let primaries: Vec<usize> = (0..4)
            .filter(|&i| a[i].tags.contains(&"primary-controller".to_string()))
            .collect();
        assert_eq!(primaries, [1]);
        assert_eq!(a[1].roles, ["primary-controller"]);
        assert!(a[1].tags.contains(&"primary-rabbitmq".to_string()));
        assert!(!a[1].tags.contains(&"controller".to_string()));
        assert_eq!(
            a[0].tags,
            ["controller", "rabbitmq", "database", "keystone", "neutron"]
        );
        assert_eq!(a[2].tags, ["compute"]);
    }

    #[test]
    fn pins_are_sticky_and_checked() {
        let c = strings(&["controller"]);
        let pin = strings(&["controller"]);
        let nodes = [
            node(&c, true),
            NodeRoles {
                roles: &c,
                ready: true,
                primary: &pin,
                pending_deletion: false,
            },
        ];
        let names = strings(&["1", "2"]);
        let meta = RoleMeta::from_release(
            &json!({"controller": {"has_primary": true, "tags": ["controller"]}}),
            &J::Null,
        );
        let a = assign(&nodes, &names, &meta).unwrap();
        assert_eq!(a[1].tags, ["primary-controller"]);
        assert_eq!(a[0].tags, ["controller"]);
        let bad = strings(&["primary-controller"]);
        let e = assign(&[node(&bad, true)], &names, &meta).unwrap_err();
        assert!(e.to_string().contains("chosen by stoker"), "{e}");
    }

    #[test]
    fn values_resolve_like_fuel() {
        let a = vec![
            Assigned {
                roles: vec![],
                tags: strings(&["primary-controller"]),
            },
            Assigned {
                roles: vec![],
                tags: strings(&["controller"]),
            },
            Assigned {
                roles: vec![],
                tags: strings(&["compute", "controller-x"]),
            },
            Assigned {
                roles: vec![],
                tags: vec![],
            },
        ];
        let r = Resolver::new(&a);
        let p = |v: J| r.resolve(&v, false).places;
        assert_eq!(p(json!("*")), [0, 1, 2]);
        assert_eq!(p(json!(["*"])), [0, 1, 2]);
        assert_eq!(p(json!("master")), [r.master()]);
        assert_eq!(
            p(json!(["/controller/"])),
            [1, 2],
            "anchored at the start only"
        );
        assert_eq!(p(json!(["/^(primary-)?controller$/"])), [0, 1]);
        assert_eq!(p(json!(["/.*/"])), [0, 1, 2]);
        assert_eq!(p(json!(["controller", "compute"])), [1, 2]);
        assert_eq!(r.resolve(&json!("/.*/"), true).places, [0]);
        assert!(r.resolve(&json!(5), false).warning.is_some());
        assert!(r.resolve(&json!(["/(/"]), false).warning.is_some());
    }
}
