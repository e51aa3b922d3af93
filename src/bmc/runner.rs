//! The master's own deploy steps: every second the runner asks the store which nodes' next
//! run is due on the master, claims each run as the `master` location (the same claim an
//! agent makes, so attempts, timeouts and the node's state machine behave alike), runs it
//! against the node's BMC on a thread of its own (at most `bmc.sync_workers` at once), and
//! reports the result like an agent. A step whose BMC lacks the capability fails before
//! anything is sent; a firmware image is fetched (and its checksum checked) before the BMC
//! is asked to install it, so a URL that 404s fails first.
//!
//! Also the fallback of `power.reboot_to_disk`: when the bootstrap's agent keeps asking for
//! work after it reported the reboot (its node's next run waits for the installed OS), it
//! could not reboot, and a node with a BMC is booted from its disk through the BMC
//! ([`Runner::reboot_to_disk`], at most once a minute per node).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::actions::{Act, Bmcs};
use super::{BmcError, PowerAction, PowerState};
use crate::engine::steps::Location;
use crate::engine::{bmc_steps, raid};
use crate::model::{Checksum, FieldError, NodeId};
use crate::store::{Claim, GroupWriter, Run, RunResult, Store};

/// What runs the master's steps, shared by the daemon's loop and the agents' calls.
pub struct Runner {
    pub bmcs: Arc<Bmcs>,
    store: Arc<Store>,
    writer: GroupWriter,
    /// Nodes whose master run is in progress in this process.
    busy: Mutex<BTreeSet<NodeId>>,
    /// When each node was last rebooted to disk through its BMC.
    fallbacks: Mutex<BTreeMap<NodeId, Instant>>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner").finish_non_exhaustive()
    }
}

impl Runner {
    pub fn new(bmcs: Arc<Bmcs>, store: Arc<Store>, writer: GroupWriter) -> Runner {
        Runner {
            bmcs,
            store,
            writer,
            busy: Mutex::new(BTreeSet::new()),
            fallbacks: Mutex::new(BTreeMap::new()),
        }
    }

    /// Claim and start every due master run; returns how many started. Blocking (a write
    /// through the group writer); the runs go on in threads of their own.
    pub fn tick(self: &Arc<Self>) -> usize {
        let now = crate::clock::now();
        let busy: BTreeSet<NodeId> = self.busy.lock().map(|b| b.clone()).unwrap_or_default();
        let free = self.bmcs.workers.saturating_sub(busy.len());
        if free == 0 {
            return 0;
        }
        // Most seconds nothing is pending: find that out on a reader, not the writer.
        match self.store.read(|tx| tx.deployments_with_master_runs()) {
            Ok(d) if d.is_empty() => return 0,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "cannot look for the master's runs");
                return 0;
            }
        }
        let claimed = self.writer.write_blocking(move |tx| {
            let mut runs = Vec::new();
            for node in tx.master_runs_due()? {
                if busy.contains(&node) || runs.len() >= free {
                    continue;
                }
                if let Claim::Run(run) = tx.claim_run(node, Location::Master, now)? {
                    runs.push(*run);
                }
            }
            Ok(runs)
        });
        let runs = match claimed {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "cannot claim the master's runs");
                return 0;
            }
        };
        let n = runs.len();
        for run in runs {
            let Some(node) = run.node_id else { continue };
            if let Ok(mut b) = self.busy.lock() {
                b.insert(node);
            }
            let me = Arc::clone(self);
            let spawned = std::thread::Builder::new()
                .name(format!("bmc-step-{}", run.id))
                .spawn(move || {
                    me.run(&run, node);
                    if let Ok(mut b) = me.busy.lock() {
                        b.remove(&node);
                    }
                });
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "cannot start a BMC step's thread");
                if let Ok(mut b) = self.busy.lock() {
                    b.remove(&node);
                }
            }
        }
        n
    }

    fn run(&self, run: &Run, node: NodeId) {
        let started = Instant::now();
        tracing::info!(node, run = run.id, step = %run.step_id(), "BMC step started");
        let mut lines = Vec::new();
        let (report, error) = match self.step(run, node, &mut lines) {
            Ok(report) => (report, None),
            Err(e) => (None, Some(e)),
        };
        let ok = error.is_none();
        let mut tail = lines.join("\n");
        if let Some(e) = &error {
            if !tail.is_empty() {
                tail.push('\n');
            }
            tail.push_str(e);
        }
        let result = RunResult {
            attempt: run.attempt,
            ok,
            exit_code: None,
            output_tail: tail,
            error: error.clone(),
            report,
        };
        let (id, dep, now) = (run.id, run.deployment, crate::clock::now());
        let history = format!(
            "{} {} through the BMC{}",
            run.step_id(),
            if ok { "done" } else { "failed" },
            error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        );
        let reported = self.writer.write_blocking(move |tx| {
            let about = crate::store::About::deployment(dep).and_node(node);
            tx.add_event(now, about, "bmc.step", &history)?;
            tx.report_run(id, node, &result, now)
        });
        if let Err(e) = reported {
            tracing::warn!(node, run = run.id, error = %e, "cannot report a BMC step");
        }
        tracing::info!(
            node,
            run = run.id,
            ok,
            ms = started.elapsed().as_millis() as u64,
            error = error.as_deref().unwrap_or(""),
            "BMC step ended"
        );
    }

    fn step(
        &self,
        run: &Run,
        node: NodeId,
        lines: &mut Vec<String>,
    ) -> Result<Option<Value>, String> {
        let args = &run.args;
        let endpoint = self
            .bmcs
            .endpoint_of(&self.store, node)
            .map_err(|e| e.to_string())?;
        let mut bmc = super::connect(&endpoint);
        let e = |err: BmcError| err.to_string();
        lines.push(format!(
            "{} BMC at {} as {}",
            endpoint.driver, endpoint.address, endpoint.username
        ));
        match (run.interface.as_str(), run.step.as_str()) {
            ("power", "boot_network") => {
                bmc.boot_once(super::BootDevice::Pxe).map_err(e)?;
                lines.push("boot device: network, next boot only".into());
                let state = bmc.power_state().map_err(e)?;
                let action = if state == PowerState::Off {
                    PowerAction::On
                } else {
                    PowerAction::Reboot
                };
                bmc.power(action).map_err(e)?;
                lines.push(format!("power was {}: {}", state.as_str(), action.as_str()));
                self.note_power(node, PowerState::PoweringOn);
                Ok(Some(
                    json!({"boot_device": "pxe", "power": action.as_str()}),
                ))
            }
            ("power", "power_off") => {
                bmc.power(PowerAction::Off).map_err(e)?;
                lines.push("power: off".into());
                self.note_power(node, PowerState::PoweringOff);
                Ok(Some(json!({"power": "off"})))
            }
            ("bios", "apply_configuration") => {
                let settings = bmc_steps::bios_settings(&args["settings"], "settings")
                    .map_err(|v| FieldError::joined(&v))?;
                require(
                    bmc.capabilities().map_err(e)?.bios,
                    &endpoint,
                    "BIOS settings resource",
                )?;
                bmc.apply_bios(&settings).map_err(e)?;
                for (k, v) in &settings {
                    lines.push(format!("{k} = {v}"));
                }
                lines.push("staged; applied at the next boot".into());
                Ok(Some(json!({"settings": settings})))
            }
            ("raid", "create_configuration") => {
                let config = raid::parse(&args["target_raid_config"], "target_raid_config")
                    .map_err(|v| FieldError::joined(&v))?;
                require(
                    bmc.capabilities().map_err(e)?.raid,
                    &endpoint,
                    "RAID volumes",
                )?;
                let drives = bmc.drives().map_err(e)?;
                lines.push(format!(
                    "{} drives: {}",
                    drives.len(),
                    drives
                        .iter()
                        .map(|d| format!("{} ({} GiB)", d.name, d.capacity_bytes >> 30))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                // Placed before anything is deleted: a layout larger than the disks changes nothing.
                let plan = raid::plan(&config, &drives, "target_raid_config")
                    .map_err(|v| FieldError::joined(&v))?;
                if args["delete_existing"].as_bool().unwrap_or(false) {
                    let n = bmc.delete_volumes().map_err(e)?;
                    lines.push(format!("deleted {n} existing volumes"));
                }
                let made = bmc.create_volumes(&plan).map_err(e)?;
                for v in &made {
                    lines.push(format!(
                        "created {} {} {} bytes",
                        v.name,
                        v.raid_type.as_deref().unwrap_or("?"),
                        v.capacity_bytes.map_or("?".into(), |b| b.to_string())
                    ));
                }
                Ok(Some(json!({"volumes": made, "plan": plan})))
            }
            ("raid", "delete_configuration") => {
                require(
                    bmc.capabilities().map_err(e)?.raid,
                    &endpoint,
                    "RAID volumes",
                )?;
                let n = bmc.delete_volumes().map_err(e)?;
                lines.push(format!("deleted {n} volumes"));
                Ok(Some(json!({"deleted": n})))
            }
            ("management", "update_firmware") => {
                let images =
                    bmc_steps::firmware_images(&args["firmware_images"], "firmware_images")
                        .map_err(|v| FieldError::joined(&v))?;
                require(
                    bmc.capabilities().map_err(e)?.firmware,
                    &endpoint,
                    "UpdateService.SimpleUpdate",
                )?;
                // Every image is checked before the first is installed.
                for (i, img) in images.iter().enumerate() {
                    let found = check_image(&img.url, img.checksum.as_ref(), self.bmcs.timeout)
                        .map_err(|m| {
                            format!("firmware_images[{i}].url: {m}; nothing was changed")
                        })?;
                    lines.push(format!("image {}: {found}", img.url));
                }
                let mut done = Vec::new();
                for img in &images {
                    let mut progress = |l: &str| lines.push(l.to_string());
                    let summary = bmc
                        .update_firmware(&img.url, Duration::from_secs(img.wait_s), &mut progress)
                        .map_err(e)?;
                    done.push(json!({"url": img.url, "result": summary}));
                }
                Ok(Some(json!({"updated": done})))
            }
            (i, s) => Err(format!("{i}.{s} is not a step the master runs")),
        }
    }

    fn note_power(&self, node: NodeId, state: PowerState) {
        let now = crate::clock::now();
        if let Err(e) = self
            .store
            .write(|tx| tx.record_power(node, Ok(state), now, now + 5))
        {
            tracing::warn!(node, error = %e, "cannot record the power state");
        }
    }

    /// `node`'s bootstrap agent asks for work while its next run waits for the installed OS:
    /// it did not reboot. With a BMC, boot the disk through it (at most once a minute).
    pub fn reboot_to_disk(self: &Arc<Self>, node: NodeId) {
        let due = match self.fallbacks.lock() {
            Ok(mut f) => {
                let last = f.get(&node).copied();
                if last.is_some_and(|t| t.elapsed() < Duration::from_secs(60)) {
                    false
                } else {
                    f.insert(node, Instant::now());
                    true
                }
            }
            Err(_) => false,
        };
        if !due {
            return;
        }
        let me = Arc::clone(self);
        // Off the caller's thread: an agent's call must not wait for the database or the BMC.
        let _ = std::thread::Builder::new()
            .name("bmc-reboot".into())
            .spawn(move || {
                let has = matches!(me.store.read(|r| r.bmc(node)), Ok(Some(b)) if b.usable());
                if !has {
                    return;
                }
                tracing::warn!(
                    node,
                    "the bootstrap agent did not reboot to disk: rebooting it through its BMC"
                );
                me.bmcs.act(
                    &me.store,
                    node,
                    Act::Disk,
                    "power.reboot_to_disk (the agent could not reboot)",
                );
            });
    }
}

/// Refuses a step the BMC lacks `what` for, before anything is sent.
fn require(has: bool, endpoint: &super::Endpoint, what: &str) -> Result<(), String> {
    if has {
        Ok(())
    } else {
        Err(format!(
            "the {} BMC at {} has no {what}; nothing was changed",
            endpoint.driver, endpoint.address
        ))
    }
}

/// Check a firmware image before the BMC is asked for it: its URL must answer 200 (a URL that
/// 404s fails here), and with a checksum the whole body (bounded at 4 GiB) must match it.
/// Without one only the answer's head is read. What it found, for the step's output.
fn check_image(
    url: &str,
    checksum: Option<&Checksum>,
    timeout: Duration,
) -> Result<String, String> {
    use sha2::Digest;
    // HTTPS images are checked against the system's roots.
    let agent = super::redfish::tls::agent(true, timeout.max(Duration::from_secs(60)))?;
    let resp = agent
        .get(url)
        .call()
        .map_err(|e| format!("cannot fetch the image: {e}"))?;
    let status = resp.status().as_u16();
    if status != 200 {
        return Err(format!("the image URL answered HTTP {status}"));
    }
    let Some(want) = checksum else {
        return Ok("answers 200".to_string());
    };
    let mut body = resp.into_body();
    let mut reader = body.as_reader().take(4 << 30);
    let (mut sha256, mut md5) = (sha2::Sha256::new(), md5::Md5::new());
    let mut buf = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| format!("reading the image: {e}"))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        match want {
            Checksum::Sha256(_) => sha256.update(&buf[..n]),
            Checksum::Md5(_) => md5.update(&buf[..n]),
        }
    }
    let got = match want {
        Checksum::Sha256(_) => crate::model::hex(&sha256.finalize()),
        Checksum::Md5(_) => crate::model::hex(&md5.finalize()),
    };
    if got != want.hex() {
        return Err(format!(
            "the image's checksum is {}:{got}, not {want}",
            want.label()
        ));
    }
    Ok(format!("{size} bytes, checksum matches"))
}
