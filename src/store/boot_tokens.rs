//! Queries on `boot_tokens`: the one-time secret rendered into a booting node's kernel command
//! line. Only a hash is stored; a token is good once, for one of the node's MACs, for a while.

use rusqlite::{OptionalExtension, params};

use super::{Result, WriteTxn};
use crate::model::Mac;

/// What checking a presented boot token found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenCheck {
    /// It matched an unused, fresh token of one of these MACs, which is now used up.
    Accepted,
    /// No such token, a used one, or an expired one.
    Refused,
}

impl WriteTxn<'_> {
    /// Record a new token for `mac`, replacing any earlier one.
    pub fn issue_boot_token(&self, mac: &Mac, token_hash: &str, now: i64) -> Result<()> {
        self.conn.execute(
            "INSERT INTO boot_tokens (mac, token_hash, issued_at, used_at) VALUES (?1, ?2, ?3, NULL)
             ON CONFLICT(mac) DO UPDATE SET token_hash = excluded.token_hash,
                 issued_at = excluded.issued_at, used_at = NULL",
            params![mac.as_str(), token_hash, now],
        )?;
        Ok(())
    }

    /// Use up the token with `token_hash` if one of `macs` holds it, unused and issued no more
    /// than `max_age` seconds before `now`.
    pub fn consume_boot_token(
        &self,
        macs: &[&Mac],
        token_hash: &str,
        now: i64,
        max_age: i64,
    ) -> Result<TokenCheck> {
        for mac in macs {
            let found: Option<(String, i64, Option<i64>)> = self
                .conn
                .query_row(
                    "SELECT token_hash, issued_at, used_at FROM boot_tokens WHERE mac = ?1",
                    [mac.as_str()],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
            if let Some((hash, issued_at, None)) = found
                && hash == token_hash
                && now.saturating_sub(issued_at) <= max_age
            {
                self.conn.execute(
                    "UPDATE boot_tokens SET used_at = ?1 WHERE mac = ?2",
                    params![now, mac.as_str()],
                )?;
                return Ok(TokenCheck::Accepted);
            }
        }
        Ok(TokenCheck::Refused)
    }
}
