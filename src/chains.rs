//! Several graphs in one execution (`POST /graphs/execute/` with more than one graph, a
//! sequence executed): run one after another as Nailgun's `TransactionsManager` ran them, as
//! one parent transaction whose children each run one graph. The parent is a `deployments`
//! row with no runs of its own (`store::Chain`), so its id is a transaction id as unique as
//! any other, it belongs to its environment like every deployment, and deleting it takes its
//! children; what it runs and why it ended live in a table of its own. A table of chains
//! apart from `deployments` would have needed ids of its own that could collide with the
//! deployments' in Nailgun's one list of transactions.
//!
//! What comes next is decided by [`crate::engine::chain::next`] (pure) over the stored rows;
//! acting needs the planner and the data dir, so it happens here, at the edge: when the
//! request opens the chain (its first graph starts then, and a first graph that cannot start
//! refuses the request, leaving nothing behind), and from the daemon's loop once a second
//! ([`tick`]), which starts the next graph when the one before it ended well and ends the
//! chain otherwise. Everything is in SQLite, so a daemon killed mid-chain carries on after a
//! restart: the running graph's agents go on, a graph cut short while being written (never
//! visible, deleted at start) is started again, the next one starts when its turn comes.
//! [`Chains`] lets one caller at a time act on chains, so a graph is never started twice.
//!
//! One graph alone runs as one deployment, as before chains: its planning errors answer the
//! request.

use std::collections::BTreeSet;
use std::sync::Mutex;

use serde::Deserialize;

use crate::deployer::{self, DeployError, Master, Request, Scope};
use crate::engine::chain::{End, Next};
use crate::engine::state::Phase;
use crate::model::FieldError;
use crate::store::{ChainGraph, Deployment, StoreError};

/// At most this many graphs run in one execution or sequence.
pub const MAX_GRAPHS: usize = 100;
/// At most this many node ids per graph.
pub const MAX_NODES: usize = 10_000;

/// One caller at a time acts on chains (the API opening one, the daemon's loop).
#[derive(Debug, Default)]
pub struct Chains {
    acting: Mutex<()>,
}

impl Chains {
    fn act(&self) -> std::sync::MutexGuard<'_, ()> {
        // Nothing is left half-done in memory under this lock: the rows say where a chain is.
        self.acting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One item of Nailgun's `graphs` list as a request gives it: `type`, and optionally the
/// `nodes` to run it on and a subset of its `tasks` (refused: stoker runs whole graphs).
/// Other keys are refused by name.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphItem {
    #[serde(rename = "type")]
    pub graph_type: String,
    #[serde(default)]
    pub nodes: Option<Vec<i64>>,
    #[serde(default)]
    pub tasks: Option<Vec<String>>,
}

/// `items` (the request's field `field`) checked into the graphs to run: at least one, at
/// most [`MAX_GRAPHS`]; each a graph type, its node ids positive (an empty list: every node),
/// no subset of tasks. Every problem named by its field.
pub fn check_graphs(items: &[GraphItem], field: &str) -> Result<Vec<ChainGraph>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut bad = |f: String, m: String| {
        errors.push(FieldError {
            field: f,
            message: m,
        })
    };
    if items.is_empty() {
        bad(
            field.to_string(),
            "no graph given: name at least one".into(),
        );
    }
    if items.len() > MAX_GRAPHS {
        bad(
            field.to_string(),
            format!(
                "{} graphs; at most {MAX_GRAPHS} run in one execution",
                items.len()
            ),
        );
    }
    let mut out = Vec::new();
    for (i, g) in items.iter().enumerate().take(MAX_GRAPHS) {
        if !crate::graphs::is_graph_type(&g.graph_type) {
            bad(
                format!("{field}[{i}].type"),
                format!(
                    "{:?} is not a graph type: expected 1-255 letters, digits, '_', '-' or '.'",
                    g.graph_type.chars().take(64).collect::<String>()
                ),
            );
        }
        if g.tasks.is_some() {
            bad(
                format!("{field}[{i}].tasks"),
                "running a subset of a graph's tasks is not supported; run the whole graph".into(),
            );
        }
        let nodes = match &g.nodes {
            Some(ids) if ids.len() > MAX_NODES => {
                bad(
                    format!("{field}[{i}].nodes"),
                    format!("{} node ids; at most {MAX_NODES}", ids.len()),
                );
                None
            }
            Some(ids) if ids.iter().any(|&id| id <= 0) => {
                bad(
                    format!("{field}[{i}].nodes"),
                    "node ids are positive integers".into(),
                );
                None
            }
            Some(ids) if !ids.is_empty() => {
                let set: BTreeSet<i64> = ids.iter().copied().collect();
                Some(set.into_iter().collect())
            }
            _ => None,
        };
        out.push(ChainGraph {
            graph_type: g.graph_type.clone(),
            nodes,
        });
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// What one execution runs: its environment, its graphs in order, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    pub cluster_id: i64,
    pub graphs: Vec<ChainGraph>,
    /// Record what would run, run nothing (Nailgun's `dry_run`, and `noop_run`: stoker's
    /// tasks have no no-op mode).
    pub dry_run: bool,
    /// Every task runs whatever its conditions say.
    pub force: bool,
}

/// The deployment's scope for graph `g`: the deployment graph by name is the deployment phase
/// (its runs are recorded as the deployed state); another type runs its tasks alone.
pub fn scope_of(g: &ChainGraph, dry_run: bool, force: bool) -> Scope {
    let (graph_type, phase) = if g.graph_type == "default" {
        (None, Some(Phase::Deploy))
    } else {
        (Some(g.graph_type.clone()), None)
    };
    Scope {
        graph_type,
        phase,
        nodes: g.nodes.as_ref().map(|n| n.iter().copied().collect()),
        force,
        dry_run,
    }
}

fn refuse(fields: Vec<FieldError>) -> DeployError {
    DeployError::Store(StoreError::Invalid {
        what: "graph execution",
        fields,
    })
}

/// What an execution names that the environment lacks: nodes not in it (Nailgun's "Nodes ...
/// do not belong to the same cluster"), graph types nothing of it defines (Nailgun found
/// those only when their turn came). Checked before anything starts.
fn check_against_environment(m: &Master<'_>, e: &Execution) -> Result<(), DeployError> {
    let members: BTreeSet<i64> = m
        .store
        .read(|r| {
            r.existing_cluster(e.cluster_id)?;
            r.cluster_nodes(e.cluster_id)
        })?
        .iter()
        .map(|n| n.id)
        .collect();
    let types = crate::graphs::types_for(m.store, m.data_dir, e.cluster_id)?;
    let mut errors = Vec::new();
    for (i, g) in e.graphs.iter().enumerate() {
        let strangers: Vec<String> = g
            .nodes
            .iter()
            .flatten()
            .filter(|id| !members.contains(id))
            .map(ToString::to_string)
            .collect();
        if !strangers.is_empty() {
            errors.push(FieldError {
                field: format!("graphs[{i}].nodes"),
                message: format!(
                    "nodes {} do not belong to environment {}",
                    strangers.join(", "),
                    e.cluster_id
                ),
            });
        }
        if !types.contains(&g.graph_type) {
            errors.push(FieldError {
                field: format!("graphs[{i}].type"),
                message: format!(
                    "environment {} has no graph of type {:?}: neither its release, its enabled \
                     plugins nor the environment define one",
                    e.cluster_id, g.graph_type
                ),
            });
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(refuse(errors))
    }
}

/// Run execution `e`: one graph as one deployment; several as a chain whose first graph
/// starts now (the rest follow from [`tick`]). The transaction to answer with. Refused, with
/// nothing written, when what it names is not the environment's or its first graph cannot
/// start.
pub fn execute(
    m: &Master<'_>,
    chains: &Chains,
    e: &Execution,
    now: i64,
) -> Result<Deployment, DeployError> {
    check_against_environment(m, e)?;
    if let [only] = e.graphs.as_slice() {
        let started = deployer::start(
            m,
            &Request {
                cluster_id: e.cluster_id,
                scope: scope_of(only, e.dry_run, e.force),
                empty_ok: true,
                now,
                ..Request::default()
            },
        )?;
        return Ok(started.deployment);
    }
    let _acting = chains.act();
    let (cluster, graphs, dry, force) = (e.cluster_id, e.graphs.clone(), e.dry_run, e.force);
    let parent = m
        .writer
        .write_blocking(move |tx| tx.open_chain(cluster, &graphs, dry, force, now))?;
    if let Err(err) = drive(m, parent.id, true, now) {
        let id = parent.id;
        // The request is refused for `err`; a chain that cannot be dropped stays, ended by
        // the daemon's loop as one whose first graph did not start.
        if let Err(drop_err) = m.writer.write_blocking(move |tx| tx.drop_chain(id)) {
            tracing::error!(transaction = id, %drop_err, "cannot drop a chain that did not start");
        }
        return Err(err);
    }
    Ok(m.store.read(|r| r.deployment(parent.id))?.unwrap_or(parent))
}

/// Move every chain that goes and waits for no graph as far as it can now: start its next
/// graph when the one before it ended well, end it when its last graph did or one failed or
/// was stopped. Returns how many chains there were; one chain's error is logged and the
/// others go on.
pub fn tick(m: &Master<'_>, chains: &Chains, now: i64) -> Result<usize, StoreError> {
    let active = m.store.read(|r| r.chains_to_move())?;
    if active.is_empty() {
        return Ok(0);
    }
    let _acting = chains.act();
    for &id in &active {
        if let Err(err) = drive(m, id, false, now) {
            tracing::error!(transaction = id, %err, "cannot move a chain of graphs on");
        }
    }
    Ok(active.len())
}

/// Drive chain `parent` (the caller acts on chains) until it waits for a running graph or
/// ends. A graph that cannot start ends the chain, naming it, except the first one when the
/// request that opened the chain is still there (`opening`): then the error is returned, for
/// the request to refuse.
fn drive(m: &Master<'_>, parent: i64, opening: bool, now: i64) -> Result<(), DeployError> {
    // Each round starts a graph or ends the chain, so this many rounds always suffice.
    for _ in 0..=MAX_GRAPHS + 1 {
        let Some(chain) = m.store.read(|r| r.chain(parent))? else {
            return Ok(());
        };
        if !chain.goes() {
            return Ok(());
        }
        let next = chain.next();
        if let Some((status, message)) = chain.ending(next) {
            m.writer
                .write_blocking(move |tx| tx.end_chain(parent, status, message.as_deref(), now))?;
            return Ok(());
        }
        let Next::Start(i) = next else {
            // A graph runs: its end moves the chain on.
            return Ok(());
        };
        let Some(graph) = chain.graphs.get(i) else {
            return Ok(());
        };
        let request = Request {
            cluster_id: chain.parent.cluster_id,
            scope: scope_of(graph, chain.dry_run, chain.force),
            empty_ok: true,
            parent: Some((parent, u32::try_from(i).unwrap_or(u32::MAX))),
            now,
            ..Request::default()
        };
        // Every task skipped: the graph is over with nothing run, as Nailgun ran a graph
        // whose tasks were all skipped.
        let started = match deployer::start(m, &request) {
            Err(DeployError::NothingToRun { .. }) => deployer::record_empty(m, &request),
            other => other.map(|s| s.deployment),
        };
        match started {
            Ok(_) => continue,
            Err(err) if opening && i == 0 => return Err(err),
            Err(err) => {
                let message = End::NotStarted {
                    index: i,
                    graphs: chain.graphs.len(),
                    graph_type: graph.graph_type.clone(),
                    why: err.to_string(),
                }
                .message();
                m.writer
                    .write_blocking(move |tx| tx.end_chain(parent, "error", Some(&message), now))?;
                return Ok(());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(ty: &str) -> GraphItem {
        GraphItem {
            graph_type: ty.into(),
            nodes: None,
            tasks: None,
        }
    }

    #[test]
    fn graphs_are_checked_each_problem_named() {
        let ok = check_graphs(
            &[
                item("a"),
                GraphItem {
                    nodes: Some(vec![3, 1, 3]),
                    ..item("b")
                },
                GraphItem {
                    nodes: Some(vec![]),
                    ..item("default")
                },
            ],
            "graphs",
        )
        .unwrap();
        assert_eq!(ok[1].nodes, Some(vec![1, 3]));
        assert_eq!(ok[2].nodes, None, "an empty list is every node");

        let bad = check_graphs(
            &[
                item("no spaces"),
                GraphItem {
                    tasks: Some(vec!["x".into()]),
                    nodes: Some(vec![0]),
                    ..item("ok")
                },
            ],
            "graphs",
        )
        .unwrap_err();
        let fields: Vec<&str> = bad.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            ["graphs[0].type", "graphs[1].tasks", "graphs[1].nodes"]
        );
        let none = check_graphs(&[], "graphs").unwrap_err();
        assert_eq!(none[0].field, "graphs");
        let many = vec![item("a"); MAX_GRAPHS + 1];
        assert_eq!(
            check_graphs(&many, "graphs").unwrap_err()[0].field,
            "graphs"
        );
    }

    #[test]
    fn the_deployment_graph_by_name_is_the_deployment_phase() {
        let s = scope_of(
            &ChainGraph {
                graph_type: "default".into(),
                nodes: Some(vec![2]),
            },
            true,
            false,
        );
        assert_eq!(
            (s.graph_type, s.phase, s.dry_run),
            (None, Some(Phase::Deploy), true)
        );
        assert_eq!(s.nodes, Some([2].into_iter().collect()));
        let s = scope_of(
            &ChainGraph {
                graph_type: "custom".into(),
                nodes: None,
            },
            false,
            true,
        );
        assert_eq!(
            (s.graph_type.as_deref(), s.phase, s.force),
            (Some("custom"), None, true)
        );
    }
}
