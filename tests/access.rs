//! Access control against the running daemon: the route table walked route by route (401
//! without a credential, 403 with a weaker role), cookies never authorizing JSON calls, form
//! posts needing their CSRF token, the first admin's password file, tokens shown once and
//! stored hashed, sign-in rate limits, secrets masked below admin, Keystone for fuel2, the
//! audit log, and `stoker user` through the API and offline.

use serde_json::{Value, json};
use stoker::auth::Access;

use crate::common::{Http, TestDaemon, form_login};

/// A user of `role` with a known password; returns (API token, session cookie, CSRF token).
fn user(d: &TestDaemon, name: &str, role: &str) -> (String, String, String) {
    let token = d.user_token(name, role);
    let (session, csrf) = form_login(&d.url(""), name, &format!("{name}-password-123"));
    (token, session, csrf)
}

fn concrete(path: &str) -> String {
    path.split('/')
        .map(|seg| {
            if seg.starts_with('{') {
                if seg.contains(":.*") { "x" } else { "1" }.to_string()
            } else if let Some(rest) = seg.strip_prefix("{mac}") {
                format!("52:54:00:00:00:01{rest}")
            } else {
                seg.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn send(
    d: &TestDaemon,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<(&str, &str)>,
) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    let url = d.url(path);
    let mut resp = match method {
        "GET" => {
            let mut r = agent.get(&url);
            for (k, v) in headers {
                r = r.header(*k, *v);
            }
            r.call().unwrap()
        }
        "DELETE" => {
            let mut r = agent.delete(&url);
            for (k, v) in headers {
                r = r.header(*k, *v);
            }
            r.call().unwrap()
        }
        m => {
            let mut r = match m {
                "PUT" => agent.put(&url),
                "PATCH" => agent.patch(&url),
                _ => agent.post(&url),
            };
            for (k, v) in headers {
                r = r.header(*k, *v);
            }
            let (ct, b) = body.unwrap_or(("application/json", "{}"));
            r.header("content-type", ct).send(b).unwrap()
        }
    };
    let status = resp.status().as_u16();
    let location = resp
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    (status, if status == 303 { location } else { text })
}

#[test]
fn every_route_refuses_missing_and_weaker_credentials() {
    let d = TestDaemon::start_bundled("install");
    let (viewer_token, viewer_session, viewer_csrf) = user(&d, "vera", "viewer");
    let (operator_token, operator_session, operator_csrf) = user(&d, "otto", "operator");
    let table = stoker::http::route_table();
    assert!(table.len() > 60, "{} routes", table.len());
    let mut checked = 0;
    for route in &table {
        let method = route.method.as_str();
        let path = concrete(&route.path);
        match route.access {
            Access::Api(needed) => {
                let (status, body) = send(&d, method, &path, &[], None);
                assert_eq!(status, 401, "{method} {path} without a credential: {body}");
                assert!(body.contains("\"code\":\"unauthorized\""), "{body}");
                // A session cookie alone never authorizes a JSON call.
                let cookie = format!("stoker_session={operator_session}");
                let (status, _) = send(&d, method, &path, &[("cookie", &cookie)], None);
                assert_eq!(status, 401, "{method} {path} with a cookie only");
                let weaker = match needed {
                    stoker::auth::Role::Admin => Some(&operator_token),
                    stoker::auth::Role::Operator => Some(&viewer_token),
                    stoker::auth::Role::Viewer => None,
                };
                if let Some(token) = weaker {
                    let bearer = format!("Bearer {token}");
                    let (status, body) =
                        send(&d, method, &path, &[("authorization", &bearer)], None);
                    assert_eq!(status, 403, "{method} {path} with a weaker role: {body}");
                    assert!(body.contains("\"code\":\"forbidden\""), "{body}");
                }
                checked += 1;
            }
            Access::Page(needed) => {
                let (status, location) = send(
                    &d,
                    method,
                    &path,
                    &[],
                    Some(("application/x-www-form-urlencoded", "")),
                );
                assert_eq!(status, 303, "{method} {path} without a session");
                assert!(location.starts_with("/login"), "{location}");
                let weaker = match needed {
                    stoker::auth::Role::Admin => Some((&operator_session, &operator_csrf)),
                    stoker::auth::Role::Operator => Some((&viewer_session, &viewer_csrf)),
                    stoker::auth::Role::Viewer => None,
                };
                if let Some((session, csrf)) = weaker {
                    let cookie = format!("stoker_session={session}");
                    let form = format!("csrf={csrf}");
                    let (status, _) = send(
                        &d,
                        method,
                        &path,
                        &[("cookie", &cookie)],
                        Some(("application/x-www-form-urlencoded", &form)),
                    );
                    assert_eq!(status, 403, "{method} {path} with a weaker role");
                }
                // A bearer token never signs a form or a page.
                let bearer = format!("Bearer {}", d.admin_token());
                let (status, _) = send(&d, method, &path, &[("authorization", &bearer)], None);
                assert_eq!(status, 303, "{method} {path} with a token only");
                checked += 1;
            }
            Access::Public | Access::Node | Access::Agent => {}
        }
    }
    assert!(checked > 50, "{checked} routes checked");
    // A node's own calls without a token are its hellos and Fuel's discovery calls.
    for route in table.iter().filter(|r| r.access == Access::Node) {
        let p = &route.path;
        assert!(
            p == "/api/v1/agent/hello"
                || p == "/api/v1/agent/service/hello"
                || p.starts_with("/api/nodes"),
            "unexpected node route {p}"
        );
    }
    // The unauthenticated surface is only what a node needs, signing in, assets and health.
    for route in table
        .iter()
        .filter(|r| matches!(r.access, Access::Public | Access::Node))
    {
        let p = &route.path;
        assert!(
            p.starts_with("/boot/")
                || p == "/api/v1/agent/hello"
                || p == "/api/v1/agent/service/hello"
                || p.starts_with("/api/nodes")
                || p == "/api/v1/version"
                || p == "/api/v1/login"
                || p == "/login"
                || p.starts_with("/keystone/")
                || p.starts_with("/assets/")
                || p == "/healthz",
            "unexpected public route {p}"
        );
    }
}

#[test]
fn cross_site_posts_and_forms_without_csrf_are_refused() {
    let d = TestDaemon::start_bundled("install");
    let token = format!("Bearer {}", d.admin_token());
    // A text/plain "JSON" post, as a cross-site page can send without a preflight.
    let (status, body) = send(
        &d,
        "POST",
        "/api/v1/clusters",
        &[("authorization", &token)],
        Some(("text/plain", r#"{"name": "x", "release_id": 1}"#)),
    );
    assert_eq!(status, 415, "{body}");
    assert!(body.contains("unsupported_media_type"), "{body}");
    // A form post with the session but without its CSRF token changes nothing.
    let creds = crate::common::credentials(&d.url("")).unwrap();
    let cookie = format!("stoker_session={}", creds.session);
    let (status, _) = send(
        &d,
        "POST",
        "/environments",
        &[("cookie", &cookie)],
        Some((
            "application/x-www-form-urlencoded",
            "name=evil&release_id=1",
        )),
    );
    assert_eq!(status, 403);
    let (status, _) = send(
        &d,
        "POST",
        "/environments",
        &[("cookie", &cookie)],
        Some((
            "application/x-www-form-urlencoded",
            "name=evil&release_id=1&csrf=0000",
        )),
    );
    assert_eq!(status, 403);
    let envs = d.http().get("/api/v1/clusters").json();
    assert_eq!(envs, json!([]), "nothing was created");
    // With the token, the same form works.
    let r = d
        .http()
        .post_form("/environments", "name=good&release_id=1");
    assert_eq!(r.status, 303);
    assert_eq!(d.http().get("/api/v1/clusters").json()[0]["name"], "good");
    // Security headers on pages.
    let (_, _, headers) = Http::get_bytes(&d.url("/login"), &[]);
    let csp = &headers["content-security-policy"];
    assert!(
        csp.contains("frame-ancestors 'none'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert!(headers.contains_key("referrer-policy"));
}

#[test]
fn first_start_writes_the_admin_password_once_and_privately() {
    use std::os::unix::fs::PermissionsExt;
    let d = TestDaemon::start();
    let data = d.db_path().parent().unwrap().to_path_buf();
    let file = data.join("initial-admin-password");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let first = std::fs::read_to_string(&file).unwrap();
    assert!(first.trim().len() >= 20);
    // The password signs in; a wrong one does not.
    let wrong = d.anonymous().post(
        "/api/v1/login",
        &json!({"username": "admin", "password": "not-the-password"}).to_string(),
    );
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.json()["code"], "unauthorized");
    let dir = d.stop().unwrap();
    // A restart keeps the user and does not write a new password.
    let config = stoker::config::Layers::default()
        .with_flag("data_dir", dir.path().join("data").display().to_string())
        .with_flag("http.listen", "127.0.0.1:0".to_string())
        .with_flag("plugins.bundled", "skip".to_string())
        .resolve()
        .unwrap();
    let again = TestDaemon::start_with(config, dir);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), first);
    let users = again.http().get("/api/v1/users").json();
    assert_eq!(users.as_array().unwrap().len(), 1);
    assert_eq!(users[0]["name"], "admin");
    assert!(users[0].get("password_hash").is_none());
}

#[test]
fn tokens_are_shown_once_stored_hashed_scoped_and_revocable() {
    let d = TestDaemon::start();
    let http = d.http();
    let made = http.post(
        "/api/v1/tokens",
        r#"{"name": "ci", "role": "viewer", "expires_in_days": 30}"#,
    );
    assert_eq!(made.status, 201, "{}", made.body);
    let made = made.json();
    let secret = made["token"].as_str().unwrap().to_string();
    assert!(secret.starts_with("skt_"));
    let list = http.get("/api/v1/tokens").body;
    assert!(list.contains("\"ci\"") && !list.contains(&secret));
    let db = std::fs::read(d.db_path()).unwrap_or_default();
    let wal = std::fs::read(d.db_path().with_extension("db-wal")).unwrap_or_default();
    for bytes in [&db, &wal] {
        assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()));
    }
    let bearer = format!("Bearer {secret}");
    let (status, body) = send(&d, "GET", "/api/v1/me", &[("authorization", &bearer)], None);
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["role"],
        "viewer"
    );
    // A viewer token cannot change anything, nor mint a stronger token.
    let (status, _) = send(
        &d,
        "POST",
        "/api/v1/tokens",
        &[("authorization", &bearer)],
        Some(("application/json", r#"{"name": "up", "role": "admin"}"#)),
    );
    assert_eq!(status, 403);
    let id = made["id"].as_i64().unwrap();
    assert_eq!(http.delete(&format!("/api/v1/tokens/{id}")).status, 204);
    let (status, _) = send(&d, "GET", "/api/v1/me", &[("authorization", &bearer)], None);
    assert_eq!(status, 401, "revoked");
    // Bad requests name the field.
    let r = http.post("/api/v1/tokens", r#"{"name": "x", "expires_in_days": 0}"#);
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["fields"][0]["field"], "expires_in_days");
}

#[test]
fn sign_in_is_rate_limited_with_a_clear_message() {
    let d = TestDaemon::start();
    let anon = d.anonymous();
    let mut statuses = Vec::new();
    for _ in 0..14 {
        let r = anon.post(
            "/api/v1/login",
            &json!({"username": "admin", "password": "guess-guess-guess"}).to_string(),
        );
        statuses.push(r.status);
        if r.status == 429 {
            assert!(r.json()["message"].as_str().unwrap().contains("try again"));
            break;
        }
    }
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    // The sign-in form carries its own CSRF token.
    let page = anon.get("/login").body;
    assert!(page.contains("name=\"csrf\""));
}

#[test]
fn secrets_are_masked_below_admin_and_kept_on_write_back() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let c = http.post("/api/v1/clusters", r#"{"name": "env", "release_id": 1}"#);
    assert_eq!(c.status, 201, "{}", c.body);
    let id = c.json()["id"].as_i64().unwrap();
    let mut settings = http.get(&format!("/api/v1/clusters/{id}/settings")).json();
    settings["access"] = json!({"user": "admin", "password": "hunter2-secret"});
    let r = http.put(
        &format!("/api/v1/clusters/{id}/settings"),
        &settings.to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let (token, _, _) = user(&d, "olga", "operator");
    let bearer = format!("Bearer {token}");
    let path = format!("/api/v1/clusters/{id}/settings");
    let (_, body) = send(&d, "GET", &path, &[("authorization", &bearer)], None);
    assert!(!body.contains("hunter2-secret"), "{body}");
    let mut seen: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(seen["access"]["password"], "******");
    assert_eq!(seen["access"]["user"], "admin");
    // The operator writes back what it read, changing another key: the password stays.
    seen["access"]["user"] = json!("root");
    let (status, _) = send(
        &d,
        "PUT",
        &path,
        &[("authorization", &bearer)],
        Some(("application/json", &seen.to_string())),
    );
    assert_eq!(status, 200);
    let admin_view = http.get(&path).json();
    assert_eq!(admin_view["access"]["password"], "hunter2-secret");
    assert_eq!(admin_view["access"]["user"], "root");
}

#[test]
fn keystone_tokens_let_fuel2_in() {
    let d = TestDaemon::start();
    let version = d.anonymous().get("/api/v1/version").json();
    assert_eq!(version["auth_required"], true);
    let password = crate::common::admin_password(d.db_path().parent().unwrap());
    let r = d.anonymous().post(
        "/keystone/v2.0/tokens",
        &json!({"auth": {"passwordCredentials": {"username": "admin", "password": password},
                         "tenantName": "admin"}})
        .to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let access = r.json();
    let token = access["access"]["token"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        access["access"]["token"]["expires"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    let tenant = access["access"]["token"]["tenant"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Re-scope by token, as keystoneclient does next.
    let r = d.anonymous().post(
        "/keystone/v2.0/tokens",
        &json!({"auth": {"token": {"id": token}, "tenantId": tenant}}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let (status, _) = send(
        &d,
        "GET",
        "/api/v1/clusters",
        &[("x-auth-token", &token)],
        None,
    );
    assert_eq!(status, 200);
    // fuel2 sends an empty X-Auth-Token when it has none: no credential.
    let (status, _) = send(&d, "GET", "/api/v1/clusters", &[("x-auth-token", "")], None);
    assert_eq!(status, 401);
    let r = d.anonymous().post(
        "/keystone/v2.0/tokens",
        &json!({"auth": {"passwordCredentials": {"username": "admin", "password": "nope"}}})
            .to_string(),
    );
    assert_eq!(r.status, 401);
}

#[test]
fn the_audit_log_says_who_did_what_from_where() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    assert_eq!(
        http.post("/api/v1/clusters", r#"{"name": "env", "release_id": 1}"#)
            .status,
        201
    );
    let (status, _) = send(&d, "DELETE", "/api/v1/clusters/1", &[], None);
    assert_eq!(status, 401);
    let log = http.get("/api/v1/audit").json();
    let entries = log.as_array().unwrap();
    let created = entries
        .iter()
        .find(|e| e["method"] == "POST" && e["path"] == "/api/v1/clusters")
        .expect("creation audited");
    assert_eq!(created["actor"], "admin");
    assert_eq!(created["role"], "admin");
    assert_eq!(created["status"], 201);
    assert_eq!(created["source"], "127.0.0.1");
    let refused = entries
        .iter()
        .find(|e| e["method"] == "DELETE")
        .expect("refusal audited");
    assert_eq!(refused["actor"], "anonymous");
    assert_eq!(refused["status"], 401);
    // Reads are not audited.
    assert!(entries.iter().all(|e| e["method"] != "GET"));
    let page = http.get("/audit");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("/api/v1/clusters"));
}

/// A node's hellos are its history's, not the audit log's: a rack rebooting says thousands at
/// once. What the audit log keeps of them is a refusal of what a node presented. (A
/// deployment's successful service hellos: `deploy::a_deployment_runs_every_node_to_ready_in_order`.)
#[test]
fn a_nodes_hellos_are_audited_only_when_refused() {
    let d = TestDaemon::start();
    let http = d.http();
    let hello = Http::raw_post(
        &d.url("/api/v1/agent/hello"),
        &crate::common::inventory("52:54:00:aa:00:07").to_string(),
        &[],
    );
    assert_eq!(hello.status, 201, "{}", hello.body);
    let node = hello.json()["node"]["id"].as_i64().unwrap();
    // A credential no node was given: refused, and audited.
    let refused = Http::raw_post(
        &d.url("/api/v1/agent/service/hello"),
        &json!({"node_id": node, "credential": "skn_not-a-credential",
                "version": env!("CARGO_PKG_VERSION"), "macs": ["52:54:00:aa:00:07"]})
        .to_string(),
        &[],
    );
    assert_eq!(refused.status, 401, "{}", refused.body);
    let log = http.get("/api/v1/audit").json();
    let entries = log.as_array().unwrap();
    let hellos: Vec<&Value> = entries
        .iter()
        .filter(|e| e["path"].as_str().is_some_and(|p| p.contains("hello")))
        .collect();
    assert_eq!(hellos.len(), 1, "{entries:?}");
    assert_eq!(hellos[0]["path"], "/api/v1/agent/service/hello");
    assert_eq!(hellos[0]["status"], 401);
    assert_eq!(hellos[0]["actor"], "anonymous");
    // The discovery hello that made the node is on its page's activity instead.
    let page = http.get(&format!("/nodes/{node}"));
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("discovered 52:54:00:aa:00:07"),
        "{}",
        page.body
    );
}

#[test]
fn stoker_user_works_through_the_api_and_offline() {
    let d = TestDaemon::start();
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str], token: Option<&str>, stdin: &str| {
        let mut cmd = crate::common::bin::stoker(dir.path());
        cmd.args(args);
        if let Some(t) = token {
            cmd.env("STOKER_TOKEN", t);
        }
        cmd.env("XDG_CONFIG_HOME", dir.path());
        crate::common::bin::run_with_stdin(&mut cmd, stdin)
    };
    let url = d.url("");
    let token = d.admin_token();
    let (code, out, err) = run(
        &[
            "user",
            "add",
            "carol",
            "--role",
            "operator",
            "--password-stdin",
            "--url",
            &url,
        ],
        Some(&token),
        "carol-password-1\n",
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("added carol"), "{out}");
    let (code, out, _) = run(&["user", "list", "--url", &url], Some(&token), "");
    assert_eq!(code, Some(0));
    assert!(out.contains("carol") && out.contains("operator"), "{out}");
    // Without a token the CLI says how to get one.
    let (code, _, err) = run(&["user", "list", "--url", &url], None, "");
    assert_eq!(code, Some(5), "not authorized");
    assert!(err.contains("stoker login"), "{err}");
    // `stoker login` keeps a token for later commands.
    let (code, out, err) = run(
        &["login", "carol", "--url", &url],
        None,
        "carol-password-1\n",
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("operator"), "{out}");
    let (code, _, err) = run(&["user", "list", "--url", &url], None, "");
    assert_eq!(code, Some(5), "an operator may not list users");
    assert!(err.contains("403"), "{err}");
    // Offline is refused while a daemon serves the database.
    let data = d.db_path().parent().unwrap().to_path_buf();
    let listen = d.addr.to_string();
    let offline = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        v.extend([
            "--offline".to_string(),
            "--data-dir".to_string(),
            data.display().to_string(),
            "--http-listen".to_string(),
            listen.clone(),
        ]);
        v
    };
    let args = offline(&["user", "passwd", "admin", "--password-stdin"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err) = run(&args, None, "new-admin-password\n");
    assert_eq!(code, Some(1));
    assert!(err.contains("a daemon serves"), "{err}");
    let _dir = d.stop().unwrap();
    let (code, _, err) = run(&args, None, "new-admin-password\n");
    assert_eq!(code, Some(0), "{err}");
    let list = offline(&["user", "list"]);
    let list: Vec<&str> = list.iter().map(String::as_str).collect();
    let (code, out, _) = run(&list, None, "");
    assert_eq!(code, Some(0));
    assert!(out.contains("admin") && out.contains("carol"), "{out}");
    // The last admin cannot be removed.
    let rm = offline(&["user", "remove", "admin"]);
    let rm: Vec<&str> = rm.iter().map(String::as_str).collect();
    let (code, _, err) = run(&rm, None, "");
    assert_eq!(code, Some(1));
    assert!(err.contains("last admin"), "{err}");
}
