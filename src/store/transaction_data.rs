//! What a transaction was made from, kept with it as Nailgun's transactions keep it (`fuel2
//! task deployment-info|settings|network-configuration download`): its deployment data
//! (`{common, nodes: {uid: facts}}` for the nodes it covers), the environment's settings
//! (`{editable}`) and its network configuration at its start. Each is gzipped JSON: the
//! deployment data of 1,000 nodes is tens of megabytes of much-repeated keys, a few of them
//! once compressed, so writing it costs the writer little (the compression is done by the
//! caller, off the writer). Gone with the transaction.

use std::io::{Read, Write};

use rusqlite::{OptionalExtension, params};
use serde_json::Value as J;

use super::{ReadTxn, Result, StoreError, WriteTxn};

/// The parts of a transaction's data, packed ([`TransactionData::pack`]).
#[derive(Debug, Clone, Default)]
pub struct TransactionData {
    pub deployment_info: Option<Vec<u8>>,
    pub settings: Option<Vec<u8>>,
    pub network: Option<Vec<u8>>,
}

/// One part of a transaction's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionPart {
    DeploymentInfo,
    Settings,
    Network,
}

impl TransactionPart {
    fn column(self) -> &'static str {
        match self {
            TransactionPart::DeploymentInfo => "deployment_info",
            TransactionPart::Settings => "settings",
            TransactionPart::Network => "network",
        }
    }
}

impl TransactionData {
    /// `v` as stored: gzipped JSON.
    pub fn pack(v: &impl serde::Serialize) -> Result<Vec<u8>> {
        let corrupt = |e: std::io::Error| StoreError::Corrupt {
            what: "transaction data",
            detail: e.to_string(),
        };
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        serde_json::to_writer(&mut gz, v).map_err(|e| corrupt(e.into()))?;
        gz.flush().map_err(corrupt)?;
        gz.finish().map_err(corrupt)
    }
}

pub(super) fn unpack(bytes: &[u8], dep: i64) -> Result<J> {
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut text)
        .map_err(|e| StoreError::Corrupt {
            what: "transaction data",
            detail: format!("transaction {dep}: {e}"),
        })?;
    serde_json::from_slice(&text).map_err(|e| StoreError::Corrupt {
        what: "transaction data",
        detail: format!("transaction {dep}: {e}"),
    })
}

impl ReadTxn<'_> {
    /// One part of transaction `dep`'s data; None when it kept none.
    pub fn transaction_part(&self, dep: i64, part: TransactionPart) -> Result<Option<J>> {
        let sql = format!(
            "SELECT {} FROM transaction_data WHERE deployment = ?1",
            part.column()
        );
        let bytes: Option<Option<Vec<u8>>> = self
            .conn
            .prepare_cached(&sql)?
            .query_row([dep], |r| r.get(0))
            .optional()?;
        bytes.flatten().map(|b| unpack(&b, dep)).transpose()
    }

    /// The newest successful deployment of environment `cluster_id` that kept `part` (what
    /// Nailgun calls the environment's deployed settings or network configuration).
    pub fn deployed_part(&self, cluster_id: i64, part: TransactionPart) -> Result<Option<J>> {
        let sql = format!(
            "SELECT t.deployment FROM transaction_data t JOIN deployments d
               ON d.id = t.deployment
             WHERE d.cluster_id = ?1 AND d.status = 'done' AND d.name = 'deployment'
               AND t.{} IS NOT NULL
             ORDER BY d.id DESC LIMIT 1",
            part.column()
        );
        let dep: Option<i64> = self
            .conn
            .prepare_cached(&sql)?
            .query_row([cluster_id], |r| r.get(0))
            .optional()?;
        match dep {
            Some(dep) => self.transaction_part(dep, part),
            None => Ok(None),
        }
    }
}

impl WriteTxn<'_> {
    /// Keep `data` with transaction `dep`.
    pub(super) fn attach_transaction_data(&self, dep: i64, data: &TransactionData) -> Result<()> {
        self.conn.execute(
            "INSERT INTO transaction_data (deployment, deployment_info, settings, network)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (deployment) DO UPDATE SET deployment_info = excluded.deployment_info,
               settings = excluded.settings, network = excluded.network",
            params![dep, data.deployment_info, data.settings, data.network],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::store_with_cluster;

    #[test]
    fn parts_read_back_and_a_deleted_transaction_takes_them() {
        let (_dir, store) = store_with_cluster();
        let info = serde_json::json!({"common": {"a": 1}, "nodes": {"1": {"uid": "1"}}});
        let data = TransactionData {
            deployment_info: Some(TransactionData::pack(&info).unwrap()),
            settings: None,
            network: Some(TransactionData::pack(&serde_json::json!({"networks": []})).unwrap()),
        };
        store
            .write(|tx| {
                tx.conn.execute(
                    "INSERT INTO deployments (id, cluster_id, status, created_at)
                     VALUES (7, 1, 'done', 1)",
                    [],
                )?;
                tx.attach_transaction_data(7, &data)
            })
            .unwrap();
        store
            .read(|r| {
                assert_eq!(
                    r.transaction_part(7, TransactionPart::DeploymentInfo)?,
                    Some(info.clone())
                );
                assert_eq!(r.transaction_part(7, TransactionPart::Settings)?, None);
                assert!(
                    r.deployed_part(1, TransactionPart::Network)?
                        .is_some_and(|n| n["networks"] == serde_json::json!([]))
                );
                Ok(())
            })
            .unwrap();
        store
            .write(|tx| {
                tx.conn
                    .execute("DELETE FROM deployments WHERE id = 7", [])?;
                Ok(())
            })
            .unwrap();
        store
            .read(|r| {
                assert_eq!(r.transaction_part(7, TransactionPart::Network)?, None);
                Ok(())
            })
            .unwrap();
    }
}
