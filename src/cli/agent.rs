//! `stoker agent`: the node-side agent. Settings come from flags, else from the kernel command
//! line (`stoker.master=`, `stoker.token=`), else from `STOKER_MASTER` / `STOKER_TOKEN` (which
//! the bootstrap's /init exports from the same arguments).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use crate::agent::{BootParams, hello_with_credentials, hello_with_retry, inventory};

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Master URL, like http://10.20.0.2:8000 (default: stoker.master= on the kernel command line)
    #[arg(long)]
    master: Option<String>,
    /// Boot token (default: stoker.token= on the kernel command line)
    #[arg(long)]
    token: Option<String>,
    /// Give up after this many attempts to reach the master (0: keep trying)
    #[arg(long, default_value_t = 0)]
    attempts: u32,
    /// Longest wait between attempts, in seconds
    #[arg(long, default_value_t = 30)]
    max_backoff: u64,
    /// After registering, say hello again every this many seconds (0: exit after registering).
    /// Later hellos refresh the inventory and the node's "last seen" time.
    #[arg(long, default_value_t = 0)]
    heartbeat: u64,
    /// Print the gathered inventory as JSON and exit without contacting the master
    #[arg(long)]
    print_inventory: bool,
    /// Root of the /proc and /sys trees to read (for testing on a prepared tree)
    #[arg(long, default_value = "/", hide = true)]
    root: PathBuf,
    /// Where the agent keeps the token the master issued it (default: run/stoker-agent.token
    /// under the root, a tmpfs on a booted node)
    #[arg(long)]
    state: Option<PathBuf>,
}

pub fn run(args: &AgentArgs) -> anyhow::Result<ExitCode> {
    let inventory = inventory::gather(&args.root);
    if args.print_inventory {
        println!("{}", serde_json::to_string_pretty(&inventory)?);
        return Ok(ExitCode::SUCCESS);
    }
    let cmdline = std::fs::read_to_string(args.root.join("proc/cmdline")).unwrap_or_default();
    let boot = BootParams::parse(&cmdline);
    let master = args
        .master
        .clone()
        .or(boot.master)
        .or_else(|| std::env::var("STOKER_MASTER").ok())
        .context(
            "no master URL: pass --master or boot with stoker.master= on the kernel command line",
        )?;
    let state = args
        .state
        .clone()
        .unwrap_or_else(|| args.root.join("run/stoker-agent.token"));
    let boot_token = args
        .token
        .clone()
        .or(boot.token)
        .or_else(|| std::env::var("STOKER_TOKEN").ok());
    // A token saved by an earlier run in this boot first, then the boot token, then none.
    let tokens: Vec<String> = std::fs::read_to_string(&state)
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .into_iter()
        .chain(boot_token)
        .collect();
    let backoff = Duration::from_secs(args.max_backoff.max(1));
    let reply = hello_with_credentials(&master, &tokens, &inventory, args.attempts, backoff)?;
    let mut agent_token = tokens.first().cloned();
    if let Some(token) = &reply.agent_token {
        save_token(&state, token)?;
        agent_token = Some(token.clone());
    }
    // One greppable line, for serial consoles and the PXE lab's marker.
    println!(
        "STOKER-AGENT ok node={} mac={} status={} created={}",
        reply.node.id, reply.node.mac, reply.node.status, reply.created
    );
    if args.heartbeat == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    // Later hellos refresh the node with its agent token.
    loop {
        std::thread::sleep(Duration::from_secs(args.heartbeat));
        let inventory = inventory::gather(&args.root);
        match hello_with_retry(&master, agent_token.as_deref(), &inventory, 0, backoff) {
            Ok(reply) => {
                if let Some(token) = reply.agent_token {
                    save_token(&state, &token)?;
                    agent_token = Some(token);
                }
            }
            Err(err) => eprintln!("stoker-agent: heartbeat refused: {err}"),
        }
    }
}

/// Keep the agent token for later runs in this boot, readable by root only.
fn save_token(path: &std::path::Path, token: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot save the agent token to {}", path.display()))?;
    std::io::Write::write_all(&mut file, token.as_bytes())?;
    Ok(())
}
