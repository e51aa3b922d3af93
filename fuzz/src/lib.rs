//! The fuzz targets' bodies, one function per target, each taking the bytes a network peer (or
//! an uploaded file) controls and driving the daemon's own entry point with the limits the
//! daemon uses. An `Err` is a fine answer; only a panic, an abort, a hang or runaway memory is a
//! finding. Each returns whether the input got past its first parser (so the seeds can be
//! checked to reach the code behind it). The binaries in `src/bin/` wrap these in
//! `afl::fuzz!`; the tests below run every seed through them without AFL.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::Ipv4Addr;

use dhcproto::Encodable;
use stoker::dhcp::classify::classify;
use stoker::dhcp::lease::{Lease, LeaseState, LeaseTable};
use stoker::dhcp::reply::{self, BootFiles, DhcpConfig, Mode, Subnet};
use stoker::engine::plugin::yaml::{self, Budget};
use stoker::model::{self, Mac};
use stoker::package::{archive, install};
use stoker::tftp::session::{self, Action, ErrorCode, Packet, Sender};
use stoker::yaql;

/// The plugin YAML reader as `engine::plugin::load` calls it: the text (non-UTF-8 is refused
/// before parsing, as the loader does) within one package's node budget, then the walk every
/// document gets (to JSON).
pub fn yaml(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let budget = Budget::default();
    match yaml::parse_within("metadata.yaml", text, &budget) {
        Ok(parsed) => {
            let json = parsed.root.to_json();
            let _ = yaml::Node::from_json(&json, &parsed.root.pos);
            true
        }
        Err(_) => false,
    }
}

/// The package reader: a `.fp` read in memory within the default `archive::Limits` (what
/// `plugins.max_*` default to), then checked as an install checks it (load, validate, graph
/// checks). Input that is not gzip is taken as a tar stream and gzipped here first, so that the
/// fuzzer can mutate tar headers and member contents without breaking the gzip checksum;
/// gzip input goes in as it is.
pub fn package(data: &[u8]) -> bool {
    let gzipped;
    let bytes = if data.starts_with(&[0x1f, 0x8b]) {
        data
    } else {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        if gz.write_all(data).is_err() {
            return false;
        }
        match gz.finish() {
            Ok(v) => gzipped = v,
            Err(_) => return false,
        }
        &gzipped
    };
    match archive::read_within(bytes, &archive::Limits::default()) {
        Ok(files) => {
            let _ = install::check_for_install(&files);
            true
        }
        Err(_) => false,
    }
}

/// A fixed clock for the DHCP decisions (Unix seconds).
const NOW: i64 = 1_700_000_000;

fn dhcp_config(mode: Mode) -> DhcpConfig {
    let mut reservations = BTreeMap::new();
    reservations.insert(mac("52:54:00:00:00:99"), Ipv4Addr::new(10, 77, 0, 50));
    DhcpConfig {
        server_ip: Ipv4Addr::new(10, 77, 0, 1),
        mode,
        subnets: vec![
            Subnet {
                network: Ipv4Addr::new(10, 77, 0, 0),
                prefix: 24,
                pool_start: Ipv4Addr::new(10, 77, 0, 100),
                pool_end: Ipv4Addr::new(10, 77, 0, 103),
                router: Some(Ipv4Addr::new(10, 77, 0, 1)),
                dns: vec![Ipv4Addr::new(10, 77, 0, 1)],
                lease_time: 3600,
                reservations,
            },
            Subnet {
                network: Ipv4Addr::new(10, 88, 0, 0),
                prefix: 16,
                pool_start: Ipv4Addr::new(10, 88, 1, 0),
                pool_end: Ipv4Addr::new(10, 88, 1, 10),
                router: None,
                dns: vec![],
                lease_time: 600,
                reservations: BTreeMap::new(),
            },
        ],
        boot: BootFiles {
            http_base: "http://10.77.0.1:8000".into(),
            bios: "undionly.kpxe".into(),
            uefi_x64: "ipxe.efi".into(),
            uefi_arm64: "ipxe-arm64.efi".into(),
        },
        offer_hold: 60,
    }
}

fn mac(s: &str) -> Mac {
    s.parse().unwrap_or_else(|e| panic!("fixture MAC {s}: {e}"))
}

/// A lease table with one lease in each state: bound, offered, expired, declined.
fn dhcp_leases() -> LeaseTable {
    let lease = |ip: [u8; 4], m: &str, expires_at: i64, state: LeaseState| Lease {
        ip: Ipv4Addr::from(ip),
        mac: mac(m),
        expires_at,
        state,
    };
    LeaseTable::new([
        lease(
            [10, 77, 0, 100],
            "52:54:00:12:34:56",
            NOW + 1000,
            LeaseState::Bound,
        ),
        lease(
            [10, 77, 0, 101],
            "52:54:00:00:00:02",
            NOW + 30,
            LeaseState::Offered,
        ),
        lease(
            [10, 77, 0, 102],
            "52:54:00:00:00:03",
            NOW - 10,
            LeaseState::Bound,
        ),
        lease(
            [10, 88, 1, 0],
            "52:54:00:00:00:04",
            NOW + 100,
            LeaseState::Declined,
        ),
    ])
}

/// The path a datagram takes through the DHCP server, less the socket: `decode` (magic
/// cookie), the client's MAC, `handle` against a two-subnet config in both modes and a lease
/// table, the lease change applied and the reply encoded; then the same request again later
/// (past the offer hold and an expiry), against the table the first one left.
pub fn dhcp(data: &[u8]) -> bool {
    let Ok(msg) = reply::decode(data) else {
        return false;
    };
    let _ = reply::client_mac(&msg);
    let _ = classify(&msg);
    for mode in [Mode::Authoritative, Mode::ReservationOnly] {
        let cfg = dhcp_config(mode);
        let mut leases = dhcp_leases();
        for now in [NOW, NOW + 1200] {
            if let Ok(outcome) = reply::handle(&msg, &cfg, &mut leases, now) {
                if let Some(change) = &outcome.change {
                    leases.apply(change);
                }
                if let Some((reply, _to)) = outcome.reply {
                    let _ = reply.to_vec();
                }
            }
        }
    }
    true
}

/// The TFTP server's pure path: a request parsed, its path checked, options negotiated against
/// a file's size, then the sender driven by the client's packets and timeouts as
/// `tftp::server::transfer` drives it (each window's block ranges cut as it cuts them).
///
/// Input: 4 bytes little-endian file size, 2 bytes big-endian request length, the request
/// packet, then events: a length byte and that many bytes of a packet from the client, or a
/// zero byte for a timeout. Ends at the end of the input, at Done, GiveUp or a client ERROR.
pub fn tftp(data: &[u8]) -> bool {
    let (Some(size), Some(len)) = (data.get(0..4), data.get(4..6)) else {
        return false;
    };
    let size = u64::from(u32::from_le_bytes([size[0], size[1], size[2], size[3]]));
    let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
    let Some(request) = data.get(6..6 + len) else {
        return false;
    };
    let mut events = &data[6 + len..];
    let req = match Packet::parse(request) {
        Ok(Packet::Read(req)) => req,
        Ok(_) => {
            let _ = session::error_packet(ErrorCode::UnknownTransferId, "unknown transfer");
            return false;
        }
        Err(err) => {
            let _ = session::error_packet(ErrorCode::IllegalOperation, &err.to_string());
            return false;
        }
    };
    if let Err(err) = session::safe_components(&req.filename) {
        let _ = session::error_packet(ErrorCode::AccessViolation, &err.to_string());
        return false;
    }
    let size = match req.mode {
        // The server sends a netascii file converted; convert what the events hold, as a file.
        session::Mode::Netascii => session::to_netascii(events).len() as u64 + size,
        session::Mode::Octet => size,
    };
    let limits = session::Limits::default();
    let negotiated = session::negotiate(&req.options, size, &limits);
    let mut sender = Sender::new(size, &negotiated, &limits);
    let mut action = sender.start();
    loop {
        match action {
            Action::SendOack => {
                let _ = session::oack_packet(&negotiated.oack);
            }
            Action::Send(window) => {
                // As `transfer` does: the window's byte range, then each block's slice of it.
                let last = window.first + window.count - 1;
                let (from, _) = sender.range(window.first, size);
                let (_, to) = sender.range(last, size);
                let chunk = to - from;
                for k in window.first..=last {
                    let (start, end) = sender.range(k, size);
                    let lo = (start - from).min(chunk);
                    let hi = (end - from).min(chunk);
                    assert!(lo <= hi, "block {k}: {lo}..{hi} of a {chunk}-byte window");
                    let _ = session::data_header((k % 65536) as u16);
                }
            }
            Action::Wait => {}
            Action::Done | Action::GiveUp => return true,
        }
        let _ = sender.wait();
        action = loop {
            let Some((&n, rest)) = events.split_first() else {
                return true;
            };
            if n == 0 {
                events = rest;
                break sender.on_timeout();
            }
            let n = usize::from(n).min(rest.len());
            let (packet, rest) = rest.split_at(n);
            events = rest;
            match Packet::parse(packet) {
                Ok(Packet::Ack { block }) => match sender.on_ack(block) {
                    Action::Wait => continue,
                    next => break next,
                },
                Ok(Packet::Error { .. }) => return true,
                _ => continue,
            }
        };
    }
}

/// The data expressions see in the fuzz target: a little of a deployment's shape, with an old
/// state that differs so that `changed()` and friends have work to do.
fn yaql_context() -> yaql::Context {
    let new = serde_json::json!({
        "roles": ["controller", "compute"],
        "uid": "1",
        "nodes": [
            {"uid": "1", "roles": ["controller"], "name": "node-1", "ip": "10.20.0.3"},
            {"uid": "2", "roles": ["compute", "cinder"], "name": "node-2", "ip": "10.20.0.4"}
        ],
        "cluster": {"id": 1, "mode": "ha_compact", "fuel_version": "9.0"},
        "network_scheme": {"endpoints": {"br-mgmt": {"IP": ["192.168.0.2/24"]}}},
        "storage": {"volumes_ceph": true, "objects_ceph": false, "pg_num": 128},
        "plugins": {"a": {"enabled": true, "metadata": {"versions": [1.0, "2"]}}},
        "ratio": 0.5,
        "none": null
    });
    let old = serde_json::json!({
        "roles": ["controller"],
        "nodes": [{"uid": "1", "roles": ["controller"], "name": "node-1"}],
        "storage": {"volumes_ceph": false}
    });
    yaql::Context::new(&new)
        .with_old(&old)
        .with_var(
            "node",
            &serde_json::json!({"uid": "1", "roles": ["controller"]}),
        )
        .with_var("common", &serde_json::json!({"release": "newton"}))
}

/// YAQL steps one fuzzed evaluation may take (the engine's default `max_steps` is 20,000,000,
/// a plan's whole budget 10,000,000). Lower here so an input runs in milliseconds: work that is
/// not counted in steps (one function call that takes seconds) then shows as a hang, which is
/// what the target looks for; the step limit itself is deterministic and tested.
pub const YAQL_STEPS: u64 = 200_000;

/// The YAQL parser (`check_syntax`, as the validator calls it), then evaluation with the
/// engine's default limits (items, memory quota, depth) within [`YAQL_STEPS`], the result
/// finalised to JSON as a plan's values are.
pub fn yaql(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    if yaql::check_syntax(text).is_err() {
        return false;
    }
    let engine = yaql::Engine::new(yaql::Limits::default());
    let (result, _steps) = engine.eval_metered(text, &yaql_context(), YAQL_STEPS);
    if let Ok(value) = result {
        let _ = value.to_json();
    }
    true
}

/// The agent hello's body and Fuel's node document (`/api/v1/agent/hello`, `POST /api/nodes`,
/// `PUT /api/nodes/agent`) within the handlers' size limit, each parsed into a validated
/// inventory; then what the daemon does with one: store it as JSON, show its disks' total and
/// its primary MAC, and answer it back in Fuel's `meta` shape.
pub fn inventory(data: &[u8]) -> bool {
    if data.len() > model::MAX_INVENTORY_BYTES {
        return false;
    }
    let parsed = [
        model::parse_inventory(data),
        model::fuel::inventory_from_fuel(data),
    ];
    let mut accepted = false;
    for inv in parsed.into_iter().flatten() {
        let _ = inv.primary_mac();
        let _ = inv.disk_bytes();
        let _ = serde_json::to_vec(&inv);
        let _ = model::fuel::fuel_meta(&inv);
        accepted = true;
    }
    accepted
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every seed of `target` through `run`, without AFL: none may panic, and most must get
    /// past the first parser (a few seeds are refusals on purpose).
    fn seeds(target: &str, run: fn(&[u8]) -> bool) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("seeds")
            .join(target);
        let (mut n, mut accepted) = (0, 0);
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{dir:?}: {e}")) {
            let path = entry.unwrap().path();
            if run(&std::fs::read(&path).unwrap()) {
                accepted += 1;
            }
            n += 1;
        }
        assert!(n > 0, "no seeds in {dir:?}");
        assert!(
            accepted * 2 > n,
            "{target}: only {accepted} of {n} seeds parse"
        );
    }

    #[test]
    fn yaml_seeds() {
        seeds("yaml", super::yaml);
    }

    #[test]
    fn package_seeds() {
        seeds("package", super::package);
    }

    #[test]
    fn dhcp_seeds() {
        seeds("dhcp", super::dhcp);
    }

    #[test]
    fn tftp_seeds() {
        seeds("tftp", super::tftp);
    }

    #[test]
    fn yaql_seeds() {
        seeds("yaql", super::yaql);
    }

    #[test]
    fn inventory_seeds() {
        seeds("inventory", super::inventory);
    }
}
