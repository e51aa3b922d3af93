//! `stoker graph plan`: plan a deployment offline, from a release (directory, `.fp` or bundled
//! name), a cluster file, enabled plugins and optionally the deployed state of earlier runs;
//! print it as text, JSON or dot. `--record` writes the deployed state as it would be after the
//! plan succeeded, so incremental redeploys can be tried without a master. A thin wrapper over
//! [`crate::engine::graph`]; reads and writes only the files it is given.
//!
//! Exit codes: 0 a plan was made, 1 no plan (cycle, failing expression, bad graph), 2 bad usage
//! or an unreadable input file.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};

use crate::engine::graph::{self, Deployed};
use crate::package::graphs::{open_plugin, open_release};

#[derive(Debug, Subcommand)]
pub enum GraphCommand {
    /// Plan a deployment: per-node ordered tasks, skips with reasons, cross-node waits
    Plan(PlanArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
    Dot,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The release: a release plugin directory or .fp, a fuel-library tree (a directory of
    /// *tasks.yaml files), or the name of a bundled release (`ubuntu-newton`)
    #[arg(long)]
    release: String,
    /// Which release of a package that defines several (its name or version)
    #[arg(long)]
    release_name: Option<String>,
    /// OPENSTACK_VERSION for a fuel-library tree (default: the folder's name)
    #[arg(long)]
    release_version: Option<String>,
    /// The graph type to plan
    #[arg(long, default_value = "default")]
    graph: String,
    /// The cluster file: settings and nodes with roles (YAML or JSON)
    #[arg(long)]
    cluster: PathBuf,
    /// An enabled plugin (directory or .fp); repeat for several
    #[arg(long = "plugin")]
    plugins: Vec<PathBuf>,
    /// Deployed state of earlier runs (JSON written by --record); tasks compare with it
    #[arg(long)]
    deployed: Option<PathBuf>,
    /// Write the deployed state as if this plan succeeded (may be the --deployed file)
    #[arg(long)]
    record: Option<PathBuf>,
    /// The deployment id to record under (default: one more than the highest numeric id)
    #[arg(long)]
    deployment_id: Option<String>,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Plan the direct, quadratic way (a wait per member of a group, each condition on each
    /// node): the same plan, to compare with (`.ci/graph-conformance.sh`)
    #[arg(long, hide = true)]
    reference: bool,
}

pub fn run(cmd: GraphCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        GraphCommand::Plan(args) => plan(&args),
    }
}

fn usage(e: impl std::fmt::Display) -> anyhow::Result<ExitCode> {
    eprintln!("stoker: {e}");
    Ok(ExitCode::from(super::EXIT_USAGE))
}

fn read_deployed(path: &Path) -> anyhow::Result<Deployed> {
    if !path.exists() {
        return Ok(Deployed::default());
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

fn next_id(d: &Deployed) -> String {
    let max = d
        .deployments
        .keys()
        .filter_map(|k| k.parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    (max + 1).to_string()
}

fn plan(args: &PlanArgs) -> anyhow::Result<ExitCode> {
    super::memory::no_huge_pages();
    let text = match std::fs::read_to_string(&args.cluster) {
        Ok(t) => t,
        Err(e) => return usage(format!("{}: {e}", args.cluster.display())),
    };
    let (cluster, nodes) = match graph::parse_cluster(&args.cluster.display().to_string(), &text) {
        Ok(c) => c,
        Err(e) => return usage(e),
    };
    let release = match open_release(
        &args.release,
        args.release_name.as_deref(),
        &args.graph,
        args.release_version.as_deref(),
    ) {
        Ok(r) => r,
        Err(e) => return usage(e),
    };
    let mut plugins = Vec::new();
    for (i, p) in args.plugins.iter().enumerate() {
        match open_plugin(p, &release, &args.graph) {
            Ok(mut g) => {
                // Nailgun's plugin_id: here, the plugin's place on the command line.
                g.id = i as i64 + 1;
                plugins.push(g);
            }
            Err(e) => return usage(e),
        }
    }
    let mut deployed = match &args.deployed {
        Some(p) => match read_deployed(p) {
            Ok(d) => d,
            Err(e) => return usage(format!("{e:#}")),
        },
        None => Deployed::default(),
    };
    let method = if args.reference {
        graph::Method::REFERENCE
    } else {
        graph::Method::default()
    };
    let engine = crate::yaql::Engine::new(crate::yaql::Limits::default());
    let planned = graph::plan_by(
        &engine,
        graph::DEFAULT_YAQL_BUDGET,
        method,
        &cluster,
        &nodes,
        &release.graph,
        &plugins,
        &deployed,
    );
    let plan = match planned {
        Ok(p) => p,
        Err(e) => {
            eprintln!("stoker: no plan: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    match args.format {
        Format::Text => out.write_all(plan.to_text().as_bytes()),
        Format::Json => plan.write_json(&mut out),
        Format::Dot => plan.write_dot(&mut out),
    }
    .and_then(|()| out.flush())
    .context("writing the plan")?;
    drop(out);
    if let Some(path) = &args.record {
        let id = args
            .deployment_id
            .clone()
            .unwrap_or_else(|| next_id(&deployed));
        deployed.record(&plan, &id);
        // Through a value, so the node parts (kept as compact text) are indented too.
        let body = serde_json::to_string_pretty(&serde_json::to_value(&deployed)?)? + "\n";
        std::fs::write(path, body).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("recorded deployment {id} in {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
