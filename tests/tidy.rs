//! Repository hygiene as tests: every source file says what it owns, and the pure core never
//! reaches for I/O, the database, the network or the clock.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The daemon crate's sources.
fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The workspace's other crates (`crates/*`), each with its own `src/`.
fn crates() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut crates: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .collect();
    crates.sort();
    crates
}

#[test]
fn every_source_file_starts_with_a_module_doc() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let n = files.len();
    for krate in crates() {
        rust_files(&krate, &mut files);
    }
    assert!(n > 10 && files.len() > n, "{files:?}");
    let missing: Vec<_> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            !text
                .lines()
                .find(|l| !l.trim().is_empty())
                .is_some_and(|l| l.starts_with("//!"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "files without a //! header: {missing:#?}"
    );
}

/// Directories and files that must stay pure (from the workspace's root). YAQL's crate has
/// neither tokio, rusqlite nor actix among its dependencies, so only `std` could reach out
/// from it.
const PURE: &[&str] = &[
    "src/engine",
    "crates/yaql/src",
    "src/model",
    "src/dhcp/classify.rs",
    "src/dhcp/lease.rs",
    "src/dhcp/reply.rs",
    "src/dhcp/spec.rs",
    "src/tftp/session.rs",
];

const FORBIDDEN: &[&str] = &[
    "tokio",
    "rusqlite",
    "actix",
    "std::fs",
    "std::net",
    "SystemTime",
    "Instant::now",
];

/// What `std::net` may not bring into the DHCP/TFTP protocol cores.
const SOCKETS: &[&str] = &["UdpSocket", "TcpStream", "TcpListener", "ToSocketAddrs"];

#[test]
fn the_core_is_pure() {
    let mut files = Vec::new();
    for part in PURE {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(part);
        let before = files.len();
        if path.is_file() {
            files.push(path);
        } else {
            rust_files(&path, &mut files);
        }
        assert!(files.len() > before, "{part}: no such source");
    }
    let mut offences = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let protocol = file.components().any(|c| {
                let c = c.as_os_str();
                c == "dhcp" || c == "tftp"
            });
            for word in FORBIDDEN {
                // Protocol cores work on addresses (`std::net::Ipv4Addr` is
                // a value); only the sockets in `std::net` are I/O there.
                let hit = if protocol && *word == "std::net" {
                    SOCKETS.iter().any(|s| line.contains(s))
                } else {
                    line.contains(word)
                };
                if hit {
                    offences.push(format!("{}:{}: {word}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(
        offences.is_empty(),
        "the pure core reaches out: {offences:#?}"
    );
}

/// The source files (relative to `src/`) whose text contains `needle`.
fn files_containing(needle: &str) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files
        .iter()
        .filter(|f| std::fs::read_to_string(f).unwrap().contains(needle))
        .map(|f| f.strip_prefix(src()).unwrap().display().to_string())
        .collect()
}

#[test]
fn clock_is_read_in_one_place() {
    assert_eq!(files_containing("SystemTime::now"), ["clock.rs"]);
}

/// Handlers reach the blocking pool through `http::off_worker` alone: one place says what a
/// failed pool task answers, and that work which grows with the site belongs there.
#[test]
fn the_blocking_pool_is_reached_in_one_place() {
    assert_eq!(files_containing("web::block("), ["http/mod.rs"]);
}

/// What only SQLite reads, which belongs in `src/store/sqlite/` (and the migrations, written
/// for SQLite): `docs/scale-out.md`, section 5.7.
const SQLITE_ONLY: &[&str] = &[
    "PRAGMA",
    "pragma_update",
    "pragma_query",
    "VACUUM",
    "sqlite_master",
    "last_insert_rowid",
    "INSERT OR",
    "IFNULL",
    "TransactionBehavior",
    "rusqlite::backup",
    "json_extract",
    "json_patch",
    "json_each",
    "wal_checkpoint",
];

/// The SQLite-only constructs in `text`'s code (comments aside): line number and construct.
fn sqlite_only(text: &str) -> Vec<(usize, &'static str)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        for c in SQLITE_ONLY {
            if code.contains(c) {
                found.push((n + 1, *c));
            }
        }
    }
    found
}

#[test]
fn sqlite_only_sql_lives_in_store_sqlite() {
    // The scanner itself finds a planted construct, and not one in a comment.
    assert_eq!(
        sqlite_only("let a = 1; // PRAGMA in a comment\nconn.execute(\"PRAGMA x\")"),
        [(2, "PRAGMA")]
    );
    let store = src().join("store");
    let mut files = Vec::new();
    rust_files(&store, &mut files);
    let allowed = |f: &Path| {
        f.starts_with(store.join("sqlite"))
            || f.ends_with("migrations.rs")
            || f.ends_with("upgrades.rs")
    };
    let offences: Vec<String> = files
        .iter()
        .filter(|f| !allowed(f))
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            sqlite_only(&text)
                .into_iter()
                .map(|(n, c)| format!("{}:{n}: {c}", f.strip_prefix(src()).unwrap().display()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        offences.is_empty(),
        "SQLite-only SQL outside src/store/sqlite/ (see docs/scale-out.md, 5.7): {offences:#?}"
    );
}

#[test]
fn rusqlite_only_in_the_store() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let store = src().join("store");
    let outside: Vec<_> = files
        .iter()
        .filter(|f| !f.starts_with(&store))
        .filter(|f| std::fs::read_to_string(f).unwrap().contains("rusqlite"))
        .map(|f| f.strip_prefix(src()).unwrap().display().to_string())
        .collect();
    assert!(
        outside.is_empty(),
        "rusqlite outside src/store: {outside:?}"
    );
}
