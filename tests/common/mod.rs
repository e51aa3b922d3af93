//! Test support: [`TestDaemon`] runs the real daemon in-process on 127.0.0.1:0 with a temporary
//! data directory, and [`Http`] is a small blocking client that never treats a status as an error.

pub mod bin;
pub mod ipmi_sim;
pub mod plan;
pub mod redfish_bmc;
pub mod sse;
pub mod sushy;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::thread::JoinHandle;

use stoker::config::{Config, Layers};
use stoker::daemon::Daemon;

/// A daemon running in this process, stopped (gracefully) when dropped.
pub struct TestDaemon {
    pub addr: SocketAddr,
    /// The DHCP server's address, when the config enables it.
    pub dhcp: Option<SocketAddr>,
    /// The TFTP server's address, when the config enables it.
    pub tftp: Option<SocketAddr>,
    dir: Option<tempfile::TempDir>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

impl TestDaemon {
    pub fn start() -> TestDaemon {
        Self::start_bundled("skip")
    }

    /// Start with `plugins.bundled` = `install` (the shipped release is installed) or `skip`.
    pub fn start_bundled(bundled: &str) -> TestDaemon {
        Self::start_in(
            tempfile::tempdir().unwrap(),
            &[("plugins.bundled", bundled.to_string())],
        )
    }

    /// Start with its data under `dir/data`, HTTP on a free loopback port, a 5 s shutdown and
    /// no bundled release, then `flags` (`config` keys), which may override those.
    pub fn start_in(dir: tempfile::TempDir, flags: &[(&'static str, String)]) -> TestDaemon {
        let mut layers = Layers::default()
            .with_flag("data_dir", dir.path().join("data").display().to_string())
            .with_flag("http.listen", "127.0.0.1:0".to_string())
            .with_flag("http.shutdown_timeout", "5".to_string())
            .with_flag("plugins.bundled", "skip".to_string());
        for (key, value) in flags {
            layers = layers.with_flag(key, value.clone());
        }
        Self::start_with(layers.resolve().unwrap(), dir)
    }

    pub fn start_with(config: Config, dir: tempfile::TempDir) -> TestDaemon {
        let data_dir = config.data_dir.clone();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let daemon = match Daemon::start(&config) {
                    Ok(d) => d,
                    Err(e) => {
                        let _ = addr_tx.send(Err(format!("{e:#}")));
                        return Err(e);
                    }
                };
                let _ = addr_tx.send(Ok((
                    daemon.http_addr(),
                    daemon.dhcp_addr(),
                    daemon.tftp_addr(),
                )));
                daemon
                    .run_until(async {
                        let _ = stop_rx.await;
                    })
                    .await
            })
        });
        let (addr, dhcp, tftp) = addr_rx.recv().unwrap().expect("daemon failed to start");
        sign_in(&format!("http://{addr}"), &data_dir);
        TestDaemon {
            addr,
            dhcp,
            tftp,
            dir: Some(dir),
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn db_path(&self) -> PathBuf {
        self.dir
            .as_ref()
            .expect("data dir lives as long as the daemon")
            .path()
            .join("data")
            .join("stoker.db")
    }

    pub fn http(&self) -> Http {
        Http { base: self.url("") }
    }

    /// A client with no credential at all.
    pub fn anonymous(&self) -> Http {
        Http {
            base: format!("anonymous+{}", self.url("")),
        }
    }

    /// The admin's API token.
    pub fn admin_token(&self) -> String {
        credentials(&self.url(""))
            .map(|c| c.token)
            .expect("signed in at start")
    }

    /// A new user of `role` (its password `{name}-password-123`), signed in: its API token.
    pub fn user_token(&self, name: &str, role: &str) -> String {
        let password = format!("{name}-password-123");
        let r = self.http().post(
            "/api/v1/users",
            &serde_json::json!({"name": name, "role": role, "password": password}).to_string(),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        let r = self.anonymous().post(
            "/api/v1/login",
            &serde_json::json!({"username": name, "password": password}).to_string(),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        r.json()["token"].as_str().unwrap().to_string()
    }

    /// POST a plugin package as the admin: the status and the JSON answer.
    pub fn post_package(&self, bytes: &[u8]) -> (u16, serde_json::Value) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut r = agent
            .post(&self.url("/api/v1/plugins"))
            .header("authorization", &format!("Bearer {}", self.admin_token()))
            .header("content-type", "application/gzip")
            .send(bytes)
            .unwrap();
        let status = r.status().as_u16();
        let body = r.body_mut().read_to_string().unwrap();
        let json = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("HTTP {status}, not JSON ({e}): {body}"));
        (status, json)
    }

    /// Build the fixture plugin in folder `dir` (named by its last component) and install it.
    pub fn install_fixture(&self, dir: &std::path::Path) {
        let name = dir.file_name().unwrap().to_str().unwrap();
        let files = stoker::package::dir::DirFiles::new(dir).unwrap();
        let bytes = stoker::package::archive::build(&files, name, 0, &mut |_, _| {}).unwrap();
        let (status, body) = self.post_package(&bytes);
        assert_eq!(status, 201, "{body}");
    }

    /// An environment of the first release and `n` discovered nodes, the first `roles.len()`
    /// of them assigned those roles (one each). Returns its id and the node ids.
    pub fn environment(&self, roles: &[&str], n: usize) -> (i64, Vec<i64>) {
        let http = self.http();
        let cluster = self.new_environment("env");
        let mut ids = Vec::new();
        for i in 0..n {
            let mac = format!("52:54:00:00:40:{i:02x}");
            let r = http.post("/api/v1/agent/hello", &inventory(&mac).to_string());
            assert_eq!(r.status, 201, "{}", r.body);
            let id = r.json()["node"]["id"].as_i64().unwrap();
            if let Some(role) = roles.get(i) {
                let r = http.put(
                    &format!("/api/v1/clusters/{cluster}/nodes/{id}"),
                    &serde_json::json!({"roles": [role]}).to_string(),
                );
                assert_eq!(r.status, 200, "{}", r.body);
                assert_eq!(r.json()["cluster_id"], cluster);
            }
            ids.push(id);
        }
        (cluster, ids)
    }

    /// A new environment `name` of the first release, without nodes: its id.
    pub fn new_environment(&self, name: &str) -> i64 {
        let http = self.http();
        let release = http.get("/api/v1/releases").json()[0]["id"]
            .as_i64()
            .unwrap();
        let r = http.post(
            "/api/v1/clusters",
            &serde_json::json!({"name": name, "release_id": release}).to_string(),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        r.json()["id"].as_i64().unwrap()
    }

    /// Stop gracefully; hand back the data directory so the test can inspect what is left.
    pub fn stop(mut self) -> anyhow::Result<tempfile::TempDir> {
        self.stop_inner()?;
        Ok(self.dir.take().expect("stopped once"))
    }

    fn stop_inner(&mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match self.thread.take() {
            Some(t) => t.join().expect("daemon thread panicked"),
            None => Ok(()),
        }
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}

/// A response: status, content type and body.
pub struct Resp {
    pub status: u16,
    pub content_type: String,
    pub body: String,
    /// A redirect's target.
    pub location: Option<String>,
    /// `name=value` of each cookie the answer set.
    pub cookies: Vec<String>,
}

impl Resp {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

pub struct Http {
    base: String,
}

/// What the test harness signed in with, per daemon: the admin's API token, a dashboard
/// session cookie and that session's CSRF token. Requests to a daemon carry the token on the
/// JSON API (not on the agents' and nodes' own endpoints, which have credentials of their own)
/// and the session cookie on pages, unless the request sets credentials itself.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub token: String,
    pub session: String,
    pub csrf: String,
}

static CREDENTIALS: std::sync::Mutex<std::collections::BTreeMap<String, Credentials>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

fn authority(url: &str) -> String {
    let rest = url.split("://").nth(1).unwrap_or(url);
    rest.split('/').next().unwrap_or(rest).to_string()
}

pub fn credentials(url: &str) -> Option<Credentials> {
    if url.starts_with("anonymous+") {
        return None;
    }
    CREDENTIALS.lock().unwrap().get(&authority(url)).cloned()
}

/// The first admin's password, as the daemon wrote it on first start.
pub fn admin_password(data_dir: &std::path::Path) -> String {
    std::fs::read_to_string(data_dir.join("initial-admin-password"))
        .expect("initial-admin-password written on first start")
        .trim()
        .to_string()
}

/// Sign in to the daemon at `base` as admin (API token and dashboard session) and remember the
/// credentials for every later request to it.
pub fn sign_in(base: &str, data_dir: &std::path::Path) -> Credentials {
    let password = admin_password(data_dir);
    let plain = agent();
    let body = serde_json::json!({"username": "admin", "password": password}).to_string();
    let r = read(
        plain
            .post(format!("{base}/api/v1/login"))
            .header("content-type", "application/json")
            .send(&body)
            .unwrap(),
    );
    assert_eq!(r.status, 201, "sign-in: {}", r.body);
    let token = r.json()["token"].as_str().unwrap().to_string();
    let (session, csrf) = form_login(base, "admin", &password);
    let creds = Credentials {
        token,
        session,
        csrf,
    };
    CREDENTIALS
        .lock()
        .unwrap()
        .insert(authority(base), creds.clone());
    creds
}

/// Sign in through the dashboard's form; returns the session cookie and its CSRF token.
pub fn form_login(base: &str, user: &str, password: &str) -> (String, String) {
    let plain: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    let mut page = plain.get(format!("{base}/login")).call().unwrap();
    let login_cookie = cookie_of(page.headers(), "stoker_login").expect("login CSRF cookie");
    let html = page.body_mut().read_to_string().unwrap();
    let csrf = hidden(&html, "csrf").expect("login form CSRF field");
    let form = format!(
        "username={user}&password={}&csrf={csrf}&next=/",
        urlencode(password)
    );
    let r = plain
        .post(format!("{base}/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", &format!("stoker_login={login_cookie}"))
        .send(&form)
        .unwrap();
    assert_eq!(r.status().as_u16(), 303, "form sign-in");
    let session = cookie_of(r.headers(), "stoker_session").expect("session cookie");
    let mut home = plain
        .get(format!("{base}/account"))
        .header("cookie", &format!("stoker_session={session}"))
        .call()
        .unwrap();
    let html = home.body_mut().read_to_string().unwrap();
    let csrf = hidden(&html, "csrf").expect("session CSRF token on the page");
    (session, csrf)
}

/// The MACs of the nodes the master at `base` lists (`GET /api/v1/nodes`, the signed-in
/// client's credentials).
pub fn node_macs(base: &str) -> std::collections::BTreeSet<String> {
    Http::raw_get_json(&format!("{base}/api/v1/nodes"))
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["mac"].as_str().unwrap().to_string())
        .collect()
}

pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value of a cookie set by a response.
pub fn cookie_of(headers: &ureq::http::HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| {
            let first = v.split(';').next()?;
            let (k, val) = first.split_once('=')?;
            (k.trim() == name).then(|| val.trim().to_string())
        })
}

/// The value of the first hidden input named `name` in a page.
pub fn hidden(html: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker)? + marker.len();
    let end = html[start..].find('"')? + start;
    Some(html[start..end].to_string())
}

/// Add the harness's credentials to a request for `url`, as the module explains.
fn with_credentials<B>(
    mut req: ureq::RequestBuilder<B>,
    url: &str,
    explicit: &[(&str, &str)],
) -> ureq::RequestBuilder<B> {
    let has = |h: &str| explicit.iter().any(|(k, _)| k.eq_ignore_ascii_case(h));
    let Some(c) = credentials(url) else {
        return req;
    };
    let path = url
        .split("://")
        .nth(1)
        .and_then(|r| r.find('/').map(|i| &r[i..]))
        .unwrap_or("/");
    let api = (path.starts_with("/api/v1/") && !path.starts_with("/api/v1/agent/"))
        || path.starts_with("/ostf/");
    let public = path.starts_with("/api/")
        || path.starts_with("/boot/")
        || path.starts_with("/assets/")
        || path.starts_with("/login")
        || path.starts_with("/keystone/")
        || path == "/healthz";
    if api && !has("authorization") && !has("x-auth-token") {
        req = req.header("authorization", &format!("Bearer {}", c.token));
    } else if !public && !has("cookie") {
        req = req.header("cookie", &format!("stoker_session={}", c.session));
    }
    req
}

/// How long the test client waits for one answer before calling the daemon hung.
const CLIENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

fn agent() -> ureq::Agent {
    agent_within(CLIENT_TIMEOUT)
}

/// The test client, giving up on an answer after `timeout`.
fn agent_within(timeout: std::time::Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .build()
        .into()
}

fn read(mut resp: ureq::http::Response<ureq::Body>) -> Resp {
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let location = resp
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let cookies = resp
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .map(str::to_string)
        .collect();
    Resp {
        status: resp.status().as_u16(),
        content_type,
        body: resp.body_mut().read_to_string().unwrap(),
        location,
        cookies,
    }
}

impl Http {
    /// GET a URL and parse its JSON body.
    pub fn raw_get_json(url: &str) -> serde_json::Value {
        read(with_credentials(agent().get(url), url, &[]).call().unwrap()).json()
    }

    /// PUT a JSON body to a URL.
    pub fn raw_put(url: &str, body: &str) -> Resp {
        read(
            with_credentials(agent().put(url), url, &[])
                .header("content-type", "application/json")
                .send(body)
                .unwrap(),
        )
    }

    /// POST with extra headers.
    pub fn raw_post(url: &str, body: &str, headers: &[(&str, &str)]) -> Resp {
        let mut req = with_credentials(agent().post(url), url, headers);
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            req = req.header("content-type", "application/json");
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        read(req.send(body).unwrap())
    }

    /// GET a binary body with extra headers; returns status, bytes and lower-case headers.
    pub fn get_bytes(
        url: &str,
        headers: &[(&str, &str)],
    ) -> (u16, Vec<u8>, std::collections::HashMap<String, String>) {
        Self::get_bytes_within(url, headers, CLIENT_TIMEOUT)
    }

    /// [`Http::get_bytes`] for a request that waits on purpose (a deliberately slow plan):
    /// `timeout` only guards against a hang, it does not time the daemon, so it must hold
    /// in a debug build and on a loaded machine alike.
    pub fn get_bytes_within(
        url: &str,
        headers: &[(&str, &str)],
        timeout: std::time::Duration,
    ) -> (u16, Vec<u8>, std::collections::HashMap<String, String>) {
        let mut req = with_credentials(agent_within(timeout).get(url), url, headers);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut resp = req.call().unwrap();
        let hs = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        let bytes = resp
            .body_mut()
            .with_config()
            .limit(64 * 1024 * 1024)
            .read_to_vec()
            .unwrap();
        (resp.status().as_u16(), bytes, hs)
    }

    fn url(&self, path: &str) -> String {
        let base = self.base.strip_prefix("anonymous+").unwrap_or(&self.base);
        format!("{base}{path}")
    }

    fn creds_url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// GET `path` with `token` instead of the harness's credentials.
    pub fn get_as(&self, path: &str, token: &str) -> Resp {
        read(
            agent()
                .get(self.url(path))
                .header("authorization", &format!("Bearer {token}"))
                .call()
                .unwrap(),
        )
    }

    /// PUT a JSON body with `token` instead of the admin's.
    pub fn put_as(&self, path: &str, body: &str, token: &str) -> Resp {
        read(
            agent()
                .put(self.url(path))
                .header("authorization", &format!("Bearer {token}"))
                .header("content-type", "application/json")
                .send(body)
                .unwrap(),
        )
    }

    pub fn get(&self, path: &str) -> Resp {
        read(
            with_credentials(agent().get(self.url(path)), &self.creds_url(path), &[])
                .call()
                .unwrap(),
        )
    }

    /// POST a dashboard form (the session's CSRF token is added).
    pub fn post_form(&self, path: &str, form: &str) -> Resp {
        let mut body = form.to_string();
        if let Some(c) = credentials(&self.creds_url(path)) {
            if !body.is_empty() {
                body.push('&');
            }
            body.push_str(&format!("csrf={}", c.csrf));
        }
        let no_redirects: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .build()
            .into();
        read(
            with_credentials(
                no_redirects.post(self.url(path)),
                &self.creds_url(path),
                &[],
            )
            .header("content-type", "application/x-www-form-urlencoded")
            .send(&body)
            .unwrap(),
        )
    }

    /// A dashboard form as a browser sends it: the post must answer with a redirect (post,
    /// redirect, get); the page it leads to is fetched with the cookies the answer set (the
    /// notice saying what the action did) and returned.
    pub fn submit(&self, path: &str, form: &str) -> Resp {
        let r = self.post_form(path, form);
        assert_eq!(r.status, 303, "a form answers with a redirect: {}", r.body);
        let to = r.location.clone().expect("a redirect names its target");
        let to = to.split('#').next().unwrap_or_default().to_string();
        let cookies = r.cookies.join("; ");
        let no_redirects: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .build()
            .into();
        let mut req = no_redirects.get(self.url(&to));
        let session =
            credentials(&self.creds_url(&to)).map(|c| format!("stoker_session={}", c.session));
        let all = [session.unwrap_or_default(), cookies]
            .into_iter()
            .filter(|c| !c.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        if !all.is_empty() {
            req = req.header("cookie", &all);
        }
        read(req.call().unwrap())
    }

    pub fn put(&self, path: &str, body: &str) -> Resp {
        read(
            with_credentials(agent().put(self.url(path)), &self.creds_url(path), &[])
                .header("content-type", "application/json")
                .send(body)
                .unwrap(),
        )
    }

    pub fn patch(&self, path: &str, body: &str) -> Resp {
        read(
            with_credentials(agent().patch(self.url(path)), &self.creds_url(path), &[])
                .header("content-type", "application/json")
                .send(body)
                .unwrap(),
        )
    }

    pub fn delete(&self, path: &str) -> Resp {
        read(
            with_credentials(agent().delete(self.url(path)), &self.creds_url(path), &[])
                .call()
                .unwrap(),
        )
    }

    pub fn post(&self, path: &str, body: &str) -> Resp {
        read(
            with_credentials(agent().post(self.url(path)), &self.creds_url(path), &[])
                .header("content-type", "application/json")
                .send(body)
                .unwrap(),
        )
    }
}

/// A realistic inventory document for a node with the given MAC.
pub fn inventory(mac: &str) -> serde_json::Value {
    serde_json::json!({
        "interfaces": [
            {"name": "eno1", "mac": mac, "speed_mbps": 10000, "link": true},
            {"name": "eno2", "mac": format!("02{}", &mac[2..]), "link": false}
        ],
        "cpu": {"count": 32, "model": "Intel(R) Xeon(R) Silver 4314"},
        "memory_bytes": 274877906944u64,
        "disks": [
            {"name": "sda", "size_bytes": 480103981056u64, "model": "SAMSUNG MZ7L3480", "serial": "S6KMNE0R123456"},
            {"name": "sdb", "size_bytes": 3840755982336u64, "model": "INTEL SSDSC2KG03", "serial": "PHYG0123"}
        ],
        "system": {"vendor": "Dell Inc.", "product": "PowerEdge R650", "serial": "7XK2QH3"},
        "boot_mode": "uefi"
    })
}

/// A fixture plugin package (`tests/fixtures/plugins/NAME`) in memory, to change before
/// building.
pub fn fixture_files(name: &str) -> stoker::engine::plugin::MemFiles {
    use stoker::engine::plugin::PackageFiles;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/plugins")
        .join(name);
    let dir = stoker::package::dir::DirFiles::new(&path).unwrap();
    let mut m = stoker::engine::plugin::MemFiles::new();
    for e in dir.entries() {
        if e.is_dir {
            m.add_dir(&e.path).unwrap();
        } else {
            m.add(&e.path, dir.read(&e.path).unwrap()).unwrap();
        }
    }
    m
}

/// A `.fp` package of `files` under the top folder `top`.
pub fn build(files: &stoker::engine::plugin::MemFiles, top: &str) -> Vec<u8> {
    stoker::package::archive::build(files, top, 0, &mut |_, _| {}).unwrap()
}
