//! Dashboard pages rendered by the real server: navigation, counts from the database, the nodes
//! table, empty states and embedded assets.

use crate::common::{TestDaemon, inventory};

fn page(d: &TestDaemon, path: &str) -> String {
    let r = d.http().get(path);
    assert_eq!(r.status, 200, "{path}: {}", r.body);
    assert!(r.content_type.starts_with("text/html"), "{path}");
    r.body
}

#[test]
fn layout_has_navigation_on_every_page() {
    let d = TestDaemon::start();
    for (path, current) in [
        ("/", "Overview"),
        ("/nodes", "Nodes"),
        ("/environments", "Environments"),
        ("/releases", "Releases &amp; plugins"),
    ] {
        let html = page(&d, path);
        for link in [
            "href=\"/\"",
            "href=\"/nodes\"",
            "href=\"/environments\"",
            "href=\"/releases\"",
        ] {
            assert!(html.contains(link), "{path} lacks {link}");
        }
        let marked = html
            .split("aria-current=\"page\"")
            .nth(1)
            .expect("current page is marked");
        assert!(
            marked[..300.min(marked.len())].contains(current),
            "{path} marks {current}"
        );
        assert!(html.contains("/assets/css/stoker.css?v="), "{path}");
    }
}

#[test]
fn empty_states_say_what_to_do() {
    let d = TestDaemon::start();
    assert!(page(&d, "/").contains("No nodes yet"));
    let nodes = page(&d, "/nodes");
    assert!(nodes.contains("No nodes discovered"));
    assert!(nodes.contains("network boot"));
    assert!(!nodes.contains("<table"));
    assert!(page(&d, "/environments").contains("No release installed"));
    assert!(page(&d, "/releases").contains("No plugin is installed"));
}

#[test]
fn nodes_page_and_overview_show_database_state() {
    let d = TestDaemon::start();
    let http = d.http();
    for i in 1..=3 {
        let r = http.post(
            "/api/v1/agent/hello",
            &inventory(&format!("52:54:00:bb:00:0{i}")).to_string(),
        );
        assert_eq!(r.status, 201);
    }
    let overview = page(&d, "/");
    assert!(!overview.contains("No nodes yet"));
    let tile = |label: &str| {
        let at = overview
            .find(&format!(">{label}<"))
            .unwrap_or_else(|| panic!("no tile {label}"));
        let before = &overview[..at];
        let value_at = before.rfind("tile-value\">").unwrap() + "tile-value\">".len();
        before[value_at..].split('<').next().unwrap().to_string()
    };
    assert_eq!(tile("nodes"), "3");
    assert_eq!(tile("discover"), "3");
    assert_eq!(tile("ready"), "0");
    assert!(overview.contains("discovered 52:54:00:bb:00:03"));

    let nodes = page(&d, "/nodes");
    assert_eq!(nodes.matches("<tr>").count(), 4, "header + 3 nodes");
    for needle in [
        "52:54:00:bb:00:01",
        "badge badge-info\">discover<",
        "32 CPUs",
        "256.0 GiB",
        "2 disks, 3.9 TiB",
        "Dell Inc. PowerEdge R650",
        "href=\"/nodes/2\"",
    ] {
        assert!(nodes.contains(needle), "nodes page lacks {needle}");
    }
    // Their agents called seconds ago: said in seconds, not rounded to a minute.
    assert!(
        nodes.contains("just now") || nodes.contains(" s ago"),
        "{nodes}"
    );

    let node = page(&d, "/nodes/2");
    for needle in ["eno2", "PHYG0123", "7XK2QH3", "uefi", "10000 Mb/s"] {
        assert!(node.contains(needle), "node page lacks {needle}");
    }
}

#[test]
fn missing_pages_are_html_errors() {
    let d = TestDaemon::start();
    let r = d.http().get("/nodes/99");
    assert_eq!(r.status, 404);
    assert!(r.content_type.starts_with("text/html"));
    assert!(r.body.contains("node 99 not found"));
    let r = d.http().get("/nope");
    assert_eq!(r.status, 404);
    assert!(r.body.contains("There is no page at /nope."));
}

#[test]
fn assets_are_embedded() {
    let d = TestDaemon::start();
    let css = d.http().get("/assets/css/stoker.css");
    assert_eq!(css.status, 200);
    assert!(css.content_type.starts_with("text/css"));
    assert!(css.body.contains(".badge-error"));
    let svg = d.http().get("/assets/icons/sprite.svg");
    assert_eq!(svg.status, 200);
    assert!(svg.content_type.starts_with("image/svg+xml"));
    for id in ["flame", "overview", "server", "layers", "package"] {
        assert!(svg.body.contains(&format!("id=\"{id}\"")), "{id}");
    }
    assert_eq!(d.http().get("/assets/nope.css").status, 404);
}

#[test]
fn markup_is_escaped() {
    let d = TestDaemon::start();
    let mut inv = inventory("52:54:00:cc:00:01");
    inv["system"]["vendor"] = serde_json::json!("<script>alert(1)</script>");
    assert_eq!(
        d.http()
            .post("/api/v1/agent/hello", &inv.to_string())
            .status,
        201
    );
    let html = page(&d, "/nodes");
    assert!(!html.contains("<script>alert(1)"));
    assert!(html.contains("&#60;script&#62;") || html.contains("&lt;script&gt;"));
}
