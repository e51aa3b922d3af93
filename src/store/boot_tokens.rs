//! Queries on `boot_tokens`: the one-time secret rendered into a booting node's kernel command
//! line. Only a hash is stored, with the address it was handed to; a MAC has at most one token,
//! good once, for a while (`max_age` seconds); expired and used ones are pruned.

use rusqlite::{OptionalExtension, params};

use super::{ReadTxn, Result, WriteTxn};
use crate::model::Mac;

/// What checking a presented boot token found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenCheck {
    /// It matches the unused, fresh token of this MAC.
    Valid(Mac),
    /// No such token, a used one, or an expired one.
    Refused,
}

impl ReadTxn<'_> {
    /// The address the unused token of `mac` issued after `now - max_age` went to (empty
    /// when it was issued before addresses were recorded); `None` when it has none.
    pub fn outstanding_boot_token(
        &self,
        mac: &Mac,
        now: i64,
        max_age: i64,
    ) -> Result<Option<String>> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT coalesce(issued_to, '') FROM boot_tokens
                 WHERE mac = ?1 AND used_at IS NULL AND issued_at >= ?2",
            )?
            .query_row(params![mac.as_str(), now.saturating_sub(max_age)], |r| {
                r.get(0)
            })
            .optional()?)
    }

    /// How many unused tokens issued after `now - max_age` there are, all MACs together.
    pub fn live_boot_tokens(&self, now: i64, max_age: i64) -> Result<u64> {
        let n: i64 = self
            .conn
            .prepare_cached(
                "SELECT COUNT(*) FROM boot_tokens WHERE used_at IS NULL AND issued_at >= ?1",
            )?
            .query_row([now.saturating_sub(max_age)], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Which of `macs` holds the token with `token_hash`, unused and issued no more than
    /// `max_age` seconds before `now`. Nothing is used up: see [`WriteTxn::use_boot_token`].
    pub fn check_boot_token(
        &self,
        macs: &[&Mac],
        token_hash: &str,
        now: i64,
        max_age: i64,
    ) -> Result<TokenCheck> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT token_hash, issued_at, used_at FROM boot_tokens WHERE mac = ?1",
        )?;
        for mac in macs {
            let found: Option<(String, i64, Option<i64>)> = stmt
                .query_row([mac.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()?;
            if let Some((hash, issued_at, None)) = found
                && hash == token_hash
                && now.saturating_sub(issued_at) <= max_age
            {
                return Ok(TokenCheck::Valid((*mac).clone()));
            }
        }
        Ok(TokenCheck::Refused)
    }
}

impl WriteTxn<'_> {
    /// Record a new token for `mac`, handed to `issued_to`, replacing any earlier one.
    pub fn issue_boot_token(
        &self,
        mac: &Mac,
        token_hash: &str,
        now: i64,
        issued_to: &str,
    ) -> Result<()> {
        self.conn.execute(
            "INSERT INTO boot_tokens (mac, token_hash, issued_at, used_at, issued_to)
             VALUES (?1, ?2, ?3, NULL, ?4)
             ON CONFLICT(mac) DO UPDATE SET token_hash = excluded.token_hash,
                 issued_at = excluded.issued_at, used_at = NULL, issued_to = excluded.issued_to",
            params![mac.as_str(), token_hash, now, issued_to],
        )?;
        Ok(())
    }

    /// Use up the token of `mac` (found by [`ReadTxn::check_boot_token`]).
    pub fn use_boot_token(&self, mac: &Mac, now: i64) -> Result<()> {
        self.conn.execute(
            "UPDATE boot_tokens SET used_at = ?1 WHERE mac = ?2",
            params![now, mac.as_str()],
        )?;
        Ok(())
    }

    /// Forget the tokens that can no longer be used: used ones and those issued more than
    /// `max_age` seconds before `now`. The number removed.
    pub fn prune_boot_tokens(&self, now: i64, max_age: i64) -> Result<usize> {
        Ok(self.conn.execute(
            "DELETE FROM boot_tokens WHERE used_at IS NOT NULL OR issued_at < ?1",
            [now.saturating_sub(max_age)],
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn tokens_are_one_per_mac_used_once_and_pruned_when_old_or_used() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let a: Mac = "52:54:00:00:00:0a".parse().unwrap();
        let b: Mac = "52:54:00:00:00:0b".parse().unwrap();
        store
            .write(|tx| {
                tx.issue_boot_token(&a, "h1", 100, "10.0.0.1")?;
                tx.issue_boot_token(&a, "h2", 110, "10.0.0.1")?;
                tx.issue_boot_token(&b, "h3", 10, "10.0.0.2")
            })
            .unwrap();
        let r = |f: &dyn Fn(&ReadTxn<'_>) -> Result<TokenCheck>| store.read(|tx| f(tx)).unwrap();
        assert_eq!(
            r(&|tx| tx.check_boot_token(&[&a], "h1", 120, 60)),
            TokenCheck::Refused,
            "replaced"
        );
        assert_eq!(
            r(&|tx| tx.check_boot_token(&[&b, &a], "h2", 120, 60)),
            TokenCheck::Valid(a.clone())
        );
        assert_eq!(
            store
                .read(|tx| tx.outstanding_boot_token(&a, 120, 60))
                .unwrap()
                .as_deref(),
            Some("10.0.0.1")
        );
        assert_eq!(store.read(|tx| tx.live_boot_tokens(120, 60)).unwrap(), 1);
        store.write(|tx| tx.use_boot_token(&a, 120)).unwrap();
        assert_eq!(
            r(&|tx| tx.check_boot_token(&[&a], "h2", 121, 60)),
            TokenCheck::Refused,
            "good once"
        );
        assert_eq!(
            store
                .read(|tx| tx.outstanding_boot_token(&a, 121, 60))
                .unwrap(),
            None
        );
        // b's is expired, a's is used: both go.
        assert_eq!(store.write(|tx| tx.prune_boot_tokens(121, 60)).unwrap(), 2);
        assert_eq!(store.write(|tx| tx.prune_boot_tokens(121, 60)).unwrap(), 0);
    }
}
