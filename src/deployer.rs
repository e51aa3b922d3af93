//! Starting a deployment: the environment's plan ([`crate::planner`]), each node's deploy steps
//! (stoker's built-ins with the master's image settings, changed by the operator's per-deployment
//! user steps, [`crate::engine::steps`]), expanded into runs ([`crate::engine::orchestrate`])
//! and stored (in parts, invisible until whole: `store::NewDeployment`) with the deployed state
//! to keep if it succeeds. Handing runs to
//! agents and recording their results is the store's ([`crate::store`]); this module only starts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::json;

use crate::engine::orchestrate::{self, RunOptions};
use crate::engine::state::{NodeState, Phase};
use crate::engine::steps::{self, PlannedStep, StepsError, UserStep};
use crate::planner::{self, PlanningError};
use crate::store::{Deployment, GroupWriter, NewDeployment, Store, StoreError, TransactionData};

/// The master's deployment settings.
#[derive(Debug, Clone)]
pub struct DeploySettings {
    /// The operating system image `deploy.write_image` writes (none: the step is off).
    pub image_url: Option<String>,
    pub image_checksum: Option<String>,
    /// How `deploy.configure` puts the service agent onto the installed OS.
    pub agent_install: steps::AgentInstall,
    pub runs: RunOptions,
    /// How long a node may take to boot (its firmware, then the bootstrap or its installed
    /// OS) before the first run it must boot for fails as not taken, when that run's own
    /// timeout is shorter (`deploy.boot_timeout`; the timeout watcher's, through
    /// [`crate::engine::schedule::Schedule::overdue`]).
    pub boot_timeout_s: u64,
}

impl Default for DeploySettings {
    fn default() -> DeploySettings {
        DeploySettings {
            image_url: None,
            image_checksum: None,
            agent_install: steps::AgentInstall::default(),
            runs: RunOptions::default(),
            boot_timeout_s: 1800,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error(transparent)]
    Planning(Box<PlanningError>),
    #[error("deploy steps: {0}")]
    Steps(#[from] StepsError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Every node's every run would be skipped: a deployment would do nothing.
    #[error(
        "nothing to run: all {skipped} tasks of the {nodes} nodes are skipped, their conditions \
         (changed(), new()) saying nothing they watch changed since the last deployment; change \
         a setting or the nodes first"
    )]
    NothingToRun { skipped: usize, nodes: usize },
    /// `?nodes=` named nodes that are not in the environment.
    #[error("nodes {nodes} are not in environment {cluster}")]
    NotInEnvironment { nodes: String, cluster: String },
    /// Deployment-phase work asked for nodes without an installed OS.
    #[error(
        "nodes {nodes} are not provisioned: their tasks run on the installed OS; provision them \
         first (PUT /api/v1/clusters/{cluster}/provision?nodes=...) or deploy the environment"
    )]
    NotProvisioned { nodes: String, cluster: i64 },
    /// A BMC step asked for nodes that have no BMC with credentials.
    #[error(
        "deploy step {step} runs against the node's BMC, and nodes {nodes} have none with \
         credentials: set one (PUT /api/v1/nodes/{{id}}/bmc) or deploy without the step"
    )]
    NoBmc { step: String, nodes: String },
}

impl From<PlanningError> for DeployError {
    fn from(e: PlanningError) -> DeployError {
        DeployError::Planning(Box::new(e))
    }
}

impl DeployError {
    /// The fields of the request the error is about (the user steps'), for the API's
    /// `fields`.
    pub fn fields(&self) -> &[crate::model::FieldError] {
        match self {
            DeployError::Steps(e) => &e.0,
            DeployError::Store(StoreError::Invalid { fields, .. }) => fields,
            _ => &[],
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            DeployError::Planning(e) => e.code(),
            DeployError::Steps(_) => "invalid_steps",
            DeployError::Store(e) => e.code(),
            DeployError::NothingToRun { .. } => "nothing_to_run",
            DeployError::NotInEnvironment { .. } => "not_in_environment",
            DeployError::NotProvisioned { .. } => "not_provisioned",
            DeployError::NoBmc { .. } => "no_bmc",
        }
    }
}

/// What a deployment covers, beyond "everything that changed, on every node" (stoker's Deploy,
/// Nailgun's `PUT /clusters/{id}/changes`): Nailgun's narrower and forced variants.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// The graph type to run (`graph execute -t`); None: the deployment graph, `default`,
    /// with provisioning first. Another type runs only its tasks, on provisioned nodes.
    pub graph_type: Option<String>,
    /// Only these nodes (`?nodes=`); None: every node of the environment.
    pub nodes: Option<BTreeSet<i64>>,
    /// Only this phase: provisioning (`PUT .../provision`) or deployment (`PUT .../deploy`).
    pub phase: Option<Phase>,
    /// Every task runs whatever its `changed()`/`new()` conditions say (Nailgun's redeploy
    /// and `force`): planned as if nothing had been deployed.
    pub force: bool,
    /// Plan and record what would run, and run nothing (Nailgun's `dry_run`, `noop_run`).
    pub dry_run: bool,
}

impl Scope {
    /// The transaction's name, as Nailgun named its tasks: `provision` for the provisioning
    /// phase alone, else `deployment`.
    pub fn name(&self) -> &'static str {
        if self.phase == Some(Phase::Provision) {
            "provision"
        } else {
            "deployment"
        }
    }

    /// The whole deployment: every node, both phases, the deployment graph.
    pub fn is_whole(&self) -> bool {
        self.graph_type.is_none() && self.nodes.is_none() && self.phase.is_none()
    }
}

/// One request to deploy.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub cluster_id: i64,
    /// The operator's per-deployment user steps.
    pub steps: Vec<UserStep>,
    pub scope: Scope,
    /// An environment without nodes gets a deployment that is over as it starts, as Nailgun's
    /// LCM releases did, instead of `no_nodes` (for the whole environment only).
    pub empty_ok: bool,
    /// The chain this deployment runs a graph of, and its place in it (`crate::chains`).
    pub parent: Option<(i64, u32)>,
    pub now: i64,
}

/// What starting a deployment needs of the master.
pub struct Master<'a> {
    pub store: &'a Store,
    pub writer: &'a GroupWriter,
    pub data_dir: &'a Path,
    pub settings: &'a DeploySettings,
    pub plans: &'a planner::Plans,
}

/// Record the request's deployment as over as it starts, with nothing run (an environment
/// without nodes; a graph of a chain whose tasks are all skipped).
pub fn record_empty(m: &Master<'_>, req: &Request) -> Result<Deployment, DeployError> {
    let (cluster_id, now, parent, dry) = (req.cluster_id, req.now, req.parent, req.scope.dry_run);
    let name = req.scope.name();
    let graph_type = req
        .scope
        .graph_type
        .clone()
        .unwrap_or_else(|| "default".to_string());
    Ok(m.writer.write_blocking(move |tx| {
        tx.record_empty_deployment(cluster_id, name, &graph_type, dry, parent, now)
    })?)
}

/// Plan the request's environment through `plans` (the kept plan when nothing it is made from
/// changed since the environment's page showed it, else a new one within the plan budget) and
/// start deploying it, or, for a dry run, record what would run.
pub fn start(m: &Master<'_>, req: &Request) -> Result<Started, DeployError> {
    let (store, data_dir, settings, plans) = (m.store, m.data_dir, m.settings, m.plans);
    let (cluster_id, now, scope) = (req.cluster_id, req.now, &req.scope);
    // The user steps first: a refusal of the request costs nothing and plans nothing.
    let defs = steps::builtins_with(
        settings.image_url.as_deref(),
        settings.image_checksum.as_deref(),
        settings.agent_install,
    );
    let mut planned: Vec<PlannedStep> = steps::plan(&defs, &req.steps)?;
    let deeper = crate::engine::bmc_steps::check(&req.steps);
    if !deeper.is_empty() {
        return Err(steps::StepsError(deeper).into());
    }
    let graph_type = scope.graph_type.as_deref().unwrap_or("default");
    if scope.graph_type.is_some() {
        // Another graph: its tasks only, on the installed OS.
        planned.retain(|s| s.step == "run_tasks");
    }
    // Pages show the kept plan, without planning again, until the deployment is stored.
    let _deploying = plans.deploying(cluster_id);
    let planned_env = plans
        .plan_with(store, data_dir, cluster_id, graph_type, scope.force, now)
        .and_then(|p| Ok((p.cached, p.plan.map_err(PlanningError::Kept)?)));
    let (plan_cached, env) = match planned_env {
        Ok(p) => p,
        Err(e) if e.is_no_nodes() && req.empty_ok && scope.nodes.is_none() => {
            return Ok(Started {
                deployment: record_empty(m, req)?,
                plan_cached: false,
            });
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(wanted) = &scope.nodes {
        let members: BTreeSet<i64> = env.nodes.iter().map(|n| n.id).collect();
        let strangers: Vec<String> = wanted
            .difference(&members)
            .map(ToString::to_string)
            .collect();
        if !strangers.is_empty() {
            return Err(DeployError::NotInEnvironment {
                nodes: strangers.join(", "),
                cluster: env.cluster.name.clone(),
            });
        }
    }
    let chosen = |id: i64| scope.nodes.as_ref().is_none_or(|n| n.contains(&id));
    // Nodes pending deletion run none of the deployment graph: the deletion graph instead,
    // when the whole environment is deployed.
    let pending: BTreeSet<i64> = if scope.is_whole() {
        env.nodes
            .iter()
            .filter(|n| n.pending_deletion)
            .map(|n| n.id)
            .collect()
    } else {
        BTreeSet::new()
    };
    let ids: BTreeMap<String, i64> = env
        .nodes
        .iter()
        .filter(|n| !n.pending_deletion && chosen(n.id))
        .map(|n| (n.id.to_string(), n.id))
        .collect();
    // A host name an operator uploaded in the provisioning facts names the node provisioned.
    let uploaded =
        store.read(|r| r.uploaded_facts(cluster_id, crate::store::FactsKind::Provisioning))?;
    let names: BTreeMap<i64, (String, String, Vec<String>)> = env
        .nodes
        .iter()
        .map(|n| {
            let host = uploaded
                .get(&n.id.to_string())
                .and_then(|f| f["hostname"].as_str())
                .filter(|h| !h.is_empty())
                .map_or_else(|| n.hostname.clone(), str::to_string);
            (n.id, (n.name.clone(), host, n.roles.clone()))
        })
        .collect();
    // A provisioned or deployed node keeps its disk: only new (or failed-to-provision) nodes
    // get their image written.
    let provisioned: BTreeSet<i64> = env
        .nodes
        .iter()
        .filter(|n| !NodeState::of_node(n, false).needs_provisioning())
        .map(|n| n.id)
        .collect();
    // Deployment-phase work needs an installed OS; a dry run runs nothing and needs none.
    let deploys_only = scope.graph_type.is_some() || scope.phase == Some(Phase::Deploy);
    if deploys_only && !scope.dry_run {
        let bare: Vec<String> = ids
            .values()
            .filter(|id| !provisioned.contains(id))
            .map(|id| format!("node-{id}"))
            .collect();
        if !bare.is_empty() {
            return Err(DeployError::NotProvisioned {
                nodes: bare.join(", "),
                cluster: cluster_id,
            });
        }
    }
    // The master's steps need the node's BMC: a BMC step asked for a node without one is
    // refused, naming the nodes; the built-in power step is skipped for them.
    let with_bmc = store.read(|r| r.nodes_with_usable_bmc())?;
    let provisioning =
        |id: &i64| !provisioned.contains(id) && scope.phase.is_none_or(|p| p == Phase::Provision);
    for s in planned.iter().filter(|s| {
        s.runs_on == steps::Location::Master
            && crate::engine::bmc_steps::needs_bmc(s.interface, &s.step)
    }) {
        let bare: Vec<String> = ids
            .values()
            .filter(|id| provisioning(id) && !with_bmc.contains(id))
            .map(|id| format!("node-{id}"))
            .collect();
        if !bare.is_empty() && !scope.dry_run {
            return Err(DeployError::NoBmc {
                step: s.id(),
                nodes: bare.join(", "),
            });
        }
    }
    let cluster_name = env.cluster.name.clone();
    let per_node = |node: i64| -> Vec<PlannedStep> {
        let mut out = planned.clone();
        if provisioned.contains(&node) {
            out.retain(|s| s.runs_on.phase() != Phase::Provision);
        }
        if !with_bmc.contains(&node) {
            out.retain(|s| s.runs_on != steps::Location::Master);
        }
        if let Some(phase) = scope.phase {
            out.retain(|s| s.runs_on.phase() == phase);
        }
        for s in &mut out {
            if s.step == "configure" {
                let (name, host, roles) = names.get(&node).cloned().unwrap_or_default();
                s.args
                    .entry("hostname")
                    .or_insert_with(|| host.clone().into());
                s.args
                    .entry("fqdn")
                    .or_insert_with(|| format!("{host}.domain.tld").into());
                s.args.entry("facts").or_insert_with(|| {
                    json!({"node_id": node, "name": name, "roles": roles,
                           "environment": cluster_name})
                });
            }
        }
        out
    };
    let mut runs = orchestrate::runs_for(&env.plan, &ids, &per_node, &settings.runs);
    if scope.phase == Some(Phase::Provision) {
        // Provisioning only: the graph's stages have nothing to order.
        runs = retain_runs(runs, |r| r.node.is_some());
    }
    let erase = deletion_runs(store, data_dir, cluster_id, &pending, settings, plans, now)?;
    // Pending nodes the release has no deletion graph for are released at once.
    let release_now: Vec<i64> = pending
        .iter()
        .copied()
        .filter(|n| !erase.iter().any(|r| r.node == Some(*n)))
        .collect();
    let offset = runs.len();
    runs.extend(erase.into_iter().map(|mut r| {
        r.deps.iter_mut().for_each(|d| *d += offset);
        r
    }));
    let node_runs = runs.iter().filter(|r| r.node.is_some());
    if !scope.dry_run
        && pending.is_empty()
        && node_runs
            .clone()
            .all(|r| r.status == orchestrate::RunStatus::Skipped)
    {
        return Err(DeployError::NothingToRun {
            skipped: node_runs.count(),
            nodes: ids.len(),
        });
    }
    // What it is made from, kept with it (the deployment data of the nodes it deploys):
    // packed on a thread of its own while the runs are written, waited for just before the
    // deployment becomes visible.
    let sources = transaction_sources(m, cluster_id)?;
    let deploys = (scope.phase != Some(Phase::Provision)).then_some((&env.plan, &ids));
    let deployment = std::thread::scope(|s| {
        let packing = s.spawn(move || transaction_data(sources, deploys));
        let data: crate::store::PendingData<'_> = Box::new(move || {
            packing.join().unwrap_or_else(|_| {
                Err(StoreError::Corrupt {
                    what: "transaction data",
                    detail: "packing it failed (a panic)".into(),
                })
            })
        });
        store.create_deployment(
            m.writer,
            NewDeployment {
                cluster_id,
                plan: &env.plan,
                runs,
                release: if scope.dry_run {
                    Vec::new()
                } else {
                    release_now
                },
                // Only the deployment graph's runs are what `changed()` compares with next
                // time.
                record: scope.graph_type.is_none(),
                dry_run: scope.dry_run,
                name: scope.name(),
                graph_type: graph_type.to_string(),
                parent: req.parent,
                now,
                data: Some(data),
            },
        )
    })?;
    Ok(Started {
        deployment,
        plan_cached,
    })
}

/// What a transaction keeps of what it was made from, read before it is packed: the
/// environment's settings as Nailgun's `editable` document and its network configuration.
struct TransactionSources {
    editable: serde_json::Value,
    network: serde_json::Value,
}

fn transaction_sources(m: &Master<'_>, cluster_id: i64) -> Result<TransactionSources, DeployError> {
    let accepts = planner::accepts(m.store, m.data_dir, cluster_id)?;
    let (settings, network) = m.store.read(|r| {
        Ok((
            r.cluster_settings(cluster_id)?,
            crate::networks::configuration(r, cluster_id)?,
        ))
    })?;
    let editable = crate::engine::attributes::editable(
        crate::engine::attributes::Source {
            release: &accepts.release_attributes,
            plugins: &accepts.plugins,
        },
        &settings,
    );
    Ok(TransactionSources { editable, network })
}

/// What a transaction keeps of what it was made from, as Nailgun's transactions do: the
/// environment's settings (`{editable}`), its network configuration, and, when it deploys,
/// its deployment data (`{common, nodes: {uid: facts}}`) for the nodes of `ids`; packed off
/// the store's writer (serialized from the plan as it is, not copied).
fn transaction_data(
    sources: TransactionSources,
    deploys: Option<(&crate::engine::graph::Plan, &BTreeMap<String, i64>)>,
) -> Result<TransactionData, StoreError> {
    let info = deploys.map(|(plan, ids)| crate::engine::graph::SnapshotOf {
        common: &plan.data.common,
        nodes: plan
            .uids
            .iter()
            .zip(&plan.data.nodes)
            .filter(|(uid, _)| ids.contains_key(*uid))
            .map(|(uid, facts)| (uid.as_str(), facts))
            .collect(),
    });
    Ok(TransactionData {
        deployment_info: info.as_ref().map(TransactionData::pack).transpose()?,
        settings: Some(TransactionData::pack(
            &json!({ "editable": sources.editable }),
        )?),
        network: Some(TransactionData::pack(&sources.network)?),
    })
}

/// The runs `keep` keeps, their waits renumbered (waits on runs dropped are dropped).
fn retain_runs(
    all: Vec<orchestrate::NewRun>,
    keep: impl Fn(&orchestrate::NewRun) -> bool,
) -> Vec<orchestrate::NewRun> {
    let kept: Vec<usize> = (0..all.len()).filter(|&i| keep(&all[i])).collect();
    let index: BTreeMap<usize, usize> = kept
        .iter()
        .enumerate()
        .map(|(new, &old)| (old, new))
        .collect();
    let mut all: Vec<Option<orchestrate::NewRun>> = all.into_iter().map(Some).collect();
    kept.iter()
        .filter_map(|&i| all[i].take())
        .map(|mut r| {
            r.deps = r
                .deps
                .iter()
                .filter_map(|d| index.get(d).copied())
                .collect();
            r
        })
        .collect()
}

/// The runs of the release's deletion graph (Fuel's `erase_node` and whatever else it holds)
/// on the nodes pending deletion, on their installed OS: the sync node's stages are left out
/// (the deployment's own stages order the rest) and the waits on them dropped. None when no
/// node is pending or the release has no deletion graph.
fn deletion_runs(
    store: &Store,
    data_dir: &Path,
    cluster_id: i64,
    pending: &BTreeSet<i64>,
    settings: &DeploySettings,
    plans: &planner::Plans,
    now: i64,
) -> Result<Vec<orchestrate::NewRun>, DeployError> {
    if pending.is_empty() {
        return Ok(Vec::new());
    }
    match deletion_plan(store, data_dir, cluster_id, plans, now)? {
        Some(plan) => erase_runs(&plan, pending, settings, &BTreeSet::new()),
        // The release has none: the nodes are released without one.
        None => Ok(Vec::new()),
    }
}

/// The environment's deletion plan; None when the release has no deletion graph.
fn deletion_plan(
    store: &Store,
    data_dir: &Path,
    cluster_id: i64,
    plans: &planner::Plans,
    now: i64,
) -> Result<Option<std::sync::Arc<planner::EnvironmentPlan>>, DeployError> {
    match plans.plan(store, data_dir, cluster_id, "deletion", now) {
        Ok(p) => Ok(Some(p.plan.map_err(PlanningError::Kept)?)),
        Err(e) if e.is_missing_graph() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The deletion plan's runs on `nodes`, each on its installed OS; the nodes in `power_off`
/// are then powered off by the master through their BMCs (`power.power_off`).
fn erase_runs(
    plan: &planner::EnvironmentPlan,
    nodes: &BTreeSet<i64>,
    settings: &DeploySettings,
    power_off: &BTreeSet<i64>,
) -> Result<Vec<orchestrate::NewRun>, DeployError> {
    let ids: BTreeMap<String, i64> = nodes.iter().map(|n| (n.to_string(), *n)).collect();
    // The graph's tasks, whatever user steps the deployment has (they are about deploying),
    // then the power-off, last.
    let off = steps::UserStep {
        interface: steps::Interface::Power,
        step: "power_off".to_string(),
        priority: 1,
        args: serde_json::Map::new(),
    };
    let planned = steps::plan(&steps::builtins(None, None), &[off])?;
    let tasks_only: Vec<PlannedStep> = planned
        .iter()
        .filter(|s| s.step == "run_tasks")
        .cloned()
        .collect();
    // A node's runs go in this order (the plan would put the master's step first).
    let with_off: Vec<PlannedStep> = tasks_only
        .iter()
        .chain(planned.iter().filter(|s| s.step == "power_off"))
        .cloned()
        .collect();
    let per_node = |node: i64| {
        if power_off.contains(&node) {
            with_off.clone()
        } else {
            tasks_only.clone()
        }
    };
    let all = orchestrate::runs_for(&plan.plan, &ids, &per_node, &settings.runs);
    // Keep the node runs, renumbering their waits.
    Ok(retain_runs(all, |r| r.node.is_some()))
}

/// Nailgun's reset (`PUT /clusters/{id}/reset`): every node of the environment goes back to
/// discover, keeping its environment and roles (they are pending again), and the environment
/// back to `new` with nothing deployed. Nodes with an installed OS run the release's deletion
/// graph first (`erase_node`: their disk wiped, a reboot into the network boot) in a
/// `reset_environment` deployment; the others, and all of them when the release has no
/// deletion graph, are reset at once. Refused while a deployment runs (stop it first).
///
/// With `power_off`, every node with a usable BMC ends powered off: the erased ones by the
/// master right after their erase (a `power.power_off` run), the others at once by the caller
/// ([`Reset::power_off_now`]).
pub fn reset(
    m: &Master<'_>,
    cluster_id: i64,
    power_off: bool,
    now: i64,
) -> Result<Reset, DeployError> {
    let (store, data_dir, settings, plans) = (m.store, m.data_dir, m.settings, m.plans);
    let (nodes, with_bmc) = store.read(|r| {
        r.refuse_if_busy(cluster_id, None)?;
        Ok((r.cluster_nodes(cluster_id)?, r.nodes_with_usable_bmc()?))
    })?;
    let off: BTreeSet<i64> = if power_off {
        nodes
            .iter()
            .map(|n| n.id)
            .filter(|id| with_bmc.contains(id))
            .collect()
    } else {
        BTreeSet::new()
    };
    let installed: BTreeSet<i64> = nodes
        .iter()
        .filter(|n| !NodeState::of_node(n, false).needs_provisioning())
        .map(|n| n.id)
        .collect();
    let plan = if installed.is_empty() {
        None
    } else {
        deletion_plan(store, data_dir, cluster_id, plans, now)?
    };
    let Some(plan) = plan else {
        let deployment = m
            .writer
            .write_blocking(move |tx| tx.reset_environment_now(cluster_id, now))?;
        return Ok(Reset {
            deployment,
            power_off_now: off.into_iter().collect(),
        });
    };
    let erased_off: BTreeSet<i64> = off.intersection(&installed).copied().collect();
    let runs = erase_runs(&plan, &installed, settings, &erased_off)?;
    let bare: Vec<i64> = nodes
        .iter()
        .map(|n| n.id)
        .filter(|id| !installed.contains(id))
        .collect();
    let power_off_now = off.difference(&installed).copied().collect();
    m.writer
        .write_blocking(move |tx| tx.reset_nodes(&bare, now))?;
    let deployment = store.create_deployment(
        m.writer,
        NewDeployment {
            cluster_id,
            plan: &plan.plan,
            runs,
            release: Vec::new(),
            record: false,
            dry_run: false,
            name: crate::store::RESET,
            graph_type: "deletion".to_string(),
            parent: None,
            now,
            data: None,
        },
    )?;
    Ok(Reset {
        deployment,
        power_off_now,
    })
}

/// What a reset started.
#[derive(Debug)]
pub struct Reset {
    /// The `reset_environment` transaction (over already when no node had an OS to erase).
    pub deployment: Deployment,
    /// Nodes to power off now: asked for, with a BMC, and nothing to erase first.
    pub power_off_now: Vec<i64>,
}

/// A deployment just started, and whether its plan was the kept one.
#[derive(Debug)]
pub struct Started {
    pub deployment: Deployment,
    /// The plan was the one kept since the environment was last planned (nothing it is made
    /// from changed), not made again.
    pub plan_cached: bool,
}
