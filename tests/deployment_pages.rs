//! The deployment page, an environment's deployment history and a node's page, rendered by the
//! real daemon after simulated agents (as `deploy.rs` plays them) ran a deployment with a
//! failing task: runs per node numbered exactly as the text plan numbers the tasks, filters
//! (and each bad one's error), the failed run's output open, the fragments the pages refresh
//! themselves from, the history list and the node's state, deployments, log tail, activity and
//! DHCP lease.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::{Http, TestDaemon};
use crate::deploy::{drive, setup};

/// A run row of a page: (status, run id, number, name).
fn rows(html: &str) -> Vec<(String, i64, String, String)> {
    html.split("<tr class=\"run run-")
        .skip(1)
        .map(|chunk| {
            let status = chunk.split('"').next().unwrap().to_string();
            let id = chunk.split("id=\"run-").nth(1).unwrap();
            let id = id.split('"').next().unwrap().parse().unwrap();
            let num = chunk.split("<td class=\"num").nth(1).unwrap();
            let num = num
                .split_once('>')
                .unwrap()
                .1
                .split("</td>")
                .next()
                .unwrap();
            let name = chunk.split("<span class=\"mono\">").nth(1).unwrap();
            let name = name.split("</span>").next().unwrap().to_string();
            (status, id, num.to_string(), name)
        })
        .collect()
}

/// The exit code cells of a page's run rows: (status, exit code shown).
fn exits(html: &str) -> Vec<(String, String)> {
    html.split("<tr class=\"run run-")
        .skip(1)
        .map(|chunk| {
            let status = chunk.split('"').next().unwrap().to_string();
            let cell = chunk
                .split("<td class=\"num exit-code\">")
                .nth(1)
                .unwrap()
                .split("</td>")
                .next()
                .unwrap();
            let code = cell
                .split_once('>')
                .map_or("", |(_, rest)| rest.split('<').next().unwrap());
            (status, code.to_string())
        })
        .collect()
}

/// The text plan's numbers: (node uid, number) → task.
fn text_numbers(text: &str) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    let mut uid = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("node ") {
            uid = rest.split_whitespace().next().map(str::to_string);
            continue;
        }
        if !line.starts_with("  ") || line.starts_with("        ") {
            if !line.starts_with("  ") {
                uid = uid.filter(|_| !line.is_empty() && !line.starts_with("sync"));
            }
            continue;
        }
        let Some((n, rest)) = line.trim_start().split_once(". ") else {
            continue;
        };
        if n.parse::<u32>().is_err() {
            continue;
        }
        if let Some(u) = &uid {
            let task = rest.split_whitespace().nth(1).unwrap().to_string();
            out.insert((u.clone(), n.to_string()), task);
        }
    }
    out
}

/// An environment of a controller and a compute, deployed through the dashboard's Deploy
/// button, whose compute's `nova-compute` (a compute's task only) fails; returns the daemon, the environment, the
/// deployment, the node ids and the text plan it ran.
fn deployed_with_a_failure() -> (TestDaemon, i64, i64, Vec<i64>, String) {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    let text = d
        .http()
        .get(&format!("/api/v1/clusters/{cluster}/plan?format=text"))
        .body;
    assert!(text.contains("tasks are numbered per node"), "{text}");
    let r = d
        .http()
        .submit(&format!("/environments/{cluster}/deploy"), "confirmed=1");
    assert!(r.body.contains("Deployment "), "{}", r.body);
    let deps = Http::raw_get_json(&format!("{base}/api/v1/clusters/{cluster}/deployments"));
    let dep = deps[0]["id"].as_i64().unwrap();
    drive(
        &base,
        &nodes,
        &|run: &Value| run["task"]["id"] == "nova-compute",
        1000,
    );
    let ids = nodes.iter().map(|n| n.id).collect();
    (d, cluster, dep, ids, text)
}

fn page(d: &TestDaemon, path: &str) -> String {
    let r = d.http().get(path);
    assert_eq!(r.status, 200, "{path}: {}", r.body);
    assert!(r.content_type.starts_with("text/html"), "{path}");
    r.body
}

#[test]
fn the_deployment_page_numbers_runs_as_the_text_plan_and_filters_them() {
    let (d, cluster, dep, nodes, text) = deployed_with_a_failure();
    let plan = text_numbers(&text);
    assert!(!plan.is_empty(), "{text}");
    let html = page(&d, &format!("/deployments/{dep}"));
    for want in [
        &format!("<h1>Deployment {dep}</h1>"),
        &format!("href=\"/environments/{cluster}\""),
        "graph default · deployment",
        " by admin",
        "data-status=\"error\"",
        "class=\"timeline\"",
        "class=\"tl-legend\"",
        "Tasks are numbered per node",
        "Retry failed steps",
        "data-live-src=\"/deployments/",
        "data-live-on=\"run node\"",
        &format!("data-live-filter=\"deployment={dep}\""),
    ] {
        assert!(html.contains(want), "the page lacks {want}:\n{html}");
    }
    // Every task run of each node carries its number in the text plan.
    for node in &nodes {
        let mine = page(&d, &format!("/deployments/{dep}?node={node}"));
        let shown = rows(&mine);
        assert!(!shown.is_empty(), "{mine}");
        let mut tasks = 0;
        for (_, _, number, name) in &shown {
            if number.starts_with('p') || number.starts_with('d') {
                assert!(name.contains('.'), "an own step: {name}");
                continue;
            }
            tasks += 1;
            assert_eq!(
                plan.get(&(node.to_string(), number.clone())),
                Some(name),
                "node {node} run {number} {name}: the text plan says otherwise"
            );
        }
        assert!(tasks > 0, "{mine}");
        let numbered: Vec<&str> = shown.iter().map(|r| r.2.as_str()).collect();
        assert_eq!(numbered[0], "p1", "provisioning first: {numbered:?}");
    }
    // How 42 steps came from fewer tasks, in numbers that add up.
    let runs = Http::raw_get_json(&format!("{}/api/v1/deployments/{dep}", d.url("")));
    let total = runs["steps"].as_array().unwrap().len();
    assert!(
        html.contains(&format!("run as {total} steps: the nodes also run")),
        "{html}"
    );
    // The failed run: its node first, expanded, its output and error open.
    let compute = nodes[1];
    let first = html.find("class=\"card flush dep-node\"").unwrap();
    assert!(
        html[first..].starts_with(&format!(
            "class=\"card flush dep-node\" id=\"node-{compute}\""
        )) || html[first..].contains(&format!("id=\"node-{compute}\"")),
        "{html}"
    );
    let failed: Vec<_> = rows(&html)
        .into_iter()
        .filter(|r| r.0 == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "{html}");
    assert_eq!(failed[0].3, "nova-compute");
    let run = failed[0].1;
    let details = html
        .split(&format!("<details id=\"out-{run}\""))
        .nth(1)
        .unwrap();
    assert!(
        details.starts_with(" open>"),
        "the failed run's output is open"
    );
    assert!(details.contains("exit 1") && details.contains("ran nova-compute"));
    assert!(html.contains("failed at"), "{html}");
    // Filters: by status, by text, linked and validated.
    let only = page(&d, &format!("/deployments/{dep}?status=failed"));
    let shown = rows(&only);
    assert_eq!(shown.len(), 1);
    assert!(only.contains("<option selected>failed</option>"), "{only}");
    assert!(only.contains("nodes have no run that matches"), "{only}");
    let text_only = page(&d, &format!("/deployments/{dep}?q=NOVA-COMP"));
    assert!(
        rows(&text_only)
            .iter()
            .all(|r| r.3.contains("nova-compute"))
    );
    assert!(!rows(&text_only).is_empty());
    for (query, error) in [
        (
            "status=bogus",
            "status: &#34;bogus&#34; is not a run status",
        ),
        ("node=abc", "node: &#34;abc&#34; is not a node id"),
        ("node=9999", "node: node 9999 has no runs in deployment"),
        ("page=0", "page: &#34;0&#34; is not a page number"),
        ("colour=red", "colour: not a filter of this page"),
        ("status=ok&status=failed", "status: given more than once"),
    ] {
        let r = d.http().get(&format!("/deployments/{dep}?{query}"));
        assert_eq!(r.status, 400, "{query}");
        assert!(
            r.body.contains(error) || r.body.contains(&error.replace("&#34;", "&quot;")),
            "{query}: {}",
            r.body
        );
        assert!(r.body.contains("The filter is not applied"), "{query}");
        assert!(rows(&r.body).is_empty(), "{query}: nothing is shown");
        let frag = d.http().get(&format!("/deployments/{dep}/runs?{query}"));
        assert_eq!(frag.status, 400, "{query}");
    }
    // The fragments the page refreshes itself from.
    let status = page(&d, &format!("/deployments/{dep}/status"));
    assert!(status.contains("data-status=\"error\""), "{status}");
    assert!(!status.contains("<html"), "a fragment, not a page");
    let runs_frag = page(&d, &format!("/deployments/{dep}/runs?status=failed"));
    assert_eq!(rows(&runs_frag).len(), 1);
    // A run's whole stored output, as text.
    let out = d
        .http()
        .get(&format!("/deployments/{dep}/runs/{run}/output"));
    assert_eq!(out.status, 200);
    assert!(out.content_type.starts_with("text/plain"));
    assert_eq!(out.body, "ran nova-compute");
    assert_eq!(
        d.http()
            .get(&format!("/deployments/{}/runs/{run}/output", dep + 1))
            .status,
        404,
        "the run is of no other deployment"
    );
    assert_eq!(d.http().get("/deployments/999").status, 404);
    assert_eq!(d.http().get("/deployments/x").status, 400);
    // Retry from the page comes back to it, saying so.
    let r = d.http().submit(&format!("/deployments/{dep}/retry"), "");
    assert!(
        r.body
            .contains(&format!("Deployment {dep}: its failed steps run again.")),
        "{}",
        r.body
    );
    assert!(r.body.contains("data-status=\"running\""), "{}", r.body);
}

#[test]
fn the_environment_lists_its_deployments_and_numbers_its_plan_per_node() {
    let (d, cluster, dep, _nodes, text) = deployed_with_a_failure();
    let env = page(&d, &format!("/environments/{cluster}"));
    for want in [
        &format!("href=\"/deployments/{dep}\""),
        "class=\"table history\"",
        "data-live-src=\"/environments/",
        &format!("data-live-src=\"/environments/{cluster}/members\""),
        "data-live-on=\"node\"",
        "class=\"zoom-bar\"",
        "Tasks are numbered per node",
    ] {
        assert!(env.contains(want), "the environment page lacks {want}");
    }
    // The plan's tables number each node's tasks 1..n, as the text plan does.
    let plan = text_numbers(&text);
    let tables = env.split("<table class=\"table plan-tasks\">").skip(1);
    let mut checked = 0;
    for table in tables {
        let body = table.split("</table>").next().unwrap();
        for (i, row) in body.split("<tr><td class=\"num\">").skip(1).enumerate() {
            let number = row.split("</td>").next().unwrap();
            assert_eq!(number, (i + 1).to_string(), "numbered 1..n per node");
            checked += 1;
        }
    }
    assert!(checked >= plan.len() / 2, "{checked} of {}", plan.len());
    // The fragments: the node table and the deployment part.
    let members = page(&d, &format!("/environments/{cluster}/members"));
    assert!(members.contains("badge-error\">error<"), "{members}");
    let part = page(&d, &format!("/environments/{cluster}/timeline"));
    assert!(
        part.contains(&format!("href=\"/deployments/{dep}\"")),
        "{part}"
    );
    assert!(part.contains("class=\"tl-legend\""));
    // The history page, and its parameter checked.
    let all = page(&d, &format!("/environments/{cluster}/deployments"));
    assert!(
        all.contains(&format!("<a href=\"/deployments/{dep}\">{dep}</a>")),
        "{all}"
    );
    assert!(all.contains("by admin"), "{all}");
    assert!(all.contains("1 failed"), "{all}");
    let bad = d
        .http()
        .get(&format!("/environments/{cluster}/deployments?page=x"));
    assert_eq!(bad.status, 400);
    assert!(
        bad.body.contains("page: &#34;x&#34; is not a page number")
            || bad.body.contains("page: &quot;x&quot;"),
        "{}",
        bad.body
    );
    assert_eq!(
        d.http()
            .get(&format!("/environments/{cluster}/deployments?page=2"))
            .status,
        404
    );
    assert_eq!(d.http().get("/environments/99/deployments").status, 404);
}

#[test]
fn the_node_page_shows_where_it_stands_its_deployments_log_and_activity() {
    let (d, cluster, dep, nodes, _) = deployed_with_a_failure();
    let compute = nodes[1];
    let html = page(&d, &format!("/nodes/{compute}"));
    for want in [
        &format!("<a href=\"/environments/{cluster}\">env</a>"),
        // The header names its environment, not "environment 1".
        &format!("In <a href=\"/environments/{cluster}\">env</a>: remove it from there"),
        "<dt>Roles</dt><dd>compute",
        "badge-error\">error<",
        "deploy failed",
        "nova-compute: exit 1",
        &format!("href=\"/deployments/{dep}?node={compute}&amp;status=failed#runs\""),
        &format!("Deployment {dep}</a>"),
        "id=\"log\"",
        "ran nova-compute",
        "id=\"activity\"",
        "nova-compute failed",
        &format!("data-live-src=\"/nodes/{compute}/state\""),
        &format!("data-live-filter=\"node={compute}\""),
    ] {
        assert!(html.contains(want), "the node page lacks {want}:\n{html}");
    }
    // Its deployment's runs, numbered as on the deployment page.
    let on_node = rows(&html);
    let on_dep = rows(&page(&d, &format!("/deployments/{dep}?node={compute}")));
    let key = |r: &(String, i64, String, String)| (r.1, r.2.clone(), r.3.clone());
    assert_eq!(
        on_node.iter().map(key).collect::<Vec<_>>(),
        on_dep.iter().map(key).collect::<Vec<_>>()
    );
    // Its addresses on the environment's networks, each with its network, CIDR and VLAN, as
    // the network configuration API lays them out.
    let nets = d
        .http()
        .get(&format!(
            "/api/v1/clusters/{cluster}/network_configuration/neutron"
        ))
        .json();
    let listed = html
        .split("<ul class=\"plain net-addresses\">")
        .nth(1)
        .unwrap_or_else(|| panic!("no network addresses:\n{html}"))
        .split("</ul>")
        .next()
        .unwrap();
    let mut seen = 0;
    for net in nets["networks"].as_array().unwrap() {
        let name = net["name"].as_str().unwrap();
        let Some(cidr) = net["cidr"].as_str() else {
            continue;
        };
        if !listed.contains(&format!(">{name}</a>")) {
            continue;
        }
        seen += 1;
        assert!(
            listed.contains(&format!("<span class=\"mono\">{cidr}</span>")),
            "{name} {cidr}: {listed}"
        );
        if let Some(vlan) = net["vlan_start"].as_i64() {
            assert!(listed.contains(&format!("VLAN {vlan}")), "{listed}");
        }
    }
    assert!(seen >= 2 && listed.contains(">management</a>"), "{listed}");
    let held: Vec<String> = listed
        .split("<li><span class=\"mono\">")
        .skip(1)
        .map(|li| li.split('<').next().unwrap().to_string())
        .collect();
    assert!(
        held.iter().all(|ip| ip.contains('/') && ip.contains('.')),
        "{held:?}"
    );
    // An exit code on every finished run that reported one, 0 included; none on the others.
    let codes = exits(&html);
    assert!(!codes.is_empty(), "{html}");
    for (status, code) in &codes {
        match status.as_str() {
            "ok" => assert_eq!(code, "0", "{codes:?}"),
            "failed" => assert_eq!(code, "1", "{codes:?}"),
            _ => assert_eq!(code, "", "{codes:?}"),
        }
    }
    assert!(
        html.contains("<span class=\"exit exit-bad\">1</span>"),
        "{html}"
    );
    assert!(html.contains("title=\"The exit code the step reported\">Exit</th>"));
    assert_eq!(
        exits(&page(&d, &format!("/deployments/{dep}?node={compute}"))),
        codes,
        "the deployment page shows the same codes"
    );
    // The state part alone, and the controller's state: its last step.
    let state = page(&d, &format!("/nodes/{compute}/state"));
    assert!(state.contains("nova-compute: exit 1"), "{state}");
    assert!(!state.contains("<html"));
    let controller = page(&d, &format!("/nodes/{}", nodes[0]));
    assert!(
        controller.contains("<dt>Last step</dt>") || controller.contains("<dt>Next step</dt>"),
        "{controller}"
    );
    assert!(controller.contains("<dt>Last error</dt><dd><span class=\"muted\">none</span>"));
    // A node that never deployed says so.
    let r = d.http().post(
        "/api/v1/agent/hello",
        &crate::common::inventory("52:54:00:00:50:01").to_string(),
    );
    let lone = r.json()["node"]["id"].as_i64().unwrap();
    let html = page(&d, &format!("/nodes/{lone}"));
    assert!(html.contains("It has not taken part in a deployment."));
    assert!(html.contains("none: not assigned"));
    assert!(html.contains("none: it is in no environment"), "{html}");
    assert!(
        html.contains("none from this master&#39;s DHCP")
            || html.contains("none from this master's DHCP")
    );
}

/// A node of many deployments shows the newest few and pages to the older ones with plain
/// links (no JavaScript), the page number checked.
#[test]
fn the_node_page_pages_to_its_older_deployments() {
    let d = TestDaemon::start_bundled("install");
    let r = d.http().post(
        "/api/v1/agent/hello",
        &crate::common::inventory("52:54:00:00:60:01").to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let node = r.json()["node"]["id"].as_i64().unwrap();
    let cluster = d.new_environment("paged");
    let conn = rusqlite::Connection::open(d.db_path()).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    for i in 0..7 {
        let dep = 500 + i;
        conn.execute(
            "INSERT INTO deployments (id, cluster_id, status, created_at, finished_at, name,
               graph_type) VALUES (?1, ?2, 'done', ?3, ?3, 'deployment', 'default')",
            [dep, cluster, 1000 + i],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO step_runs (deployment, node_id, seq, interface, step, task, args, deps,
               timeout_s, status, attempt, started_at, finished_at, exit_code, runs_on)
             VALUES (?1, ?2, 0, 'deploy', 'run_tasks', 'hiera', '{}', '[]', 600, 'ok', 1,
               ?3, ?3, 0, 'os')",
            [dep, node, 1000 + i],
        )
        .unwrap();
    }
    let shown = |html: &str| -> Vec<String> {
        html.split("<div class=\"node-dep\">")
            .skip(1)
            .map(|c| {
                c.split("\">Deployment ")
                    .nth(1)
                    .unwrap()
                    .split('<')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    let first = page(&d, &format!("/nodes/{node}"));
    assert_eq!(shown(&first), ["506", "505", "504", "503", "502"]);
    assert!(first.contains("newest first: 1–5 of 7"), "{first}");
    let older = format!("/nodes/{node}?deployments_page=2#deployments");
    assert!(
        first.contains(&format!(
            "<a href=\"{older}\" rel=\"next\">Older deployments →</a>"
        )),
        "{first}"
    );
    assert!(!first.contains("Newer deployments"));
    let second = page(&d, &format!("/nodes/{node}?deployments_page=2"));
    assert_eq!(shown(&second), ["501", "500"]);
    assert!(second.contains("6–7 of 7"), "{second}");
    assert!(
        second.contains(&format!(
            "<a href=\"/nodes/{node}#deployments\" rel=\"prev\">← Newer deployments</a>"
        )),
        "{second}"
    );
    assert!(!second.contains("Older deployments"));
    // Past the last page: the last one; no page number: refused, naming the parameter.
    assert_eq!(
        shown(&page(&d, &format!("/nodes/{node}?deployments_page=9"))),
        ["501", "500"]
    );
    for bad in ["0", "x", "-2"] {
        let r = d
            .http()
            .get(&format!("/nodes/{node}?deployments_page={bad}"));
        assert_eq!(r.status, 400, "{bad}");
        assert!(r.body.contains("deployments_page"), "{}", r.body);
    }
}

#[test]
fn the_node_page_shows_its_dhcp_lease() {
    let (d, c) = crate::dhcp::start();
    let ip = crate::dhcp::dora(&c, crate::dhcp::mac(7), 70);
    let r = d.http().post(
        "/api/v1/agent/hello",
        &crate::common::inventory("52:54:00:aa:00:07").to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["node"]["id"].as_i64().unwrap();
    let html = page(&d, &format!("/nodes/{id}"));
    let lease = html.split("<dt>DHCP leases</dt>").nth(1).unwrap();
    let lease = lease.split("</dd>").next().unwrap();
    assert!(
        lease.contains(&format!("<span class=\"mono\">{ip}</span>")),
        "{lease}"
    );
    assert!(lease.contains("badge-ok\">bound<"), "{lease}");
    assert!(lease.contains("52:54:00:aa:00:07"), "{lease}");
    assert!(
        lease.contains("in 10 min") || lease.contains("in 9 min"),
        "{lease}"
    );
}

/// A finished deployment of `nodes` nodes × `steps` runs written straight into the daemon's
/// database (what a thousand agents would have left), the first `failed` nodes stopped by a
/// failed run half-way; returns the environment and the deployment.
fn big_deployment(d: &TestDaemon, nodes: i64, steps: i64, failed: i64) -> (i64, i64) {
    let cluster = d.new_environment("big");
    let mut conn = rusqlite::Connection::open(d.db_path()).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    let tx = conn.transaction().unwrap();
    let dep: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(id), 0) + 100 FROM deployments",
            [],
            |r| r.get(0),
        )
        .unwrap();
    tx.execute(
        "INSERT INTO deployments (id, cluster_id, status, created_at, finished_at, name,
           graph_type) VALUES (?1, ?2, 'error', 1000, 1900, 'deployment', 'default')",
        [dep, cluster],
    )
    .unwrap();
    {
        let mut node = tx
            .prepare(
                "INSERT INTO nodes (id, mac, name, status, created_at, last_seen_at, cluster_id,
                   roles) VALUES (?1, ?2, ?3, ?4, 1, 1, ?5, '[\"compute\"]')",
            )
            .unwrap();
        let mut inv = tx
            .prepare("INSERT INTO node_inventories (node_id, inventory) VALUES (?1, ?2)")
            .unwrap();
        let mut mac_row = tx
            .prepare("INSERT INTO node_macs (mac, node_id) VALUES (?1, ?2)")
            .unwrap();
        let mut run = tx
            .prepare(
                "INSERT INTO step_runs (deployment, node_id, seq, interface, step, task, args,
                   deps, timeout_s, status, attempt, started_at, finished_at, exit_code,
                   output_tail, error, runs_on)
                 VALUES (?1, ?2, ?3, 'deploy', ?4, ?5, '{}', '[]', 600, ?6, ?7, ?8, ?9, ?10,
                   ?11, ?12, ?13)",
            )
            .unwrap();
        for n in 0..nodes {
            let id = 10_000 + n;
            let mac = format!(
                "52:54:01:{:02x}:{:02x}:{:02x}",
                n >> 16 & 0xff,
                n >> 8 & 0xff,
                n & 0xff
            );
            let bad = n < failed;
            node.execute(rusqlite::params![
                id,
                mac,
                format!("node-{id}"),
                if bad { "error" } else { "ready" },
                cluster
            ])
            .unwrap();
            inv.execute(rusqlite::params![
                id,
                crate::common::inventory(&mac).to_string()
            ])
            .unwrap();
            mac_row.execute(rusqlite::params![mac, id]).unwrap();
            for seq in 0..steps {
                let own = seq < 3;
                let status = match (bad, seq.cmp(&(steps / 2))) {
                    (true, std::cmp::Ordering::Equal) => "failed",
                    (true, std::cmp::Ordering::Greater) => "pending",
                    _ => "ok",
                };
                let done = status != "pending";
                run.execute(rusqlite::params![
                    dep,
                    id,
                    seq,
                    if own { "configure" } else { "run_tasks" },
                    (!own).then(|| format!("task-{seq}")),
                    status,
                    i64::from(done),
                    done.then_some(1000 + seq * 20),
                    done.then_some(1000 + seq * 20 + 7),
                    done.then_some(i64::from(status == "failed")),
                    if done {
                        "x".repeat(150) + "\ndone"
                    } else {
                        String::new()
                    },
                    (status == "failed").then_some("exit 1"),
                    if own { "ramdisk" } else { "os" },
                ])
                .unwrap();
            }
        }
    }
    tx.commit().unwrap();
    (cluster, dep)
}

#[test]
fn a_thousand_node_deployment_stays_a_short_page() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, dep) = big_deployment(&d, 1000, 40, 3);
    let html = page(&d, &format!("/deployments/{dep}"));
    // The three failed nodes first with their runs; the others one line each, 25 to a page.
    assert_eq!(html.matches("class=\"card flush dep-node\"").count(), 25);
    assert_eq!(rows(&html).len(), 3 * 40, "only the failed nodes' runs");
    assert!(html.contains("id=\"node-10000\""));
    assert!(
        html.contains("Nodes 1–25 of 1000 (page 1 of 40)"),
        "{}",
        &html[..2000]
    );
    assert!(html.contains("22 of the nodes below show one line"));
    assert!(html.len() < 400_000, "{} bytes", html.len());
    // A filter that keeps many runs still pages by node.
    let ok = page(&d, &format!("/deployments/{dep}?status=ok&page=40"));
    assert_eq!(rows(&ok).len(), 25 * 40);
    assert!(ok.len() < 1_500_000, "{} bytes", ok.len());
    let r = d.http().get(&format!("/deployments/{dep}?page=41"));
    assert_eq!(r.status, 200, "the last page instead");
    // The environment page and its timeline keep to 40 lanes.
    let env = page(&d, &format!("/environments/{cluster}/timeline"));
    assert_eq!(env.matches("<g class=\"tl-lane\">").count(), 40);
    assert!(env.contains("and 960 more nodes"), "{env}");
    assert!(env.len() < 1_500_000, "{} bytes", env.len());
    // A node's page reads its own runs only.
    let node = page(&d, "/nodes/10001");
    assert_eq!(rows(&node).len(), 40);
}

/// A run's id in an API answer.
fn run_ids(list: &Value) -> Vec<i64> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect()
}

#[test]
fn a_big_deployment_s_runs_come_in_pages() {
    let d = TestDaemon::start_bundled("install");
    // 12,000 runs: more than one answer carries.
    let (_, dep) = big_deployment(&d, 300, 40, 2);
    let http = d.http();
    let get = |path: &str| {
        let r = http.get(path);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        r.json()
    };
    let first = get(&format!("/api/v1/deployments/{dep}"));
    assert_eq!(first["steps"].as_array().unwrap().len(), 10_000);
    assert_eq!(first["steps_total"], 12_000);
    assert_eq!(first["runs"]["total"], 12_000, "counted over every run");
    assert_eq!(first["next_offset"], 10_000);
    let rest = get(&format!("/api/v1/deployments/{dep}?offset=10000"));
    assert_eq!(rest["steps"].as_array().unwrap().len(), 2_000);
    assert_eq!(rest["next_offset"], Value::Null, "the last page");
    let mut all = run_ids(&first["steps"]);
    all.extend(run_ids(&rest["steps"]));
    let mut unique = all.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), 12_000, "every run once, none twice");
    // Brief pages of the runs, by node then order as the full list.
    let mut paged = Vec::new();
    let mut offset = 0;
    loop {
        let page = get(&format!(
            "/api/v1/deployments/{dep}/runs?brief=1&limit=5000&offset={offset}"
        ));
        let runs = page["runs"].as_array().unwrap();
        assert!(runs.len() <= 5000);
        assert!(runs.iter().all(|r| r.get("output_tail").is_none()), "brief");
        paged.extend(run_ids(&page["runs"]));
        match page["next_offset"].as_u64() {
            Some(n) => offset = usize::try_from(n).unwrap(),
            None => break,
        }
    }
    assert_eq!(paged, all, "the same runs in the same order, page by page");
    // A filter pages over what it keeps.
    let failed = get(&format!("/api/v1/deployments/{dep}/runs?status=failed"));
    assert_eq!(failed["runs"].as_array().unwrap().len(), 2);
    assert_eq!(failed["next_offset"], Value::Null);
    // Bad paging is refused, naming the parameter.
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=10001", "limit"),
        ("limit=x", "limit"),
        ("offset=-1", "offset"),
    ] {
        for path in [
            format!("/api/v1/deployments/{dep}?{query}"),
            format!("/api/v1/deployments/{dep}/runs?{query}"),
        ] {
            let r = http.get(&path);
            assert_eq!(r.status, 400, "{path}: {}", r.body);
            assert!(r.body.contains(field), "{path}: {}", r.body);
        }
    }
    // The CLI reads every page: `deployment show -o json` has all 12,000 steps.
    let cli = crate::common::bin::stoker(std::env::temp_dir().as_path())
        .args(["deployment", "show", &dep.to_string(), "-o", "json"])
        .env("STOKER_URL", d.url(""))
        .env("STOKER_TOKEN", d.admin_token())
        .output()
        .unwrap();
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    let shown: Value = serde_json::from_slice(&cli.stdout).unwrap();
    assert_eq!(run_ids(&shown["steps"]), all);
}
