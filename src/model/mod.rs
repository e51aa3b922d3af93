//! Plain data shared by every layer: nodes, their inventory and status. Types here are serde
//! structs and small validated newtypes; this module does no I/O, holds no state and reads no
//! clock, so the engine, the store and the HTTP layer can all depend on it.

pub mod catalog;
pub mod checksum;
pub mod fuel;
pub mod node;

pub use catalog::{Cluster, PluginSummary, Release};
pub use checksum::Checksum;
pub use node::{
    FieldError, Inventory, InventoryError, MAX_INVENTORY_BYTES, Mac, Node, NodeId, NodeStatus,
    ONLINE_WINDOW_S, RawInventory, parse_inventory,
};

/// Unix seconds as Nailgun wrote times: `YYYY-MM-DDTHH:MM:SS` (UTC, no zone suffix).
pub fn iso(ts: i64) -> String {
    utc(ts).trim_end_matches(" UTC").replacen(' ', "T", 1)
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS UTC` (proleptic Gregorian; Howard Hinnant's algorithm).
pub fn utc(ts: i64) -> String {
    let days = ts.div_euclid(86_400);
    let secs = ts.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Lowercase hex of `bytes` (digests, tokens). One allocation: this runs on every agent call,
/// where a `format!` per byte was 64 small allocations for a token hash.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_is_lowercase_two_digits_per_byte() {
        assert_eq!(super::hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(super::hex(&[]), "");
    }
}
