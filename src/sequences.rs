//! Nailgun's deployment sequences (`/sequences/`, `fuel2 sequence ...`): a release's named
//! list of graphs, executed on an environment of that release as one transaction whose graphs
//! run one after another ([`crate::chains`]). What the API does lives here, as Nailgun's
//! `SequenceValidator` and `SequenceExecutorValidator` checked it: `name`, `release` and
//! `graphs` required to create, `name` and `graphs` to change, `cluster` to execute (with
//! `dry_run`, `noop_run`, `force`, `debug`), no other key; a name taken in the release is a
//! conflict; a missing release, environment or sequence, or an environment of another release,
//! is not found. Each refusal names its field. Stricter than Nailgun: a name is 1-255
//! characters without control characters, each graph a graph type with no other key than
//! `type` and `nodes` (`tasks` is refused: stoker runs whole graphs), at most
//! [`crate::chains::MAX_GRAPHS`] graphs, and a null where a value is expected is refused.

use serde::{Deserialize, Deserializer};

use crate::chains::{self, Chains, Execution, GraphItem};
use crate::deployer::{DeployError, Master};
use crate::model::FieldError;
use crate::store::{ChainGraph, Deployment, ReadTxn, Sequence, StoreError, WriteTxn};

/// A key that, when present, must not be null (Nailgun's schema types refuse null).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// `POST /sequences/`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSequence {
    pub name: String,
    pub release: i64,
    pub graphs: Vec<GraphItem>,
}

/// `PUT|PATCH /sequences/{id}/`'s body: what to change.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequenceChange {
    #[serde(default, deserialize_with = "present")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub graphs: Option<Vec<GraphItem>>,
}

/// `POST /sequences/{id}/execute/`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequenceRun {
    pub cluster: i64,
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub noop_run: bool,
    #[serde(default)]
    pub force: bool,
    /// Accepted and ignored: stoker's agents report the same either way.
    #[serde(default)]
    pub debug: bool,
}

fn invalid(fields: Vec<FieldError>) -> StoreError {
    StoreError::Invalid {
        what: "sequence",
        fields,
    }
}

fn check_name(name: &str, errors: &mut Vec<FieldError>) {
    let chars = name.chars().count();
    if chars == 0 || chars > 255 || name.chars().any(char::is_control) {
        errors.push(FieldError {
            field: "name".into(),
            message: format!(
                "{:?}: a sequence's name is 1-255 characters without control characters",
                name.chars().take(64).collect::<String>()
            ),
        });
    }
}

fn check_graphs(items: &[GraphItem], errors: &mut Vec<FieldError>) -> Vec<ChainGraph> {
    match chains::check_graphs(items, "graphs") {
        Ok(graphs) => graphs,
        Err(found) => {
            errors.extend(found);
            Vec::new()
        }
    }
}

/// Every sequence, or those of a release (`release`) or of an environment's release
/// (`cluster`, which wins, as Nailgun's); not found when the one named does not exist.
pub fn list(
    r: &ReadTxn<'_>,
    release: Option<i64>,
    cluster: Option<i64>,
) -> crate::store::Result<Vec<Sequence>> {
    let release = match (cluster, release) {
        (Some(c), _) => Some(r.existing_cluster(c)?.release_id),
        (None, Some(rel)) => match r.release(rel)? {
            Some(_) => Some(rel),
            None => {
                return Err(StoreError::NotFound {
                    entity: "release",
                    id: rel.to_string(),
                });
            }
        },
        (None, None) => None,
    };
    r.sequences(release)
}

/// Create a sequence: its name unique in its release (409), the release existing (404).
pub fn create(tx: &WriteTxn<'_>, new: &NewSequence) -> crate::store::Result<Sequence> {
    let mut errors = Vec::new();
    check_name(&new.name, &mut errors);
    let graphs = check_graphs(&new.graphs, &mut errors);
    if !errors.is_empty() {
        return Err(invalid(errors));
    }
    tx.create_sequence(new.release, &new.name, &graphs)
}

/// Change sequence `id`'s name and/or graphs.
pub fn update(
    tx: &WriteTxn<'_>,
    id: i64,
    change: &SequenceChange,
) -> crate::store::Result<Sequence> {
    let mut errors = Vec::new();
    if let Some(name) = &change.name {
        check_name(name, &mut errors);
    }
    let graphs = change
        .graphs
        .as_ref()
        .map(|items| check_graphs(items, &mut errors));
    if !errors.is_empty() {
        return Err(invalid(errors));
    }
    tx.update_sequence(id, change.name.as_deref(), graphs.as_deref())
}

/// Execute sequence `id` on the environment `run` names, which must be of the sequence's
/// release (else not found, as Nailgun's): its graphs one after another, as one transaction.
pub fn execute(
    m: &Master<'_>,
    chains: &Chains,
    id: i64,
    run: &SequenceRun,
    now: i64,
) -> Result<Deployment, DeployError> {
    let (sequence, cluster) = m.store.read(|r| {
        let sequence = r.existing_sequence(id)?;
        let cluster = r.existing_cluster(run.cluster)?;
        Ok((sequence, cluster))
    })?;
    if cluster.release_id != sequence.release_id {
        return Err(DeployError::Store(StoreError::NotFound {
            entity: "sequence",
            id: format!(
                "{:?} (release {}) for environment {} (release {})",
                sequence.name, sequence.release_id, cluster.name, cluster.release_id
            ),
        }));
    }
    let execution = Execution {
        cluster_id: cluster.id,
        graphs: sequence.graphs,
        dry_run: run.dry_run || run.noop_run,
        force: run.force,
    };
    chains::execute(m, chains, &execution, now)
}
