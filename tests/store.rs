//! The store on a real SQLite file: WAL, migrations on open, durability across reopen, and
//! rollback of a failed write.

use stoker::model::{NodeStatus, RawInventory};
use stoker::store::{HelloOutcome, Store, StoreError, migrations};

use crate::common::inventory;

fn inv(mac: &str) -> stoker::model::Inventory {
    serde_json::from_value::<RawInventory>(inventory(mac))
        .unwrap()
        .validate()
        .unwrap()
}

#[test]
fn open_creates_migrates_and_uses_wal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stoker.db");
    let store = Store::open(&path).unwrap();
    store.close().unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    assert_eq!(migrations::current(&conn).unwrap(), migrations::latest());
    drop(conn);
    assert!(
        !dir.path().join("stoker.db-wal").exists(),
        "a clean close leaves no WAL behind"
    );
}

/// The WAL header's checkpoint sequence number: it goes up each time the WAL starts over.
fn wal_restarts(db: &std::path::Path) -> u32 {
    use std::io::Read;
    let mut header = [0u8; 16];
    std::fs::File::open(db.with_extension("db-wal"))
        .and_then(|mut f| f.read_exact(&mut header))
        .unwrap();
    u32::from_be_bytes([header[12], header[13], header[14], header[15]])
}

/// History rows already copied into the database file itself (a copy of it without its WAL).
fn checkpointed_history(db: &std::path::Path, scratch: &std::path::Path) -> i64 {
    let copy = scratch.join("copy.db");
    std::fs::copy(db, &copy).unwrap();
    let conn = rusqlite::Connection::open(&copy).unwrap();
    let n = conn
        .query_row("SELECT COUNT(*) FROM history", [], |r| r.get(0))
        .unwrap_or(0);
    drop(conn);
    std::fs::remove_file(&copy).unwrap();
    n
}

#[test]
fn the_checkpoint_thread_copies_the_wal_and_lets_it_start_over() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let path = dir.path().join("stoker.db");
    let store = Store::open(&path).unwrap();
    let before = wal_restarts(&path);
    for i in 0..2000 {
        store
            .write(|tx| tx.add_history(i, None, "test", &format!("write {i:>200}")))
            .unwrap();
    }
    // A WAL this short (under 64 MiB) the writer never checkpoints itself: in the pause the
    // checkpoint thread copies it into the database file, and the next write starts the WAL
    // from its beginning.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        std::thread::sleep(std::time::Duration::from_millis(300));
        store
            .write(|tx| tx.add_history(0, None, "test", "after the pause"))
            .unwrap();
        let copied = checkpointed_history(&path, scratch.path());
        if copied >= 2000 && wal_restarts(&path) > before {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{copied} rows in the database file; the WAL restarted {} times",
            wal_restarts(&path) - before
        );
    }
    store.close().unwrap();
}

#[test]
fn a_wal_that_writes_never_leave_alone_starts_over_long_before_its_cap() {
    // One write after another, no pause: the checkpoint thread alone never copies the whole
    // WAL (each commit adds to it while it copies), so before the writer's catch-up it grew
    // to its 1 GiB cap and a blocking checkpoint, which stalls every write. Now past 64 MiB
    // the writer copies the last few frames between two writes and the WAL starts over.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stoker.db");
    let wal = path.with_extension("db-wal");
    let store = Store::open(&path).unwrap();
    let before = wal_restarts(&path);
    let page = "x".repeat(4000);
    let mut writes = 0;
    while wal_restarts(&path) == before {
        store
            .write(|tx| tx.add_history(writes, None, "test", &page))
            .unwrap();
        writes += 1;
        // 4 KiB a write: some 400 MiB, far past 64 MiB and short of the 1 GiB cap.
        assert!(
            writes < 100_000,
            "the WAL never started over ({} bytes)",
            std::fs::metadata(&wal).unwrap().len()
        );
    }
    // Half the cap: without the catch-up the WAL reached the cap (1.15 GB). This loop writes
    // some 450 MB of WAL a second (10,000 agents deploying write about 100 MiB), and the
    // writer is asked to catch up only once the checkpoint thread is within 4 MiB of it, which
    // at that rate comes late: on the 2-core machine of 2026-12-04 it started over at 280-330
    // MB, quiet or in CI. What this guards is the WAL starting over without ever reaching the
    // cap's blocking checkpoint.
    let size = std::fs::metadata(&wal).unwrap().len();
    assert!(
        size < 512 << 20,
        "the WAL started over at {size} bytes, after {writes} writes (its cap is 1 GiB)"
    );
    store.close().unwrap();
}

#[test]
fn a_wal_file_grown_large_in_a_burst_is_truncated_once_idle() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stoker.db");
    let wal = path.with_extension("db-wal");
    let store = Store::open(&path).unwrap();
    let page = "x".repeat(4000);
    store
        .write(|tx| {
            for i in 0..20_000 {
                tx.add_history(i, None, "test", &page)?;
            }
            Ok(())
        })
        .unwrap();
    let grown = std::fs::metadata(&wal).unwrap().len();
    assert!(grown > 64 << 20, "the burst grew the WAL to {grown} bytes");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::fs::metadata(&wal).map_or(0, |m| m.len()) > 64 << 20 {
        assert!(
            std::time::Instant::now() < deadline,
            "the WAL file kept its size"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(store.read(|r| r.recent_history(3)).unwrap().len(), 3);
    store.close().unwrap();
}

#[test]
fn data_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stoker.db");
    let store = Store::open(&path).unwrap();
    let (node, outcome) = store
        .write(|tx| tx.record_hello(&inv("52:54:00:dd:00:01"), Some("h"), 1000))
        .unwrap();
    assert_eq!(outcome, HelloOutcome::Created);
    assert_eq!(node.status, NodeStatus::Discover);
    store.close().unwrap();

    let store = Store::open(&path).unwrap();
    let again = store
        .read(|tx| tx.node_by_mac(&"02:54:00:dd:00:01".parse().unwrap()))
        .unwrap()
        .expect("found by its second MAC");
    assert_eq!(again.id, node.id);
    assert_eq!(again.inventory, node.inventory);
    let counts = store.read(|tx| tx.node_counts()).unwrap();
    assert_eq!((counts.total, counts.get(NodeStatus::Discover)), (1, 1));
    let history = store.read(|tx| tx.recent_history(10)).unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].kind, "node.discovered");
}

#[test]
fn failed_write_rolls_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("stoker.db")).unwrap();
    let err = store
        .write(|tx| {
            tx.record_hello(&inv("52:54:00:ee:00:01"), None, 1)?;
            Err::<(), _>(StoreError::NotFound {
                entity: "thing",
                id: "x".into(),
            })
        })
        .unwrap_err();
    assert_eq!(err.to_string(), "thing x not found");
    assert!(store.read(|tx| tx.nodes()).unwrap().is_empty());
    assert!(store.read(|tx| tx.recent_history(5)).unwrap().is_empty());
}

#[test]
fn newer_schema_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stoker.db");
    Store::open(&path).unwrap().close().unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", 999).unwrap();
    drop(conn);
    let err = Store::open(&path).unwrap_err();
    assert!(
        err.to_string().contains("schema version 999 is newer"),
        "{err}"
    );
}
