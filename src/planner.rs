//! An environment's deployment plan, from what the master holds: the environment and its nodes
//! and settings from the store, the release's and the enabled plugins' graphs from the installed
//! packages under the data directory, and the deployed state of earlier runs. Gathers them and
//! calls the pure [`crate::engine::graph::plan`]; decides nothing itself and writes nothing
//! (a deployment records what it ran: [`crate::store`]'s `create_deployment`).
//!
//! A plugin is enabled in an environment the way Fuel marked it in the cluster attributes: its
//! settings hold `<plugin name>: {metadata: {enabled: true}}`, and when several versions of it
//! are installed `metadata.chosen_id` says which ([`crate::engine::settings::enabled_plugins`]);
//! settings that enable a plugin without saying which of its versions are no plan.
//!
//! [`Plans`] is planning as the daemon does it: within the configured YAQL budget, keeping the
//! last plan of each environment for as long as nothing it is made from changes, so a page
//! view does not plan again.
//!
//! [`accepts`] gathers what an environment accepts from the same sources: the roles of its
//! release and enabled plugins (an assignment naming another role is refused), and the setting
//! attributes of its release and of the plugins it can enable
//! ([`crate::engine::settings::Schema`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use sha2::{Digest, Sha256};

use serde_json::Value as J;

use crate::engine::attributes::PluginAttributes;
use crate::engine::graph::preview::Preview;
use crate::engine::graph::{self, NodeSpec, Plan, PlanError};
use crate::engine::plugin::release::for_release;
use crate::engine::settings::{Installed, Schema, enabled_plugins as choose_plugins, enables};
use crate::model::{Cluster, FieldError, Node, NodeStatus, Release};
use crate::package::graphs::{GraphSourceError, OpenedRelease, open_plugin, open_release};
use crate::store::{GraphOwner, Store, StoreError, StoredGraph};
use crate::yaql::{Engine, Limits};

/// Why no plan could be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanningError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("environment {0} not found")]
    NoCluster(i64),
    #[error("environment {0} has no nodes; assign nodes with roles first")]
    NoNodes(String),
    #[error("release {release}: {source}")]
    Release {
        release: String,
        #[source]
        source: GraphSourceError,
    },
    #[error("plugin {plugin}: {source}")]
    Plugin {
        plugin: String,
        #[source]
        source: GraphSourceError,
    },
    /// The settings enable a plugin without one version of it (each problem names its field
    /// and the plugin's versions).
    #[error(
        "the environment's settings do not enable one version of each plugin: {}",
        FieldError::joined(.0)
    )]
    PluginChoice(Vec<FieldError>),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Volumes(crate::volumes::VolumesError),
    /// A failure kept with the plan it stopped (see [`Plans`]).
    #[error(transparent)]
    Kept(Arc<PlanningError>),
}

impl PlanningError {
    /// A stable code for API clients.
    pub fn code(&self) -> &'static str {
        match self {
            PlanningError::Store(e) => e.code(),
            PlanningError::NoCluster(_) => "not_found",
            PlanningError::NoNodes(_) => "no_nodes",
            PlanningError::Release { .. } | PlanningError::Plugin { .. } => "bad_package",
            PlanningError::PluginChoice(_) => "plugin_conflict",
            PlanningError::Plan(_) => "plan_failed",
            PlanningError::Volumes(crate::volumes::VolumesError::Store(e)) => e.code(),
            PlanningError::Volumes(_) => "bad_package",
            PlanningError::Kept(e) => e.code(),
        }
    }

    /// The release has no graph of the type asked for (a release may have no deletion graph).
    /// The environment has no nodes to plan for (kept or not).
    pub fn is_no_nodes(&self) -> bool {
        match self {
            PlanningError::NoNodes(_) => true,
            PlanningError::Kept(e) => e.is_no_nodes(),
            _ => false,
        }
    }

    pub fn is_missing_graph(&self) -> bool {
        matches!(
            self,
            PlanningError::Release {
                source: GraphSourceError::Source {
                    source: graph::source::SourceError::NoGraph { .. },
                    ..
                },
                ..
            }
        )
    }
}

/// Everything a plan was made from, kept so a successful run can be recorded against it.
#[derive(Debug, Clone)]
pub struct EnvironmentPlan {
    pub cluster: Cluster,
    pub release: Release,
    pub nodes: Vec<Node>,
    pub plan: Plan,
}

/// The status a node has for the planner (Nailgun's names; old data is ignored for the
/// statuses in [`graph::input::REDEPLOY_STATUSES`]). Its host name is the node's (Nailgun's
/// `node-<id>` unless an operator set one; the `configure` step's too), its `fqdn` that under
/// `domain.tld`; the name the operator sees is its `user_node_name`.
fn spec_of(
    node: &Node,
    layout: Layout<'_>,
    vms_conf: Option<J>,
    attributes: &J,
    openstack: &[crate::store::OpenstackConfig],
    alike: &mut AlikeData,
) -> NodeSpec {
    let mut spec = NodeSpec::new(&node.id.to_string(), &[]);
    // Nailgun's volume_manager extension adds the node's volumes to its part of the data,
    // and its VMs' configuration is the node's (both as stored or, for volumes, defaulted);
    // its OpenStack configuration is the environment's, its roles' and its own, merged.
    let (configuration, options) =
        crate::openstack_config::for_node(openstack, node.id, &node.roles);
    // Nailgun 10's DeploymentHASerializer90: CPU pinning and huge pages from its attributes.
    let derived = crate::node_attributes::deployment(attributes, node.inventory.cpu.count);
    spec.data = alike.data(layout, vms_conf, configuration, options, derived.data);
    spec.nova_cpu_pinning = derived.nova_cpu_pinning;
    spec.nova_hugepages = derived.nova_hugepages;
    spec.roles.clone_from(&node.roles);
    spec.name = Some(node.hostname.clone());
    spec.user_node_name = Some(node.name.clone());
    spec.status = node.status.as_str().to_string();
    spec.pending_addition = node.status == NodeStatus::Discover;
    spec.pending_deletion = node.pending_deletion;
    spec
}

/// A node's volumes: [`crate::volumes::Volumes::layout_of`] (an index that nodes alike in
/// roles, disks and memory share, and the layout), or none.
type Layout<'a> = Option<(usize, &'a [J])>;

/// Nodes' own deployment data ([`NodeSpec::data`]), one copy per distinct data: a rack's
/// nodes mostly share their volumes, VMs' and OpenStack configurations and attributes, and
/// the volumes alone are tens of kilobytes a node (hundreds of megabytes at 10,000 nodes when
/// each node held its own).
#[derive(Default)]
struct AlikeData {
    /// By volumes' layout and the compact text of everything else the data is made from.
    made: HashMap<(Option<usize>, String), Arc<J>>,
}

impl AlikeData {
    fn data(
        &mut self,
        layout: Layout<'_>,
        vms_conf: Option<J>,
        configuration: J,
        options: J,
        derived: J,
    ) -> Arc<J> {
        let vms_conf = vms_conf.unwrap_or_else(|| serde_json::json!([]));
        let rest = [vms_conf, configuration, options, derived];
        // The data is a function of the layout and these alone: the same text, the same data.
        let text = rest.iter().map(J::to_string).collect::<Vec<_>>().join(",");
        let (index, volumes) = layout.map_or((None, &[][..]), |(i, v)| (Some(i), v));
        let made = self.made.entry((index, text)).or_insert_with(|| {
            let [vms_conf, configuration, options, derived] = rest;
            let mut data = serde_json::json!({
                "node_volumes": volumes,
                "vms_conf": vms_conf,
                "configuration": configuration,
                "configuration_options": options,
            });
            crate::engine::graph::data::deep_merge(&mut data, &derived);
            Arc::new(data)
        });
        Arc::clone(made)
    }
}

/// The installed plugins an environment of the release with plugin id `release_plugin` may
/// enable: every one but the release's own.
pub(crate) fn installed(
    plugins: &[(i64, String, String, String)],
    release_plugin: i64,
) -> Vec<Installed> {
    plugins
        .iter()
        .filter(|(id, ..)| *id != release_plugin)
        .map(|(id, name, version, _)| Installed {
            id: *id,
            name: name.clone(),
            version: version.clone(),
        })
        .collect()
}

/// Everything a plan of one environment is made from, as the store holds it.
struct Inputs {
    cluster: Cluster,
    release: Release,
    nodes: Vec<Node>,
    /// Each node's volumes (Nailgun's full format), in the order of `nodes`.
    volumes: crate::volumes::Volumes,
    /// Each node's VMs' configuration, in the order of `nodes`.
    vms_conf: Vec<Option<J>>,
    /// Each node's attributes (the release's with its stored values), in the order of
    /// `nodes`.
    attributes: Vec<J>,
    /// Roles and tags the API created, changed or deleted.
    meta: crate::roles::PlanMeta,
    settings: J,
    deployed: graph::Deployed,
    plugins: Vec<(i64, String, String, String)>,
    /// The uploaded graphs of the type planned: the release's, the environment's, plugins'.
    stored: Vec<StoredGraph>,
    /// The environment's active OpenStack configurations, oldest first.
    openstack: Vec<crate::store::OpenstackConfig>,
    /// What the deployment data's network keys are made from, when the environment has
    /// networks.
    network: Option<NetworkRows>,
    /// Deployment facts an operator uploaded, by uid (`common` and node ids).
    replaced: BTreeMap<String, J>,
}

/// What an environment's network keys are made from, as the store holds it (`None` for an
/// environment without stored networks: the daemon gives them at start). Read with the other
/// inputs; the keys themselves ([`NetworkRows::facts`]) are computed only when a plan is made,
/// not each time a kept plan is checked.
#[derive(Debug)]
struct NetworkRows {
    cluster: crate::engine::network::scheme::ClusterNets,
    roles: J,
    settings: J,
    /// Interfaces operators set, by node.
    interfaces: BTreeMap<i64, J>,
    /// Each node's addresses by network name (not the admin network's: its lease).
    held: BTreeMap<i64, BTreeMap<String, String>>,
}

impl NetworkRows {
    fn read(r: &crate::store::ReadTxn<'_>, cluster: &Cluster) -> Result<Option<Self>, StoreError> {
        use crate::engine::network::{alloc, model::ADMIN, scheme};
        let Some((parameters, _)) = r.network_config(cluster.id)? else {
            return Ok(None);
        };
        let networks = r.cluster_networks(cluster.id)?;
        let network_roles = r.release_value(cluster.release_id, "network_roles_metadata")?;
        let settings = r.cluster_settings(cluster.id)?;
        let addresses = r.addresses(cluster.id)?;
        let vips = alloc::vips_of(&network_roles)
            .into_iter()
            .map(|(spec, _)| {
                let ip = addresses.iter().find_map(|a| match &a.owner {
                    alloc::Owner::Vip { name, .. } if *name == spec.name => Some(a.ip.clone()),
                    _ => None,
                });
                (spec, ip)
            })
            .collect();
        let tenant = settings
            .pointer("/access/tenant")
            .map(|v| v.get("value").unwrap_or(v).clone())
            .unwrap_or(J::String("admin".into()));
        let names: HashMap<i64, &str> = networks.iter().map(|n| (n.id, n.name.as_str())).collect();
        let mut held: BTreeMap<i64, BTreeMap<String, String>> = BTreeMap::new();
        for a in &addresses {
            if let alloc::Owner::Node(n) = a.owner
                && let Some(net) = names.get(&a.network_id).filter(|net| **net != ADMIN)
            {
                held.entry(n)
                    .or_default()
                    .insert(net.to_string(), a.ip.clone());
            }
        }
        Ok(Some(NetworkRows {
            cluster: scheme::ClusterNets {
                networks,
                parameters,
                network_roles,
                vips,
                tenant,
            },
            roles: r.release_value(cluster.release_id, "roles_metadata")?,
            settings,
            interfaces: r.cluster_node_interfaces(cluster.id)?.into_iter().collect(),
            held,
        }))
    }

    /// The deployment data's network keys for `nodes`.
    fn facts(mut self, nodes: &[Node]) -> crate::engine::network::scheme::Facts {
        use crate::engine::network::{alloc, model::ADMIN, nic, scheme};
        let mut per_node = Vec::with_capacity(nodes.len());
        for node in nodes {
            let public = alloc::should_have_public(&node.roles, &self.roles, &self.settings);
            let interfaces = match self.interfaces.remove(&node.id) {
                Some(J::Array(list)) => list,
                _ => nic::default_assignment(
                    nic::nics(&node.inventory, node.mac.as_str(), &J::Null),
                    &alloc::node_networks(&self.cluster.networks, public),
                ),
            };
            // Its admin address is its DHCP lease (not allocated: `alloc`'s module text).
            let mut addresses = self.held.remove(&node.id).unwrap_or_default();
            if let Some(ip) = &node.address {
                addresses.insert(ADMIN.to_string(), ip.clone());
            }
            per_node.push((
                node.id.to_string(),
                scheme::NodeNets {
                    interfaces,
                    addresses,
                    public,
                },
                node.pending_deletion,
            ));
        }
        scheme::facts(&self.cluster, &per_node)
    }
}

/// What a plan of the environment is made from, and the plan revision it was read at (in the
/// same snapshot).
fn read_inputs(
    store: &Store,
    cluster_id: i64,
    graph_type: &str,
) -> Result<(Inputs, i64), PlanningError> {
    store
        .read(|r| {
            let revision = r.plan_revision()?;
            let Some((cluster, release)) = r.cluster_with_release(cluster_id)? else {
                return Ok(None);
            };
            let plugins = r.plugin_paths()?;
            let mut stored = Vec::new();
            let owners = [
                GraphOwner::Release(release.id),
                GraphOwner::Cluster(cluster_id),
            ]
            .into_iter()
            .chain(plugins.iter().map(|(id, ..)| GraphOwner::Plugin(*id)));
            for owner in owners {
                stored.extend(r.stored_graph(owner, graph_type)?);
            }
            let nodes = r.nodes_to_plan(cluster_id)?;
            let mut vms = r.node_documents(cluster_id, crate::store::NodeDocument::VmsConf)?;
            let vms_conf = nodes.iter().map(|n| vms.remove(&n.id)).collect();
            let node_meta = crate::node_attributes::metadata_of(r, release.id)?;
            let mut stored_attrs =
                r.node_documents(cluster_id, crate::store::NodeDocument::Attributes)?;
            let attributes = nodes
                .iter()
                .map(|n| {
                    crate::node_attributes::current(&node_meta, stored_attrs.remove(&n.id).as_ref())
                })
                .collect();
            let volumes = crate::volumes::of_nodes(r, cluster_id, &nodes)?;
            let network = NetworkRows::read(r, &cluster)?;
            Ok(Some((
                Inputs {
                    network,
                    meta: crate::roles::plan_meta(r, release.id, cluster_id)?,
                    nodes,
                    volumes,
                    vms_conf,
                    attributes,
                    settings: r.cluster_settings(cluster_id)?,
                    deployed: r.deployed(cluster_id)?,
                    openstack: r.openstack_configs(cluster_id, Some(true))?,
                    plugins,
                    stored,
                    replaced: r.uploaded_facts(cluster_id, crate::store::FactsKind::Deployment)?,
                    cluster,
                    release,
                },
                revision,
            )))
        })?
        .ok_or(PlanningError::NoCluster(cluster_id))
}

/// Plan an environment's `graph` (`default`, `provisioning`, ...) from what the store holds,
/// its YAQL work within `budget` steps ([`graph::build`]'s budget). [`Plans`] calls it.
fn plan_inputs(
    inputs: Inputs,
    data_dir: &Path,
    graph_type: &str,
    budget: u64,
) -> Result<EnvironmentPlan, PlanningError> {
    let Inputs {
        cluster,
        release,
        nodes,
        volumes,
        vms_conf,
        attributes,
        meta,
        settings,
        deployed,
        plugins,
        stored,
        network,
        replaced,
        openstack,
    } = inputs;
    if nodes.is_empty() {
        return Err(PlanningError::NoNodes(cluster.name));
    }
    let chosen = choose_plugins(&settings, &installed(&plugins, release.plugin_id))
        .map_err(PlanningError::PluginChoice)?;
    let release_path = plugins
        .iter()
        .find(|(id, ..)| *id == release.plugin_id)
        .map(|(.., path)| data_dir.join(path))
        .ok_or_else(|| StoreError::NotFound {
            entity: "plugin",
            id: release.plugin_id.to_string(),
        })?;
    let stored_of = |owner: GraphOwner| stored.iter().find(|g| g.owner == owner);
    let release_stored = stored_of(GraphOwner::Release(release.id));
    let own = stored_of(GraphOwner::Cluster(cluster.id));
    let open = |graph: &str| {
        open_release(
            &release_path.to_string_lossy(),
            Some(&release.name),
            graph,
            None,
        )
        .map_err(|source| PlanningError::Release {
            release: release.name.clone(),
            source: source.relative_to(data_dir),
        })
    };
    let mut opened = match open(graph_type) {
        // A type only uploaded graphs define: the release's roles and settings still count.
        Err(e)
            if e.is_missing_graph()
                && (release_stored.is_some() || own.is_some())
                && graph_type != "default" =>
        {
            let mut o = open("default").map_err(|_| e)?;
            o.graph.tasks.clear();
            o
        }
        other => other?,
    };
    if let Some(g) = release_stored {
        opened.graph.tasks = uploaded(g, &format!("release {}", release.name));
    }
    if let Some(repos) = &meta.release_repos {
        crate::release_repos::apply_to_settings(&mut opened.graph.settings, repos);
    }
    if let Some(roles) = meta.release_roles {
        opened.graph.roles_metadata = roles;
    }
    if let Some(tags) = meta.release_tags {
        opened.graph.tags_metadata = tags;
    }
    let mut plugin_graphs = enabled_plugins(&plugins, &chosen, data_dir, &opened, graph_type)?;
    for p in &mut plugin_graphs {
        if let Some(g) = stored_of(GraphOwner::Plugin(p.id)) {
            p.tasks = uploaded(g, &p.name);
        }
    }
    let spec = graph::Cluster {
        id: cluster.id,
        name: cluster.name.clone(),
        status: cluster.status.clone(),
        settings,
        tasks: own
            .map(|g| uploaded(g, &format!("environment {}", cluster.name)))
            .unwrap_or_default(),
        network: network.map(|rows| rows.facts(&nodes)),
        roles_metadata: meta.cluster_roles,
        tags_metadata: meta.cluster_tags,
        replaced: {
            let mut nodes = replaced;
            graph::Replaced {
                common: nodes.remove(crate::store::COMMON),
                nodes,
            }
        },
        ..graph::Cluster::default()
    };
    let mut alike = AlikeData::default();
    let specs: Vec<NodeSpec> = nodes
        .iter()
        .zip(vms_conf)
        .zip(&attributes)
        .enumerate()
        .map(|(i, ((n, vms), attrs))| {
            spec_of(n, volumes.layout_of(i), vms, attrs, &openstack, &mut alike)
        })
        .collect();
    drop(alike);
    let engine = Engine::new(Limits::default());
    let plan = graph::plan_within(
        &engine,
        budget,
        &spec,
        &specs,
        &opened.graph,
        &plugin_graphs,
        &deployed,
    )?;
    Ok(EnvironmentPlan {
        cluster,
        release,
        nodes,
        plan,
    })
}

/// An uploaded graph's tasks, each with where it came from (`origin`, the graph's type and
/// the task's place in it).
fn uploaded(g: &StoredGraph, origin: &str) -> Vec<(J, graph::Source)> {
    g.tasks
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| {
            let file = format!("uploaded graph {} (id {}) tasks[{i}]", g.graph_type, g.id);
            (t.clone(), graph::Source::new(origin, &file, 0))
        })
        .collect()
}

/// Nodes whose tasks a plan's preview lists (the environment page's); the text plan has
/// every node's.
pub const PREVIEW_NODES: usize = 25;

/// A plan answered by [`Plans::plan`], and whether it was made for this call.
#[derive(Debug, Clone)]
pub struct Planned {
    pub plan: Result<Arc<EnvironmentPlan>, Arc<PlanningError>>,
    /// When it was made (the caller's `now` then).
    pub made_at: i64,
    /// It was made earlier, from the same inputs.
    pub cached: bool,
    /// Its preview once a page has asked for one; shared with its kept entry.
    preview: PreviewCell,
}

impl Planned {
    /// `plan`, made at `made_at` for this call.
    fn made(plan: Result<Arc<EnvironmentPlan>, Arc<PlanningError>>, made_at: i64) -> Planned {
        Planned {
            plan,
            made_at,
            cached: false,
            preview: Arc::default(),
        }
    }

    /// The plan as a page shows it.
    pub fn shown(&self) -> Shown {
        Shown {
            made_at: self.made_at,
            cached: self.cached,
            held: match &self.plan {
                Ok(p) => Held::Plan(Arc::clone(p), Arc::clone(&self.preview)),
                Err(e) => Held::Failed(Arc::clone(e)),
            },
        }
    }
}

/// A plan as a page shows it: [`Planned::shown`], or [`Plans::kept`] without planning.
#[derive(Debug, Clone)]
pub struct Shown {
    /// When it was made.
    pub made_at: i64,
    /// It was made earlier than the call that answered it.
    pub cached: bool,
    held: Held,
}

impl Shown {
    /// Its preview, or why there is no plan. The first page to ask for a plan's preview makes
    /// it, walking every step (tens of milliseconds at 10,000 nodes: call it off the async
    /// workers); every later one, and the plan's kept entry, share it.
    pub fn preview(&self) -> Result<Arc<Preview>, Arc<PlanningError>> {
        match &self.held {
            Held::Plan(plan, cell) => {
                Ok(Arc::clone(cell.get_or_init(|| {
                    Arc::new(Preview::of(&plan.plan, PREVIEW_NODES))
                })))
            }
            Held::Shown(preview) => Ok(Arc::clone(preview)),
            Held::Failed(e) => Err(Arc::clone(e)),
        }
    }
}

/// A plan's preview, made the first time a page asks for it.
type PreviewCell = Arc<OnceLock<Arc<Preview>>>;

/// What a kept entry holds of its plan.
#[derive(Debug, Clone)]
enum Held {
    /// The plan, and its preview once a page has asked for it.
    Plan(Arc<EnvironmentPlan>, PreviewCell),
    /// Its successor is being made: only its preview is left ([`Cached::shown_only`]).
    Shown(Arc<Preview>),
    /// Why there is no plan: the plan was refused, or the environment has no nodes.
    Failed(Arc<PlanningError>),
}

/// The last plan made of one environment, the digest of what it was made from, and the plan
/// revision (`store::revision`) those inputs were read at.
struct Cached {
    key: [u8; 32],
    revision: i64,
    held: Held,
    made_at: i64,
    /// False once its successor is being made ([`Cached::shown_only`]): it is then only shown,
    /// never answered as a plan to deploy or record from.
    whole: bool,
}

impl Cached {
    /// `planned`, made from inputs of digest `key` read at `revision`, kept.
    fn new(key: [u8; 32], revision: i64, planned: &Planned) -> Cached {
        Cached {
            key,
            revision,
            held: planned.shown().held,
            made_at: planned.made_at,
            whole: true,
        }
    }

    /// The plan to answer a caller with, unless its successor is being made.
    fn answer(&self, cached: bool) -> Option<Planned> {
        if !self.whole {
            return None;
        }
        let (plan, preview) = match &self.held {
            Held::Plan(p, cell) => (Ok(Arc::clone(p)), Arc::clone(cell)),
            Held::Failed(e) => (Err(Arc::clone(e)), Arc::default()),
            Held::Shown(_) => return None,
        };
        Some(Planned {
            plan,
            made_at: self.made_at,
            cached,
            preview,
        })
    }

    /// The plan is stale and its successor is being made: it is never answered again, and
    /// the plan itself goes (its steps, 148 MB at 10,000 nodes by heaptrack, the nodes' rows it
    /// was made from and the deployment data it would record) instead of sitting beside its
    /// successor's at the peak of the making. What [`Plans::kept`] shows of it meanwhile is
    /// its preview, made now if no page asked for it yet: the caller makes it from the plan
    /// returned, outside the entry's lock, and puts it back with [`Cached::shown`].
    fn shown_only(&mut self) -> Option<(Arc<EnvironmentPlan>, PreviewCell)> {
        self.whole = false;
        match &self.held {
            Held::Plan(p, cell) => Some((Arc::clone(p), Arc::clone(cell))),
            Held::Shown(_) | Held::Failed(_) => None,
        }
    }

    /// Keep only `preview` of a plan being replaced (made `made_at`).
    fn shown(&mut self, made_at: i64, preview: Arc<Preview>) {
        if !self.whole && self.made_at == made_at && matches!(self.held, Held::Plan(..)) {
            self.held = Held::Shown(preview);
        }
    }
}

/// One environment's kept plan of one graph type. `making` is held by the one caller making a
/// new plan (for seconds at thousands of nodes); `kept` only while the plan is read or
/// replaced, so the kept plan stays readable while its successor is made.
#[derive(Default)]
struct SlotCell {
    kept: Mutex<Option<Cached>>,
    making: Mutex<()>,
}

type Slot = Arc<SlotCell>;

/// Planning as the daemon does it: within the configured YAQL budget, and with the last plan
/// of each environment kept, so pages do not plan again on every view.
///
/// A kept plan is used while nothing it is made from has changed: the graph type, the budget,
/// the environment's row, its release, its nodes (ids, names, roles, statuses, volumes, VMs'
/// configurations, attributes), its settings, its active OpenStack configurations, the
/// deployed state, and the installed plugins (ids, names, versions, directories and loaded
/// manifests, which `plugin sync` refreshes). Each call first reads the store's plan revision,
/// one row that every change of those inputs moves (`store::revision`): the same revision as
/// the kept plan's inputs were read at answers the kept plan without reading anything else.
/// Otherwise it reads the inputs and compares a SHA-256 digest of them with the kept plan's;
/// any change makes a new plan, which replaces it. A plan that failed is kept the same way
/// when its failure follows from those inputs (the plan was refused, or the environment has no
/// nodes); a store or package error is not kept. One environment is planned by one caller at
/// a time: another waits, then finds the new plan; meanwhile [`Plans::kept`] answers the plan
/// being replaced without waiting. An environment that is gone loses its entry on its next
/// call.
pub struct Plans {
    budget: u64,
    /// Per environment and graph type: a Deploy that plans the deletion graph does not throw
    /// away the deployment graph's plan the environment's page keeps using.
    slots: Mutex<HashMap<(i64, String), Slot>>,
    made: AtomicU64,
    /// Environments a Deploy is being prepared for, with how many ([`Plans::deploying`]).
    deploying: Mutex<HashMap<i64, usize>>,
}

/// Held while a Deploy of one environment is prepared (planned, its runs made and stored):
/// [`Plans::is_deploying`] says so until it is dropped.
pub struct Deploying<'a> {
    plans: &'a Plans,
    cluster_id: i64,
}

impl Drop for Deploying<'_> {
    fn drop(&mut self) {
        let mut deploying = lock(&self.plans.deploying);
        if let Some(n) = deploying.get_mut(&self.cluster_id) {
            *n -= 1;
            if *n == 0 {
                deploying.remove(&self.cluster_id);
            }
        }
    }
}

impl std::fmt::Debug for Plans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plans")
            .field("budget", &self.budget)
            .field("made", &self.made())
            .finish_non_exhaustive()
    }
}

impl Plans {
    pub fn new(budget: u64) -> Plans {
        Plans {
            budget,
            slots: Mutex::new(HashMap::new()),
            made: AtomicU64::new(0),
            deploying: Mutex::new(HashMap::new()),
        }
    }

    /// The YAQL budget of a plan, in steps.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// How many plans were made (not answered from the cache) since start.
    pub fn made(&self) -> u64 {
        self.made.load(Ordering::Relaxed)
    }

    /// The plan last made of environment `cluster_id`'s `graph_type`, whatever changed since,
    /// without reading the store: what a page shows while a deployment runs, when every node's
    /// status change would otherwise make a new plan per view (seconds at thousands of nodes).
    ///
    /// For showing only: while its successor is made, only the plan's preview is left
    /// ([`Cached::shown_only`]). Deploy through [`Plans::plan`].
    pub fn kept(&self, cluster_id: i64, graph_type: &str) -> Option<Shown> {
        let slot = lock(&self.slots)
            .get(&(cluster_id, graph_type.to_string()))
            .cloned()?;
        let kept = lock(&slot.kept);
        kept.as_ref().map(|c| Shown {
            made_at: c.made_at,
            cached: true,
            held: c.held.clone(),
        })
    }

    /// Whether a caller is making a new plan of environment `cluster_id`'s `graph_type` now
    /// (one that another call would wait for).
    pub fn making(&self, cluster_id: i64, graph_type: &str) -> bool {
        lock(&self.slots)
            .get(&(cluster_id, graph_type.to_string()))
            .is_some_and(|slot| {
                matches!(
                    slot.making.try_lock(),
                    Err(std::sync::TryLockError::WouldBlock)
                )
            })
    }

    /// A Deploy of environment `cluster_id` is being prepared until the answer is dropped. Its
    /// own plan is the one to show meanwhile: a page that planned again beside it would read
    /// every input again (its revision moves as the deployment is stored), some 200 MB at
    /// 10,000 nodes, at the moment the Deploy holds its runs.
    pub fn deploying(&self, cluster_id: i64) -> Deploying<'_> {
        *lock(&self.deploying).entry(cluster_id).or_default() += 1;
        Deploying {
            plans: self,
            cluster_id,
        }
    }

    /// Whether a Deploy of environment `cluster_id` is being prepared now.
    pub fn is_deploying(&self, cluster_id: i64) -> bool {
        lock(&self.deploying).contains_key(&cluster_id)
    }

    /// Environment `cluster_id`'s plan of `graph_type`: the kept one when its inputs are
    /// unchanged, else a new one (kept, `made_at` = `now`).
    pub fn plan(
        &self,
        store: &Store,
        data_dir: &Path,
        cluster_id: i64,
        graph_type: &str,
        now: i64,
    ) -> Result<Planned, PlanningError> {
        self.plan_with(store, data_dir, cluster_id, graph_type, false, now)
    }

    /// [`Plans::plan`], or with `force` the plan of every task as if nothing had been
    /// deployed (`changed()` and `new()` all true: Nailgun's redeploy), kept apart.
    pub fn plan_with(
        &self,
        store: &Store,
        data_dir: &Path,
        cluster_id: i64,
        graph_type: &str,
        force: bool,
        now: i64,
    ) -> Result<Planned, PlanningError> {
        self.plan_as(store, data_dir, cluster_id, graph_type, force, false, now)
    }

    /// The deployment graph's plan as it would be without the deployment facts an operator
    /// uploaded (Nailgun's `ignore_customized`: `deployment-facts download --default`), kept
    /// apart.
    pub fn generated(
        &self,
        store: &Store,
        data_dir: &Path,
        cluster_id: i64,
        now: i64,
    ) -> Result<Planned, PlanningError> {
        self.plan_as(store, data_dir, cluster_id, "default", false, true, now)
    }

    #[allow(clippy::too_many_arguments)]
    fn plan_as(
        &self,
        store: &Store,
        data_dir: &Path,
        cluster_id: i64,
        graph_type: &str,
        force: bool,
        generated: bool,
        now: i64,
    ) -> Result<Planned, PlanningError> {
        let slot_name = match (force, generated) {
            (true, _) => format!("{graph_type}, every task"),
            (false, true) => format!("{graph_type}, generated"),
            (false, false) => graph_type.to_string(),
        };
        let slot = Arc::clone(
            lock(&self.slots)
                .entry((cluster_id, slot_name))
                .or_default(),
        );
        // Nothing changed since the kept plan's inputs were read: it holds, unread.
        if let Some(p) = kept_at(&slot, store.read(|r| r.plan_revision())?) {
            return Ok(p);
        }
        // One caller makes the plan; another waits here, then finds it made at the revision
        // it would read. The kept plan stays readable meanwhile ([`Plans::kept`]).
        let _making = lock(&slot.making);
        if let Some(p) = kept_at(&slot, store.read(|r| r.plan_revision())?) {
            return Ok(p);
        }
        let read = read_inputs(store, cluster_id, graph_type).and_then(|(mut inputs, revision)| {
            if force {
                inputs.deployed = graph::Deployed::default();
            }
            if generated {
                inputs.replaced.clear();
            }
            let manifests = store.read(|r| r.plugin_manifests())?;
            Ok((inputs, manifests, revision))
        });
        let (inputs, manifests, revision) = match read {
            Ok(r) => r,
            Err(e) => {
                if matches!(e, PlanningError::NoCluster(_)) {
                    lock(&self.slots).retain(|(c, _), _| *c != cluster_id);
                }
                return Err(e);
            }
        };
        let key = digest(&inputs, &manifests, graph_type, self.budget);
        if let Some(c) = lock(&slot.kept).as_mut()
            && c.key == key
            && let Some(p) = c.answer(true)
        {
            // The same inputs at a newer revision (something unread by plans moved it, or a
            // change was undone): the next call can answer at this one unread.
            c.revision = c.revision.max(revision);
            return Ok(p);
        }
        // Stale: a successor is made now.
        retire(&slot);
        self.made.fetch_add(1, Ordering::Relaxed);
        // Seconds of CPU at thousands of nodes, on both cores: niced, so that the agents' calls
        // and the pages go first while it runs.
        let plan = match crate::priority::niced(crate::priority::BACKGROUND, || {
            plan_inputs(inputs, data_dir, graph_type, self.budget)
        }) {
            Ok(p) => Ok(Arc::new(p)),
            Err(
                e @ (PlanningError::Plan(_)
                | PlanningError::NoNodes(_)
                | PlanningError::PluginChoice(_)),
            ) => Err(Arc::new(e)),
            Err(e) => {
                *lock(&slot.kept) = None;
                return Err(e);
            }
        };
        let planned = Planned::made(plan, now);
        *lock(&slot.kept) = Some(Cached::new(key, revision, &planned));
        Ok(planned)
    }
}

/// The slot's kept plan is stale and its successor is about to be made: only its preview is
/// kept ([`Cached::shown_only`]), made here, outside the entry's lock, if no page asked yet.
fn retire(slot: &SlotCell) {
    let taken = lock(&slot.kept)
        .as_mut()
        .and_then(|c| Some((c.shown_only()?, c.made_at)));
    if let Some(((plan, cell), made_at)) = taken {
        let preview =
            Arc::clone(cell.get_or_init(|| Arc::new(Preview::of(&plan.plan, PREVIEW_NODES))));
        drop(plan);
        if let Some(c) = lock(&slot.kept).as_mut() {
            c.shown(made_at, preview);
        }
    }
}

/// The slot's kept plan when its inputs were read at `revision`.
fn kept_at(slot: &SlotCell, revision: i64) -> Option<Planned> {
    let kept = lock(&slot.kept);
    kept.as_ref()
        .filter(|c| c.revision == revision)?
        .answer(true)
}

/// A lock whose holder panicked is still usable: the data is replaced whole, never half-made.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The digest of everything a plan is made from (see [`Plans`]).
fn digest(inputs: &Inputs, manifests: &[(i64, String)], graph_type: &str, budget: u64) -> [u8; 32] {
    let mut h = Sha256::new();
    let mut put = |part: &[u8]| {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    };
    put(graph_type.as_bytes());
    put(&budget.to_le_bytes());
    let c = &inputs.cluster;
    put(format!(
        "{}\0{}\0{}\0{}\0{}",
        c.id, c.name, c.release_id, c.status, c.net_segment_type
    )
    .as_bytes());
    let r = &inputs.release;
    put(format!(
        "{}\0{}\0{}\0{}\0{}",
        r.id, r.name, r.version, r.operating_system, r.plugin_id
    )
    .as_bytes());
    for n in &inputs.nodes {
        // Its CPU count: its attributes' pinned CPUs are numbered within it.
        put(format!(
            "{}\0{}\0{}\0{}\0{:?}\0{}",
            n.id,
            n.name,
            n.hostname,
            n.status.as_str(),
            n.roles,
            n.inventory.cpu.count
        )
        .as_bytes());
    }
    put(&serde_json::to_vec(&inputs.volumes).unwrap_or_default());
    put(&serde_json::to_vec(&inputs.vms_conf).unwrap_or_default());
    put(&serde_json::to_vec(&inputs.attributes).unwrap_or_default());
    put(&serde_json::to_vec(&inputs.meta).unwrap_or_default());
    put(inputs.settings.to_string().as_bytes());
    put(format!("{:?}", inputs.network).as_bytes());
    put(&serde_json::to_vec(&inputs.deployed).unwrap_or_default());
    put(&serde_json::to_vec(&inputs.replaced).unwrap_or_default());
    put(&serde_json::to_vec(&inputs.openstack).unwrap_or_default());
    for (id, name, version, path) in &inputs.plugins {
        put(format!("{id}\0{name}\0{version}\0{path}").as_bytes());
    }
    for (id, manifest) in manifests {
        put(&id.to_le_bytes());
        put(manifest.as_bytes());
    }
    for g in &inputs.stored {
        put(format!(
            "{}\0{}\0{}\0{}",
            g.owner.model(),
            g.owner.id(),
            g.id,
            g.tasks
        )
        .as_bytes());
    }
    h.finalize().into()
}

/// The graphs of the installed plugins `chosen` (their ids), as `release` sees them.
fn enabled_plugins(
    plugins: &[(i64, String, String, String)],
    chosen: &[i64],
    data_dir: &Path,
    release: &OpenedRelease,
    graph_type: &str,
) -> Result<Vec<graph::PluginGraph>, PlanningError> {
    let mut out = Vec::new();
    for (id, name, _, path) in plugins {
        if !chosen.contains(id) {
            continue;
        }
        let path: PathBuf = data_dir.join(path);
        let mut g =
            open_plugin(&path, release, graph_type).map_err(|source| PlanningError::Plugin {
                plugin: name.clone(),
                source: source.relative_to(data_dir),
            })?;
        g.id = *id;
        out.push(g);
    }
    Ok(out)
}

/// What an environment accepts: roles to assign and settings keys.
#[derive(Debug, Clone)]
pub struct Accepts {
    /// The release's name, for messages.
    pub release: String,
    /// The roles of the release and of the plugins enabled in the environment.
    pub roles: BTreeSet<String>,
    /// The settings the release and its plugins' attributes back.
    pub settings: Schema,
    /// The release's `attributes_metadata`.
    pub release_attributes: J,
    /// Every plugin package compatible with the release (or enabled), with its attributes.
    pub plugins: Vec<PluginAttributes>,
    /// What each role of [`Accepts::roles`] says of itself: its `name` (label), description,
    /// conflicts, limits and restrictions (the release's, the environment's own, the enabled
    /// plugins').
    pub role_metadata: serde_json::Map<String, J>,
}

impl Accepts {
    /// Every role of `roles` (the request's `field`) that is not the release's or an enabled
    /// plugin's.
    pub fn check_roles(&self, field: &str, roles: &[String]) -> Vec<FieldError> {
        roles
            .iter()
            .enumerate()
            .filter(|(_, r)| !self.roles.contains(*r))
            .map(|(i, r)| FieldError {
                field: format!("{field}[{i}]"),
                message: format!(
                    "unknown role {r:?}: release {} and its enabled plugins define {}",
                    self.release,
                    self.roles.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            })
            .chain(
                crate::engine::assignment::conflicts(&self.role_metadata, roles)
                    .into_iter()
                    .map(|message| FieldError {
                        field: field.to_string(),
                        message,
                    }),
            )
            .collect()
    }
}

fn role_names(roles_metadata: &J) -> impl Iterator<Item = String> + '_ {
    roles_metadata
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys().cloned())
}

/// What environment `cluster_id` accepts: its release's roles and attributes from the store,
/// and, from the installed packages, the roles of the plugins its settings enable and the
/// attributes of every plugin compatible with the release (or enabled in it). A plugin that
/// cannot be opened is an error when enabled, and left out otherwise.
pub fn accepts(store: &Store, data_dir: &Path, cluster_id: i64) -> Result<Accepts, PlanningError> {
    let (release, sections, settings, plugins, own) = store
        .read(|r| {
            let Some((_, release)) = r.cluster_with_release(cluster_id)? else {
                return Ok(None);
            };
            let mut sections = r.release_roles_and_attributes(release.id)?;
            if let (Some((_, attributes)), Some(repos)) = (
                sections.as_mut(),
                crate::release_repos::stored(r, release.id)?,
            ) {
                crate::release_repos::apply(attributes, &repos);
            }
            let settings = r.cluster_settings(cluster_id)?;
            let plugins = r.plugin_paths()?;
            let own = crate::roles::all(
                r,
                crate::store::MetaOwner::Cluster(cluster_id),
                crate::store::MetaKind::Role,
            )?;
            Ok(Some((release, sections, settings, plugins, own)))
        })?
        .ok_or(PlanningError::NoCluster(cluster_id))?;
    let (roles_metadata, attributes) = sections.unwrap_or((J::Null, J::Null));
    let mut role_metadata = serde_json::Map::new();
    let mut roles: BTreeSet<String> = if roles_metadata.is_object() {
        BTreeSet::new()
    } else {
        // A release without role metadata is planned with Fuel newton's.
        let default = graph::roles::default_metadata().0;
        if let Some(m) = default.as_object() {
            role_metadata.extend(m.clone());
        }
        role_names(&default).collect()
    };
    // The release's roles with those created, changed or deleted through the API, and the
    // environment's own.
    roles.extend(own.keys().cloned());
    role_metadata.extend(own);
    let mut schema = Schema::of_release(&release.name, &attributes);
    let mut plugin_attributes = Vec::new();
    let installed = installed(&plugins, release.plugin_id);
    for (plugin, (_, _, _, path)) in installed
        .iter()
        .zip(plugins.iter().filter(|(id, ..)| *id != release.plugin_id))
    {
        let name = &plugin.name;
        let on = enables(&settings, plugin);
        let pkg = match crate::package::open(&data_dir.join(path)) {
            Ok(files) => crate::engine::plugin::load(files.as_ref()),
            Err(e) if on => {
                return Err(PlanningError::Plugin {
                    plugin: name.clone(),
                    source: GraphSourceError::Package(e),
                });
            }
            Err(_) => continue,
        };
        let tree = match for_release(&pkg, &release.version, &release.operating_system) {
            Some(tree) => tree,
            None if on => pkg.manifest(),
            None => continue,
        };
        if on {
            let theirs = tree.get("roles_metadata").unwrap_or(&J::Null);
            roles.extend(role_names(theirs));
            if let Some(m) = theirs.as_object() {
                role_metadata.extend(m.clone());
            }
        }
        let attributes = tree.get("attributes_metadata").unwrap_or(&J::Null);
        schema.add_plugin(name, attributes);
        let manifest = pkg.manifest();
        plugin_attributes.push(PluginAttributes {
            id: plugin.id,
            name: name.clone(),
            title: manifest
                .get("title")
                .and_then(J::as_str)
                .unwrap_or(name)
                .to_string(),
            version: plugin.version.clone(),
            attributes: attributes.get("attributes").cloned().unwrap_or(J::Null),
        });
    }
    schema.set_installed(installed);
    Ok(Accepts {
        release: release.name,
        roles,
        settings: schema,
        release_attributes: attributes,
        plugins: plugin_attributes,
        role_metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes whose data is made from the same layout and the same rest share one copy; any
    /// difference makes its own, and the data is what each node's inputs make.
    #[test]
    fn alike_nodes_share_one_copy_of_their_data() {
        use serde_json::json;
        let (a, b) = (
            vec![json!({"id": "os", "size": 1})],
            vec![json!({"id": "vm"})],
        );
        let mut alike = AlikeData::default();
        let mut data = |layout, vms: Option<J>, conf: J, derived: J| {
            alike.data(layout, vms, conf, json!({}), derived)
        };
        let first = data(Some((0, &a[..])), None, json!({}), json!({}));
        let same = data(Some((0, &a[..])), None, json!({}), json!({}));
        assert!(Arc::ptr_eq(&first, &same));
        assert_eq!(
            *first,
            json!({"node_volumes": a, "vms_conf": [], "configuration": {},
                   "configuration_options": {}})
        );
        let other_layout = data(Some((1, &b[..])), None, json!({}), json!({}));
        assert_eq!(other_layout["node_volumes"], json!(b));
        // A node without a layout has no volumes, apart from any node with one.
        let none = data(None, None, json!({}), json!({}));
        assert_eq!(none["node_volumes"], json!([]));
        assert!(!Arc::ptr_eq(&none, &first));
        let vms = data(
            Some((0, &a[..])),
            Some(json!([{"id": 1}])),
            json!({}),
            json!({}),
        );
        assert_eq!(vms["vms_conf"], json!([{"id": 1}]));
        let conf = data(
            Some((0, &a[..])),
            None,
            json!({"nova": {"x": 1}}),
            json!({}),
        );
        assert_eq!(conf["configuration"], json!({"nova": {"x": 1}}));
        // Derived attributes merge over the rest, as each node's own did.
        let pinned = data(
            Some((0, &a[..])),
            None,
            json!({}),
            json!({"cpu_pinning": {"nova": [1]}, "vms_conf": []}),
        );
        assert_eq!(pinned["cpu_pinning"], json!({"nova": [1]}));
        assert_eq!(pinned["node_volumes"], json!(a));
        for (i, x) in [&first, &other_layout, &vms, &conf, &pinned]
            .iter()
            .enumerate()
        {
            for y in [&first, &other_layout, &vms, &conf, &pinned]
                .iter()
                .skip(i + 1)
            {
                assert!(!Arc::ptr_eq(x, y) && x != y, "{x} and {y}");
            }
        }
    }

    /// While one caller makes a plan (holds the slot's maker lock), `making` says so and the
    /// kept plan is read without waiting for it.
    #[test]
    fn the_kept_plan_is_read_while_another_is_made() {
        let plans = Plans::new(1);
        assert!(!plans.making(1, "default"));
        let slot = Arc::clone(
            lock(&plans.slots)
                .entry((1, "default".to_string()))
                .or_default(),
        );
        *lock(&slot.kept) = Some(Cached::new(
            [0; 32],
            3,
            &Planned::made(Err(Arc::new(PlanningError::NoNodes("env".into()))), 7),
        ));
        let making = lock(&slot.making);
        assert!(plans.making(1, "default"));
        assert!(!plans.making(2, "default"));
        assert_eq!(plans.kept(1, "default").map(|p| p.made_at), Some(7));
        drop(making);
        assert!(!plans.making(1, "default"));
    }

    /// A Deploy being prepared is told until the last of its guards goes, per environment.
    #[test]
    fn a_deploy_is_told_while_it_is_prepared() {
        let plans = Plans::new(1);
        assert!(!plans.is_deploying(1));
        let first = plans.deploying(1);
        let second = plans.deploying(1);
        assert!(plans.is_deploying(1));
        assert!(!plans.is_deploying(2));
        drop(first);
        assert!(
            plans.is_deploying(1),
            "another Deploy of it is still prepared"
        );
        drop(second);
        assert!(!plans.is_deploying(1));
        assert!(lock(&plans.deploying).is_empty());
    }

    #[test]
    fn only_a_graph_the_release_lacks_counts_as_missing() {
        let release = |graph: &str| {
            open_release("ubuntu-newton", None, graph, None).map_err(|source| {
                PlanningError::Release {
                    release: "ubuntu-newton".into(),
                    source,
                }
            })
        };
        assert!(release("deletion").is_ok(), "the bundled release has one");
        let Err(e) = release("no-such-graph") else {
            panic!("a graph the release lacks")
        };
        assert!(e.is_missing_graph(), "{e}");
        let Err(e) = open_release("no-such-release", None, "deletion", None).map_err(|source| {
            PlanningError::Release {
                release: "x".into(),
                source,
            }
        }) else {
            panic!("an unknown release")
        };
        assert!(!e.is_missing_graph(), "{e}");
    }

    /// An environment of the bundled release with a controller and a compute node, in a
    /// store of its own.
    fn environment() -> (tempfile::TempDir, Store, i64) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("stoker.db")).unwrap();
        assert!(!crate::package::bundled::install_on_first_start(&store, dir.path(), 1).is_empty());
        let release = store.read(|r| r.releases()).unwrap()[0].id;
        let cluster = store
            .write(|tx| tx.create_cluster("env", release, "vlan", 1))
            .unwrap()
            .id;
        let mut assigned = Vec::new();
        for (i, role) in ["controller", "compute"].into_iter().enumerate() {
            let inventory: crate::model::Inventory = serde_json::from_value(serde_json::json!({
                "interfaces": [{"name": "eno1", "mac": format!("52:54:00:00:00:0{i}"),
                                "speed_mbps": 10000, "link": true}],
                "cpu": {"count": 8}, "memory_bytes": 68_719_476_736u64,
                "disks": [{"name": "sda", "size_bytes": 480_103_981_056u64}]
            }))
            .unwrap();
            let node = store
                .write(|tx| tx.record_hello(&inventory, None, 1))
                .unwrap()
                .0;
            assigned.push((node.id, vec![role.to_string()]));
        }
        store
            .write(|tx| tx.assign_nodes(cluster, &assigned, 1))
            .unwrap();
        (dir, store, cluster)
    }

    /// The plan revision may leave a table or column unwatched only if planning never reads
    /// it: every read of a plan's inputs, recorded by SQLite's authorizer, is of a watched one.
    #[test]
    fn plans_read_nothing_the_plan_revision_leaves_unwatched() {
        let (_dir, store, cluster) = environment();
        let ((inputs, _), reads) = store.reads_of(|| {
            let inputs = read_inputs(&store, cluster, "default").unwrap();
            store.read(|r| r.plugin_manifests()).unwrap();
            inputs
        });
        assert_eq!(inputs.nodes.len(), 2);
        for table in [
            "nodes",
            "node_inventories",
            "clusters",
            "releases",
            "plugins",
        ] {
            assert!(
                reads.iter().any(|(t, _)| t == table),
                "planning reads {table}: {reads:?}"
            );
        }
        let unwatched: Vec<_> = reads
            .iter()
            .filter(|(t, c)| {
                crate::store::revision::UNWATCHED
                    .iter()
                    .any(|u| u.table == t && u.column.is_none_or(|uc| uc == c))
            })
            .collect();
        assert!(
            unwatched.is_empty(),
            "planning reads what the plan revision does not watch (store::revision::UNWATCHED): \
             {unwatched:?}"
        );
    }

    /// A kept plan is answered from the revision alone while nothing it was made from
    /// changes, and made again when something does (a node's roles).
    #[test]
    fn a_kept_plan_holds_until_its_inputs_change() {
        let (dir, store, cluster) = environment();
        let plans = Plans::new(10_000_000);
        let first = plans
            .plan(&store, dir.path(), cluster, "default", 1)
            .unwrap();
        assert!(!first.cached);
        assert!(first.plan.is_ok(), "{:?}", first.plan.err());
        let (again, reads) = store.reads_of(|| {
            plans
                .plan(&store, dir.path(), cluster, "default", 2)
                .unwrap()
        });
        assert!(again.cached);
        assert_eq!(again.made_at, 1);
        assert!(
            reads.iter().all(|(t, _)| t == "plan_revision"),
            "answered from the revision alone: {reads:?}"
        );
        let nodes = store.read(|r| r.cluster_nodes(cluster)).unwrap();
        store
            .write(|tx| {
                tx.assign_node(
                    cluster,
                    nodes[1].id,
                    &["compute".to_string(), "cinder".to_string()],
                    4,
                )
            })
            .unwrap();
        let changed = plans
            .plan(&store, dir.path(), cluster, "default", 4)
            .unwrap();
        assert!(!changed.cached);
        assert_eq!(plans.made(), 2);
    }

    /// A stale kept plan whose successor is being made keeps only what a page shows, its
    /// preview: the plan itself is let go (freed once no caller holds it), and never
    /// answered as a plan again, even for the very inputs it was made from.
    #[test]
    fn a_kept_plan_being_replaced_is_only_shown() {
        let (dir, store, cluster) = environment();
        let plans = Plans::new(10_000_000);
        let first = plans
            .plan(&store, dir.path(), cluster, "default", 1)
            .unwrap();
        let env = Arc::clone(first.plan.as_ref().unwrap());
        let expected = Preview::of(&env.plan, PREVIEW_NODES);
        assert!(!expected.nodes.is_empty());
        let gone = Arc::downgrade(&env);
        drop((first, env));
        let slot = Arc::clone(&lock(&plans.slots)[&(cluster, "default".to_string())]);
        let whole = |p: &Planned| {
            let env = p.plan.as_ref().unwrap();
            (
                !env.nodes.is_empty(),
                !env.plan.data.nodes.is_empty(),
                !env.plan.uids.is_empty(),
            )
        };
        // Shown while whole: the page's preview is the plan's, made once and shared.
        let held = plans.kept(cluster, "default").unwrap();
        assert_eq!(*held.preview().unwrap(), expected);
        assert!(Arc::ptr_eq(
            &held.preview().unwrap(),
            &plans.kept(cluster, "default").unwrap().preview().unwrap()
        ));
        // A caller holds the plan: it lives on with the caller, not with the entry.
        retire(&slot);
        assert!(gone.upgrade().is_some());
        drop(held);
        assert!(gone.upgrade().is_none(), "the stale plan is freed");
        let shown = plans.kept(cluster, "default").unwrap();
        assert_eq!(*shown.preview().unwrap(), expected);
        assert_eq!((shown.made_at, shown.cached), (1, true));
        // An entry replaced meanwhile (another made_at) is left as it is.
        lock(&slot.kept)
            .as_mut()
            .unwrap()
            .shown(9, Arc::new(expected.clone()));
        assert_eq!(plans.kept(cluster, "default").unwrap().made_at, 1);
        // Nothing changed in the store, yet the plan to deploy from is made again, whole.
        let again = plans
            .plan(&store, dir.path(), cluster, "default", 2)
            .unwrap();
        assert!(!again.cached);
        assert_eq!(again.made_at, 2);
        assert_eq!(whole(&again), (true, true, true));
        assert_eq!(plans.made(), 2);
        assert!(
            plans
                .plan(&store, dir.path(), cluster, "default", 3)
                .unwrap()
                .cached
        );
    }
}
