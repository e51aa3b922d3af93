//! `stoker yaql`: evaluate YAQL expressions from the command line (`eval`, with the error's
//! position marked by a caret) or as a JSON Lines filter (`--jsonl`, the conformance
//! protocol of `yaql-check.py`). A thin wrapper over the pure `crate::yaql` engine.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};

use crate::yaql::jsonl::answer;
use crate::yaql::{Context, Converter, Engine, Limits, Value, YaqlError};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct YaqlArgs {
    /// Read `{"expr", "data", "old"?, "vars"?}` lines on stdin and write one
    /// `{"ok": true, "value": ...}` or `{"ok": false, "error": "<Kind>"}` line for each.
    #[arg(long)]
    jsonl: bool,
    #[command(subcommand)]
    command: Option<YaqlCommand>,
}

#[derive(Debug, Subcommand)]
enum YaqlCommand {
    /// Evaluate one expression and print the result as JSON.
    Eval {
        /// The expression, e.g. `$.nodes.where($.status = ready).name`
        expr: String,
        /// The data bound to `$` (a .json or .yaml file; default: null)
        #[arg(long)]
        data: Option<PathBuf>,
        /// The previous deployment's data bound to `$%old` (default: {})
        #[arg(long)]
        old: Option<PathBuf>,
    },
}

pub fn run(args: &YaqlArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        Some(YaqlCommand::Eval { expr, data, old }) => eval(expr, data.as_deref(), old.as_deref()),
        None if args.jsonl => jsonl(),
        None => anyhow::bail!("say `stoker yaql eval 'EXPR'` or `stoker yaql --jsonl`"),
    }
}

fn load(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let is_yaml = matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    );
    if is_yaml {
        serde_saphyr::from_str_with_options(&text, yaml_options())
            .with_context(|| format!("parsing YAML {}", path.display()))
    } else {
        Converter::new()
            .convert_text(&text)
            .with_context(|| format!("parsing JSON {}", path.display()))
    }
}

/// serde-saphyr within the bounds of stoker's own YAML reader (`engine::plugin::yaml`): the
/// same nesting depth and node budget, alias expansions counted against it.
fn yaml_options() -> serde_saphyr::Options {
    use crate::engine::plugin::yaml::{MAX_DEPTH, MAX_NODES};
    let nodes = usize::try_from(MAX_NODES).unwrap_or(usize::MAX);
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: MAX_DEPTH,
            max_nodes: nodes,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: nodes,
        },
    }
}

/// The error with the expression and a caret under the position.
pub fn render_error(expr: &str, e: &YaqlError) -> String {
    let mut out = format!("error: {}: {}\n", e.kind, e.message);
    if let Some(pos) = e.position {
        let line_start = expr
            .chars()
            .take(pos)
            .collect::<String>()
            .rfind('\n')
            .map(|i| i + 1)
            .unwrap_or(0);
        let before: String = expr.chars().take(pos).collect();
        let col = before[line_start..].chars().count();
        let line: String = expr
            .chars()
            .skip(before[..line_start].chars().count())
            .take_while(|c| *c != '\n')
            .collect();
        out.push_str(&format!("  {line}\n  {}^\n", " ".repeat(col)));
    }
    out
}

fn eval(expr: &str, data: Option<&Path>, old: Option<&Path>) -> anyhow::Result<ExitCode> {
    let data = match data {
        Some(p) => load(p)?,
        None => Value::Null,
    };
    let mut ctx = Context::from_value(data);
    if let Some(p) = old {
        ctx = ctx.with_old_value(load(p)?);
    }
    let engine = Engine::new(Limits::default());
    match engine.eval_json(expr, &ctx) {
        Ok(v) => {
            println!("{}", serde_json::to_string_pretty(&v)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprint!("{}", render_error(expr, &e));
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The `--jsonl` filter (also started directly by `cli::run` when the command line is
/// exactly `yaql --jsonl`, without building the whole command tree).
pub fn jsonl() -> anyhow::Result<ExitCode> {
    let engine = Engine::new(Limits::default());
    let mut conv = Converter::new();
    let mut input = std::io::BufReader::with_capacity(1 << 16, std::io::stdin().lock());
    // Stdout is line-buffered (a write per answer); answers are written in blocks instead and
    // flushed whenever the input has nothing more waiting.
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut line = String::new();
    let mut buf = Vec::new();
    loop {
        line.clear();
        if input.read_line(&mut line).context("reading stdin")? == 0 {
            break;
        }
        buf.clear();
        answer(&engine, &mut conv, line.trim(), &mut buf);
        buf.push(b'\n');
        out.write_all(&buf)?;
        // Answer each line before waiting for the next (a driver may send one at a time).
        if input.buffer().is_empty() {
            out.flush()?;
        }
    }
    out.flush()?;
    // The process ends here: its memory goes with it, without freeing the table of shared
    // sub-trees and the parsed expressions one by one.
    std::mem::forget(conv);
    std::mem::forget(engine);
    Ok(ExitCode::SUCCESS)
}
