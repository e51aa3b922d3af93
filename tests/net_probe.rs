//! Network verification's probe for real: two network namespaces made by the test, joined by
//! a veth pair, the built binary's probe (`stoker agent --net-probe`) run in each at once, and
//! the master's verdict (`engine::network::verify`) over their reports: a VLAN both sides
//! carry is heard, one only one side carries is absent, on the right interface. Needs root
//! (`ip netns`), so it is ignored by `cargo test` and run by `.ci/run` (as root); run without
//! root it fails saying so. Every namespace made is deleted, with the veth pair in it, even
//! when the test fails.

use std::process::{Command, Output, Stdio};

use serde_json::json;
use stoker::engine::network::verify::{Expected, ExpectedIface, Received, judge};

use crate::common::bin::STOKER;

/// Network namespaces this test made; deleted on drop (their links go with them).
struct Namespaces(Vec<String>);

impl Namespaces {
    fn add(&mut self, name: &str) -> Result<(), String> {
        let out = ip(&["netns", "add", name]);
        if out.status.success() {
            self.0.push(name.to_string());
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

fn ip(args: &[&str]) -> Output {
    Command::new("ip")
        .args(args)
        .output()
        .expect("the ip command runs")
}

fn must(args: &[&str]) {
    let out = ip(args);
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "needs root (network namespaces): .ci/run runs this"]
fn the_probe_hears_a_vlan_both_nodes_carry_and_reports_one_only_one_carries_absent() {
    let tag = std::process::id();
    let (a, b) = (format!("stk-np-{tag}-a"), format!("stk-np-{tag}-b"));
    let mut spaces = Namespaces(Vec::new());
    if let Err(e) = spaces.add(&a) {
        panic!("ip netns is not permitted here (needs root): {}", e.trim());
    }
    spaces.add(&b).expect("a second namespace");
    // The veth pair is made inside the namespaces: the host's interfaces are never touched.
    must(&[
        "link", "add", "np0", "netns", &a, "type", "veth", "peer", "name", "np1", "netns", &b,
    ]);
    must(&["-n", &a, "link", "set", "np0", "up"]);
    must(&["-n", &b, "link", "set", "np1", "up"]);

    // Both nodes are expected on untagged, VLAN 100 and VLAN 200; node 2's probe is told only
    // untagged and 100, as a node whose VLAN 200 is not configured.
    let spec = |node: i64, iface: &str, vlans: &[u16]| {
        json!({"node": node, "interfaces": [{"iface": iface, "vlans": vlans}],
               "listen_ms": 3000, "send_after_ms": 600, "rounds": 3})
        .to_string()
    };
    let run = |ns: &str, spec: String| {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns, STOKER, "agent", "--net-probe", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the probe starts");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(spec.as_bytes())
            .unwrap();
        child
    };
    let one = run(&a, spec(1, "np0", &[0, 100, 200]));
    let two = run(&b, spec(2, "np1", &[0, 100]));
    let reports: Vec<Received> = [one, two]
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "probe: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
        })
        .collect();

    // What each heard: node 1 heard node 2 untagged and on 100, nobody on 200.
    let heard = |r: &Received, vlan: u16| r.networks[0].vlans.get(&vlan).cloned();
    assert_eq!(heard(&reports[0], 0), Some([2].into()), "{reports:?}");
    assert_eq!(heard(&reports[0], 100), Some([2].into()), "{reports:?}");
    assert_eq!(heard(&reports[0], 200), Some([].into()), "{reports:?}");
    assert_eq!(heard(&reports[1], 100), Some([1].into()), "{reports:?}");
    assert_eq!(
        heard(&reports[1], 200),
        None,
        "node 2 did not listen on 200"
    );

    let expected = |uid: i64, iface: &str| Expected {
        uid,
        name: format!("node-{uid}"),
        networks: vec![ExpectedIface {
            iface: iface.into(),
            mac: "52:54:00:00:00:00".into(),
            vlans: vec![0, 100, 200],
        }],
    };
    let verdict = judge(&[expected(1, "np0"), expected(2, "np1")], &reports);
    assert_eq!(verdict.status, "error", "{verdict:?}");
    let absent: Vec<(i64, &str, &[u16])> = verdict
        .result
        .iter()
        .map(|a| (a.uid, a.interface.as_str(), a.absent_vlans.as_slice()))
        .collect();
    assert_eq!(
        absent,
        [(1, "np0", &[200][..]), (2, "np1", &[200][..])],
        "VLAN 200 absent on both sides, 0 and 100 found"
    );

    // Both sides carry 200: the same check passes.
    let one = run(&a, spec(1, "np0", &[0, 100, 200]));
    let two = run(&b, spec(2, "np1", &[0, 100, 200]));
    let reports: Vec<Received> = [one, two]
        .into_iter()
        .map(|c| serde_json::from_slice(&c.wait_with_output().unwrap().stdout).unwrap())
        .collect();
    let verdict = judge(&[expected(1, "np0"), expected(2, "np1")], &reports);
    assert_eq!(verdict.status, "ready", "{verdict:?}");
}
