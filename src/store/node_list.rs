//! The node list at rack scale: search, filters, sort and paging done in SQL over each node's
//! row, which carries a summary of its inventory (serial, CPUs, memory, disks, vendor and
//! product, written with every inventory by [`WriteTxn::write_inventory`]), so a page of 50 of
//! 10,000 nodes reads 50 rows and no inventory. The same filter names the nodes a bulk action
//! takes ([`ReadTxn::node_ids_matching`]).

use rusqlite::{Row, ToSql, params};

use super::sqlite;
use super::{ReadTxn, Result, StoreError, WriteTxn};
use crate::model::{Inventory, Mac, NodeId, NodeStatus, ONLINE_WINDOW_S};

/// Which environment the listed nodes are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InEnvironment {
    /// Environment `id`.
    Id(i64),
    /// None: free to assign.
    Unassigned,
}

/// What a node's BMC says of its power, as the list shows and filters it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    On,
    Off,
    /// Powering on or off.
    Changing,
    /// The BMC did not answer its last reading.
    Unreachable,
    /// A BMC without a password (an address its agent reported).
    NoCredentials,
    /// A BMC not read yet.
    Unknown,
    /// No BMC.
    NoBmc,
}

impl Power {
    pub const ALL: [Power; 7] = [
        Power::On,
        Power::Off,
        Power::Changing,
        Power::Unreachable,
        Power::NoCredentials,
        Power::Unknown,
        Power::NoBmc,
    ];

    /// The name in a query string and in SQL.
    pub fn as_str(self) -> &'static str {
        match self {
            Power::On => "on",
            Power::Off => "off",
            Power::Changing => "changing",
            Power::Unreachable => "unreachable",
            Power::NoCredentials => "no_credentials",
            Power::Unknown => "unknown",
            Power::NoBmc => "no_bmc",
        }
    }

    /// How an operator reads it.
    pub fn label(self) -> &'static str {
        match self {
            Power::On => "on",
            Power::Off => "off",
            Power::Changing => "changing",
            Power::Unreachable => "unreachable",
            Power::NoCredentials => "no credentials",
            Power::Unknown => "unknown",
            Power::NoBmc => "no BMC",
        }
    }

    pub fn parse(s: &str) -> Option<Power> {
        Power::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// Which nodes: every part given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFilter {
    /// A substring (any case) of the name, host name, serial, address or any MAC; a whole MAC
    /// written with separators is looked up exactly ([`whole_mac`]).
    pub search: Option<String>,
    pub status: Option<NodeStatus>,
    /// A role it has (assigned, deployed or not).
    pub role: Option<String>,
    pub environment: Option<InEnvironment>,
    /// Its agent called within [`ONLINE_WINDOW_S`] (or not).
    pub online: Option<bool>,
    pub power: Option<Power>,
    /// Only these nodes (a selection).
    pub ids: Option<Vec<NodeId>>,
}

/// A column the list sorts by (then by id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    Id,
    #[default]
    Name,
    Mac,
    Status,
    Environment,
    Cpus,
    Memory,
    Disks,
    LastSeen,
    Power,
}

impl SortKey {
    pub const ALL: [SortKey; 10] = [
        SortKey::Id,
        SortKey::Name,
        SortKey::Mac,
        SortKey::Status,
        SortKey::Environment,
        SortKey::Cpus,
        SortKey::Memory,
        SortKey::Disks,
        SortKey::LastSeen,
        SortKey::Power,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SortKey::Id => "id",
            SortKey::Name => "name",
            SortKey::Mac => "mac",
            SortKey::Status => "status",
            SortKey::Environment => "environment",
            SortKey::Cpus => "cpus",
            SortKey::Memory => "memory",
            SortKey::Disks => "disks",
            SortKey::LastSeen => "last_seen",
            SortKey::Power => "power",
        }
    }

    pub fn parse(s: &str) -> Option<SortKey> {
        SortKey::ALL.into_iter().find(|k| k.as_str() == s)
    }

    fn column(self) -> &'static str {
        match self {
            SortKey::Id => "n.id",
            SortKey::Name => "n.name",
            SortKey::Mac => "n.mac",
            SortKey::Status => "n.status",
            SortKey::Environment => "c.name",
            SortKey::Cpus => "n.cpus",
            SortKey::Memory => "n.memory_bytes",
            SortKey::Disks => "n.disk_bytes",
            SortKey::LastSeen => "n.last_seen_at",
            SortKey::Power => "power",
        }
    }
}

/// One page of the list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeQuery {
    pub filter: NodeFilter,
    pub sort: SortKey,
    pub descending: bool,
    pub offset: u64,
    pub limit: u64,
}

/// A node as the list shows it: its row and the summary of its inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedNode {
    pub id: NodeId,
    pub mac: String,
    pub name: String,
    pub hostname: String,
    pub status: NodeStatus,
    pub cluster: Option<(i64, String)>,
    pub roles: Vec<String>,
    pub address: Option<String>,
    pub serial: Option<String>,
    pub cpus: u32,
    pub memory_bytes: u64,
    pub disk_count: u32,
    pub disk_bytes: u64,
    /// Vendor and product, space-separated; empty when unknown.
    pub hardware: String,
    pub last_seen_at: i64,
    pub online: bool,
    pub approved: bool,
    pub pending_deletion: bool,
    pub power: Power,
}

/// A page of nodes and how many match in all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeListing {
    pub matching: u64,
    pub nodes: Vec<ListedNode>,
}

/// The power a row's BMC columns say (see [`Power`]).
const POWER: &str = "CASE
      WHEN b.node_id IS NULL THEN 'no_bmc'
      WHEN b.power_error IS NOT NULL THEN 'unreachable'
      WHEN b.sealed_password IS NULL THEN 'no_credentials'
      WHEN b.power_state IN ('powering_on', 'powering_off') THEN 'changing'
      ELSE coalesce(b.power_state, 'unknown') END";

const FROM: &str = "nodes n LEFT JOIN clusters c ON c.id = n.cluster_id
     LEFT JOIN node_bmcs b ON b.node_id = n.id";

/// `%` and `_` taken literally in a `LIKE … ESCAPE '\'` pattern.
fn like_pattern(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('%');
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// A search that is a whole MAC address written with separators (`52:54:00:12:34:56`,
/// `52-54-00-12-34-56`, `5254.0012.3456`, any case), in its normal form: found through the MAC
/// indexes instead of a match over every row, as an operator pasting a MAC from a switch's
/// table or a BMC expects. Twelve hex digits without separators may as well be part of a serial
/// or a name, so they stay a text search.
fn whole_mac(s: &str) -> Option<Mac> {
    if !s.contains([':', '-', '.']) {
        return None;
    }
    s.parse().ok()
}

/// The WHERE clause of `f` and its parameters.
fn where_clause(f: &NodeFilter, now: i64) -> (String, Vec<Box<dyn ToSql>>) {
    let mut terms: Vec<String> = Vec::new();
    let mut args: Vec<Box<dyn ToSql>> = Vec::new();
    let arg = |v: Box<dyn ToSql>, args: &mut Vec<Box<dyn ToSql>>| {
        args.push(v);
        format!("?{}", args.len())
    };
    let search = f.search.as_deref().map(str::trim).filter(|s| !s.is_empty());
    if let Some(mac) = search.and_then(whole_mac) {
        let p = arg(Box::new(String::from(mac)), &mut args);
        // `node_macs` holds every MAC of every node, its first one too (as `node_by_mac` reads).
        terms.push(format!(
            "n.id IN (SELECT node_id FROM node_macs WHERE mac = {p})"
        ));
    } else if let Some(s) = search {
        let p = arg(Box::new(like_pattern(&s.to_lowercase())), &mut args);
        terms.push(format!(
            "(lower(n.name) LIKE {p} ESCAPE '\\'
              OR lower(coalesce(n.hostname, 'node-' || n.id)) LIKE {p} ESCAPE '\\'
              OR lower(coalesce(n.serial, '')) LIKE {p} ESCAPE '\\'
              OR coalesce(n.address, '') LIKE {p} ESCAPE '\\'
              OR n.mac LIKE {p} ESCAPE '\\'
              OR n.id IN (SELECT node_id FROM node_macs WHERE mac LIKE {p} ESCAPE '\\'))"
        ));
    }
    if let Some(s) = f.status {
        let p = arg(Box::new(s.as_str()), &mut args);
        terms.push(format!("n.status = {p}"));
    }
    if let Some(r) = &f.role {
        let p = arg(Box::new(r.clone()), &mut args);
        terms.push(sqlite::json_array_has("n.roles", &p));
    }
    match f.environment {
        Some(InEnvironment::Id(id)) => {
            let p = arg(Box::new(id), &mut args);
            terms.push(format!("n.cluster_id = {p}"));
        }
        Some(InEnvironment::Unassigned) => terms.push("n.cluster_id IS NULL".to_string()),
        None => {}
    }
    if let Some(online) = f.online {
        let p = arg(Box::new(now.saturating_sub(ONLINE_WINDOW_S)), &mut args);
        terms.push(if online {
            format!("n.last_seen_at >= {p}")
        } else {
            format!("n.last_seen_at < {p}")
        });
    }
    if let Some(power) = f.power {
        let p = arg(Box::new(power.as_str()), &mut args);
        terms.push(format!("({POWER}) = {p}"));
    }
    if let Some(ids) = &f.ids {
        let list = serde_json::to_string(ids).unwrap_or_else(|_| "[]".to_string());
        let p = arg(Box::new(list), &mut args);
        terms.push(format!("n.id IN {}", sqlite::json_array_values(&p)));
    }
    if terms.is_empty() {
        (String::new(), args)
    } else {
        (format!("WHERE {}", terms.join(" AND ")), args)
    }
}

/// A listed row and its text columns still to decode: status, roles, power.
type RawListed = (ListedNode, String, String, String);

fn listed(r: &Row<'_>, now: i64) -> rusqlite::Result<RawListed> {
    let id: NodeId = r.get(0)?;
    let last_seen_at: i64 = r.get(15)?;
    let cluster = match (r.get::<_, Option<i64>>(5)?, r.get::<_, Option<String>>(6)?) {
        (Some(c), Some(name)) => Some((c, name)),
        _ => None,
    };
    let node = ListedNode {
        id,
        mac: r.get(1)?,
        name: r.get(2)?,
        hostname: r
            .get::<_, Option<String>>(3)?
            .unwrap_or_else(|| super::nodes::default_hostname(id)),
        status: NodeStatus::Discover,
        cluster,
        roles: Vec::new(),
        address: r.get(8)?,
        serial: r.get(9)?,
        cpus: u32::try_from(r.get::<_, i64>(10)?).unwrap_or(0),
        memory_bytes: u64::try_from(r.get::<_, i64>(11)?).unwrap_or(0),
        disk_count: u32::try_from(r.get::<_, i64>(12)?).unwrap_or(0),
        disk_bytes: u64::try_from(r.get::<_, i64>(13)?).unwrap_or(0),
        hardware: r.get(14)?,
        last_seen_at,
        online: now.saturating_sub(last_seen_at) <= ONLINE_WINDOW_S,
        approved: r.get(16)?,
        pending_deletion: r.get(17)?,
        power: Power::NoBmc,
    };
    Ok((node, r.get(4)?, r.get(7)?, r.get(18)?))
}

impl ReadTxn<'_> {
    /// One page of the nodes `q` selects, in its order, and how many it selects in all.
    pub fn node_list(&self, q: &NodeQuery, now: i64) -> Result<NodeListing> {
        let (cond, mut args) = where_clause(&q.filter, now);
        let count_sql = format!("SELECT count(*) FROM {FROM} {cond}");
        let matching: i64 = self.conn.prepare_cached(&count_sql)?.query_row(
            rusqlite::params_from_iter(args.iter().map(|a| a.as_ref())),
            |r| r.get(0),
        )?;
        let dir = if q.descending { "DESC" } else { "ASC" };
        // Nulls (no environment) last either way; ties in id order.
        let order = match q.sort {
            SortKey::Id => format!("n.id {dir}"),
            SortKey::Environment => format!("c.name IS NULL, c.name {dir}, n.id"),
            k => format!("{} {dir}, n.id", k.column()),
        };
        args.push(Box::new(i64::try_from(q.limit).unwrap_or(i64::MAX)));
        let limit = args.len();
        args.push(Box::new(i64::try_from(q.offset).unwrap_or(i64::MAX)));
        let offset = args.len();
        let sql = format!(
            "SELECT n.id, n.mac, n.name, n.hostname, n.status, n.cluster_id, c.name, n.roles,
                    n.address, n.serial, n.cpus, n.memory_bytes, n.disk_count, n.disk_bytes,
                    n.hardware, n.last_seen_at, n.approved, n.pending_deletion,
                    {POWER} AS power
             FROM {FROM} {cond} ORDER BY {order} LIMIT ?{limit} OFFSET ?{offset}"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(
            rusqlite::params_from_iter(args.iter().map(|a| a.as_ref())),
            |r| listed(r, now),
        )?;
        let mut nodes = Vec::new();
        for row in rows {
            let (mut node, status, roles, power) = row?;
            let corrupt = |what, detail: String| StoreError::Corrupt {
                what,
                detail: format!("node {}: {detail}", node.id),
            };
            node.status = status.parse().map_err(|e| corrupt("node status", e))?;
            node.roles =
                serde_json::from_str(&roles).map_err(|e| corrupt("node roles", e.to_string()))?;
            node.power = Power::parse(&power).unwrap_or(Power::Unknown);
            nodes.push(node);
        }
        Ok(NodeListing {
            matching: u64::try_from(matching).unwrap_or(0),
            nodes,
        })
    }

    /// Every node `f` selects, by id: what a bulk action "on all matching" takes.
    pub fn node_ids_matching(&self, f: &NodeFilter, now: i64) -> Result<Vec<NodeId>> {
        let (cond, args) = where_clause(f, now);
        let sql = format!("SELECT n.id FROM {FROM} {cond} ORDER BY n.id");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(
            rusqlite::params_from_iter(args.iter().map(|a| a.as_ref())),
            |r| r.get(0),
        )?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Every role some node has, sorted: the list's role filter offers them.
    pub fn node_roles_in_use(&self) -> Result<Vec<String>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT DISTINCT r.value FROM nodes n, {} r
             WHERE n.roles <> '[]' ORDER BY r.value",
            sqlite::json_elements("n.roles")
        ))?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The names of nodes `ids` (those that exist), for messages.
    pub fn node_names(&self, ids: &[NodeId]) -> Result<Vec<(NodeId, String)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT id, name FROM nodes WHERE id = ?1")?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(found) = rusqlite::OptionalExtension::optional(
                stmt.query_row([id], |r| Ok((r.get(0)?, r.get(1)?))),
            )? {
                out.push(found);
            }
        }
        Ok(out)
    }
}

/// What the list keeps of an inventory.
struct Summary {
    serial: Option<String>,
    cpus: i64,
    memory_bytes: i64,
    disk_count: i64,
    disk_bytes: i64,
    hardware: String,
}

impl Summary {
    fn of(inv: &Inventory) -> Summary {
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        Summary {
            serial: inv.system.serial.clone(),
            cpus: i64::from(inv.cpu.count),
            memory_bytes: clamp(inv.memory_bytes),
            disk_count: i64::try_from(inv.disks.len()).unwrap_or(i64::MAX),
            disk_bytes: clamp(inv.disk_bytes()),
            hardware: [&inv.system.vendor, &inv.system.product]
                .into_iter()
                .flatten()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

impl WriteTxn<'_> {
    /// Store node `id`'s inventory (`json` is its serialized form) and the summary the list
    /// reads; the node's row exists.
    pub(super) fn write_inventory(&self, id: NodeId, inv: &Inventory, json: &str) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO node_inventories (node_id, inventory) VALUES (?1, ?2)
                 ON CONFLICT(node_id) DO UPDATE SET inventory = excluded.inventory",
            )?
            .execute(params![id, json])?;
        let s = Summary::of(inv);
        self.conn
            .prepare_cached(
                "UPDATE nodes SET serial = ?2, cpus = ?3, memory_bytes = ?4, disk_count = ?5,
                   disk_bytes = ?6, hardware = ?7
                 WHERE id = ?1 AND (serial IS NOT ?2 OR cpus <> ?3 OR memory_bytes <> ?4
                   OR disk_count <> ?5 OR disk_bytes <> ?6 OR hardware <> ?7)",
            )?
            .execute(params![
                id,
                s.serial,
                s.cpus,
                s.memory_bytes,
                s.disk_count,
                s.disk_bytes,
                s.hardware
            ])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_take_wildcards_literally() {
        assert_eq!(like_pattern("a%b_c\\"), "%a\\%b\\_c\\\\%");
    }

    #[test]
    fn a_whole_mac_with_separators_is_a_mac_and_anything_else_text() {
        for s in ["52:54:00:AB:cd:01", "52-54-00-ab-CD-01", "5254.00ab.cd01"] {
            assert_eq!(whole_mac(s).unwrap().as_str(), "52:54:00:ab:cd:01", "{s}");
        }
        for s in [
            "525400abcd01",
            "00:ab:cd:01",
            "52:54:00:ab:cd:0g",
            "node-7",
            "10.20.0.5",
        ] {
            assert_eq!(whole_mac(s), None, "{s}");
        }
    }

    /// Nodes `node-0`..`node-2`, node 1 with a second NIC, in a store of their own.
    fn three_nodes() -> (tempfile::TempDir, crate::store::Store, Vec<NodeId>) {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(&dir.path().join("stoker.db")).unwrap();
        let mut ids = Vec::new();
        for i in 0..3 {
            let mut nics = vec![serde_json::json!(
                {"name": "eno1", "mac": format!("52:54:00:ab:cd:0{i}"), "speed_mbps": 10000, "link": true})];
            if i == 1 {
                nics.push(serde_json::json!(
                    {"name": "eno2", "mac": "0c:c4:7a:00:00:11", "speed_mbps": 10000, "link": true}));
            }
            let inventory: Inventory = serde_json::from_value(serde_json::json!({
                "interfaces": nics, "cpu": {"count": 8}, "memory_bytes": 68_719_476_736u64,
                "disks": [{"name": "sda", "size_bytes": 480_103_981_056u64}],
                "system": {"serial": format!("SN-52540{i}")}
            }))
            .unwrap();
            ids.push(
                store
                    .write(|tx| tx.record_hello(&inventory, None, 1))
                    .unwrap()
                    .0
                    .id,
            );
        }
        (dir, store, ids)
    }

    fn search(store: &crate::store::Store, q: &str) -> (Vec<NodeId>, u64) {
        let query = NodeQuery {
            filter: NodeFilter {
                search: Some(q.to_string()),
                ..NodeFilter::default()
            },
            sort: SortKey::default(),
            descending: false,
            offset: 0,
            limit: 50,
        };
        let listing = store.read(|tx| tx.node_list(&query, 1)).unwrap();
        (
            listing.nodes.iter().map(|n| n.id).collect(),
            listing.matching,
        )
    }

    #[test]
    fn a_search_finds_nodes_by_any_mac_whole_or_in_part_and_by_text() {
        let (_dir, store, ids) = three_nodes();
        // A whole MAC, in any of its spellings: the node it boots from or any other NIC's.
        for q in ["52:54:00:ab:cd:01", " 52-54-00-AB-CD-01 ", "5254.00ab.cd01"] {
            assert_eq!(search(&store, q), (vec![ids[1]], 1), "{q:?}");
        }
        assert_eq!(search(&store, "0C:C4:7A:00:00:11"), (vec![ids[1]], 1));
        assert_eq!(search(&store, "52:54:00:ab:cd:09"), (vec![], 0));
        // Part of a MAC, a serial's part, twelve digits without separators: text.
        assert_eq!(search(&store, "ab:cd"), (ids.clone(), 3));
        assert_eq!(search(&store, "00:11"), (vec![ids[1]], 1));
        assert_eq!(search(&store, "sn-525402"), (vec![ids[2]], 1));
        assert_eq!(search(&store, "525400abcd01"), (vec![], 0));
    }

    #[test]
    fn names_round_trip() {
        for p in Power::ALL {
            assert_eq!(Power::parse(p.as_str()), Some(p));
        }
        for k in SortKey::ALL {
            assert_eq!(SortKey::parse(k.as_str()), Some(k));
        }
    }
}
