//! The node state machine: Fuel's statuses (`discover → provisioning → provisioned → deploying →
//! ready`, `error` with an error type) with Ironic's asynchronous sub-states: while a step runs on
//! the node's agent, the node waits in `wait call-back`; the agent's report brings it back.
//!
//! The machine is the table [`TRANSITIONS`], one `(state, event) => next` line each; anything
//! not in the table is an invalid transition. Pure: no clock, no storage.

use std::fmt;

use crate::model::{Node, NodeStatus};

/// Why a node is in `error` (Nailgun's `error_type`), which also says where a retry resumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorType {
    Provision,
    Deploy,
    Deletion,
}

impl ErrorType {
    /// Nailgun's `error_type` name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::Provision => "provision",
            ErrorType::Deploy => "deploy",
            ErrorType::Deletion => "deletion",
        }
    }

    pub fn parse(s: &str) -> Option<ErrorType> {
        [ErrorType::Provision, ErrorType::Deploy, ErrorType::Deletion]
            .into_iter()
            .find(|t| t.as_str() == s)
    }
}

/// Where a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeState {
    Discover,
    /// Provisioning, the master deciding or running a step itself.
    Provisioning,
    /// Provisioning, a step handed to the agent (Ironic's `wait call-back`).
    ProvisionWait,
    Provisioned,
    /// Deploying, the master deciding or running a step itself.
    Deploying,
    /// Deploying, a step handed to the agent (Ironic's `wait call-back`).
    DeployWait,
    Ready,
    /// Running the deletion graph (erasing the node).
    Removing,
    Error(ErrorType),
}

/// What happens to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Event {
    /// The operator deployed an environment holding this discovered (or failed) node.
    Provision,
    /// Provisioned or ready: run the deployment graph.
    Deploy,
    /// An asynchronous step was handed to the agent.
    StepSent,
    /// A step finished and more remain.
    StepDone,
    /// The last step finished.
    LastStepDone,
    /// A step failed or timed out.
    StepFailed,
    /// The operator stopped the deployment; the node keeps its step index.
    Abort,
    /// The operator retried the failed step.
    Retry,
    /// The node is to be removed: run the deletion graph.
    Remove,
}

impl NodeState {
    /// Where a node is, from its stored status, whether its agent runs a step right now (the
    /// `wait call-back` sub-state) and, for `error`, its stored error type (a deploy error
    /// when none was stored).
    pub fn of(status: NodeStatus, step_running: bool, error: Option<ErrorType>) -> NodeState {
        match (status, step_running) {
            (NodeStatus::Discover, _) => NodeState::Discover,
            (NodeStatus::Provisioning, false) => NodeState::Provisioning,
            (NodeStatus::Provisioning, true) => NodeState::ProvisionWait,
            (NodeStatus::Provisioned, _) => NodeState::Provisioned,
            (NodeStatus::Deploying, false) => NodeState::Deploying,
            (NodeStatus::Deploying, true) => NodeState::DeployWait,
            (NodeStatus::Ready, _) => NodeState::Ready,
            (NodeStatus::Error, _) => NodeState::Error(error.unwrap_or(ErrorType::Deploy)),
        }
    }

    /// Where a stored node is (its `status` and `error_type`), given whether its agent runs a
    /// step right now.
    pub fn of_node(node: &Node, step_running: bool) -> NodeState {
        NodeState::of(
            node.status,
            step_running,
            node.error_type.as_deref().and_then(ErrorType::parse),
        )
    }

    pub const ALL: [NodeState; 11] = [
        NodeState::Discover,
        NodeState::Provisioning,
        NodeState::ProvisionWait,
        NodeState::Provisioned,
        NodeState::Deploying,
        NodeState::DeployWait,
        NodeState::Ready,
        NodeState::Removing,
        NodeState::Error(ErrorType::Provision),
        NodeState::Error(ErrorType::Deploy),
        NodeState::Error(ErrorType::Deletion),
    ];

    /// Fuel's status name, as the API and fuelclient show it.
    pub fn status(self) -> &'static str {
        match self {
            NodeState::Discover => "discover",
            NodeState::Provisioning | NodeState::ProvisionWait => "provisioning",
            NodeState::Provisioned => "provisioned",
            NodeState::Deploying | NodeState::DeployWait => "deploying",
            NodeState::Ready => "ready",
            NodeState::Removing => "removing",
            NodeState::Error(_) => "error",
        }
    }

    /// Ironic's provision sub-state: `wait call-back` while the agent runs a step.
    pub fn sub_state(self) -> Option<&'static str> {
        match self {
            NodeState::Provisioning | NodeState::Deploying | NodeState::Removing => {
                Some("deploying")
            }
            NodeState::ProvisionWait | NodeState::DeployWait => Some("wait call-back"),
            _ => None,
        }
    }

    /// Whether a deployment must provision this node (write its image) before deploying it: a
    /// provisioned or deployed node keeps its disk.
    pub fn needs_provisioning(self) -> bool {
        matches!(
            self,
            NodeState::Discover
                | NodeState::Provisioning
                | NodeState::ProvisionWait
                | NodeState::Error(ErrorType::Provision)
        )
    }

    pub fn error_type(self) -> Option<ErrorType> {
        match self {
            NodeState::Error(t) => Some(t),
            _ => None,
        }
    }
}

impl fmt::Display for NodeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeState::Error(t) => write!(f, "error({})", t.as_str()),
            NodeState::ProvisionWait => f.write_str("provisioning/wait call-back"),
            NodeState::DeployWait => f.write_str("deploying/wait call-back"),
            other => f.write_str(other.status()),
        }
    }
}

impl Event {
    pub const ALL: [Event; 9] = [
        Event::Provision,
        Event::Deploy,
        Event::StepSent,
        Event::StepDone,
        Event::LastStepDone,
        Event::StepFailed,
        Event::Abort,
        Event::Retry,
        Event::Remove,
    ];
}

use ErrorType::{Deletion, Deploy as DeployErr, Provision as ProvisionErr};
use Event as E;
use NodeState as S;

/// Every legal transition, one line each.
pub const TRANSITIONS: &[(NodeState, Event, NodeState)] = &[
    (S::Discover, E::Provision, S::Provisioning),
    (S::Provisioning, E::StepSent, S::ProvisionWait),
    (S::Provisioning, E::StepDone, S::Provisioning),
    (S::Provisioning, E::LastStepDone, S::Provisioned),
    (S::Provisioning, E::StepFailed, S::Error(ProvisionErr)),
    (S::Provisioning, E::Abort, S::Error(ProvisionErr)),
    (S::ProvisionWait, E::StepDone, S::Provisioning),
    (S::ProvisionWait, E::LastStepDone, S::Provisioned),
    (S::ProvisionWait, E::StepFailed, S::Error(ProvisionErr)),
    (S::ProvisionWait, E::Abort, S::Error(ProvisionErr)),
    (S::Provisioned, E::Deploy, S::Deploying),
    (S::Provisioned, E::Remove, S::Removing),
    (S::Deploying, E::StepSent, S::DeployWait),
    (S::Deploying, E::StepDone, S::Deploying),
    (S::Deploying, E::LastStepDone, S::Ready),
    (S::Deploying, E::StepFailed, S::Error(DeployErr)),
    (S::Deploying, E::Abort, S::Error(DeployErr)),
    (S::DeployWait, E::StepDone, S::Deploying),
    (S::DeployWait, E::LastStepDone, S::Ready),
    (S::DeployWait, E::StepFailed, S::Error(DeployErr)),
    (S::DeployWait, E::Abort, S::Error(DeployErr)),
    (S::Ready, E::Deploy, S::Deploying),
    (S::Ready, E::Remove, S::Removing),
    (S::Removing, E::StepSent, S::Removing),
    (S::Removing, E::StepDone, S::Removing),
    (S::Removing, E::LastStepDone, S::Discover),
    (S::Removing, E::StepFailed, S::Error(Deletion)),
    (S::Error(ProvisionErr), E::Retry, S::Provisioning),
    (S::Error(ProvisionErr), E::Provision, S::Provisioning),
    (S::Error(ProvisionErr), E::Remove, S::Removing),
    (S::Error(DeployErr), E::Retry, S::Deploying),
    (S::Error(DeployErr), E::Deploy, S::Deploying),
    (S::Error(DeployErr), E::Remove, S::Removing),
    (S::Error(Deletion), E::Retry, S::Removing),
    (S::Error(Deletion), E::Remove, S::Removing),
];

/// A transition that is not in the table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a node in state {from} cannot take event {event:?}")]
pub struct InvalidTransition {
    pub from: NodeState,
    pub event: Event,
}

/// The next state, or why there is none.
pub fn next(from: NodeState, event: Event) -> Result<NodeState, InvalidTransition> {
    TRANSITIONS
        .iter()
        .find(|(s, e, _)| *s == from && *e == event)
        .map(|(_, _, to)| *to)
        .ok_or(InvalidTransition { from, event })
}

/// Which part of a node's life a step belongs to, as in Fuel: provisioning (in the bootstrap
/// ramdisk, or on the master against the BMC: the image written, the OS configured, the reboot
/// to disk) and then deploying (the graph's tasks on the installed OS). A step's location says
/// its phase ([`crate::engine::steps::Location::phase`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    Provision,
    Deploy,
}

/// Walk `events` through the table from `from`.
pub fn walk(from: NodeState, events: &[Event]) -> Result<NodeState, InvalidTransition> {
    events.iter().try_fold(from, |s, e| next(s, *e))
}

/// The state a node in `from` takes to run a step of `phase`, through the table: a discovered
/// node is provisioned first, a provisioned or ready one goes on deploying. A phase with no
/// step of its own (no image to write) is passed through: `Provision` and at once
/// `LastStepDone`.
pub fn enter(from: NodeState, phase: Phase) -> Result<NodeState, InvalidTransition> {
    let at = match (from, phase) {
        (S::ProvisionWait, Phase::Provision) => S::Provisioning,
        (S::DeployWait, Phase::Deploy) => S::Deploying,
        (S::ProvisionWait, Phase::Deploy) => S::Provisioning,
        (S::DeployWait, Phase::Provision) => S::Deploying,
        (s, _) => s,
    };
    let events: &[Event] = match (at, phase) {
        (S::Provisioning, Phase::Provision) | (S::Deploying, Phase::Deploy) => &[],
        (S::Discover | S::Error(ProvisionErr), Phase::Provision) => &[E::Provision],
        (S::Discover, Phase::Deploy) => &[E::Provision, E::LastStepDone, E::Deploy],
        (S::Error(ProvisionErr), Phase::Deploy) => &[E::Retry, E::LastStepDone, E::Deploy],
        (S::Provisioning, Phase::Deploy) => &[E::LastStepDone, E::Deploy],
        (_, Phase::Deploy) => &[E::Deploy],
        (_, Phase::Provision) => &[E::Provision],
    };
    walk(at, events)
}

/// The state of a node in `from` whose every step of the deployment is done: ready after
/// deploying, provisioned after provisioning only; a node that had nothing to run passes
/// through the phases it skipped.
pub fn finish(from: NodeState) -> Result<NodeState, InvalidTransition> {
    match from {
        S::Ready | S::Provisioned => Ok(from),
        // Only provisioning steps ran: provisioned, as Fuel's "provision only".
        S::Provisioning | S::ProvisionWait => walk(S::Provisioning, &[E::LastStepDone]),
        other => walk(enter(other, Phase::Deploy)?, &[E::LastStepDone]),
    }
}

/// The state of a node that leaves its environment for good (its deletion graph ran, it had
/// none, or the environment was deleted): back in discover, from wherever it was.
pub fn released(from: NodeState) -> Result<NodeState, InvalidTransition> {
    match from {
        S::Discover => Ok(S::Discover),
        S::Provisioning | S::ProvisionWait | S::Deploying | S::DeployWait => {
            walk(from, &[E::Abort, E::Remove, E::LastStepDone])
        }
        other => walk(other, &[E::Remove, E::LastStepDone]),
    }
}

/// The state of a node in `from` whose provisioning steps of the deployment are all done
/// (`reboot_to_disk` reported): provisioned, until its installed OS's agent takes a
/// deployment step ([`enter`]). A node in any other state stays there.
pub fn provisioning_done(from: NodeState) -> Result<NodeState, InvalidTransition> {
    match from {
        S::Provisioning | S::ProvisionWait => walk(S::Provisioning, &[E::LastStepDone]),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn a_stored_status_and_a_running_step_give_ironics_sub_state() {
        let of = NodeState::of;
        assert_eq!(
            of(NodeStatus::Deploying, true, None).sub_state(),
            Some("wait call-back")
        );
        assert_eq!(
            of(NodeStatus::Deploying, false, None).sub_state(),
            Some("deploying")
        );
        assert_eq!(
            of(NodeStatus::Provisioning, true, None),
            NodeState::ProvisionWait
        );
        assert_eq!(of(NodeStatus::Ready, false, None).sub_state(), None);
        assert_eq!(
            of(NodeStatus::Error, false, Some(ErrorType::Provision)).error_type(),
            Some(ErrorType::Provision)
        );
        assert_eq!(
            of(NodeStatus::Error, false, None).to_string(),
            "error(deploy)"
        );
        for status in NodeStatus::ALL {
            // Every stored status maps to a state whose Fuel name is that status.
            assert_eq!(of(status, false, None).status(), status.as_str());
        }
    }

    /// What a deployment does to a node in each state: where it enters to run a step of each
    /// phase, and where it ends when all its steps are done. Every answer is reached through
    /// the table (an invalid one says which event the table lacks).
    #[test]
    fn entering_a_phase_and_finishing_walk_the_table() {
        let mut out = String::new();
        for s in states() {
            let show = |r: Result<NodeState, InvalidTransition>| match r {
                Ok(to) => to.to_string(),
                Err(e) => format!("invalid ({:?} from {})", e.event, e.from),
            };
            out.push_str(&format!(
                "{s}: provision -> {}; deploy -> {}; finish -> {}\n",
                show(enter(s, Phase::Provision)),
                show(enter(s, Phase::Deploy)),
                show(finish(s)),
            ));
        }
        let expected = "\
discover: provision -> provisioning; deploy -> deploying; finish -> ready
provisioning: provision -> provisioning; deploy -> deploying; finish -> provisioned
provisioning/wait call-back: provision -> provisioning; deploy -> deploying; finish -> provisioned
provisioned: provision -> invalid (Provision from provisioned); deploy -> deploying; finish -> provisioned
deploying: provision -> invalid (Provision from deploying); deploy -> deploying; finish -> ready
deploying/wait call-back: provision -> invalid (Provision from deploying); deploy -> deploying; finish -> ready
ready: provision -> invalid (Provision from ready); deploy -> deploying; finish -> ready
removing: provision -> invalid (Provision from removing); deploy -> invalid (Deploy from removing); finish -> invalid (Deploy from removing)
error(provision): provision -> provisioning; deploy -> deploying; finish -> ready
error(deploy): provision -> invalid (Provision from error(deploy)); deploy -> deploying; finish -> ready
error(deletion): provision -> invalid (Provision from error(deletion)); deploy -> invalid (Deploy from error(deletion)); finish -> invalid (Deploy from error(deletion))
";
        assert_eq!(out, expected);
    }

    fn states() -> BTreeSet<NodeState> {
        NodeState::ALL.into_iter().collect()
    }

    /// Walk every (state, event) pair and render the outcome as a matrix: the snapshot is the
    /// specification, readable in review.
    #[test]
    fn every_pair_matches_the_snapshot() {
        let mut out = String::new();
        for s in states() {
            for e in Event::ALL {
                match next(s, e) {
                    Ok(to) => out.push_str(&format!("{s} + {e:?} => {to}\n")),
                    Err(err) => assert_eq!(err, InvalidTransition { from: s, event: e }),
                }
            }
        }
        let expected = "\
discover + Provision => provisioning
provisioning + StepSent => provisioning/wait call-back
provisioning + StepDone => provisioning
provisioning + LastStepDone => provisioned
provisioning + StepFailed => error(provision)
provisioning + Abort => error(provision)
provisioning/wait call-back + StepDone => provisioning
provisioning/wait call-back + LastStepDone => provisioned
provisioning/wait call-back + StepFailed => error(provision)
provisioning/wait call-back + Abort => error(provision)
provisioned + Deploy => deploying
provisioned + Remove => removing
deploying + StepSent => deploying/wait call-back
deploying + StepDone => deploying
deploying + LastStepDone => ready
deploying + StepFailed => error(deploy)
deploying + Abort => error(deploy)
deploying/wait call-back + StepDone => deploying
deploying/wait call-back + LastStepDone => ready
deploying/wait call-back + StepFailed => error(deploy)
deploying/wait call-back + Abort => error(deploy)
ready + Deploy => deploying
ready + Remove => removing
removing + StepSent => removing
removing + StepDone => removing
removing + LastStepDone => discover
removing + StepFailed => error(deletion)
error(provision) + Provision => provisioning
error(provision) + Retry => provisioning
error(provision) + Remove => removing
error(deploy) + Deploy => deploying
error(deploy) + Retry => deploying
error(deploy) + Remove => removing
error(deletion) + Retry => removing
error(deletion) + Remove => removing
";
        assert_eq!(out, expected);
    }

    #[test]
    fn table_has_one_line_per_pair_and_only_known_states() {
        let mut seen = BTreeSet::new();
        for (s, e, to) in TRANSITIONS {
            assert!(seen.insert((*s, *e)), "two lines for ({s}, {e:?})");
            assert!(states().contains(s) && states().contains(to));
        }
    }

    #[test]
    fn every_state_can_reach_ready_and_discover() {
        for target in [NodeState::Ready, NodeState::Discover] {
            for start in states() {
                let mut reached = BTreeSet::from([start]);
                let mut frontier = vec![start];
                while let Some(s) = frontier.pop() {
                    for e in Event::ALL {
                        if let Ok(to) = next(s, e)
                            && reached.insert(to)
                        {
                            frontier.push(to);
                        }
                    }
                }
                assert!(
                    reached.contains(&target),
                    "{target} unreachable from {start}"
                );
            }
        }
    }

    #[test]
    fn statuses_and_sub_states() {
        assert_eq!(NodeState::DeployWait.status(), "deploying");
        assert_eq!(NodeState::DeployWait.sub_state(), Some("wait call-back"));
        assert_eq!(NodeState::Deploying.sub_state(), Some("deploying"));
        assert_eq!(NodeState::Ready.sub_state(), None);
        assert_eq!(
            NodeState::Error(ErrorType::Provision).error_type(),
            Some(ErrorType::Provision)
        );
        assert_eq!(
            next(NodeState::Ready, Event::StepSent)
                .unwrap_err()
                .to_string(),
            "a node in state ready cannot take event StepSent"
        );
    }
}
