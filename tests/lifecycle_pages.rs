//! The dashboard's lifecycle forms against the real daemon (real SQLite, loopback): bulk node
//! actions reviewed then done, an environment deleted after its confirmation, the Settings and
//! Network forms saved and refused by field, a plugin uploaded and removed from the Releases
//! page (admin only), a node renamed, Deploy and Abort asking first without JavaScript; each
//! action's notice on the page it leads to, and nothing written by a refusal.

use serde_json::{Value, json};

use crate::common::{Resp, TestDaemon, form_login, inventory, urlencode};

/// Discover a node with MAC `mac`: its id.
fn discover(d: &TestDaemon, mac: &str) -> i64 {
    let r = d
        .http()
        .post("/api/v1/agent/hello", &inventory(mac).to_string());
    assert_eq!(r.status, 201, "{}", r.body);
    r.json()["node"]["id"].as_i64().unwrap()
}

fn node(d: &TestDaemon, id: i64) -> Value {
    let r = d.http().get(&format!("/api/v1/nodes/{id}"));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn name(d: &TestDaemon, id: i64) -> String {
    node(d, id)["name"].as_str().unwrap().to_string()
}

/// The notice a page shows (the text of its `#notice` box), or "".
fn notice(r: &Resp) -> String {
    r.body
        .split("id=\"notice\"><p>")
        .nth(1)
        .and_then(|rest| rest.split("</p>").next())
        .unwrap_or_default()
        .to_string()
}

/// A user of `role`, signed in to the dashboard: its session cookie and CSRF token.
fn page_user(d: &TestDaemon, name: &str, role: &str) -> (String, String) {
    d.user_token(name, role);
    form_login(&d.url(""), name, &format!("{name}-password-123"))
}

/// POST a form as the user whose session is `session`: the status.
fn post_as(d: &TestDaemon, session: &str, path: &str, form: &str) -> u16 {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    agent
        .post(d.url(path))
        .header("cookie", &format!("stoker_session={session}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .send(form)
        .unwrap()
        .status()
        .as_u16()
}

#[test]
fn bulk_actions_are_reviewed_then_done_with_a_notice() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let env = d.new_environment("prod");
    let a = discover(&d, "52:54:00:e1:00:01");
    let b = discover(&d, "52:54:00:e1:00:02");
    let c = discover(&d, "52:54:00:e1:00:03");
    let assigned = |id| node(&d, id)["assigned_roles"].clone();

    // The review: the release's roles as a picker, the nodes named; nothing done yet.
    let review = http.get(&format!(
        "/nodes/bulk?do=assign&nodes={a}&nodes={b}&to_env={env}"
    ));
    assert_eq!(review.status, 200, "{}", review.body);
    for needle in [
        "Assign 2 nodes",
        r#"name="roles" value="controller""#,
        r#"name="roles" value="compute""#,
        r#"name="confirmed" value="1""#,
        &format!(r#"href="/nodes/{a}""#),
    ] {
        assert!(review.body.contains(needle), "{needle}: {}", review.body);
    }
    assert_eq!(assigned(a), json!([]));
    // A form that skipped the review is sent to it.
    let skip = format!("do=assign&nodes={a}&nodes={b}&to_env={env}&roles=compute");
    let r = http.post_form("/nodes/bulk", &skip);
    assert_eq!(r.status, 303, "{}", r.body);
    assert!(
        r.location
            .as_deref()
            .unwrap_or_default()
            .starts_with("/nodes/bulk?do=assign"),
        "{:?}",
        r.location
    );
    assert_eq!(assigned(a), json!([]), "nothing before the confirmation");

    // A role the release does not have is refused by name, and nothing is written.
    let r = http.submit("/nodes/bulk", &format!("{skip}&roles=nope&confirmed=1"));
    let n = notice(&r);
    assert!(n.starts_with("Not assigned: "), "{n}");
    assert!(n.contains("unknown role &#34;nope&#34;"), "{n}");
    assert_eq!((assigned(a), assigned(b)), (json!([]), json!([])));

    // Confirmed: both assigned, the notice names them.
    let r = http.submit(
        "/nodes/bulk",
        &format!("{skip}&confirmed=1&back=/environments/{env}"),
    );
    let n = notice(&r);
    assert!(n.starts_with("Assigned as compute: 2 done ("), "{n}");
    assert!(n.contains(&name(&d, a)), "{n}");
    assert!(r.body.contains("<h1>prod"), "back to the environment");
    assert_eq!(
        (assigned(a), assigned(b)),
        (json!(["compute"]), json!(["compute"]))
    );

    // The members table's "Roles…" link: the review of an assigned node with its roles ticked.
    let env_page = http.get(&format!("/environments/{env}")).body;
    let link = format!("/nodes/bulk?do=assign&amp;nodes={a}&amp;to_env={env}");
    assert!(env_page.contains(&link), "{env_page}");
    let review = http.get(&link.replace("&amp;", "&"));
    assert_eq!(review.status, 200, "{}", review.body);
    assert!(
        review
            .body
            .contains(r#"name="roles" value="compute" checked"#),
        "{}",
        review.body
    );
    assert!(!review.body.contains("left as it is"), "{}", review.body);
    let r = http.submit(
        "/nodes/bulk",
        &format!("do=assign&nodes={a}&to_env={env}&roles=compute&roles=cinder&confirmed=1"),
    );
    assert!(
        notice(&r).starts_with("Assigned as compute, cinder: 1 done"),
        "{}",
        notice(&r)
    );
    assert_eq!(assigned(a), json!(["compute", "cinder"]));
    assert_eq!(assigned(b), json!(["compute"]), "only the ticked node");

    // Delete: the free node goes, the assigned one is left with why.
    let review = http.get(&format!("/nodes/bulk?do=delete&nodes={a}&nodes={c}"));
    assert!(review.body.contains("Delete 2 nodes?"), "{}", review.body);
    assert!(review.body.contains("left as it is"), "{}", review.body);
    let (name_a, name_c) = (name(&d, a), name(&d, c));
    let r = http.submit(
        "/nodes/bulk",
        &format!("do=delete&nodes={a}&nodes={c}&confirmed=1"),
    );
    assert_eq!(
        notice(&r),
        format!(
            "Deleted: 1 done ({name_c}). 1 not:\n{name_a}: in environment prod: remove it from \
             there first"
        )
    );
    assert_eq!(http.get(&format!("/api/v1/nodes/{c}")).status, 404);
    assert_eq!(http.get(&format!("/api/v1/nodes/{a}")).status, 200);

    // Power: a node without a BMC is refused, saying so, as an error.
    let r = http.submit(
        "/nodes/bulk",
        &format!("do=power&act=on&nodes={b}&confirmed=1"),
    );
    assert!(r.body.contains("notice notice-error"), "{}", r.body);
    assert_eq!(
        notice(&r),
        format!("Power on: 0 done. 1 not:\n{}: no BMC", name(&d, b))
    );

    // Remove from the environment, chosen by a filter ("all matching").
    let r = http.submit(
        "/nodes/bulk",
        &format!("do=unassign&all=1&env={env}&confirmed=1"),
    );
    assert!(
        notice(&r).starts_with("Removed from their environments (a node with an installed OS is erased at the next Deploy): 2 done"),
        "{}",
        notice(&r)
    );
    assert_eq!(node(&d, b)["cluster"], Value::Null);

    // Hostile input: each refusal names its field, nothing panics, nothing is done.
    for (form, says) in [
        (
            "do=delete&nodes=x&confirmed=1",
            "nodes: &#34;x&#34; is not a node id",
        ),
        (
            "do=explode&nodes=1&confirmed=1",
            "do: no bulk action &#34;explode&#34;",
        ),
        (
            "do=power&act=melt&nodes=1&confirmed=1",
            "act: no power action &#34;melt&#34;",
        ),
        (
            "do=assign&nodes=1&confirmed=1",
            "to_env: choose the environment",
        ),
        (
            "do=assign&nodes=1&to_env=-3&confirmed=1",
            "to_env: &#34;-3&#34; is not an environment id",
        ),
        (
            "do=delete&all=1&status=gone&confirmed=1",
            "status: no node status",
        ),
        (
            "do=delete&nodes=1&colour=red&confirmed=1",
            "colour: a bulk action takes",
        ),
    ] {
        let r = http.submit("/nodes/bulk", form);
        let n = notice(&r);
        assert!(n.starts_with("Nothing done: "), "{form}: {n}");
        assert!(n.contains(says), "{form}: {n}");
    }
    // A foreign place to go back to is not followed.
    let r = http.post_form(
        "/nodes/bulk",
        &format!(
            "do=delete&nodes={b}&confirmed=1&back={}",
            urlencode("https://evil.example/")
        ),
    );
    assert_eq!(r.location.as_deref(), Some("/nodes"));
    assert_eq!(
        http.get(&format!("/api/v1/nodes/{b}")).status,
        404,
        "b was free"
    );

    // A viewer may neither review nor act.
    let (session, csrf) = page_user(&d, "vera", "viewer");
    assert_eq!(
        post_as(
            &d,
            &session,
            "/nodes/bulk",
            &format!("do=delete&nodes={a}&confirmed=1&csrf={csrf}")
        ),
        403
    );
    assert_eq!(http.get(&format!("/api/v1/nodes/{a}")).status, 200);
}

#[test]
fn an_environment_is_deleted_after_its_confirmation() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let (env, ids) = d.environment(&["controller", "compute"], 2);
    let page = http.get(&format!("/environments/{env}")).body;
    assert!(
        page.contains(&format!(r#"href="/environments/{env}/delete""#)),
        "{page}"
    );
    let review = http.get(&format!("/environments/{env}/delete"));
    assert_eq!(review.status, 200, "{}", review.body);
    assert!(
        review.body.contains("Delete environment env?"),
        "{}",
        review.body
    );
    assert!(
        review.body.contains("Its 2 nodes leave it"),
        "{}",
        review.body
    );
    // Posted without the review's confirmation: to the review, nothing deleted.
    let r = http.post_form(&format!("/environments/{env}/delete"), "");
    assert_eq!(r.status, 303);
    assert_eq!(
        r.location.as_deref(),
        Some(format!("/environments/{env}/delete").as_str())
    );
    assert_eq!(http.get(&format!("/api/v1/clusters/{env}")).status, 200);
    // An operator of another kind may not; a viewer is refused.
    let (session, csrf) = page_user(&d, "vera", "viewer");
    assert_eq!(
        post_as(
            &d,
            &session,
            &format!("/environments/{env}/delete"),
            &format!("confirmed=1&csrf={csrf}")
        ),
        403
    );
    // While it deploys, the deletion is refused, saying why, on its page.
    let r = http.post(&format!("/api/v1/clusters/{env}/deploy"), "{}");
    assert_eq!(r.status, 202, "{}", r.body);
    let dep = r.json()["id"].as_i64().unwrap();
    let r = http.submit(&format!("/environments/{env}/delete"), "confirmed=1");
    assert!(notice(&r).starts_with("Not deleted: "), "{}", notice(&r));
    assert!(notice(&r).contains("abort it first"), "{}", notice(&r));
    assert_eq!(http.get(&format!("/api/v1/clusters/{env}")).status, 200);
    // Abort asks first too (the no-JavaScript path), then aborts.
    let abort = format!("/environments/{env}/deployments/{dep}/abort");
    let r = http.post_form(&abort, "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body.contains(&format!("Abort deployment {dep}?")),
        "{}",
        r.body
    );
    assert_eq!(
        http.get(&format!("/api/v1/transactions/{dep}")).json()["status"],
        "running"
    );
    let r = http.submit(&abort, "confirmed=1");
    assert!(notice(&r).contains("aborted"), "{}", notice(&r));
    // Now it goes, and its nodes are free.
    let r = http.submit(&format!("/environments/{env}/delete"), "confirmed=1");
    assert_eq!(
        notice(&r),
        "Environment env deleted; its nodes are free again."
    );
    assert!(r.body.contains("aria-current=\"page\"><svg"), "the list");
    assert_eq!(http.get(&format!("/api/v1/clusters/{env}")).status, 404);
    for id in ids {
        assert_eq!(node(&d, id)["cluster"], Value::Null);
    }
}

#[test]
fn deploy_asks_first_without_javascript_and_a_created_environment_opens() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let r = http.post_form("/environments", "name=lab&release_id=1");
    assert_eq!(r.status, 303);
    let env = http.get("/api/v1/clusters").json()[0]["id"]
        .as_i64()
        .unwrap();
    assert_eq!(
        r.location.as_deref(),
        Some(format!("/environments/{env}").as_str()),
        "a created environment opens"
    );
    let a = discover(&d, "52:54:00:e3:00:01");
    let r = http.submit(
        &format!("/environments/{env}/nodes"),
        &format!("nodes={a}&roles=controller"),
    );
    assert_eq!(notice(&r), "1 node added as controller.");
    assert!(r.body.contains("data-confirm=\"Deploy lab?"), "{}", r.body);
    // Without the confirmation: the question, and no deployment.
    let r = http.post_form(&format!("/environments/{env}/deploy"), "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("Deploy environment lab?"), "{}", r.body);
    assert!(
        r.body.contains(r#"name="confirmed" value="1""#),
        "{}",
        r.body
    );
    let deployments = || {
        http.get(&format!("/api/v1/clusters/{env}/deployments"))
            .json()
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(deployments(), 0);
    // The add form's refusals, each named.
    for (form, says) in [
        (
            "roles=controller".to_string(),
            "nodes: tick at least one node",
        ),
        (format!("nodes={a}"), "roles: tick at least one role"),
        ("nodes=abc&roles=controller".to_string(), "node"),
    ] {
        let r = http.submit(&format!("/environments/{env}/nodes"), &form);
        assert!(
            notice(&r).starts_with("Not added: "),
            "{form}: {}",
            notice(&r)
        );
        assert!(notice(&r).contains(says), "{form}: {}", notice(&r));
    }
    let r = http.submit(&format!("/environments/{env}/deploy"), "confirmed=1");
    assert!(notice(&r).starts_with("Deployment "), "{}", notice(&r));
    assert_eq!(deployments(), 1);
}

#[test]
fn a_node_is_renamed_from_its_page_with_the_apis_rules() {
    let d = TestDaemon::start();
    let http = d.http();
    let a = discover(&d, "52:54:00:e4:00:01");
    let before = name(&d, a);
    let page = http.get(&format!("/nodes/{a}")).body;
    assert!(
        page.contains(&format!(r#"action="/nodes/{a}/name""#)),
        "{page}"
    );
    assert!(
        page.contains(r#"<label for="node-name">Name</label>"#),
        "{page}"
    );
    let r = http.submit(&format!("/nodes/{a}/name"), "name=db-1");
    assert_eq!(notice(&r), format!("{before} renamed db-1."));
    assert_eq!(name(&d, a), "db-1");
    assert!(r.body.contains("<h1>db-1"), "{}", r.body);
    // Refused as the API refuses, naming the field; nothing changes.
    let long = "x".repeat(101);
    for form in ["name=", "name=+++", &format!("name={long}"), "other=1"] {
        let r = http.submit(&format!("/nodes/{a}/name"), form);
        let n = notice(&r);
        assert!(n.starts_with("Not renamed: "), "{form}: {n}");
        assert!(n.contains("name"), "{form}: {n}");
        assert_eq!(name(&d, a), "db-1");
    }
    // Markup in a name is only ever text.
    let r = http.submit(
        &format!("/nodes/{a}/name"),
        &format!("name={}", urlencode("<b>x</b>")),
    );
    assert!(!r.body.contains("<b>x</b>"), "{}", r.body);
    assert_eq!(name(&d, a), "<b>x</b>");
    // An unknown node is not found.
    assert_eq!(http.post_form("/nodes/999/name", "name=a").status, 404);
}

/// A plugin package for the Settings page's tests: `name` (`title`) 1.0.0 for the bundled release, no
/// tasks, its attributes `environment_config`.
fn settings_plugin(name: &str, title: &str, environment_config: &str) -> Vec<u8> {
    let mut m = stoker::engine::plugin::MemFiles::new();
    m.add(
        "metadata.yaml",
        format!(
            "name: {name}\ntitle: {title}\nversion: '1.0.0'\ndescription: restrictions\n\
             package_version: '5.0.0'\nlicenses: ['Apache License Version 2.0']\n\
             authors: ['stoker']\nhomepage: 'https://example.org'\ngroups: []\n\
             is_hotpluggable: false\nreleases:\n  - os: ubuntu\n    version: newton-10.0\n\
             \x20   deployment_scripts_path: deployment_scripts/\n\
             \x20   repository_path: repositories/ubuntu\n"
        ),
    )
    .unwrap();
    m.add("deployment_tasks.yaml", "[]\n").unwrap();
    m.add("environment_config.yaml", environment_config)
        .unwrap();
    m.add_dir("deployment_scripts").unwrap();
    m.add_dir("repositories/ubuntu").unwrap();
    crate::common::build(&m, &format!("{name}-1.0.0"))
}

/// The Settings page's plugin: a text attribute a restriction disables while OpenStack debug
/// logging is off.
fn guarded_plugin() -> Vec<u8> {
    settings_plugin(
        "guarded",
        "Guarded",
        "attributes:\n\
         \x20 metadata: {label: Guarded, weight: 90, group: other}\n\
         \x20 note:\n\
         \x20   value: ''\n\
         \x20   label: Note\n\
         \x20   type: text\n\
         \x20   weight: 10\n\
         \x20   restrictions:\n\
         \x20     - condition: \"settings:common.debug.value == false\"\n\
         \x20       message: Turn on OpenStack debug logging first\n",
    )
}

/// POST a multipart upload of `package` to the Releases page's form as `session` with `csrf`.
fn upload(d: &TestDaemon, session: &str, csrf: &str, package: &[u8]) -> Resp {
    let boundary = "stokerTestBoundary7";
    let mut body = format!(
        "--{boundary}\r\ncontent-disposition: form-data; name=\"csrf\"\r\n\r\n{csrf}\r\n\
         --{boundary}\r\ncontent-disposition: form-data; name=\"package\"; \
         filename=\"guarded-1.0-1.0.0-1.noarch.fp\"\r\ncontent-type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(package);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    let mut r = agent
        .post(d.url("/releases/plugins"))
        .header("cookie", &format!("stoker_session={session}"))
        .header(
            "content-type",
            &format!("multipart/form-data; boundary={boundary}"),
        )
        .send(&body[..])
        .unwrap();
    Resp {
        status: r.status().as_u16(),
        content_type: String::new(),
        location: r
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        cookies: r
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| v.split(';').next())
            .map(str::to_string)
            .collect(),
        body: r.body_mut().read_to_string().unwrap(),
    }
}

/// Follow a 303 the way `Http::submit` does, with its notice cookie.
fn follow(d: &TestDaemon, r: &Resp) -> Resp {
    assert_eq!(r.status, 303, "{}", r.body);
    let creds = crate::common::credentials(&d.url("")).unwrap();
    let cookie = std::iter::once(format!("stoker_session={}", creds.session))
        .chain(r.cookies.iter().cloned())
        .collect::<Vec<_>>()
        .join("; ");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    let mut resp = agent
        .get(d.url(r.location.as_deref().unwrap()))
        .header("cookie", &cookie)
        .call()
        .unwrap();
    Resp {
        status: resp.status().as_u16(),
        content_type: String::new(),
        location: None,
        cookies: Vec::new(),
        body: resp.body_mut().read_to_string().unwrap(),
    }
}

#[test]
fn plugins_are_installed_and_removed_from_the_releases_page_by_admins_only() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let package = guarded_plugin();
    let page = http.get("/releases").body;
    assert!(page.contains(r#"enctype="multipart/form-data""#), "{page}");
    // A viewer and an operator are refused, and nothing is installed.
    for (user, role) in [("vera", "viewer"), ("otto", "operator")] {
        let (session, csrf) = page_user(&d, user, role);
        assert_eq!(upload(&d, &session, &csrf, &package).status, 403, "{role}");
    }
    let plugins = || {
        http.get("/api/v1/plugins")
            .json()
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["name"] == "guarded")
            .count()
    };
    assert_eq!(plugins(), 0);
    // Without the CSRF token first, refused.
    let creds = crate::common::credentials(&d.url("")).unwrap();
    assert_eq!(upload(&d, &creds.session, "stale", &package).status, 403);
    // Not a package: refused with a notice, nothing installed.
    let r = follow(&d, &upload(&d, &creds.session, &creds.csrf, b"not gzip"));
    assert!(r.body.contains("notice notice-error"), "{}", r.body);
    assert!(
        notice(&r).contains("not installed: not gzip data"),
        "{}",
        notice(&r)
    );
    assert_eq!(plugins(), 0);
    // The admin installs it.
    let r = follow(&d, &upload(&d, &creds.session, &creds.csrf, &package));
    assert!(
        notice(&r).starts_with("Installed plugin guarded 1.0.0"),
        "{}",
        notice(&r)
    );
    assert_eq!(plugins(), 1);
    let id = http
        .get("/api/v1/plugins")
        .json()
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "guarded")
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    assert!(
        r.body
            .contains(&format!(r#"href="/releases/plugins/{id}/remove""#)),
        "{}",
        r.body
    );
    // Its removal: reviewed, refused to others, asked again when posted without the review.
    let review = http.get(&format!("/releases/plugins/{id}/remove"));
    assert_eq!(review.status, 200, "{}", review.body);
    assert!(
        review.body.contains("Remove Guarded 1.0.0?"),
        "{}",
        review.body
    );
    let (session, csrf) = page_user(&d, "opal", "operator");
    assert_eq!(
        post_as(
            &d,
            &session,
            &format!("/releases/plugins/{id}/remove"),
            &format!("confirmed=1&csrf={csrf}")
        ),
        403
    );
    let r = http.post_form(&format!("/releases/plugins/{id}/remove"), "");
    assert_eq!(r.status, 303);
    assert_eq!(
        r.location.as_deref(),
        Some(format!("/releases/plugins/{id}/remove").as_str())
    );
    assert_eq!(plugins(), 1);
    let r = http.submit(&format!("/releases/plugins/{id}/remove"), "confirmed=1");
    assert_eq!(notice(&r), "Removed guarded 1.0.0 and its files.");
    assert_eq!(plugins(), 0);
}

/// The form fields a page's form named `action` sends as it is (hidden, text, checked
/// checkboxes, textareas, selected options), without the CSRF token.
fn form_fields(html: &str, action: &str) -> Vec<(String, String)> {
    let start = html
        .find(&format!(r#"action="{action}""#))
        .unwrap_or_else(|| panic!("no form {action}"));
    let form = &html[start..start + html[start..].find("</form>").unwrap()];
    let attr = |tag: &str, key: &str| {
        let m = format!(" {key}=\"");
        tag.find(&m).map(|i| {
            let rest = &tag[i + m.len()..];
            unescape(&rest[..rest.find('"').unwrap()])
        })
    };
    let mut out = Vec::new();
    for piece in form.split('<').skip(1) {
        let tag = &piece[..piece.find('>').unwrap_or(piece.len())];
        if tag.starts_with("input") {
            let (Some(name), ty) = (attr(tag, "name"), attr(tag, "type").unwrap_or_default())
            else {
                continue;
            };
            if name == "csrf" || tag.contains(" disabled") {
                continue;
            }
            if (ty == "checkbox" || ty == "radio") && !tag.contains(" checked") {
                continue;
            }
            out.push((name, attr(tag, "value").unwrap_or_default()));
        } else if tag.starts_with("textarea") {
            if let Some(name) = attr(tag, "name") {
                let text = &piece[piece.find('>').unwrap() + 1..];
                out.push((name, unescape(text)));
            }
        } else if tag.starts_with("select") {
            let name = attr(tag, "name").unwrap();
            let rest = &form[form.find(tag).unwrap()..];
            let rest = &rest[..rest.find("</select>").unwrap()];
            let chosen = rest
                .split("<option")
                .skip(1)
                .find(|o| o.contains(" selected"))
                .or_else(|| rest.split("<option").nth(1))
                .and_then(|o| attr(o, "value"))
                .unwrap_or_default();
            out.push((name, chosen));
        }
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&#34;", "\"")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&#60;", "<")
        .replace("&gt;", ">")
        .replace("&#62;", ">")
        .replace("&amp;", "&")
}

fn encode(fields: &[(String, String)]) -> String {
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", urlencode(k), urlencode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn with(fields: &[(String, String)], key: &str, value: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = fields.iter().filter(|(k, _)| k != key).cloned().collect();
    out.push((key.to_string(), value.to_string()));
    out
}

#[test]
fn settings_are_saved_from_the_generated_form_with_restrictions_honoured() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let (status, body) = d.post_package(&guarded_plugin());
    assert_eq!(status, 201, "{body}");
    let env = d.new_environment("prod");
    let path = format!("/environments/{env}/settings");
    let settings = || http.get(&format!("/api/v1/clusters/{env}/settings")).json();
    let page = http.get(&path);
    assert_eq!(page.status, 200, "{}", page.body);
    for needle in [
        "OpenStack debug logging",
        "Guarded",
        "Turn on OpenStack debug logging first",
        r#"name="v.common.debug""#,
        r#"name="v.access.user""#,
    ] {
        assert!(page.body.contains(needle), "{needle}: {}", page.body);
    }
    let fields = form_fields(&page.body, &path);
    assert!(fields.iter().any(|(k, _)| k == "g.guarded"), "{fields:?}");
    // The page as it is, saved: the notice, and nothing changed.
    let before = settings();
    let r = http.submit(&path, &encode(&fields));
    assert_eq!(notice(&r), "Settings of prod saved.");
    assert_eq!(settings(), before);

    // The restricted note may not change while debug logging is off: refused naming it.
    let on = with(&fields, "g.guarded", "1");
    let r = http.post_form(&path, &encode(&with(&on, "v.guarded.note", "hello")));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.contains("Settings not saved: 1 value refused"),
        "{}",
        r.body
    );
    assert!(r.body.contains("note"), "{}", r.body);
    assert_eq!(settings(), before, "a refusal writes nothing");
    // A bad value of the release's own attribute is refused next to it.
    let r = http.post_form(&path, &encode(&with(&fields, "v.access.user", "nova")));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("Invalid username"), "{}", r.body);
    assert!(
        r.body.contains("value=\"nova\""),
        "the value as sent: {}",
        r.body
    );
    assert_eq!(settings(), before);

    // Debug logging on and the plugin enabled: then the note may change.
    let r = http.submit(&path, &encode(&with(&on, "v.common.debug", "1")));
    assert_eq!(notice(&r), "Settings of prod saved.");
    let page = http.get(&path).body;
    assert!(
        page.contains(r#"data-when="0" hidden>Turn on OpenStack debug logging first<"#),
        "the message is kept for the browser, not shown: {page}"
    );
    let fields = form_fields(&page, &path);
    let r = http.submit(&path, &encode(&with(&fields, "v.guarded.note", "hello")));
    assert_eq!(notice(&r), "Settings of prod saved.");
    let s = settings().to_string();
    assert!(s.contains("hello"), "{s}");
    // A viewer sees the page but may not save.
    let (session, csrf) = page_user(&d, "vera", "viewer");
    assert_eq!(
        post_as(
            &d,
            &session,
            &path,
            &format!("{}&csrf={csrf}", encode(&fields))
        ),
        403
    );
}

/// A plugin for the Settings page's restrictions: a section a restriction disables while the
/// administrator's tenant is `frozen`, a setting shown only when `mode` is `fancy`, and one a
/// constant restriction always hides.
fn veiled_plugin() -> Vec<u8> {
    settings_plugin(
        "veiled",
        "Veiled",
        "attributes:\n\
         \x20 metadata:\n\
         \x20   label: Veiled\n\
         \x20   weight: 91\n\
         \x20   group: other\n\
         \x20   restrictions:\n\
         \x20     - condition: \"settings:access.tenant.value == 'frozen'\"\n\
         \x20       message: The tenant is frozen\n\
         \x20 mode:\n\
         \x20   value: plain\n\
         \x20   label: Mode\n\
         \x20   type: radio\n\
         \x20   weight: 10\n\
         \x20   values: [{data: plain, label: Plain}, {data: fancy, label: Fancy}]\n\
         \x20 flourish:\n\
         \x20   value: ''\n\
         \x20   label: Flourish\n\
         \x20   type: text\n\
         \x20   weight: 20\n\
         \x20   restrictions:\n\
         \x20     - condition: \"settings:veiled.mode.value != 'fancy'\"\n\
         \x20       action: hide\n\
         \x20 never:\n\
         \x20   value: ''\n\
         \x20   label: Never shown\n\
         \x20   type: text\n\
         \x20   weight: 30\n\
         \x20   restrictions:\n\
         \x20     - condition: 'true'\n\
         \x20       action: hide\n",
    )
}

/// The opening tag of the Settings field that holds the control named `name`.
fn field_tag(html: &str, name: &str) -> String {
    html.split("<div class=\"field setting")
        .skip(1)
        .find(|piece| {
            let end = piece.find("<div class=\"field").unwrap_or(piece.len());
            piece[..end].contains(&format!("name=\"{name}\""))
        })
        .map(|piece| {
            format!(
                "<div class=\"field setting{}",
                &piece[..piece.find('>').unwrap()]
            )
        })
        .unwrap_or_else(|| panic!("no field {name}"))
}

/// The opening tag of the Settings section `key`.
fn section_tag(html: &str, key: &str) -> String {
    html.split("<fieldset class=\"settings-section")
        .skip(1)
        .map(|piece| {
            format!(
                "<fieldset class=\"settings-section{}",
                &piece[..piece.find('>').unwrap()]
            )
        })
        .find(|tag| tag.contains(&format!("id=\"s-{key}\"")))
        .unwrap_or_else(|| panic!("no section {key}"))
}

/// The opening tag of the element with `id`.
fn tag_with_id(html: &str, id: &str) -> String {
    let at = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no element {id}"));
    let start = html[..at].rfind('<').unwrap();
    html[start..at + html[at..].find('>').unwrap()].to_string()
}

/// The JSON of a tag's `data-restrict`.
fn restrict(tag: &str) -> Value {
    let m = " data-restrict=\"";
    let i = tag
        .find(m)
        .unwrap_or_else(|| panic!("no data-restrict: {tag}"));
    let rest = &tag[i + m.len()..];
    serde_json::from_str(&unescape(&rest[..rest.find('"').unwrap()])).unwrap()
}

#[test]
fn settings_restrictions_hide_and_disable_and_go_to_the_page_for_the_browser() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let (status, body) = d.post_package(&veiled_plugin());
    assert_eq!(status, 201, "{body}");
    let env = d.new_environment("prod");
    let path = format!("/environments/{env}/settings");
    let settings = || http.get(&format!("/api/v1/clusters/{env}/settings")).json();
    let page = http.get(&path).body;
    assert!(
        page.contains(r#"<script src="/assets/js/settings.js"#),
        "{page}"
    );
    assert!(page.contains(" data-live"), "an operator's form is live");
    let js = http.get("/assets/js/settings.js");
    assert_eq!(js.status, 200);

    // Switched off (a plugin is, until enabled): the section says so and its fields are
    // disabled, so the form does not send them.
    let section = section_tag(&page, "veiled");
    assert!(section.contains("settings-section off"), "{section}");
    assert!(!section.contains(" hidden"), "{section}");
    let mode = field_tag(&page, "v.veiled.mode");
    assert!(mode.contains(" disabled"), "{mode}");
    assert!(
        page.contains(r#"type="radio" name="v.veiled.mode" value="plain" checked disabled"#),
        "{page}"
    );
    // The section's own restriction reads a setting of the form: it goes to the page, its
    // message hidden while it does not hold.
    assert_eq!(
        restrict(&section),
        json!([{"a": "disable", "c": ["==", ["s", "access.tenant.value", "admin"],
                                            ["v", "frozen"]]}])
    );
    assert!(
        page.contains(r#"<p class="note" data-when="0" hidden>The tenant is frozen</p>"#),
        "{page}"
    );
    // Hidden while mode is not fancy: rendered for the browser, not shown, not sent.
    let flourish = field_tag(&page, "v.veiled.flourish");
    assert!(flourish.contains(" hidden"), "{flourish}");
    assert_eq!(
        restrict(&flourish),
        json!([{"a": "hide", "c": ["!=", ["s", "veiled.mode.value", "plain"], ["v", "fancy"]]}])
    );
    assert!(tag_with_id(&page, "f-veiled-flourish").contains(" disabled"));
    // A constant restriction is the server's alone: never shown, no tree.
    assert!(!page.contains("v.veiled.never"), "{page}");
    let fields = form_fields(&page, &path);
    assert!(
        !fields.iter().any(|(k, _)| k.starts_with("v.veiled.")),
        "{fields:?}"
    );

    // A hidden value may not change.
    let on = with(&fields, "g.veiled", "1");
    let r = http.post_form(&path, &encode(&with(&on, "v.veiled.flourish", "x")));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("cannot be changed"), "{}", r.body);
    // Switched on and fancy: the section's fields are enabled, flourish is shown.
    let r = http.submit(&path, &encode(&with(&on, "v.veiled.mode", "fancy")));
    assert_eq!(notice(&r), "Settings of prod saved.");
    let page = http.get(&path).body;
    let section = section_tag(&page, "veiled");
    assert!(!section.contains(" off"), "{section}");
    let flourish = field_tag(&page, "v.veiled.flourish");
    assert!(
        !flourish.contains(" hidden") && !flourish.contains(" disabled"),
        "{flourish}"
    );
    assert!(!tag_with_id(&page, "f-veiled-flourish").contains(" disabled"));
    let fields = form_fields(&page, &path);
    let r = http.submit(&path, &encode(&with(&fields, "v.veiled.flourish", "x")));
    assert_eq!(notice(&r), "Settings of prod saved.");

    // The tenant frozen: the section's restriction disables the section and its fields, its
    // message shown; a value of it may not change.
    let fields = form_fields(&http.get(&path).body, &path);
    let r = http.submit(&path, &encode(&with(&fields, "v.access.tenant", "frozen")));
    assert_eq!(notice(&r), "Settings of prod saved.");
    let page = http.get(&path).body;
    let section = section_tag(&page, "veiled");
    assert!(section.contains(" disabled"), "{section}");
    assert!(
        page.contains(r#"<p class="note" data-when="0">The tenant is frozen</p>"#),
        "{page}"
    );
    assert!(tag_with_id(&page, "t-veiled").contains(" disabled"));
    assert!(tag_with_id(&page, "f-veiled-flourish").contains(" disabled"));
    assert!(field_tag(&page, "v.veiled.flourish").contains(" disabled"));
    let before = settings();
    let fields = form_fields(&page, &path);
    let r = http.post_form(&path, &encode(&with(&fields, "v.veiled.flourish", "y")));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body
            .contains("cannot be changed: its section is restricted: The tenant is frozen"),
        "{}",
        r.body
    );
    assert_eq!(settings(), before, "a refusal writes nothing");
    // The page as it is still saves: the disabled fields are not sent, their values kept.
    let r = http.submit(&path, &encode(&fields));
    assert_eq!(notice(&r), "Settings of prod saved.");
    assert_eq!(settings(), before);
    assert_eq!(
        settings()["veiled"]["flourish"],
        json!("x"),
        "{}",
        settings()
    );

    // A viewer's form is not live.
    let (session, _) = page_user(&d, "vera", "viewer");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let viewer = agent
        .get(d.url(&path))
        .header("cookie", &format!("stoker_session={session}"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(viewer.contains("settings-form"), "{viewer}");
    assert!(!viewer.contains(" data-live"), "{viewer}");
}

#[test]
fn network_settings_are_saved_and_refused_by_field() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let env = d.new_environment("prod");
    let path = format!("/environments/{env}/network");
    let config = || {
        http.get(&format!(
            "/api/v1/clusters/{env}/network_configuration/neutron"
        ))
        .json()
    };
    let page = http.get(&path);
    assert_eq!(page.status, 200, "{}", page.body);
    let fields = form_fields(&page.body, &path);
    assert!(
        fields.iter().any(|(k, _)| k == "p.dns_nameservers"),
        "{fields:?}"
    );
    let public = config()["networks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "public")
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    // DNS servers changed: saved, with a notice.
    let r = http.submit(
        &path,
        &encode(&with(&fields, "p.dns_nameservers", "1.1.1.1\n9.9.9.9")),
    );
    assert_eq!(notice(&r), "Network settings of prod saved.");
    assert_eq!(
        config()["networking_parameters"]["dns_nameservers"],
        json!(["1.1.1.1", "9.9.9.9"])
    );
    let before = config();
    // Refusals, each next to its field; nothing written.
    for (key, value, says) in [
        (
            format!("n.{public}.vlan"),
            "abc",
            "&#34;abc&#34; is not a VLAN ID",
        ),
        (format!("n.{public}.cidr"), "300.1.2.0/24", "cidr"),
        ("p.vlan_range".to_string(), "9 - x", "vlan_range"),
    ] {
        let r = http.post_form(&path, &encode(&with(&fields, &key, value)));
        assert_eq!(r.status, 400, "{key}: {}", r.body);
        assert!(
            r.body.contains("Network settings not saved"),
            "{key}: {}",
            r.body
        );
        assert!(r.body.contains(says), "{key}: {says}: {}", r.body);
        assert_eq!(config(), before, "{key}: a refusal writes nothing");
    }
    let (session, csrf) = page_user(&d, "vera", "viewer");
    assert_eq!(
        post_as(
            &d,
            &session,
            &path,
            &format!("{}&csrf={csrf}", encode(&fields))
        ),
        403
    );
}
