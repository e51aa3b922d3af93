//! `GET /metrics` against a daemon with DHCP and TFTP on loopback: activity of every kind (API
//! requests, an agent's hello, a DHCP exchange, a TFTP fetch), then the exposition parsed and
//! each family checked against what the activity implies; an anonymous scrape refused; the
//! Grafana dashboard's queries naming only metrics the exposition has.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use crate::common::{TestDaemon, inventory};

/// One sample: its name and labels, its value.
type Samples = BTreeMap<(String, BTreeMap<String, String>), f64>;

/// A small parser of the text format: `name{k="v",...} value` lines, comments skipped.
fn parse(text: &str) -> Samples {
    let mut out = Samples::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (series, value) = line.rsplit_once(' ').expect("a value");
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series.to_string(), BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').expect("closing brace");
                let mut labels = BTreeMap::new();
                // Values here never hold `",`: split on it.
                for pair in body.split("\",").filter(|p| !p.is_empty()) {
                    let (k, v) = pair.split_once("=\"").expect("k=\"v\"");
                    labels.insert(k.to_string(), v.trim_end_matches('"').to_string());
                }
                (name.to_string(), labels)
            }
        };
        assert!(
            out.insert((name, labels), value).is_none(),
            "duplicate series: {line}"
        );
    }
    out
}

fn get(s: &Samples, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    s.get(&(name.to_string(), labels)).copied()
}

/// Every metric name the exposition has: those of its samples, and every family declared by
/// a `# TYPE` line (a family of gauges may have no sample yet, as deployments by status).
fn names(text: &str) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = parse(text).into_keys().map(|(n, _)| n).collect();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().unwrap_or("");
            out.insert(name.to_string());
        }
    }
    out
}

fn daemon(dhcp_client: SocketAddr) -> TestDaemon {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tftp");
    std::fs::create_dir_all(&root).unwrap();
    let flags = [
        ("dhcp.enabled", "true".to_string()),
        ("dhcp.listen", "127.0.0.1:0".to_string()),
        ("dhcp.server_ip", "127.0.0.1".to_string()),
        (
            "dhcp.subnets",
            "127.0.0.0/24 pool=127.0.0.100-127.0.0.109 router=127.0.0.1 lease=600".to_string(),
        ),
        ("dhcp.reply_to", dhcp_client.to_string()),
        ("tftp.enabled", "true".to_string()),
        ("tftp.listen", "127.0.0.1:0".to_string()),
        ("tftp.root", root.display().to_string()),
    ];
    TestDaemon::start_in(dir, &flags)
}

/// Fetch `name` over TFTP in lock-step with 512-byte blocks: its bytes.
fn tftp_get(server: SocketAddr, name: &str) -> Vec<u8> {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut rrq = vec![0, 1];
    for s in [name, "octet"] {
        rrq.extend_from_slice(s.as_bytes());
        rrq.push(0);
    }
    socket.send_to(&rrq, server).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let (n, from) = socket.recv_from(&mut buf).expect("data");
        assert_eq!(u16::from_be_bytes([buf[0], buf[1]]), 3, "a DATA packet");
        out.extend_from_slice(&buf[4..n]);
        socket.send_to(&[0, 4, buf[2], buf[3]], from).unwrap();
        if n - 4 < 512 {
            return out;
        }
    }
}

/// Scrape until `done` holds of the samples (counters of the UDP services are bumped just
/// after their packets leave), at most a few seconds.
fn scrape_until(d: &TestDaemon, token: &str, done: impl Fn(&Samples) -> bool) -> String {
    let mut last = String::new();
    for _ in 0..100 {
        let r = d.http().get_as("/metrics", token);
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(
            r.content_type.starts_with("text/plain; version=0.0.4"),
            "{}",
            r.content_type
        );
        last = r.body;
        if done(&parse(&last)) {
            return last;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    last
}

#[test]
fn metrics_count_what_happened_and_need_a_token() {
    let client = crate::dhcp::client_socket();
    let d = daemon(client.local_addr().unwrap());
    let viewer = d.user_token("prometheus", "viewer");

    // An anonymous scrape is refused, as any API call without a token.
    let anonymous = d.anonymous().get("/metrics");
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);

    // Activity: three reads of a node (one route, whatever the id), two unknown paths, an
    // agent's hello, a DHCP DISCOVER, a TFTP fetch.
    let hello = d.http().post(
        "/api/v1/agent/hello",
        &inventory("52:54:00:cc:00:01").to_string(),
    );
    assert_eq!(hello.status, 201, "{}", hello.body);
    let id = hello.json()["node"]["id"].as_i64().unwrap();
    for _ in 0..3 {
        assert_eq!(d.http().get(&format!("/api/v1/nodes/{id}")).status, 200);
    }
    assert_eq!(d.http().get("/api/v1/nodes/999999").status, 404);
    assert_eq!(d.http().get("/no/such/page/1").status, 404);
    assert_eq!(d.http().get("/no/such/page/2").status, 404);
    // DISCOVER → OFFER → REQUEST → ACK.
    let dhcp = crate::dhcp::Client::new(client, d.dhcp.unwrap());
    crate::dhcp::dora(&dhcp, [0x52, 0x54, 0, 0xcc, 0, 2], 0x5151);
    let script = tftp_get(d.tftp.unwrap(), "stoker.ipxe");
    assert!(script.starts_with(b"#!ipxe"));

    let text = scrape_until(&d, &viewer, |s| {
        get(s, "stoker_tftp_transfers_total", &[("result", "completed")]) == Some(1.0)
            && get(s, "stoker_dhcp_replies_sent_total", &[]) == Some(2.0)
    });
    let s = parse(&text);
    let have = names(&text);

    // HTTP: by route pattern and status, exactly as many as were made.
    let node_route = [
        ("method", "GET"),
        ("route", "/api/v1/nodes/{id}"),
        ("status", "200"),
    ];
    assert_eq!(
        get(&s, "stoker_http_requests_total", &node_route),
        Some(3.0)
    );
    assert_eq!(
        get(
            &s,
            "stoker_http_requests_total",
            &[
                ("method", "GET"),
                ("route", "/api/v1/nodes/{id}"),
                ("status", "404")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        get(
            &s,
            "stoker_http_requests_total",
            &[("method", "GET"), ("route", "unmatched"), ("status", "404")]
        ),
        Some(2.0)
    );
    assert!(
        !s.keys().any(|(_, l)| l
            .get("route")
            .is_some_and(|r| r.contains("/no/such") || r.contains("999999"))),
        "raw paths never become labels"
    );
    assert_eq!(
        get(
            &s,
            "stoker_http_request_duration_seconds_count",
            &[("method", "GET"), ("route", "/api/v1/nodes/{id}")]
        ),
        Some(4.0)
    );
    assert_eq!(
        get(
            &s,
            "stoker_http_request_duration_seconds_bucket",
            &[
                ("method", "GET"),
                ("route", "/api/v1/nodes/{id}"),
                ("le", "+Inf")
            ]
        ),
        Some(4.0)
    );
    // The anonymous scrape was answered 401 by its route.
    assert_eq!(
        get(
            &s,
            "stoker_http_requests_total",
            &[("method", "GET"), ("route", "/metrics"), ("status", "401")]
        ),
        Some(1.0)
    );
    // Agents: the hello, and its latency.
    assert_eq!(
        get(
            &s,
            "stoker_agent_calls_total",
            &[("call", "hello"), ("status", "201")]
        ),
        Some(1.0)
    );
    assert_eq!(
        get(
            &s,
            "stoker_agent_call_duration_seconds_count",
            &[("call", "hello")]
        ),
        Some(1.0)
    );
    // Nodes: the one that said hello, discovered and online.
    assert_eq!(
        get(
            &s,
            "stoker_nodes",
            &[("status", "discover"), ("online", "true")]
        ),
        Some(1.0)
    );
    assert_eq!(
        get(
            &s,
            "stoker_nodes",
            &[("status", "ready"), ("online", "false")]
        ),
        Some(0.0)
    );
    assert_eq!(
        get(&s, "stoker_deployment_runs", &[("status", "running")]),
        Some(0.0)
    );
    // DHCP: the DISCOVER offered, the REQUEST acknowledged; the lease is stored bound (the
    // offer's hold never was: offers are held in memory), the rest of the pool free.
    assert_eq!(
        get(
            &s,
            "stoker_dhcp_packets_total",
            &[("type", "discover"), ("result", "offered")]
        ),
        Some(1.0)
    );
    assert_eq!(
        get(
            &s,
            "stoker_dhcp_packets_total",
            &[("type", "request"), ("result", "acked")]
        ),
        Some(1.0)
    );
    assert_eq!(
        get(&s, "stoker_dhcp_leases", &[("state", "offered")]),
        Some(0.0)
    );
    assert_eq!(
        get(&s, "stoker_dhcp_leases", &[("state", "bound")]),
        Some(1.0)
    );
    assert_eq!(get(&s, "stoker_dhcp_pool_addresses", &[]), Some(10.0));
    assert_eq!(get(&s, "stoker_dhcp_pool_free_addresses", &[]), Some(9.0));
    // The lease was committed and flushed once before the ACK left.
    assert_eq!(get(&s, "stoker_dhcp_lease_flushes_total", &[]), Some(1.0));
    assert!(get(&s, "stoker_dhcp_lease_flush_seconds_total", &[]).unwrap() > 0.0);
    assert!(get(&s, "stoker_dhcp_lease_commit_seconds_total", &[]).unwrap() > 0.0);
    // TFTP: one request, one completed transfer, its bytes.
    assert_eq!(get(&s, "stoker_tftp_requests_total", &[]), Some(1.0));
    assert_eq!(
        get(&s, "stoker_tftp_sent_bytes_total", &[]),
        Some(script.len() as f64)
    );
    assert_eq!(
        get(&s, "stoker_tftp_transfers_total", &[("result", "failed")]),
        Some(0.0)
    );
    // The group writer committed something (the hello's writes go through the store, the
    // agents' step calls through the writer: at least the families are there).
    assert!(have.contains("stoker_store_group_size_bucket"));
    assert!(have.contains("stoker_store_group_commit_duration_seconds_count"));
    // The process.
    assert!(get(&s, "process_resident_memory_bytes", &[]).is_some_and(|v| v > 0.0));
    assert!(get(&s, "process_open_fds", &[]).is_some_and(|v| v > 0.0));
    assert!(get(&s, "process_cpu_seconds_total", &[]).is_some());

    // The dashboard queries only what the exposition has.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/grafana/stoker.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).expect("valid JSON");
    assert!(
        dashboard["__inputs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"] == "DS_PROMETHEUS"),
        "the datasource is an input"
    );
    let mut exprs = Vec::new();
    collect_exprs(&dashboard, &mut exprs);
    assert!(exprs.len() >= 10, "{} queries", exprs.len());
    let metric = regex::Regex::new(r"\b(?:stoker|process)_[a-z_]+").unwrap();
    let mut queried = BTreeSet::new();
    for e in &exprs {
        for m in metric.find_iter(e) {
            queried.insert(m.as_str().to_string());
        }
    }
    let missing: Vec<&String> = queried.iter().filter(|n| !have.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries unknown metrics: {missing:?}"
    );
    for family in [
        "stoker_http_requests_total",
        "stoker_agent_calls_total",
        "stoker_dhcp_packets_total",
        "stoker_tftp_sent_bytes_total",
        "stoker_nodes",
        "stoker_deployments",
        "stoker_deployment_runs",
        "stoker_store_group_size_bucket",
        "process_resident_memory_bytes",
    ] {
        assert!(queried.contains(family), "no panel shows {family}");
    }
}

/// Every `expr` string in a dashboard document.
fn collect_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr", serde_json::Value::String(e)) => out.push(e.clone()),
                    _ => collect_exprs(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| collect_exprs(v, out)),
        _ => {}
    }
}
