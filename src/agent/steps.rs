//! The built-in deploy steps a node executes, by `interface.name`: `deploy.write_image`,
//! `deploy.configure` ([`super::configure`]), `deploy.run_tasks` (one graph task, through the [`Executor`]),
//! `deploy.collect_logs` and `power.reboot_to_disk`. Each returns an [`Outcome`]; none reports
//! to the master or decides what runs next (that is `deploy`'s loop), and the reboot after
//! `reboot_to_disk` is left to the loop too, since it must report first.

use std::path::PathBuf;

/// Where the kernel says which boot this is, relative to the root.
const BOOT_ID: &str = "proc/sys/kernel/random/boot_id";

use serde_json::Value;

use crate::agent::exec::{Context, Executor, Outcome, Tail, run_shell};
use crate::agent::image::{DiskFormat, parse_checksum, write_image};
use crate::agent::inventory;
use crate::agent::net_probe;
use crate::agent::protocol::Run;

/// Where a sandboxed node records that it rebooted to disk.
pub const REBOOTED_TO_DISK: &str = "var/lib/stoker/rebooted-to-disk";

/// Log files whose tails `collect_logs` gathers, under the root.
const LOGS: &[&str] = &[
    "var/log/syslog",
    "var/log/messages",
    "var/log/stoker-agent.log",
    "var/log/puppet.log",
];

impl Executor {
    /// Execute one run's step.
    pub fn run_step(&self, run: &Run, cx: &Context<'_>) -> Outcome {
        let step = &run.step;
        match (step.interface.as_str(), step.name.as_str()) {
            ("deploy", "write_image") => self.write_image(&step.args, cx),
            ("deploy", "configure") => self.configure(&step.args, cx.tail),
            ("deploy", "run_tasks") => match &run.task {
                Some(task) => self.run_task(task, cx),
                None => {
                    Outcome::failed_with(cx.tail, "deploy.run_tasks without a task".to_string())
                }
            },
            ("deploy", "collect_logs") => self.collect_logs(cx.tail),
            ("power", "reboot_to_disk") => self.reboot_to_disk(cx.tail),
            ("network", "verify") => self.verify_network(&step.args, cx.tail),
            (interface, name) => {
                Outcome::failed_with(cx.tail, format!("unknown step {interface}.{name}"))
            }
        }
    }

    /// Network verification's probe (`agent::net_probe`): frames sent and heard on the
    /// interfaces and VLANs of the spec; what was heard is the run's report. A sandboxed
    /// agent (no real interfaces) reports hearing nothing.
    fn verify_network(&self, args: &Value, tail: &Tail) -> Outcome {
        let spec: net_probe::ProbeSpec = match serde_json::from_value(args.clone()) {
            Ok(s) => s,
            Err(e) => {
                return Outcome::failed_with(tail, format!("network.verify: bad spec: {e}"));
            }
        };
        let summary: Vec<String> = spec
            .interfaces
            .iter()
            .map(|i| format!("{} {:?}", i.iface, i.vlans))
            .collect();
        tail.line(&format!(
            "probing {} for {} ms",
            summary.join(", "),
            spec.listen_ms
        ));
        let report = if self.is_sandbox() {
            tail.line("sandboxed agent: no interfaces probed");
            net_probe::ProbeReport {
                node: spec.node,
                networks: Vec::new(),
            }
        } else {
            match net_probe::run(&spec) {
                Ok(r) => r,
                Err(e) => return Outcome::failed_with(tail, format!("network.verify: {e}")),
            }
        };
        for heard in &report.networks {
            for (vlan, nodes) in &heard.vlans {
                tail.line(&format!("{} vlan {vlan}: heard {nodes:?}", heard.iface));
            }
        }
        let mut out = Outcome::done(tail);
        out.report = serde_json::to_value(&report).ok();
        out
    }

    /// The disk to write: `target` from the args, else the first non-removable disk of the
    /// inventory gathered under the root; resolved under the root.
    pub(crate) fn image_target(&self, args: &Value) -> Result<PathBuf, String> {
        let path = match args.get("target").and_then(Value::as_str) {
            Some(t) => t.to_string(),
            None => {
                let inv = inventory::gather(self.root());
                let disk = inv["disks"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|d| d["removable"] != Value::Bool(true))
                    .and_then(|d| d["name"].as_str())
                    .ok_or("no target given and the inventory has no non-removable disk")?;
                format!("/dev/{disk}")
            }
        };
        self.resolve(&path)
    }

    fn write_image(&self, args: &Value, cx: &Context<'_>) -> Outcome {
        let prepare = || -> Result<_, String> {
            let url = args
                .get("image_url")
                .and_then(Value::as_str)
                .ok_or("write_image needs args.image_url")?;
            let checksum = match args.get("checksum").and_then(Value::as_str) {
                Some(c) if !c.is_empty() => Some(parse_checksum(c).map_err(|e| e.to_string())?),
                _ => None,
            };
            let format = match args.get("disk_format").and_then(Value::as_str) {
                Some(f) => Some(DiskFormat::parse(f).map_err(|e| e.to_string())?),
                None => None,
            };
            let target = self.image_target(args)?;
            Ok((url, checksum, format, target))
        };
        let (url, checksum, format, target) = match prepare() {
            Ok(p) => p,
            Err(e) => return Outcome::failed_with(cx.tail, e),
        };
        let open = || -> std::io::Result<std::fs::File> {
            if self.is_sandbox()
                && let Some(dir) = target.parent()
            {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::OpenOptions::new()
                .write(true)
                .create(self.is_sandbox())
                .truncate(false)
                .open(&target)
        };
        let file = match open() {
            Ok(f) => f,
            Err(e) => {
                return Outcome::failed_with(
                    cx.tail,
                    format!("cannot open {} for writing: {e}", target.display()),
                );
            }
        };
        cx.tail.line(&format!("downloading {url}"));
        let source = match cx.fetch.get(url, &[]) {
            Ok(r) => r,
            Err(e) => return Outcome::failed_with(cx.tail, e.to_string()),
        };
        match write_image(source, &file, &target, format, checksum.as_ref(), cx.tail) {
            Ok(_) => Outcome::done(cx.tail),
            Err(e) => Outcome::failed_with(cx.tail, e.to_string()),
        }
    }

    fn collect_logs(&self, tail: &Tail) -> Outcome {
        let mut found = false;
        for log in LOGS {
            if let Ok(bytes) = std::fs::read(self.root().join(log)) {
                found = true;
                tail.line(&format!("==> /{log} <=="));
                let start = bytes.len().saturating_sub(4096);
                tail.push(&bytes[start..]);
                tail.line("");
            }
        }
        if !found {
            tail.line("no log files found");
        }
        Outcome::done(tail)
    }

    fn reboot_to_disk(&self, tail: &Tail) -> Outcome {
        if self.is_sandbox() {
            let marker = self.root().join(REBOOTED_TO_DISK);
            let write = || -> std::io::Result<()> {
                if let Some(dir) = marker.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::write(&marker, "1\n")
            };
            if let Err(e) = write() {
                return Outcome::failed_with(tail, format!("cannot record the reboot: {e}"));
            }
            tail.line("rebooting to disk (sandbox: recorded; the agent exits)");
        } else {
            tail.line("rebooting to disk after reporting");
        }
        Outcome::done(tail)
    }

    /// On a node, after `reboot_to_disk` was reported: reboot now.
    /// This boot's id (`/proc/sys/kernel/random/boot_id`, under the root in a sandbox): a
    /// reboot changes it, which is how an agent knows, after a `reboot` task, that the node
    /// really rebooted.
    pub fn boot_id(&self) -> Option<String> {
        let read = || {
            std::fs::read_to_string(self.root().join(BOOT_ID))
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        match read() {
            // A sandbox's first boot.
            None if self.is_sandbox() => self.new_sandbox_boot().ok().and_then(|()| read()),
            id => id,
        }
    }

    /// A sandbox's new boot: a new random boot id.
    fn new_sandbox_boot(&self) -> std::io::Result<()> {
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).map_err(|e| std::io::Error::other(e.to_string()))?;
        let path = self.root().join(BOOT_ID);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, crate::model::hex(&id) + "\n")
    }

    pub fn reboot_now(&self) -> Outcome {
        if self.is_sandbox() {
            // A sandboxed node "reboots" by getting a new boot id; its loop starts again.
            return match self.new_sandbox_boot() {
                Ok(()) => Outcome::done(&Tail::default()),
                Err(e) => Outcome::failed_with(&Tail::default(), format!("cannot reboot: {e}")),
            };
        }
        run_shell(
            "sync; reboot -f",
            self.root(),
            self.root(),
            std::time::Duration::from_secs(30),
            &Tail::default(),
        )
    }
}
