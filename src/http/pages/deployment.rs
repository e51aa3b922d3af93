//! A deployment's page, `/deployments/{id}`: who started it and when, how it stands (counts,
//! the agents it waits for, how its graph tasks became steps), its timeline, its abort and
//! retry actions, and every run grouped per node with status, attempt, times, exit code and
//! output tail, filtered by node, status and text (GET parameters, so a filter works without
//! JavaScript and can be linked).
//!
//! Big deployments stay small pages: nodes come [`NODES_PER_PAGE`] to a page (the stages and
//! nodes with a failed run first), and without a filter a node with nothing failed or running
//! is one line saying where it stands and how many runs it hides. The status card and the runs
//! are also fragments (`/deployments/{id}/status`, `/deployments/{id}/runs?…`) rendered by the
//! same template parts, which `live.js` swaps in as the deployment moves. Also the run's whole
//! stored output as text, and the abort and retry actions, which come back here.

use std::collections::HashMap;
use std::fmt::Write as _;

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;

use crate::engine::orchestrate::RunStatus;
use crate::http::pages::runs::{self, RunRow};
use crate::http::pages::views::{Me, ago, badge, duration, utc};
use crate::http::pages::{PageError, VERSION, notice};
use crate::http::{ApiError, AppState};
use crate::store::{Deployment, RunCounts, RunLine};

/// Node sections on one page.
pub const NODES_PER_PAGE: usize = 25;

/// The longest text filter.
const MAX_TEXT: usize = 100;

/// What the runs are filtered by, from the query string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub node: Option<i64>,
    pub status: Option<RunStatus>,
    /// Part of the step or task name, any case.
    pub text: String,
    /// 1-based.
    pub page: usize,
}

impl Filter {
    /// The filter of `query` (`node`, `status`, `q`, `page`; empty values are absent), or every
    /// problem with it, each naming its parameter.
    pub fn parse(query: &str) -> Result<Filter, Vec<String>> {
        let mut f = Filter {
            page: 1,
            ..Filter::default()
        };
        let pairs: Vec<(String, String)> = match serde_urlencoded::from_str(query) {
            Ok(p) => p,
            Err(e) => return Err(vec![format!("the query string is not readable: {e}")]),
        };
        let mut errors = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        for (key, value) in &pairs {
            let value = value.trim();
            if seen.contains(&key.as_str()) {
                errors.push(format!("{key}: given more than once"));
                continue;
            }
            match key.as_str() {
                "node" => {
                    seen.push("node");
                    if value.is_empty() {
                        continue;
                    }
                    match value.parse::<i64>() {
                        Ok(n) if n > 0 => f.node = Some(n),
                        _ => errors.push(format!("node: {value:?} is not a node id")),
                    }
                }
                "status" => {
                    seen.push("status");
                    if value.is_empty() {
                        continue;
                    }
                    match RunStatus::parse(value) {
                        Some(s) => f.status = Some(s),
                        None => errors.push(format!(
                            "status: {value:?} is not a run status (failed, running, pending, \
                             ok, skipped)"
                        )),
                    }
                }
                "q" => {
                    seen.push("q");
                    if value.chars().count() > MAX_TEXT {
                        errors.push(format!("q: longer than {MAX_TEXT} characters"));
                    } else {
                        f.text = value.to_string();
                    }
                }
                "page" => {
                    seen.push("page");
                    if value.is_empty() {
                        continue;
                    }
                    match value.parse::<usize>() {
                        Ok(p) if (1..=100_000).contains(&p) => f.page = p,
                        _ => errors.push(format!("page: {value:?} is not a page number")),
                    }
                }
                other => errors.push(format!(
                    "{other}: not a filter of this page (node, status, q, page)"
                )),
            }
        }
        if errors.is_empty() {
            Ok(f)
        } else {
            Err(errors)
        }
    }

    /// Whether it narrows the runs (a node, a status or a text), so every node it keeps shows
    /// its runs.
    pub fn narrows(&self) -> bool {
        self.node.is_some() || self.status.is_some() || !self.text.is_empty()
    }

    /// Whether `line` passes the status and text filters.
    fn keeps(&self, line: &RunLine) -> bool {
        if let Some(s) = self.status
            && line.status != s.as_str()
        {
            return false;
        }
        self.text.is_empty()
            || line
                .name()
                .to_lowercase()
                .contains(&self.text.to_lowercase())
    }

    /// This filter as a query string (with `?`, empty when it is the default), on `page`.
    pub fn query(&self, page: usize) -> String {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if let Some(n) = self.node {
            pairs.push(("node", n.to_string()));
        }
        if let Some(s) = self.status {
            pairs.push(("status", s.as_str().to_string()));
        }
        if !self.text.is_empty() {
            pairs.push(("q", self.text.clone()));
        }
        if page > 1 {
            pairs.push(("page", page.to_string()));
        }
        if pairs.is_empty() {
            return String::new();
        }
        format!(
            "?{}",
            serde_urlencoded::to_string(&pairs).unwrap_or_default()
        )
    }
}

/// The deployment's status card (`web/templates/deployment/status.html`).
pub struct StatusView {
    pub id: i64,
    pub status: String,
    pub badge: &'static str,
    /// `running for 3 min` / `took 3 min 20 s, ended 2026-… UTC`.
    pub took: String,
    /// `12 of 20 steps done · 1 running · …`.
    pub counts: String,
    pub done: usize,
    pub total: usize,
    pub waiting: Vec<String>,
    /// How the graph tasks became this many steps.
    pub explain: String,
    /// What a check concluded (a network verification).
    pub message: String,
    pub timeline: String,
    pub can_abort: bool,
    pub can_retry: bool,
}

/// One node's part of the runs.
pub struct NodeSection {
    /// `node-3` or `stages`.
    pub anchor: String,
    pub node_id: Option<i64>,
    pub name: String,
    pub roles: String,
    pub node_status: String,
    pub node_badge: &'static str,
    pub done: usize,
    pub total: usize,
    /// What it does now: `running 4 hiera`, `failed at 4 hiera`, `next: 5 globals`.
    pub now: String,
    /// Empty when its runs are shown; else why not (`All 20 steps done.`).
    pub collapsed: String,
    pub rows: Vec<RunRow>,
    /// `3 of its 20 runs match.` when a filter hides some.
    pub matched: String,
}

/// The runs part (`web/templates/deployment/runs.html`).
pub struct RunsView {
    pub id: i64,
    pub sections: Vec<NodeSection>,
    /// What is collapsed or left out, and how to see it.
    pub hidden: String,
    /// `Nodes 1–25 of 1,000`.
    pub range: String,
    pub prev: Option<String>,
    pub next: Option<String>,
    /// Nothing matches: why.
    pub empty: String,
    /// The filter's problems: nothing is shown.
    pub errors: Vec<String>,
}

/// The filter form's state and choices.
pub struct FilterView {
    pub node: String,
    pub status: String,
    pub text: String,
    /// The deployment's nodes: (id, name).
    pub nodes: Vec<(i64, String)>,
    /// `?node=3&status=failed` for the runs fragment.
    pub query: String,
}

#[derive(Template)]
#[template(path = "deployment.html")]
pub struct DeploymentPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    id: i64,
    env_id: i64,
    env_name: String,
    /// `graph default · deployment`.
    kind: String,
    started: String,
    started_utc: String,
    started_by: String,
    /// `graph 2 of transaction 14`, with the parent's id.
    chain: Option<(i64, String)>,
    /// A chain's graphs: (child deployment, graph type, badge, status).
    children: Vec<(Option<i64>, String, &'static str, String)>,
    status: StatusView,
    /// How runs are numbered ([`runs::EXPLAIN`]).
    numbering: &'static str,
    filter: FilterView,
    runs: RunsView,
}

#[derive(Template)]
#[template(path = "deployment/status.html")]
pub struct StatusFragment {
    me: Me,
    status: StatusView,
}

#[derive(Template)]
#[template(path = "deployment/runs.html")]
pub struct RunsFragment {
    runs: RunsView,
}

/// What the page is made of, read in one transaction.
struct Loaded {
    deployment: Deployment,
    env_name: String,
    lines: Vec<RunLine>,
    /// The runs of nodes deleted since, counted as they were left (not in `lines`).
    deleted: RunCounts,
    /// Node id → (name, roles, status).
    nodes: HashMap<i64, (String, String, crate::model::NodeStatus)>,
    waiting: Vec<String>,
    started_by: Option<String>,
    chain: Option<crate::store::Chain>,
    /// This deployment's place in its chain: (parent, place, graphs).
    parent: Option<(i64, usize, usize)>,
}

async fn load(state: &AppState, id: i64, now: i64) -> Result<Loaded, ApiError> {
    state
        .store(move |s| {
            s.read(|r| {
                let Some(d) = r.deployment(id)?.filter(|d| d.status != "preparing") else {
                    return Ok(None);
                };
                let env_name = r
                    .cluster(d.cluster_id)?
                    .map_or_else(|| format!("environment {}", d.cluster_id), |c| c.name);
                let lines = r.run_lines(id)?;
                let deleted = r.deleted_runs(id)?;
                let nodes = r
                    .node_labels()?
                    .into_iter()
                    .map(|(id, n)| (id, (n.name, n.roles.join(", "), n.status)))
                    .collect();
                let waiting = r
                    .waiting_agents(&d, now)?
                    .into_iter()
                    .map(|w| w.message)
                    .collect();
                let started_by = r.deployment_starter(id)?;
                let chain = r.chain(id)?;
                let parent = match d.parent_id {
                    Some(p) => r.chain(p)?.map(|c| {
                        let place = c
                            .children
                            .iter()
                            .find(|ch| ch.deployment.id == id)
                            .map_or(0, |ch| ch.place);
                        (p, place, c.graphs.len())
                    }),
                    None => None,
                };
                Ok(Some(Loaded {
                    deployment: d,
                    env_name,
                    lines,
                    deleted,
                    nodes,
                    waiting,
                    started_by,
                    chain,
                    parent,
                }))
            })
        })
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("deployment {id} not found")))
}

impl Loaded {
    fn node_name(&self, id: i64) -> String {
        self.nodes
            .get(&id)
            .map_or_else(|| format!("node {id}"), |n| n.0.clone())
    }
}

/// How the graph's tasks became this deployment's steps, from its runs.
fn explain(lines: &[RunLine]) -> String {
    let tasks = lines.iter().filter(|l| l.step == "run_tasks").count();
    let skipped = lines
        .iter()
        .filter(|l| l.step == "run_tasks" && l.status == "skipped")
        .count();
    let stages = lines.iter().filter(|l| l.step == "stage").count();
    let own: Vec<&RunLine> = lines.iter().filter(|l| !l.is_task()).collect();
    let mut kinds: Vec<String> = Vec::new();
    for l in &own {
        let name = l.name();
        if !kinds.contains(&name) {
            kinds.push(name);
        }
    }
    let skipped = if skipped > 0 {
        format!(" ({skipped} of them skipped, as the plan says)")
    } else {
        String::new()
    };
    let mut s = format!(
        "{tasks} graph tasks{skipped} and {stages} stages run as {} steps",
        lines.len()
    );
    if own.is_empty() {
        s.push_str(": no node ran deploy steps of its own (all were provisioned already).");
    } else {
        let _ = write!(
            s,
            ": the nodes also run {} deploy steps of their own ({}), which the plan does not \
             list, numbered p1, p2, … before their tasks.",
            own.len(),
            kinds.join(", ")
        );
    }
    s
}

fn status_view(l: &Loaded, me: &Me, now: i64) -> StatusView {
    let d = &l.deployment;
    let c = RunCounts::of_lines(&l.lines).plus(l.deleted);
    let took = match d.finished_at {
        Some(f) => format!("took {}, ended {}", duration(f - d.created_at), utc(f)),
        None if d.status == "running" => {
            format!("running for {}", duration(now - d.created_at))
        }
        None => String::new(),
    };
    let mut counts = format!("{} of {} steps done", c.done(), c.total);
    for (n, what) in [
        (c.running, "running"),
        (c.failed, "failed"),
        (c.pending, "pending"),
        (c.skipped, "skipped"),
    ] {
        if n > 0 {
            let _ = write!(counts, " · {n} {what}");
        }
    }
    if c.of_deleted_nodes > 0 {
        let _ = write!(
            counts,
            " · {} of nodes deleted since, counted as they were left and not listed",
            c.of_deleted_nodes
        );
    }
    let names = |n: i64| l.node_name(n);
    let check = d.is_check() || d.status == crate::store::CHAINING;
    StatusView {
        id: d.id,
        status: d.status.clone(),
        badge: runs::deployment_badge(&d.status),
        took,
        counts,
        done: c.done(),
        total: c.total,
        waiting: l.waiting.clone(),
        explain: if l.lines.is_empty() {
            String::new()
        } else {
            explain(&l.lines)
        },
        message: d.message.clone().unwrap_or_default(),
        timeline: if l.lines.iter().any(|r| r.started_at.is_some()) {
            crate::http::pages::timeline::svg(d, &l.lines, &names, now)
        } else {
            String::new()
        },
        can_abort: me.operate && d.status == "running",
        can_retry: me.operate
            && !check
            && d.parent_id.is_none()
            && matches!(d.status.as_str(), "error" | "aborted"),
    }
}

/// One node's runs, in order, with their numbers.
struct Group<'a> {
    node: Option<i64>,
    lines: Vec<&'a RunLine>,
    numbers: Vec<String>,
    counts: RunCounts,
}

fn groups(lines: &[RunLine]) -> Vec<Group<'_>> {
    let mut out: Vec<Group<'_>> = Vec::new();
    for l in lines {
        match out.last_mut() {
            Some(g) if g.node == l.node_id => g.lines.push(l),
            _ => out.push(Group {
                node: l.node_id,
                lines: vec![l],
                numbers: Vec::new(),
                counts: RunCounts::default(),
            }),
        }
    }
    for g in &mut out {
        g.lines.sort_by_key(|l| (l.seq, l.id));
        g.numbers = runs::numbers(&g.lines);
        for l in &g.lines {
            g.counts.add(&l.status, 1);
        }
    }
    out
}

/// Where a node stands, in a few words.
fn standing(g: &Group<'_>) -> String {
    let at = |i: usize| format!("{} {}", g.numbers[i], g.lines[i].name());
    if let Some(i) = g.lines.iter().position(|l| l.status == "failed") {
        return format!("failed at {}", at(i));
    }
    if let Some(i) = g.lines.iter().position(|l| l.status == "running") {
        return format!("running {}", at(i));
    }
    match g.lines.iter().position(|l| l.status == "pending") {
        Some(i) => format!("next: {}", at(i)),
        None => String::new(),
    }
}

/// The runs part for `filter` (already checked against the deployment's nodes).
fn runs_view(l: &Loaded, filter: &Filter, outputs: &HashMap<i64, String>, now: i64) -> RunsView {
    let id = l.deployment.id;
    let mut all = groups(&l.lines);
    // The stages first, then nodes with a failed run, then the rest by id.
    all.sort_by_key(|g| (g.node.is_some(), g.counts.failed == 0, g.node));
    let mut no_match = 0;
    let mut kept: Vec<(Group<'_>, Vec<usize>)> = Vec::new();
    for g in all {
        if filter.node.is_some() && g.node != filter.node {
            continue;
        }
        let matching: Vec<usize> = (0..g.lines.len())
            .filter(|&i| filter.keeps(g.lines[i]))
            .collect();
        if matching.is_empty() && (filter.status.is_some() || !filter.text.is_empty()) {
            no_match += 1;
            continue;
        }
        kept.push((g, matching));
    }
    let total = kept.len();
    let pages = total.div_ceil(NODES_PER_PAGE).max(1);
    let page = filter.page.min(pages);
    let from = (page - 1) * NODES_PER_PAGE;
    let mut collapsed_done = 0;
    let mut collapsed_other = 0;
    let mut sections = Vec::new();
    for (g, matching) in kept.into_iter().skip(from).take(NODES_PER_PAGE) {
        let c = g.counts;
        let (name, roles, node_status, node_badge) = match g.node {
            None => (
                "Stages".to_string(),
                "sync node".to_string(),
                String::new(),
                "",
            ),
            Some(n) => match l.nodes.get(&n) {
                Some((name, roles, st)) => (
                    name.clone(),
                    roles.clone(),
                    st.as_str().to_string(),
                    badge(*st),
                ),
                None => (
                    format!("node {n}"),
                    String::new(),
                    "deleted".to_string(),
                    "badge-neutral",
                ),
            },
        };
        let expand = filter.narrows() || c.failed > 0 || c.running > 0;
        let collapsed = if expand {
            String::new()
        } else if c.done() == c.total {
            collapsed_done += 1;
            format!("All {} steps done.", c.total)
        } else if c.pending == c.total {
            collapsed_other += 1;
            format!("Not started: {} steps pending.", c.total)
        } else {
            collapsed_other += 1;
            format!("{} of {} steps done; the rest wait.", c.done(), c.total)
        };
        let rows = if expand {
            matching
                .iter()
                .map(|&i| {
                    let line = g.lines[i];
                    RunRow::new(
                        line,
                        g.numbers[i].clone(),
                        outputs.get(&line.id).map(String::as_str),
                        now,
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        let matched = if expand && matching.len() < g.lines.len() {
            format!("{} of its {} runs match.", matching.len(), g.lines.len())
        } else {
            String::new()
        };
        sections.push(NodeSection {
            anchor: g
                .node
                .map_or_else(|| "stages".to_string(), |n| format!("node-{n}")),
            node_id: g.node,
            name,
            roles,
            node_status,
            node_badge,
            done: c.done(),
            total: c.total,
            now: standing(&g),
            collapsed,
            rows,
            matched,
        });
    }
    let mut hidden = Vec::new();
    if collapsed_done + collapsed_other > 0 {
        hidden.push(format!(
            "{} of the nodes below show one line instead of their runs ({collapsed_done} all \
             done, {collapsed_other} not running yet): nothing of theirs failed or runs. Filter \
             by node or status to see their runs.",
            collapsed_done + collapsed_other
        ));
    }
    if no_match > 0 {
        hidden.push(format!(
            "{no_match} nodes have no run that matches and are left out."
        ));
    }
    let empty = if total == 0 {
        if filter.narrows() {
            "No run matches this filter.".to_string()
        } else {
            "This deployment has no runs.".to_string()
        }
    } else {
        String::new()
    };
    let path = format!("/deployments/{id}");
    RunsView {
        id,
        sections,
        hidden: hidden.join(" "),
        range: if total > NODES_PER_PAGE {
            format!(
                "Nodes {}–{} of {total} (page {page} of {pages})",
                from + 1,
                (from + NODES_PER_PAGE).min(total)
            )
        } else {
            String::new()
        },
        prev: (page > 1).then(|| format!("{path}{}", filter.query(page - 1))),
        next: (page < pages).then(|| format!("{path}{}", filter.query(page + 1))),
        empty,
        errors: Vec::new(),
    }
}

/// The ids of the runs `view` shows, whose outputs it needs.
fn shown_runs(l: &Loaded, filter: &Filter, now: i64) -> Vec<i64> {
    runs_view(l, filter, &HashMap::new(), now)
        .sections
        .iter()
        .flat_map(|s| s.rows.iter().map(|r| r.id))
        .collect()
}

/// Check `filter` against the deployment: a node it names must have runs in it, a page must
/// exist.
fn check(l: &Loaded, filter: Result<Filter, Vec<String>>) -> Result<Filter, Vec<String>> {
    let f = filter?;
    let mut errors = Vec::new();
    if let Some(n) = f.node
        && !l.lines.iter().any(|r| r.node_id == Some(n))
    {
        errors.push(format!(
            "node: node {n} has no runs in deployment {}",
            l.deployment.id
        ));
    }
    if errors.is_empty() {
        Ok(f)
    } else {
        Err(errors)
    }
}

/// The runs part for the request's filter, with the outputs it shows.
async fn runs_for(
    state: &AppState,
    l: &Loaded,
    filter: &Result<Filter, Vec<String>>,
    now: i64,
) -> Result<RunsView, ApiError> {
    let f = match filter {
        Ok(f) => f,
        Err(errors) => {
            return Ok(RunsView {
                id: l.deployment.id,
                sections: Vec::new(),
                hidden: String::new(),
                range: String::new(),
                prev: None,
                next: None,
                empty: String::new(),
                errors: errors.clone(),
            });
        }
    };
    let ids = shown_runs(l, f, now);
    let outputs = state
        .store(move |s| s.read(|r| r.run_outputs(&ids)))
        .await?;
    Ok(runs_view(l, f, &outputs, now))
}

fn html(status: actix_web::http::StatusCode, body: String) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .body(body)
}

fn render(t: &impl Template) -> Result<String, ApiError> {
    t.render()
        .map_err(|e| ApiError::Internal(format!("page failed to render: {e}")))
}

/// `GET /deployments/{id}[?node=&status=&q=&page=]`: the page; 400 with the filter's problems
/// (and no runs) when a parameter is wrong.
pub async fn deployment(
    state: web::Data<AppState>,
    me: Me,
    path: web::Path<String>,
    req: HttpRequest,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "deployment")?;
    let now = crate::clock::now();
    let l = load(&state, id, now).await?;
    let filter = check(&l, Filter::parse(req.query_string()));
    let runs = runs_for(&state, &l, &filter, now).await?;
    let d = &l.deployment;
    let mut node_choices: Vec<(i64, String)> = l
        .lines
        .iter()
        .filter_map(|r| r.node_id)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|n| (n, l.node_name(n)))
        .collect();
    node_choices.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
    let raw = |k: &str| -> String {
        serde_urlencoded::from_str::<Vec<(String, String)>>(req.query_string())
            .unwrap_or_default()
            .into_iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v)
            .unwrap_or_default()
    };
    let children = match &l.chain {
        Some(c) => c
            .graphs
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let child = c.children.iter().find(|ch| ch.place == i);
                let status = child.map_or_else(
                    || "not started".to_string(),
                    |ch| ch.deployment.status.clone(),
                );
                (
                    child.map(|ch| ch.deployment.id),
                    g.graph_type.clone(),
                    runs::deployment_badge(&status),
                    status,
                )
            })
            .collect(),
        None => Vec::new(),
    };
    let page = DeploymentPage {
        nav: "environments",
        version: VERSION,
        id,
        env_id: d.cluster_id,
        env_name: l.env_name.clone(),
        kind: if d.status == crate::store::CHAINING || l.chain.is_some() {
            "graphs one after another".to_string()
        } else {
            format!("graph {} · {}", d.graph_type, d.name)
        },
        started: ago(d.created_at, now),
        started_utc: utc(d.created_at),
        started_by: l.started_by.clone().unwrap_or_default(),
        chain: l
            .parent
            .map(|(p, place, of)| (p, format!("graph {} of {of} in transaction {p}", place + 1))),
        children,
        status: status_view(&l, &me, now),
        numbering: runs::EXPLAIN,
        filter: FilterView {
            node: match &filter {
                Ok(f) => f.node.map(|n| n.to_string()).unwrap_or_default(),
                Err(_) => raw("node"),
            },
            status: match &filter {
                Ok(f) => f.status.map(|s| s.as_str().to_string()).unwrap_or_default(),
                Err(_) => raw("status"),
            },
            text: match &filter {
                Ok(f) => f.text.clone(),
                Err(_) => raw("q"),
            },
            nodes: node_choices,
            // A wrong filter stays in the refreshed part's address: it keeps saying so.
            query: match &filter {
                Ok(f) => f.query(f.page),
                Err(_) => format!("?{}", req.query_string()),
            },
        },
        runs,
        me,
    };
    let status = if filter.is_ok() {
        actix_web::http::StatusCode::OK
    } else {
        actix_web::http::StatusCode::BAD_REQUEST
    };
    Ok(html(status, render(&page)?))
}

/// `GET /deployments/{id}/status`: the status card, as the page shows it.
pub async fn status(
    state: web::Data<AppState>,
    me: Me,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "deployment")?;
    let now = crate::clock::now();
    let l = load(&state, id, now).await?;
    let status = status_view(&l, &me, now);
    Ok(html(
        actix_web::http::StatusCode::OK,
        render(&StatusFragment { me, status })?,
    ))
}

/// `GET /deployments/{id}/runs[?filter]`: the runs part, as the page shows it for the filter
/// (400 with its problems).
pub async fn runs(
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "deployment")?;
    let now = crate::clock::now();
    let l = load(&state, id, now).await?;
    let filter = check(&l, Filter::parse(req.query_string()));
    let runs = runs_for(&state, &l, &filter, now).await?;
    let status = if filter.is_ok() {
        actix_web::http::StatusCode::OK
    } else {
        actix_web::http::StatusCode::BAD_REQUEST
    };
    Ok(html(status, render(&RunsFragment { runs })?))
}

/// `GET /deployments/{id}/runs/{run}/output`: a run's whole stored output tail, as text.
pub async fn output(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    let (dep, run) = path.into_inner();
    let dep = crate::http::api::catalog::id_of(&dep, "deployment")?;
    let run = crate::http::api::catalog::id_of(&run, "run")?;
    let found = state.store(move |s| s.read(|r| r.run(run))).await?;
    let Some(r) = found.filter(|r| r.deployment == dep) else {
        return Err(ApiError::NotFound(format!("deployment {dep} has no run {run}")).into());
    };
    Ok(HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .body(r.output_tail))
}

/// Abort (`abort: true`) or retry deployment `dep`, then back to `back` saying what happened.
pub async fn act(state: &AppState, dep: i64, abort: bool, back: &str) -> HttpResponse {
    let now = crate::clock::now();
    let done = state
        .store(move |s| {
            s.write(|tx| {
                if abort {
                    tx.abort_deployment(dep, now)
                } else {
                    tx.retry_deployment(dep, now)
                }
            })
        })
        .await;
    notice::after(
        state,
        back,
        done,
        |d| {
            if abort {
                format!("Deployment {} aborted: no step starts any more.", d.id)
            } else {
                format!("Deployment {}: its failed steps run again.", d.id)
            }
        },
        if abort { "Not aborted" } else { "Not retried" },
    )
}

/// `POST /deployments/{id}/{action}` with action `abort` or `retry`; back to the deployment.
pub async fn action(
    state: web::Data<AppState>,
    me: Me,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, PageError> {
    let (dep, action) = path.into_inner();
    let dep = crate::http::api::catalog::id_of(&dep, "deployment")?;
    let abort = match action.as_str() {
        "abort" => true,
        "retry" => false,
        other => {
            return Err(ApiError::NotFound(format!("no deployment action {other:?}")).into());
        }
    };
    let back = format!("/deployments/{dep}");
    let pairs = crate::http::access::url_form(&body);
    if abort && !crate::http::pages::confirm::given(&pairs) {
        let action = format!("/deployments/{dep}/abort");
        return Ok(ask_abort(me, dep, &action, &back, &pairs)?);
    }
    Ok(act(&state, dep, abort, &back).await)
}

/// The confirmation an Abort posted without `confirmed=1` answers with.
pub fn ask_abort(
    me: Me,
    dep: i64,
    action: &str,
    back: &str,
    pairs: &[(String, String)],
) -> Result<HttpResponse, ApiError> {
    crate::http::pages::confirm::page(
        me,
        "environments",
        crate::http::pages::confirm::Ask {
            question: format!("Abort deployment {dep}?"),
            detail: "What runs finishes; nothing else starts. The nodes stay as the steps \
                     that ran left them."
                .to_string(),
            action,
            button: format!("Abort deployment {dep}"),
            cancel: back.to_string(),
            danger: true,
        },
        pairs,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_read_and_every_problem_named() {
        assert_eq!(
            Filter::parse("").unwrap(),
            Filter {
                page: 1,
                ..Filter::default()
            }
        );
        let f = Filter::parse("node=3&status=failed&q=Hiera&page=2").unwrap();
        assert_eq!(f.node, Some(3));
        assert_eq!(f.status, Some(RunStatus::Failed));
        assert_eq!(f.text, "Hiera");
        assert_eq!(f.page, 2);
        assert_eq!(f.query(2), "?node=3&status=failed&q=Hiera&page=2");
        assert_eq!(f.query(1), "?node=3&status=failed&q=Hiera");
        assert!(Filter::parse("node=&status=&q=").unwrap() == Filter::parse("").unwrap());
        let errors = Filter::parse("node=x&status=bogus&page=0&color=red&q=a&q=b").unwrap_err();
        assert_eq!(errors.len(), 5, "{errors:?}");
        for want in [
            "node: \"x\" is not a node id",
            "status: \"bogus\" is not a run status",
            "page: \"0\" is not a page number",
            "color: not a filter of this page",
            "q: given more than once",
        ] {
            assert!(
                errors.iter().any(|e| e.starts_with(want)),
                "{want}: {errors:?}"
            );
        }
        let long = format!("q={}", "a".repeat(MAX_TEXT + 1));
        assert!(Filter::parse(&long).unwrap_err()[0].starts_with("q: longer"));
    }

    fn line(id: i64, node: Option<i64>, seq: u32, task: Option<&str>, status: &str) -> RunLine {
        RunLine {
            id,
            deployment: 1,
            node_id: node,
            seq,
            interface: "deploy".into(),
            step: if task.is_some() {
                "run_tasks"
            } else {
                "write_image"
            }
            .into(),
            task: task.map(str::to_string),
            status: status.into(),
            reason: None,
            attempt: 1,
            started_at: Some(10),
            finished_at: Some(12),
            exit_code: Some(0),
            error: None,
            runs_on: if task.is_some() {
                crate::engine::steps::Location::Os
            } else {
                crate::engine::steps::Location::Ramdisk
            },
            output_len: 0,
        }
    }

    fn loaded(lines: Vec<RunLine>) -> Loaded {
        Loaded {
            deployment: Deployment {
                id: 1,
                cluster_id: 1,
                status: "error".into(),
                created_at: 0,
                finished_at: Some(20),
                name: "deployment".into(),
                graph_type: "default".into(),
                message: None,
                result: None,
                parent_id: None,
            },
            env_name: "env".into(),
            lines,
            deleted: RunCounts::default(),
            nodes: HashMap::new(),
            waiting: Vec::new(),
            started_by: None,
            chain: None,
            parent: None,
        }
    }

    #[test]
    fn quiet_nodes_collapse_failed_ones_come_first_and_filters_expand() {
        let mut lines = Vec::new();
        let mut id = 0;
        for node in 1..=30 {
            for seq in 0..3 {
                id += 1;
                let status = if node == 17 && seq == 2 {
                    "failed"
                } else {
                    "ok"
                };
                let task = (seq > 0).then_some(if seq == 1 { "hiera" } else { "globals" });
                lines.push(line(id, Some(node), seq, task, status));
            }
        }
        let l = loaded(lines);
        let v = runs_view(&l, &Filter::parse("").unwrap(), &HashMap::new(), 30);
        assert_eq!(v.sections.len(), NODES_PER_PAGE);
        assert_eq!(v.sections[0].node_id, Some(17), "the failed node first");
        assert_eq!(v.sections[0].rows.len(), 3);
        let numbers: Vec<&str> = v.sections[0]
            .rows
            .iter()
            .map(|r| r.number.as_str())
            .collect();
        assert_eq!(numbers, ["p1", "1", "2"]);
        assert_eq!(v.sections[0].now, "failed at 2 globals");
        assert!(v.sections[1].rows.is_empty());
        assert_eq!(v.sections[1].collapsed, "All 3 steps done.");
        assert!(
            v.hidden.starts_with("24 of the nodes below"),
            "{}",
            v.hidden
        );
        assert_eq!(v.range, "Nodes 1–25 of 30 (page 1 of 2)");
        assert_eq!(v.next.as_deref(), Some("/deployments/1?page=2"));
        let v = runs_view(
            &l,
            &Filter::parse("status=failed").unwrap(),
            &HashMap::new(),
            30,
        );
        assert_eq!(v.sections.len(), 1);
        assert_eq!(v.sections[0].matched, "1 of its 3 runs match.");
        assert!(v.hidden.contains("29 nodes have no run that matches"));
        let v = runs_view(
            &l,
            &Filter::parse("node=4&q=HIER").unwrap(),
            &HashMap::new(),
            30,
        );
        assert_eq!(v.sections.len(), 1);
        assert_eq!(v.sections[0].rows[0].name, "hiera");
        assert_eq!(v.sections[0].rows[0].number, "1");
        assert!(check(&l, Filter::parse("node=99")).unwrap_err()[0].contains("no runs"));
        assert!(explain(&l.lines).starts_with(
            "60 graph tasks and 0 stages run as 90 steps: the nodes also run 30 deploy steps of \
             their own (deploy.write_image)"
        ));
    }

    #[test]
    fn the_status_counts_runs_of_deleted_nodes_as_they_were_left() {
        let mut l = loaded(vec![line(1, Some(1), 0, None, "ok")]);
        let mut gone = RunCounts::default();
        gone.add_deleted("failed", 1);
        gone.add_deleted("pending", 5);
        l.deleted = gone;
        let v = status_view(&l, &Me::default(), 30);
        assert_eq!((v.done, v.total), (1, 7));
        assert_eq!(
            v.counts,
            "1 of 7 steps done · 1 failed · 5 pending · 6 of nodes deleted since, counted as \
             they were left and not listed"
        );
    }
}
