//! `deploy.configure`, the last provisioning step before the reboot: the installed OS gets its
//! host name, the master's facts, and its service agent (the configuration with the node's
//! credential from the step's `os_agent` argument, the systemd unit, the binary). Two ways,
//! chosen by `agent_install`:
//! - `config-2` / `nocloud`: a config drive appended to the target disk for the image's
//!   cloud-init, whose user data writes the files, fetches the agent from the master with the
//!   credential and enables its unit;
//! - `inject`: for images without cloud-init, the image's root filesystem is found (by label or
//!   partition type), mounted, and the files and this agent's own binary are written into it.
//!
//! The disk work is [`super::disk`]'s; this file decides what goes where.

use std::path::Path;

use serde_json::{Value, json};

use super::disk::config_drive::{self, Contents, Flavor};
use super::disk::mount::{self, NewFile};
use super::disk::{Disk, fs, table};
use super::exec::{Executor, Outcome, Tail};

/// Where the agent binary goes in the installed OS (the unit's `ExecStart`).
pub const AGENT_PATH: &str = "/usr/local/bin/stoker";

/// The service agent's unit in the installed OS.
const UNIT_PATH: &str = "/etc/systemd/system/stoker-agent.service";

/// The unit enabled, as `systemctl enable` does it: a symlink (systemd ignores a `.wants`
/// entry that is a regular file, so a copy of the unit there left the agent stopped).
const UNIT_WANTS: &str = "/etc/systemd/system/multi-user.target.wants/stoker-agent.service";

/// A host name the OS can take: 1 to 253 letters, digits, `-` and `.`.
fn valid_hostname(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
}

/// The files every way installs: host name, facts, the agent's configuration and unit.
fn os_files(hostname: &str, facts: &Value, os_agent: &Value) -> Result<Vec<NewFile>, String> {
    let config = os_agent
        .get("config")
        .filter(|c| c.is_object())
        .ok_or("os_agent.config is missing (the master adds it when it hands the step out)")?;
    let unit = os_agent
        .get("unit")
        .and_then(Value::as_str)
        .ok_or("os_agent.unit is missing")?;
    let text = |v: &Value| serde_json::to_string_pretty(v).map(|t| t + "\n");
    let facts = text(facts).map_err(|e| format!("cannot encode the facts: {e}"))?;
    let config = text(config).map_err(|e| format!("cannot encode os_agent.config: {e}"))?;
    Ok(vec![
        NewFile {
            path: "/etc/hostname".into(),
            mode: 0o644,
            contents: format!("{hostname}\n").into_bytes(),
        },
        NewFile {
            path: "/etc/stoker/facts.json".into(),
            mode: 0o644,
            contents: facts.into_bytes(),
        },
        NewFile {
            path: "/etc/stoker/agent.json".into(),
            mode: 0o600,
            contents: config.into_bytes(),
        },
        NewFile {
            path: UNIT_PATH.into(),
            mode: 0o644,
            contents: unit.as_bytes().to_vec(),
        },
    ])
}

impl Executor {
    pub(crate) fn configure(&self, args: &Value, tail: &Tail) -> Outcome {
        match self.try_configure(args, tail) {
            Ok(()) => Outcome::done(tail),
            Err(e) => Outcome::failed_with(tail, e),
        }
    }

    fn try_configure(&self, args: &Value, tail: &Tail) -> Result<(), String> {
        let hostname = args
            .get("hostname")
            .and_then(Value::as_str)
            .ok_or("configure needs args.hostname")?;
        if !valid_hostname(hostname) {
            return Err(format!("hostname {hostname:?} is not valid"));
        }
        let mut facts = match args.get("facts") {
            Some(Value::Object(m)) => m.clone(),
            None | Some(Value::Null) => serde_json::Map::new(),
            Some(other) => return Err(format!("facts {other} is not an object")),
        };
        facts
            .entry("hostname")
            .or_insert_with(|| Value::from(hostname));
        if let Some(fqdn) = args.get("fqdn").and_then(Value::as_str) {
            facts.entry("fqdn").or_insert_with(|| Value::from(fqdn));
        }
        let facts = Value::Object(facts);
        let os_agent = args.get("os_agent").cloned().unwrap_or(Value::Null);
        let files = os_files(hostname, &facts, &os_agent)?;
        let install = args
            .get("agent_install")
            .and_then(Value::as_str)
            .unwrap_or("config-2");
        let target = self.image_target(args)?;
        let disk = Disk::open(&target).map_err(|e| e.to_string())?;
        match install {
            "inject" => self.inject(&disk, &target, &files, tail),
            other => {
                let flavor = Flavor::parse(other).map_err(|e| {
                    format!("agent_install {other:?} is not config-2, nocloud or inject ({e})")
                })?;
                config_drive_install(&disk, flavor, hostname, &files, &os_agent, tail)
            }
        }
    }

    /// Find the image's root filesystem, mount it, write the files and this agent's binary.
    fn inject(
        &self,
        disk: &Disk,
        target: &Path,
        files: &[NewFile],
        tail: &Tail,
    ) -> Result<(), String> {
        let (part, found) = fs::find_root(disk, fs::ROOT_LABELS).map_err(|e| e.to_string())?;
        tail.line(&format!(
            "root filesystem: partition {} of {} ({} {})",
            part.number,
            target.display(),
            found.kind.name(),
            found.label.as_deref().unwrap_or("without a label")
        ));
        let sandbox = self.is_sandbox().then(|| self.root());
        let mounted = mount::mount(target, &part, &found, sandbox).map_err(|e| e.to_string())?;
        let mut all = files.to_vec();
        if self.is_sandbox() {
            // A sandbox's "binary" would be a copy of the test's executable: a note stands for
            // it.
            all.push(NewFile {
                path: AGENT_PATH.into(),
                mode: 0o755,
                contents: b"#!/bin/sh\n# stoker agent (sandbox: the binary is not copied)\n"
                    .to_vec(),
            });
        } else {
            let exe = std::fs::read("/proc/self/exe")
                .map_err(|e| format!("cannot read this agent's binary: {e}"))?;
            all.push(NewFile {
                path: AGENT_PATH.into(),
                mode: 0o755,
                contents: exe,
            });
        }
        mount::write_files(mounted.path(), &all).map_err(|e| e.to_string())?;
        mount::write_symlink(mounted.path(), UNIT_WANTS, UNIT_PATH).map_err(|e| e.to_string())?;
        mounted.finish().map_err(|e| e.to_string())?;
        tail.line(&format!(
            "injected the service agent into the root filesystem: {}",
            all.iter()
                .map(|f| f.path.as_str())
                .chain([UNIT_WANTS])
                .collect::<Vec<_>>()
                .join(", ")
        ));
        Ok(())
    }
}

/// The config drive: meta data with the host name, the master's user data with the host name
/// and facts added to its `write_files`, appended to the disk as a partition.
fn config_drive_install(
    disk: &Disk,
    flavor: Flavor,
    hostname: &str,
    files: &[NewFile],
    os_agent: &Value,
    tail: &Tail,
) -> Result<(), String> {
    let user_data = os_agent
        .get("user_data")
        .and_then(Value::as_str)
        .ok_or("os_agent.user_data is missing")?;
    let mut cloud: Value = serde_json::from_str(
        user_data
            .strip_prefix("#cloud-config\n")
            .ok_or("os_agent.user_data is not a #cloud-config document")?,
    )
    .map_err(|e| format!("os_agent.user_data: {e}"))?;
    let write = cloud["write_files"]
        .as_array_mut()
        .ok_or("os_agent.user_data has no write_files list")?;
    for f in files
        .iter()
        .filter(|f| f.path == "/etc/hostname" || f.path == "/etc/stoker/facts.json")
    {
        write.push(json!({
            "path": f.path,
            "permissions": format!("{:04o}", f.mode),
            "content": String::from_utf8_lossy(&f.contents),
        }));
    }
    let mut meta = os_agent.get("meta_data").cloned().unwrap_or(json!({}));
    let id = meta["uuid"].as_str().unwrap_or("stoker-node").to_string();
    match flavor {
        Flavor::ConfigTwo => {
            meta["hostname"] = json!(hostname);
            meta["name"] = json!(hostname);
        }
        Flavor::NoCloud => {
            meta["instance-id"] = json!(id);
            meta["local-hostname"] = json!(hostname);
        }
    }
    let contents = Contents {
        meta_data: meta,
        user_data: format!("#cloud-config\n{cloud:#}\n").into_bytes(),
        network_data: None,
    };
    let image = config_drive::build(flavor, &contents).map_err(|e| e.to_string())?;
    // A retried configure (or a redeploy that provisions again) finds its own drive: it is
    // rewritten in place when the new one fits, so the disk never collects stale drives that
    // cloud-init could find instead. (A drive of the other flavor is replaced too: its
    // partition keeps its type and GPT name, which cloud-init does not look at.)
    let part = match config_drive::find(disk).map_err(|e| e.to_string())? {
        Some((part, found)) if image.len() as u64 <= part.size => {
            if found != flavor {
                tail.line(&format!(
                    "replacing the {} config drive of partition {}",
                    found.label(),
                    part.number
                ));
            }
            disk.write_at(part.start, &image, "rewriting the config drive")
                .and_then(|()| disk.sync("rewriting the config drive"))
                .map_err(|e| e.to_string())?;
            part
        }
        _ => table::append(disk, &image, &flavor.append()).map_err(|e| e.to_string())?,
    };
    tail.line(&format!(
        "config drive {} ({} bytes) written as partition {} at byte {}",
        flavor.label(),
        image.len(),
        part.number,
        part.start
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::disk::{cloud, config_drive};

    #[test]
    fn host_names_are_checked() {
        assert!(valid_hostname("node-1.domain.tld"));
        assert!(!valid_hostname(""));
        assert!(!valid_hostname("a b"));
        assert!(!valid_hostname(&"a".repeat(254)));
    }

    /// A sandboxed node whose `/dev/vda` holds the demo's OS image (MBR, an ext4 partition
    /// labelled stoker-root, 4 MiB free after it).
    fn node() -> (tempfile::TempDir, Executor) {
        let dir = tempfile::tempdir().unwrap();
        crate::demo::write_os_image(&dir.path().join("dev/vda")).unwrap();
        let ex = Executor::sandbox(dir.path().to_path_buf());
        (dir, ex)
    }

    /// The step's arguments as the master hands them out, with the service's payload.
    fn args(install: &str) -> Value {
        let config = json!({"master": "http://10.20.0.2:8000", "fingerprint": null,
                            "node_id": 7, "credential": "skn_secret"});
        let user_data = json!({
            "write_files": [
                {"path": "/etc/stoker/agent.json", "permissions": "0600",
                 "content": format!("{config:#}\n")},
                {"path": "/etc/systemd/system/stoker-agent.service", "permissions": "0644",
                 "content": "[Unit]\n"},
            ],
            "runcmd": [["systemctl", "enable", "--now", "stoker-agent.service"]],
        });
        json!({
            "target": "/dev/vda",
            "hostname": "node-7",
            "fqdn": "node-7.domain.tld",
            "facts": {"roles": ["compute"]},
            "agent_install": install,
            "os_agent": {
                "config": config,
                "unit": "[Unit]\n",
                "user_data": format!("#cloud-config\n{user_data:#}\n"),
                "meta_data": {"uuid": "stoker-node-7", "meta": {"stoker_node_id": "7"}},
            },
        })
    }

    fn configure(ex: &Executor, args: &Value) -> Result<String, String> {
        let tail = Tail::default();
        let out = ex.configure(args, &tail);
        if out.ok {
            Ok(tail.text())
        } else {
            Err(out.error.unwrap_or_default())
        }
    }

    #[test]
    fn a_config_drive_carries_the_agent_and_is_rewritten_not_stacked_on_a_retry() {
        use crate::agent::disk::{FsKind, PartKind};
        for (install, flavor, kind) in [
            (
                "config-2",
                config_drive::Flavor::ConfigTwo,
                (FsKind::Iso9660, PartKind::Mbr(0x83)),
            ),
            (
                "nocloud",
                config_drive::Flavor::NoCloud,
                (FsKind::Vfat, PartKind::Mbr(0x0c)),
            ),
        ] {
            let (dir, ex) = node();
            let disk_path = dir.path().join("dev/vda");
            let log = configure(&ex, &args(install)).unwrap();
            assert!(log.contains("as partition 2"), "{log}");
            let disk = Disk::open_read_only(&disk_path).unwrap();
            let (part, found) = config_drive::find(&disk).unwrap().unwrap();
            assert_eq!((part.number, found), (2, flavor));
            // config-2 as Nova and Ironic write it: ISO 9660 in a Linux partition; NoCloud FAT.
            let fs = fs::probe_partition(&disk, &part).unwrap().unwrap();
            assert_eq!((fs.kind, part.kind.clone()), kind);
            // What cloud-init would do with it: the agent's files, host name and facts.
            let root = dir.path().join("booted");
            std::fs::create_dir(&root).unwrap();
            cloud::first_boot(&disk_path, &root).unwrap();
            let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
            assert!(read("etc/stoker/agent.json").contains("skn_secret"));
            assert_eq!(read("etc/hostname"), "node-7\n");
            let facts: Value = serde_json::from_str(&read("etc/stoker/facts.json")).unwrap();
            assert_eq!(facts["fqdn"], "node-7.domain.tld");
            assert_eq!(facts["roles"][0], "compute");
            // Again: the same partition, rewritten; no third partition.
            let log = configure(&ex, &args(install)).unwrap();
            assert!(log.contains("as partition 2"), "{log}");
            let disk = Disk::open_read_only(&disk_path).unwrap();
            assert_eq!(table::read(&disk).unwrap().partitions.len(), 2);
            assert_eq!(config_drive::find(&disk).unwrap().unwrap().1, flavor);
        }
    }

    #[test]
    fn the_other_flavor_replaces_the_drive_in_place() {
        let (dir, ex) = node();
        let disk_path = dir.path().join("dev/vda");
        configure(&ex, &args("nocloud")).unwrap();
        let log = configure(&ex, &args("config-2")).unwrap();
        assert!(
            log.contains("replacing the cidata config drive of partition 2"),
            "{log}"
        );
        let disk = Disk::open_read_only(&disk_path).unwrap();
        assert_eq!(table::read(&disk).unwrap().partitions.len(), 2);
        let (part, found) = config_drive::find(&disk).unwrap().unwrap();
        assert_eq!((part.number, found), (2, config_drive::Flavor::ConfigTwo));
        let root = dir.path().join("booted");
        std::fs::create_dir(&root).unwrap();
        cloud::first_boot(&disk_path, &root).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("etc/hostname")).unwrap(),
            "node-7\n"
        );
    }

    #[test]
    fn injection_writes_the_agent_into_the_root_filesystem() {
        let (dir, ex) = node();
        let log = configure(&ex, &args("inject")).unwrap();
        assert!(log.contains("root filesystem: partition 1"), "{log}");
        assert!(log.contains("stoker-root"), "{log}");
        // The sandbox's mount of partition 1.
        let root = dir.path().join("installed/vda-part1");
        let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
        assert!(read("etc/stoker/agent.json").contains("skn_secret"));
        assert_eq!(read("etc/hostname"), "node-7\n");
        assert_eq!(read("etc/systemd/system/stoker-agent.service"), "[Unit]\n");
        // Enabled by a symlink, as systemd wants it (a regular file there is ignored).
        let wants = root.join("etc/systemd/system/multi-user.target.wants/stoker-agent.service");
        assert!(std::fs::symlink_metadata(&wants).unwrap().is_symlink());
        assert_eq!(
            std::fs::read_link(&wants).unwrap(),
            Path::new("/etc/systemd/system/stoker-agent.service")
        );
        assert!(root.join(AGENT_PATH.trim_start_matches('/')).exists());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(root.join("etc/stoker/agent.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the credential is root's only");
        // No config drive was added.
        let disk = Disk::open_read_only(&dir.path().join("dev/vda")).unwrap();
        assert_eq!(table::read(&disk).unwrap().partitions.len(), 1);
    }

    #[test]
    fn bad_disks_and_arguments_are_refused_by_name() {
        // No root filesystem to inject into: a disk of zeros with an empty table.
        let (dir, ex) = node();
        let disk = dir.path().join("dev/vda");
        let mut bytes = std::fs::read(&disk).unwrap();
        bytes[446..462].fill(0);
        std::fs::write(&disk, &bytes).unwrap();
        let e = configure(&ex, &args("inject")).unwrap_err();
        assert!(e.contains("vda") && e.contains("root"), "{e}");

        // A disk with no room after its last partition for the drive.
        let (dir, ex) = node();
        let disk = dir.path().join("dev/vda");
        let f = std::fs::OpenOptions::new().write(true).open(&disk).unwrap();
        f.set_len(12 * 1024 * 1024 + 512 * 1024).unwrap();
        drop(f);
        let e = configure(&ex, &args("config-2")).unwrap_err();
        assert!(e.contains("vda"), "{e}");

        // A config drive over 64 MiB.
        let (_dir, ex) = node();
        let mut a = args("nocloud");
        a["facts"]["blob"] = json!("x".repeat(65 * 1024 * 1024));
        let e = configure(&ex, &a).unwrap_err();
        assert!(e.contains("64 MiB") || e.contains("67108864"), "{e}");

        // An unknown way, a bad host name, no payload from the master.
        let (_dir, ex) = node();
        let mut a = args("iso");
        let e = configure(&ex, &a).unwrap_err();
        assert!(e.contains("agent_install \"iso\""), "{e}");
        a["agent_install"] = json!("inject");
        a["hostname"] = json!("no spaces please");
        let e = configure(&ex, &a).unwrap_err();
        assert!(e.contains("hostname"), "{e}");
        a["hostname"] = json!("node-7");
        a.as_object_mut().unwrap().remove("os_agent");
        let e = configure(&ex, &a).unwrap_err();
        assert!(e.contains("os_agent.config is missing"), "{e}");
    }
}
