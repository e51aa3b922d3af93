//! The diagnostic snapshot (Nailgun's `PUT /logs/package`, `fuel2 snapshot create`, `fuel
//! snapshot`): a `dump` task of the master ([`crate::store::MasterTask`]) whose thread writes a
//! `.tar.gz` of the master's state under `data_dir/snapshots/`, and whose message, once it is
//! `ready`, is the path it is downloaded from (`/api/dump/<name>`, admin only).
//!
//! What is in it: the database as one consistent copy with every secret blanked
//! ([`crate::store::Store::copy_without_secrets`]), the daemon's effective configuration
//! (credentials inside URLs blanked), its version and schema, the recent history and audit log
//! as text, and, when the master runs as the systemd unit `stoker.service` and `journalctl` is
//! there, the unit's journal of the last day (else a line saying why not: the daemon logs to
//! stderr only). Everything is bounded: a database past [`MAX_DATABASE_BYTES`] is left out
//! (saying so), the history and audit to their newest entries, the journal by lines, bytes and
//! time. The archive is written to a hidden temporary file and renamed when whole, so a
//! snapshot is never seen half-written; the newest [`KEEP`] are kept, older ones deleted with
//! their tasks. A master stopped while one was being made fails its task and removes what it
//! left at the next start.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value as J, json};

use crate::model::FieldError;
use crate::store::{MasterTask, Store, StoreError};

/// Nailgun's name of the task.
pub const TASK: &str = "dump";
/// Snapshots (and their tasks) kept; the oldest beyond go.
pub const KEEP: usize = 3;
/// Where a ready snapshot is downloaded from: this, then its name (Nailgun's `/api/dump/`).
pub const URL_PREFIX: &str = "/api/dump/";
/// A database larger than this is left out of a snapshot.
pub const MAX_DATABASE_BYTES: u64 = 1 << 30;
const HISTORY_ENTRIES: u32 = 10_000;
const AUDIT_ENTRIES: u32 = 10_000;
const JOURNAL_LINES: u32 = 20_000;
const JOURNAL_BYTES: usize = 16 << 20;
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
const NAME_PREFIX: &str = "stoker-snapshot-";
const NAME_SUFFIX: &str = ".tar.gz";

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no snapshot {0}")]
    NotFound(String),
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SnapshotError + use<> {
    let path = path.to_path_buf();
    move |source| SnapshotError::Io { what, path, source }
}

/// Where the snapshots are and what a snapshot says of the daemon.
#[derive(Debug)]
pub struct Snapshots {
    dir: PathBuf,
    /// The effective configuration, as text without secrets.
    config: String,
}

/// Credentials inside URLs (`scheme://user:password@host`) blanked.
fn without_credentials(text: &str) -> String {
    match regex::Regex::new(r"(?i)([a-z][a-z0-9+.-]*://)[^/@\s\x22]*@") {
        Ok(re) => re.replace_all(text, "${1}***@").into_owned(),
        Err(_) => String::new(),
    }
}

impl Snapshots {
    /// Snapshots under `data_dir/snapshots`, describing the daemon's `config`.
    pub fn new(data_dir: &Path, config: &crate::config::Config) -> Snapshots {
        Snapshots {
            dir: data_dir.join("snapshots"),
            config: without_credentials(&format!("{config:#?}\n")),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// At start: what a stopped master left half-made is removed, and its task fails.
    pub fn recover(&self, store: &Store, now: i64) -> Result<(), SnapshotError> {
        store.write(|tx| {
            tx.fail_unfinished_master_tasks(
                "the master stopped while this task ran; start it again",
                now,
            )
        })?;
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                if name.starts_with(".tmp-") || name.starts_with(".work-") {
                    let p = e.path();
                    let _ = if p.is_dir() {
                        std::fs::remove_dir_all(&p)
                    } else {
                        std::fs::remove_file(&p)
                    };
                }
            }
        }
        Ok(())
    }

    /// Start a snapshot: the `dump` task (refused while one runs), its archive made by a
    /// thread of its own. `conf` is the request's body: stoker's snapshot has fixed contents,
    /// so only none, `null` or `{}` is taken (any key is refused, named).
    pub fn start(
        self: &Arc<Self>,
        store: &Arc<Store>,
        conf: Option<&J>,
        now: i64,
    ) -> Result<MasterTask, SnapshotError> {
        match conf {
            None | Some(J::Null) => {}
            Some(J::Object(o)) if o.is_empty() => {}
            Some(J::Object(o)) => {
                return Err(StoreError::Invalid {
                    what: "snapshot configuration",
                    fields: o
                        .keys()
                        .map(|k| FieldError {
                            field: k.clone(),
                            message: "stoker's snapshot has fixed contents and takes no \
                                      configuration (send {} or nothing)"
                                .to_string(),
                        })
                        .collect(),
                }
                .into());
            }
            Some(_) => {
                return Err(StoreError::Invalid {
                    what: "snapshot configuration",
                    fields: vec![FieldError {
                        field: "$".into(),
                        message: "expected an object (stoker takes {} or nothing)".into(),
                    }],
                }
                .into());
            }
        }
        let task = store.write(|tx| tx.start_master_task(TASK, KEEP - 1, now))?;
        let (me, store2, id) = (Arc::clone(self), Arc::clone(store), task.id);
        let spawned = std::thread::Builder::new()
            .name("stoker-snapshot".into())
            .spawn(move || me.run(&store2, id, now));
        if let Err(e) = spawned {
            store.write(|tx| {
                tx.finish_master_task(
                    id,
                    false,
                    &format!("cannot start the snapshot's thread: {e}"),
                    &json!({}),
                    now,
                )
            })?;
        }
        Ok(task)
    }

    /// The snapshot thread: build, end the task, drop the old snapshots.
    fn run(&self, store: &Store, id: i64, now: i64) {
        let started = Instant::now();
        let outcome = self.build(store, id, now);
        let end = crate::clock::now();
        let written = match &outcome {
            Ok((name, bytes)) => {
                tracing::info!(task = id, file = %name, bytes, seconds = started.elapsed().as_secs_f64(), "snapshot ready");
                store.write(|tx| {
                    tx.finish_master_task(
                        id,
                        true,
                        &format!("{URL_PREFIX}{name}"),
                        &json!({"file": name, "bytes": bytes}),
                        end,
                    )
                })
            }
            Err(e) => {
                tracing::error!(task = id, "snapshot failed: {e}");
                store.write(|tx| {
                    tx.finish_master_task(
                        id,
                        false,
                        &format!("snapshot failed: {e}"),
                        &json!({}),
                        end,
                    )
                })
            }
        };
        if let Err(e) = written {
            tracing::error!(task = id, "cannot record the snapshot's end: {e}");
        }
        if let Err(e) = self.prune(store) {
            tracing::warn!("cannot remove old snapshots: {e}");
        }
    }

    /// Every snapshot file not named by a kept `dump` task goes.
    fn prune(&self, store: &Store) -> Result<(), SnapshotError> {
        let kept: Vec<String> = store
            .read(|r| r.master_tasks(None))?
            .into_iter()
            .filter(|t| t.name == TASK)
            .filter_map(|t| t.result.get("file").and_then(J::as_str).map(str::to_string))
            .collect();
        let entries = std::fs::read_dir(&self.dir).map_err(io("cannot list", &self.dir))?;
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if is_snapshot_name(&name) && !kept.contains(&name) {
                std::fs::remove_file(e.path()).map_err(io("cannot remove", &e.path()))?;
            }
        }
        Ok(())
    }

    /// Make snapshot file of task `id`: its name and size.
    fn build(&self, store: &Store, id: i64, now: i64) -> Result<(String, u64), SnapshotError> {
        create_private_dir(&self.dir)?;
        let stamp = crate::model::utc(now)
            .trim_end_matches(" UTC")
            .replace([' ', ':'], "-");
        let top = format!("{NAME_PREFIX}{id}-{stamp}");
        let name = format!("{top}{NAME_SUFFIX}");
        let work = self.dir.join(format!(".work-{id}"));
        let tmp = self.dir.join(format!(".tmp-{name}"));
        let made = self.write_archive(store, id, now, &top, &work, &tmp);
        let _ = std::fs::remove_dir_all(&work);
        let bytes = match made {
            Ok(bytes) => bytes,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        let path = self.dir.join(&name);
        std::fs::rename(&tmp, &path).map_err(io("cannot rename the snapshot to", &path))?;
        if let Ok(d) = std::fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok((name, bytes))
    }

    fn write_archive(
        &self,
        store: &Store,
        id: i64,
        now: i64,
        top: &str,
        work: &Path,
        tmp: &Path,
    ) -> Result<u64, SnapshotError> {
        create_private_dir(work)?;
        let db = work.join("stoker.db");
        let size = store.database_bytes()?;
        let copied = if size > MAX_DATABASE_BYTES {
            Err(format!(
                "the database is {size} bytes, over the snapshot's bound of \
                 {MAX_DATABASE_BYTES}: copy it by hand from a stopped master"
            ))
        } else {
            Ok(store.copy_without_secrets(&db)?)
        };
        let (history, audit, deployments) = store.read(|r| {
            Ok((
                r.recent_history(HISTORY_ENTRIES)?,
                r.audit(AUDIT_ENTRIES, None)?,
                r.deployments_with_progress(None, None)?,
            ))
        })?;
        let mut parts: Vec<(&str, String)> = Vec::new();
        parts.push(("README.txt", readme(id, now, &copied)));
        parts.push((
            "version.txt",
            format!(
                "stoker {}\nschema version {} (the database copy's: {})\n",
                env!("CARGO_PKG_VERSION"),
                crate::store::migrations::latest(),
                match &copied {
                    Ok(v) => v.to_string(),
                    Err(_) => "not included".to_string(),
                }
            ),
        ));
        parts.push((
            "config.txt",
            format!(
                "# The daemon's effective configuration (defaults < file < environment < flags);\n\
             # credentials inside URLs blanked.\n{}",
                self.config
            ),
        ));
        let mut text = String::new();
        for h in history.iter().rev() {
            let node = h.node_id.map_or("-".to_string(), |n| format!("node-{n}"));
            text.push_str(&format!(
                "{}  {node}  {}  {}\n",
                crate::model::utc(h.at),
                h.kind,
                h.message
            ));
        }
        parts.push(("history.txt", text));
        let mut text = String::new();
        for a in audit.iter().rev() {
            text.push_str(&format!(
                "{}  {} ({})  {}  {} {}  {}  {}\n",
                crate::model::utc(a.at),
                a.actor,
                a.role,
                a.source,
                a.method,
                a.path,
                a.status,
                a.detail
            ));
        }
        parts.push(("audit.txt", text));
        let mut text = String::new();
        for (d, total, finished) in &deployments {
            text.push_str(&format!(
                "{}  environment {}  {} ({})  {}  runs {finished}/{total}  started {}  ended {}\n",
                d.id,
                d.cluster_id,
                d.name,
                d.graph_type,
                d.status,
                crate::model::utc(d.created_at),
                d.finished_at.map_or("-".to_string(), crate::model::utc)
            ));
        }
        parts.push(("deployments.txt", text));
        parts.push(("journal.txt", journal()));

        let file = std::fs::File::create(tmp).map_err(io("cannot create", tmp))?;
        let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
        let mut tar = tar::Builder::new(gz);
        let append = |tar: &mut tar::Builder<_>, name: &str, data: &[u8]| {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o600);
            h.set_mtime(u64::try_from(now).unwrap_or(0));
            h.set_entry_type(tar::EntryType::Regular);
            tar.append_data(&mut h, format!("{top}/{name}"), data)
                .map_err(io("cannot write", tmp))
        };
        for (name, text) in &parts {
            append(&mut tar, name, text.as_bytes())?;
        }
        if copied.is_ok() {
            let mut f = std::fs::File::open(&db).map_err(io("cannot read", &db))?;
            let len = f.metadata().map_err(io("cannot read", &db))?.len();
            let mut h = tar::Header::new_gnu();
            h.set_size(len);
            h.set_mode(0o600);
            h.set_mtime(u64::try_from(now).unwrap_or(0));
            h.set_entry_type(tar::EntryType::Regular);
            tar.append_data(&mut h, format!("{top}/stoker.db"), &mut f)
                .map_err(io("cannot write", tmp))?;
        }
        let gz = tar.into_inner().map_err(io("cannot write", tmp))?;
        let mut file = gz.finish().map_err(io("cannot write", tmp))?;
        file.flush().map_err(io("cannot write", tmp))?;
        file.sync_all().map_err(io("cannot write", tmp))?;
        Ok(file.metadata().map_err(io("cannot read", tmp))?.len())
    }

    /// The path of snapshot `name` for its download: a name this module gives, of a file
    /// that is there (never a temporary one).
    pub fn file(&self, name: &str) -> Result<PathBuf, SnapshotError> {
        if !is_snapshot_name(name) {
            return Err(SnapshotError::NotFound(name.to_string()));
        }
        let path = self.dir.join(name);
        if path.is_file() {
            Ok(path)
        } else {
            Err(SnapshotError::NotFound(name.to_string()))
        }
    }
}

/// A name [`Snapshots::build`] gives: `stoker-snapshot-<id>-<time>.tar.gz`, letters, digits,
/// `-`, `_` and `.` only (Nailgun's `[A-Za-z0-9-_.]+`).
fn is_snapshot_name(name: &str) -> bool {
    name.starts_with(NAME_PREFIX)
        && name.ends_with(NAME_SUFFIX)
        && !name.contains("..")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn create_private_dir(dir: &Path) -> Result<(), SnapshotError> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io("cannot create", dir))
}

fn readme(id: i64, now: i64, copied: &Result<u32, String>) -> String {
    format!(
        "A diagnostic snapshot of a stoker master, made {} by task {id}.\n\n\
         stoker.db        the database as one consistent copy; every secret blanked: password\n\
         \x20                and token hashes, session and boot tokens, the agents' tokens and\n\
         \x20                credentials, and in every JSON document what a viewer sees masked\n\
         \x20                (passwords, tokens, keys). Open it with sqlite3.{}\n\
         version.txt      stoker's version and database schema\n\
         config.txt       the daemon's effective configuration\n\
         history.txt      the newest {HISTORY_ENTRIES} history entries, oldest first\n\
         audit.txt        the newest {AUDIT_ENTRIES} audited requests, oldest first\n\
         deployments.txt  every deployment (transaction) with its progress\n\
         journal.txt      the unit's journal of the last day, or why it is not here\n",
        crate::model::utc(now),
        match copied {
            Ok(_) => String::new(),
            Err(why) => format!("\n                 NOT INCLUDED: {why}"),
        }
    )
}

// ---- the journal ----

/// Run `program` with `args` for at most [`COMMAND_TIMEOUT`] (then it is killed), its output
/// kept up to `cap` bytes; or why it could not.
fn run(program: &Path, args: &[&str], cap: usize) -> Result<(String, bool), String> {
    let mut child = Command::new(program)
        .args(args)
        .env("LC_ALL", "C")
        .env("SYSTEMD_PAGER", "")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let Some(mut out) = child.stdout.take() else {
        return Err("no output pipe".to_string());
    };
    let reader = std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 64 * 1024];
        let mut cut = false;
        loop {
            match out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = cap.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                    cut |= n > room;
                }
            }
        }
        (kept, cut)
    });
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                // Our own child, by its handle.
                let _ = child.kill();
                let _ = child.wait();
                let _ = reader.join();
                return Err(format!(
                    "{} took longer than {} s and was stopped",
                    program.display(),
                    COMMAND_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("cannot wait for {}: {e}", program.display())),
        }
    };
    let (kept, cut) = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(format!("{} ended with {status}", program.display()));
    }
    Ok((String::from_utf8_lossy(&kept).into_owned(), cut))
}

/// The unit's journal of the last day, when this master is the unit `stoker.service` and
/// `journalctl` is here; else a line saying why not. Never an error.
fn journal() -> String {
    let not = |why: String| format!("not included: {why}\n");
    let Some(journalctl) = crate::agent::exec::find_on_path("journalctl") else {
        return not("journalctl is not installed here (the daemon logs to stderr only)".into());
    };
    let Some(systemctl) = crate::agent::exec::find_on_path("systemctl") else {
        return not("systemctl is not installed here: no systemd unit runs stoker".into());
    };
    match run(
        &systemctl,
        &["show", "--property=LoadState", "--value", "stoker.service"],
        4096,
    ) {
        Ok((state, _)) if state.trim() == "loaded" => {}
        Ok((state, _)) => {
            return not(format!(
                "the unit stoker.service is not known here (LoadState={})",
                state.trim()
            ));
        }
        Err(why) => return not(why),
    }
    let lines = format!("--lines={JOURNAL_LINES}");
    match run(
        &journalctl,
        &[
            "--unit=stoker.service",
            "--since=-24h",
            &lines,
            "--no-pager",
            "--output=short-iso",
        ],
        JOURNAL_BYTES,
    ) {
        Ok((text, false)) => text,
        Ok((text, true)) => format!("{text}\n[cut at {JOURNAL_BYTES} bytes]\n"),
        Err(why) => not(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_modules_own() {
        assert!(is_snapshot_name(
            "stoker-snapshot-4-2026-01-02-03-04-05.tar.gz"
        ));
        for bad in [
            ".tmp-stoker-snapshot-4-x.tar.gz",
            "stoker-snapshot-../x.tar.gz",
            "stoker-snapshot-4 x.tar.gz",
            "stoker.db",
            "stoker-snapshot-4/../../etc.tar.gz",
        ] {
            assert!(!is_snapshot_name(bad), "{bad}");
        }
    }

    #[test]
    fn credentials_in_urls_are_blanked() {
        assert_eq!(
            without_credentials("image_url: Some(\"https://me:pw@host/x\"), other: \"ftp://a@b\""),
            "image_url: Some(\"https://***@host/x\"), other: \"ftp://***@b\""
        );
    }

    #[test]
    fn a_command_that_runs_too_long_or_fails_is_a_reason_not_an_error() {
        let (out, cut) = run(Path::new("/bin/sh"), &["-c", "echo hello"], 3).unwrap();
        assert_eq!((out.as_str(), cut), ("hel", true));
        assert!(run(Path::new("/bin/sh"), &["-c", "exit 3"], 10).is_err());
        assert!(run(Path::new("/nonexistent/journalctl"), &[], 10).is_err());
        // journal() never fails, whatever this machine has.
        assert!(!journal().is_empty());
    }
}
