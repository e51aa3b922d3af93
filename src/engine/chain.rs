//! Several deployment graphs run one after another as one transaction, as Nailgun's
//! `TransactionsManager` ran them: a parent transaction whose sub-transactions (children) each
//! run one graph; the next starts only when the one before it ended well (`ready`); a child
//! that fails ends the chain and fails the parent, one stopped by the operator stops it. Pure:
//! given how many graphs a chain has and how each child started so far stands, [`next`] says
//! what to do; [`progress`] is the parent's progress and [`End::message`] why it ended. The
//! driver (`crate::chains`) reads the rows, acts (plans and starts a child) and writes.

use std::collections::BTreeMap;

/// How one child (one graph's deployment) stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Child {
    /// Running, or being written.
    Running,
    /// Ended well: done, or a dry run recorded.
    Succeeded,
    /// Stopped on a failed step.
    Failed,
    /// Stopped by the operator (aborted).
    Stopped,
}

impl Child {
    /// A child of its stored deployment status. A status this module does not know ends the
    /// chain as a failure rather than waiting on it forever.
    pub fn of_status(status: &str) -> Child {
        match status {
            "preparing" | "running" => Child::Running,
            "done" | "dry_run" => Child::Succeeded,
            "aborted" => Child::Stopped,
            _ => Child::Failed,
        }
    }
}

/// What a chain does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Start graph `i` (0-based): the ones before it ended well and it has no child yet.
    Start(usize),
    /// Graph `i`'s child runs: nothing to do until it ends.
    Wait(usize),
    /// Every graph ended well: the chain is over, well.
    Finish,
    /// Graph `i`'s child failed: the chain ends there, failed.
    Fail(usize),
    /// Graph `i`'s child was stopped: the chain ends there, stopped.
    Stop(usize),
}

/// What comes next in a chain of `graphs` graphs whose children so far stand as `children`
/// (by place in the chain; places past the last graph are ignored).
pub fn next(graphs: usize, children: &BTreeMap<usize, Child>) -> Next {
    for i in 0..graphs {
        match children.get(&i) {
            None => return Next::Start(i),
            Some(Child::Running) => return Next::Wait(i),
            Some(Child::Succeeded) => {}
            Some(Child::Failed) => return Next::Fail(i),
            Some(Child::Stopped) => return Next::Stop(i),
        }
    }
    Next::Finish
}

/// A child's progress in percent: 100 once it ended well or when it has no runs, else the
/// share of its runs that finished.
pub fn child_percent(succeeded: bool, runs: u64, finished: u64) -> u64 {
    if succeeded || runs == 0 {
        100
    } else {
        finished.min(runs) * 100 / runs
    }
}

/// The parent's progress in percent: the mean of its graphs' progress, a graph not started
/// counting 0 (`percents`: the started children's, by place). A chain of no graphs is done.
pub fn progress(graphs: usize, percents: &BTreeMap<usize, u64>) -> u64 {
    if graphs == 0 {
        return 100;
    }
    let sum: u64 = (0..graphs)
        .map(|i| percents.get(&i).copied().unwrap_or(0).min(100))
        .sum();
    sum / graphs as u64
}

/// How a chain ended, when not well: what the parent's message says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// Graph `index` (0-based) of `graphs`, of type `graph_type`, failed in child `child`.
    Failed {
        index: usize,
        graphs: usize,
        graph_type: String,
        child: i64,
    },
    /// The operator stopped it while graph `index` ran in child `child`, or before the graph
    /// started (`child` None).
    Stopped {
        index: usize,
        graphs: usize,
        graph_type: String,
        child: Option<i64>,
    },
    /// Graph `index` could not start: `why`.
    NotStarted {
        index: usize,
        graphs: usize,
        graph_type: String,
        why: String,
    },
}

impl End {
    /// The parent transaction's message, naming the graph.
    pub fn message(&self) -> String {
        let rest = |index: usize, graphs: usize| match graphs.saturating_sub(index + 1) {
            0 => String::new(),
            1 => "; the graph after it did not run".to_string(),
            n => format!("; the {n} graphs after it did not run"),
        };
        match self {
            End::Failed {
                index,
                graphs,
                graph_type,
                child,
            } => format!(
                "graph {} of {graphs} ({graph_type}) failed: transaction {child} stopped on a \
                 failed step{}",
                index + 1,
                rest(*index, *graphs)
            ),
            End::Stopped {
                index,
                graphs,
                graph_type,
                child,
            } => format!(
                "stopped by the operator at graph {} of {graphs} ({graph_type}{}){}",
                index + 1,
                child.map_or_else(String::new, |c| format!(", transaction {c}")),
                rest(*index, *graphs)
            ),
            End::NotStarted {
                index,
                graphs,
                graph_type,
                why,
            } => format!(
                "graph {} of {graphs} ({graph_type}) could not start: {why}{}",
                index + 1,
                rest(*index, *graphs)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn children(list: &[(usize, Child)]) -> BTreeMap<usize, Child> {
        list.iter().copied().collect()
    }

    #[test]
    fn graphs_start_one_after_another_each_when_the_one_before_ended_well() {
        assert_eq!(next(2, &children(&[])), Next::Start(0));
        assert_eq!(next(2, &children(&[(0, Child::Running)])), Next::Wait(0));
        assert_eq!(next(2, &children(&[(0, Child::Succeeded)])), Next::Start(1));
        assert_eq!(
            next(2, &children(&[(0, Child::Succeeded), (1, Child::Running)])),
            Next::Wait(1)
        );
        assert_eq!(
            next(
                2,
                &children(&[(0, Child::Succeeded), (1, Child::Succeeded)])
            ),
            Next::Finish
        );
    }

    #[test]
    fn a_failed_or_stopped_child_ends_the_chain_there() {
        assert_eq!(next(3, &children(&[(0, Child::Failed)])), Next::Fail(0));
        assert_eq!(
            next(3, &children(&[(0, Child::Succeeded), (1, Child::Stopped)])),
            Next::Stop(1)
        );
        // A later child cannot outweigh an earlier end (a retried one, say).
        assert_eq!(
            next(3, &children(&[(0, Child::Failed), (1, Child::Succeeded)])),
            Next::Fail(0)
        );
    }

    #[test]
    fn places_past_the_chain_and_an_empty_chain() {
        assert_eq!(next(0, &children(&[])), Next::Finish);
        assert_eq!(
            next(1, &children(&[(0, Child::Succeeded), (5, Child::Failed)])),
            Next::Finish
        );
        // A gap (a child deleted, a start cut short) is started again.
        assert_eq!(next(3, &children(&[(1, Child::Succeeded)])), Next::Start(0));
    }

    #[test]
    fn statuses_of_stored_deployments() {
        assert_eq!(Child::of_status("running"), Child::Running);
        assert_eq!(Child::of_status("preparing"), Child::Running);
        assert_eq!(Child::of_status("done"), Child::Succeeded);
        assert_eq!(Child::of_status("dry_run"), Child::Succeeded);
        assert_eq!(Child::of_status("error"), Child::Failed);
        assert_eq!(Child::of_status("aborted"), Child::Stopped);
        assert_eq!(Child::of_status("something new"), Child::Failed);
    }

    #[test]
    fn the_parent_progress_is_the_mean_of_its_graphs() {
        let p = |list: &[(usize, u64)]| progress(4, &list.iter().copied().collect());
        assert_eq!(p(&[]), 0);
        assert_eq!(p(&[(0, 100), (1, 50)]), 37);
        assert_eq!(p(&[(0, 100), (1, 100), (2, 100), (3, 100)]), 100);
        assert_eq!(p(&[(0, 900)]), 25, "a child counts at most 100");
        assert_eq!(progress(0, &BTreeMap::new()), 100);
        assert_eq!(child_percent(false, 4, 1), 25);
        assert_eq!(child_percent(false, 0, 0), 100);
        assert_eq!(child_percent(true, 4, 0), 100);
        assert_eq!(child_percent(false, 4, 9), 100);
    }

    #[test]
    fn messages_name_the_graph_and_what_did_not_run() {
        let failed = End::Failed {
            index: 0,
            graphs: 3,
            graph_type: "custom".into(),
            child: 17,
        };
        assert_eq!(
            failed.message(),
            "graph 1 of 3 (custom) failed: transaction 17 stopped on a failed step; the 2 \
             graphs after it did not run"
        );
        let stopped = End::Stopped {
            index: 1,
            graphs: 2,
            graph_type: "b".into(),
            child: Some(9),
        };
        assert_eq!(
            stopped.message(),
            "stopped by the operator at graph 2 of 2 (b, transaction 9)"
        );
        let not = End::NotStarted {
            index: 1,
            graphs: 3,
            graph_type: "b".into(),
            why: "nodes node-2 are not provisioned".into(),
        };
        assert!(
            not.message()
                .starts_with("graph 2 of 3 (b) could not start: nodes")
        );
        assert!(not.message().ends_with("; the graph after it did not run"));
    }
}
