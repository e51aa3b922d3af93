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
