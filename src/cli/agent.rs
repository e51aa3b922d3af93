//! `stoker agent`: the node-side agent. Settings come from flags, else from the kernel command
//! line (`stoker.master=`, `stoker.token=`, `stoker.deploy=`), else from `STOKER_MASTER` /
//! `STOKER_TOKEN` (which the bootstrap's /init exports from the same arguments); an `https://`
//! master is trusted by `stoker.fingerprint=` (or `--fingerprint`). After hello it
//! enters the deploy loop (`crate::agent::deploy`) unless told to only register or heartbeat.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use crate::agent::deploy::{RUN_STATE_FILE, TOKEN_FILE, save_token};
use crate::agent::exec::Executor;
use crate::agent::{
    BootParams, LoopEnd, Master, hello_with_credentials, hello_with_retry, inventory, run_loop,
};

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Master URL, like http://10.20.0.2:8000 (default: stoker.master= on the kernel command line)
    /// Run as the installed OS's service agent with this configuration (what the configure
    /// step installed, /etc/stoker/agent.json): hello with the node's credential, then run
    /// deployment tasks until stopped.
    #[arg(long, value_name = "CONFIG", conflicts_with_all = ["register_only", "token"])]
    service: Option<PathBuf>,
    #[arg(long)]
    master: Option<String>,
    /// Boot token (default: stoker.token= on the kernel command line)
    #[arg(long)]
    token: Option<String>,
    /// The master's certificate fingerprint, for an https:// master (default:
    /// stoker.fingerprint= on the kernel command line, else STOKER_FINGERPRINT)
    #[arg(long)]
    fingerprint: Option<String>,
    /// Give up after this many attempts to reach the master (0: keep trying)
    #[arg(long, default_value_t = 0)]
    attempts: u32,
    /// Longest wait between attempts, in seconds
    #[arg(long, default_value_t = 30)]
    max_backoff: u64,
    /// After registering, say hello again every this many seconds (0: none). Later hellos
    /// refresh the inventory and the node's "last seen" time. Without --deploy (or
    /// stoker.deploy=1) a heartbeat replaces the deploy loop.
    #[arg(long, default_value_t = 0)]
    heartbeat: u64,
    /// After registering, ask the master for deploy steps and run them (the default without
    /// --heartbeat; also stoker.deploy=1 on the kernel command line)
    #[arg(long, conflicts_with = "register_only")]
    deploy: bool,
    /// Exit after registering (no deploy loop, no heartbeat)
    #[arg(long)]
    register_only: bool,
    /// Run the steps under this directory instead of / (a simulated node: files, the image
    /// and reboots land in it; the hostname is not set)
    #[arg(long)]
    sandbox: Option<PathBuf>,
    /// In a sandbox, run shell and puppet commands for real (inside it, with STOKER_ROOT set).
    /// Off by default: a release's commands are written for a real node and are recorded
    /// instead of run against the machine hosting a simulated one.
    #[arg(long, requires = "sandbox")]
    run_commands: bool,
    /// Print the gathered inventory as JSON and exit without contacting the master
    #[arg(long)]
    print_inventory: bool,
    /// Run one network verification probe (`agent::net_probe`) from this JSON spec ("-":
    /// standard input), print what it heard as JSON and exit, without contacting the master
    #[arg(long, value_name = "SPEC", hide = true, conflicts_with = "service")]
    net_probe: Option<PathBuf>,
    /// Root of the /proc and /sys trees to read (for testing on a prepared tree)
    #[arg(long, default_value = "/", hide = true)]
    root: PathBuf,
    /// Directory for the agent's state: the token the master issued it (stoker-agent.token)
    /// and a step result not yet acknowledged (stoker-agent.run.json). Default: run/ under the
    /// root, a tmpfs on a booted node.
    #[arg(long)]
    state: Option<PathBuf>,
}

/// `--net-probe SPEC`: one probe, its report on standard output.
fn net_probe(spec: &Path) -> anyhow::Result<ExitCode> {
    let text = if spec == Path::new("-") {
        std::io::read_to_string(std::io::stdin()).context("reading the probe spec from stdin")?
    } else {
        std::fs::read_to_string(spec)
            .with_context(|| format!("reading the probe spec {}", spec.display()))?
    };
    let spec: crate::agent::net_probe::ProbeSpec = serde_json::from_str(&text)
        .with_context(|| format!("the probe spec is not valid: {text:.200}"))?;
    let report = crate::agent::net_probe::run(&spec)?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(ExitCode::SUCCESS)
}

/// What to do after hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    RegisterOnly,
    Heartbeat,
    Deploy,
}

fn mode(args: &AgentArgs, boot: &BootParams) -> Mode {
    let deploy = if args.register_only {
        false
    } else if args.deploy {
        true
    } else {
        boot.deploy.unwrap_or(args.heartbeat == 0)
    };
    match (deploy, args.heartbeat) {
        (true, _) => Mode::Deploy,
        (false, 0) => Mode::RegisterOnly,
        (false, _) => Mode::Heartbeat,
    }
}

pub fn run(args: &AgentArgs) -> anyhow::Result<ExitCode> {
    if let Some(spec) = &args.net_probe {
        return net_probe(spec);
    }
    if let Some(config) = &args.service {
        return service(args, config);
    }
    let inventory = inventory::gather(&args.root);
    if args.print_inventory {
        println!("{}", serde_json::to_string_pretty(&inventory)?);
        return Ok(ExitCode::SUCCESS);
    }
    let cmdline = std::fs::read_to_string(args.root.join("proc/cmdline")).unwrap_or_default();
    let boot = BootParams::parse(&cmdline);
    let mode = mode(args, &boot);
    let master = args
        .master
        .clone()
        .or(boot.master)
        .or_else(|| std::env::var("STOKER_MASTER").ok())
        .context(
            "no master URL: pass --master or boot with stoker.master= on the kernel command line",
        )?;

    let state_dir = args.state.clone().unwrap_or_else(|| args.root.join("run"));
    let state = state_dir.join(TOKEN_FILE);
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
    let fingerprint = args
        .fingerprint
        .clone()
        .or(boot.fingerprint)
        .or_else(|| std::env::var("STOKER_FINGERPRINT").ok());
    let master = Master::connect(&master, fingerprint.as_deref(), args.attempts, backoff)?;
    let reply = hello_with_credentials(&master, &tokens, &inventory, args.attempts, backoff)?;
    let mut agent_token = tokens.first().cloned();
    if let Some(token) = &reply.agent_token {
        save_token(&state, token)
            .with_context(|| format!("cannot save the agent token to {}", state.display()))?;
        agent_token = Some(token.clone());
    }
    // One greppable line, for serial consoles and the PXE lab's marker.
    println!(
        "STOKER-AGENT ok node={} mac={} status={} created={}",
        reply.node.id, reply.node.mac, reply.node.status, reply.created
    );
    match mode {
        Mode::RegisterOnly => Ok(ExitCode::SUCCESS),
        Mode::Heartbeat => heartbeat(
            &master,
            &args.root,
            &state,
            agent_token,
            args.heartbeat,
            backoff,
        ),
        Mode::Deploy => {
            let token = agent_token.context(
                "the master issued no agent token and none was saved: cannot ask for work",
            )?;
            if args.heartbeat > 0 {
                let (master, root, state) = (master.clone(), args.root.clone(), state.clone());
                let every = args.heartbeat;
                let token = Some(token.clone());
                std::thread::spawn(move || {
                    heartbeat(&master, &root, &state, token, every, backoff)
                });
            }
            let executor = match &args.sandbox {
                Some(dir) => {
                    std::fs::create_dir_all(dir)
                        .with_context(|| format!("cannot create the sandbox {}", dir.display()))?;
                    Executor::sandbox(dir.clone()).running_commands(args.run_commands)
                }
                None => Executor::node(),
            };
            tracing::info!(
                node = reply.node.id,
                state = %state_dir.join(RUN_STATE_FILE).display(),
                "asking {} for deploy steps",
                master.url()
            );
            let stop = AtomicBool::new(false);
            match run_loop(&master, &token, reply.node.id, &executor, &state_dir, &stop)? {
                LoopEnd::RebootedToDisk => {
                    println!("STOKER-AGENT rebooted-to-disk node={}", reply.node.id)
                }
                LoopEnd::Rebooted => println!("STOKER-AGENT rebooting node={}", reply.node.id),
                LoopEnd::Erased => println!("STOKER-AGENT erased node={}", reply.node.id),
                LoopEnd::Stopped => {}
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Later hellos refresh the node with its agent token (and pick up a rotated one).
/// `stoker agent --service CONFIG`: the installed OS's agent, until stopped.
fn service(args: &AgentArgs, config: &Path) -> anyhow::Result<ExitCode> {
    use crate::agent::service::{self, ServiceConfig, ServiceOptions};
    let cfg = ServiceConfig::load(config)?;
    let opts = ServiceOptions {
        root: args.sandbox.clone().unwrap_or_else(|| args.root.clone()),
        sandbox: args.sandbox.is_some(),
        run_commands: args.run_commands,
        refused_wait: Duration::from_secs(60),
        max_backoff: Duration::from_secs(args.max_backoff.max(1)),
    };
    let stop = AtomicBool::new(false);
    match service::run(&cfg, &opts, &stop)? {
        LoopEnd::Rebooted => println!("STOKER-AGENT rebooting node={}", cfg.node_id),
        LoopEnd::Erased => println!("STOKER-AGENT erased node={}", cfg.node_id),
        LoopEnd::RebootedToDisk | LoopEnd::Stopped => {}
    }
    Ok(ExitCode::SUCCESS)
}

fn heartbeat(
    master: &Master,
    root: &Path,
    state: &Path,
    mut agent_token: Option<String>,
    every: u64,
    backoff: Duration,
) -> anyhow::Result<ExitCode> {
    loop {
        std::thread::sleep(Duration::from_secs(every));
        let inventory = inventory::gather(root);
        match hello_with_retry(master, agent_token.as_deref(), &inventory, 0, backoff) {
            Ok(reply) => {
                if let Some(token) = reply.agent_token {
                    save_token(state, &token).with_context(|| {
                        format!("cannot save the agent token to {}", state.display())
                    })?;
                    agent_token = Some(token);
                }
            }
            Err(err) => eprintln!("stoker-agent: heartbeat refused: {err}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        agent: AgentArgs,
    }

    fn mode_of(argv: &[&str], cmdline: &str) -> Mode {
        let cli = Cli::try_parse_from([&["agent"], argv].concat()).unwrap();
        mode(&cli.agent, &BootParams::parse(cmdline))
    }

    #[test]
    fn deploy_is_the_default_unless_heartbeat_or_register_only() {
        assert_eq!(mode_of(&[], ""), Mode::Deploy);
        assert_eq!(mode_of(&["--heartbeat", "60"], ""), Mode::Heartbeat);
        assert_eq!(
            mode_of(&["--heartbeat", "60", "--deploy"], ""),
            Mode::Deploy
        );
        assert_eq!(
            mode_of(&["--heartbeat", "60"], "stoker.deploy=1"),
            Mode::Deploy
        );
        assert_eq!(mode_of(&[], "stoker.deploy=0"), Mode::RegisterOnly);
        assert_eq!(mode_of(&["--deploy"], "stoker.deploy=0"), Mode::Deploy);
        assert_eq!(
            mode_of(&["--register-only"], "stoker.deploy=1"),
            Mode::RegisterOnly
        );
        assert!(Cli::try_parse_from(["agent", "--deploy", "--register-only"]).is_err());
    }
}
