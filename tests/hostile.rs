//! Hostile input against the built daemon, each attack of issue 15 as a test: YAML alias bombs
//! and deep nesting in a plugin, gzip bombs (one and four at once), oversized tar headers and
//! uploads, forbidden tar members, graphs with cycles, concurrent installs of one plugin, an
//! install killed mid-way, deep JSON bodies, and the same YAML in the CLI.
//!
//! Each daemon runs under `prlimit --as` (a bomb that got through would fail there instead of
//! taking the machine), and its peak resident memory (`VmHWM` in `/proc/PID/status`) may grow
//! at most 64 MiB over what it was once started and answering. After every attack the daemon
//! must still answer `/healthz`, and a valid plugin must still install.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::{Value, json};
use stoker::engine::plugin::{MemFiles, PackageFiles};
use stoker::package::dir::DirFiles;

use super::common::bin::{STOKER, Served};
use super::common::{build, fixture_files};

/// Address space the daemon may map: far above what it needs (about 0.6 GiB at rest, most of
/// it thread stacks and malloc arenas reserved, not used), far below what a bomb would take.
const ADDRESS_SPACE: &str = "--as=3221225472";
/// How much the peak resident memory may grow over the baseline.
const GROWTH: u64 = 64 << 20;

/// A built daemon in a directory of its own.
struct Daemon {
    served: Served,
    dir: tempfile::TempDir,
    /// VmHWM once started and answering.
    baseline: u64,
}

fn command(data: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new("prlimit");
    cmd.arg(ADDRESS_SPACE).arg(STOKER).args([
        "serve",
        "--data-dir",
        &data.display().to_string(),
        "--http-listen",
        "127.0.0.1:0",
    ]);
    if !extra.contains(&"--plugins-bundled") {
        cmd.args(["--plugins-bundled", "skip"]);
    }
    cmd.args(extra);
    for (key, _) in std::env::vars() {
        if key.starts_with("STOKER_") || key == "NOTIFY_SOCKET" {
            cmd.env_remove(key);
        }
    }
    cmd
}

impl Daemon {
    fn start(extra: &[&str]) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let served = Served::spawn(command(&dir.path().join("data"), extra));
        crate::common::sign_in(&format!("http://{}", served.addr), &dir.path().join("data"));
        let mut d = Daemon {
            served,
            dir,
            baseline: 0,
        };
        d.healthy();
        d.baseline = d.peak();
        d
    }

    fn pid(&self) -> u32 {
        self.served.child.id()
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.served.addr)
    }

    /// A field of `/proc/PID/status`, in bytes.
    fn status(&self, key: &str) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no {key} in /proc status"));
        let kib: u64 = line
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap();
        kib << 10
    }

    fn peak(&self) -> u64 {
        self.status("VmHWM:")
    }

    /// The peak so far is within [`GROWTH`] of the baseline.
    fn within_bound(&self, attack: &str) {
        let grown = self.peak().saturating_sub(self.baseline);
        eprintln!(
            "{attack}: VmHWM {} MiB, {:.1} MiB over the baseline of {} MiB",
            self.peak() >> 20,
            grown as f64 / (1 << 20) as f64,
            self.baseline >> 20
        );
        assert!(
            grown <= GROWTH,
            "{attack}: the daemon's peak memory grew by {} MiB (VmHWM {} MiB, baseline {} MiB)",
            grown >> 20,
            self.peak() >> 20,
            self.baseline >> 20
        );
    }

    fn healthy(&self) {
        let (status, body) = get(&self.url("/healthz"));
        assert_eq!(
            (status, body["status"].as_str()),
            (200, Some("ok")),
            "{body}"
        );
    }

    fn post(&self, bytes: &[u8]) -> (u16, Value) {
        post_package(&self.url("/api/v1/plugins"), bytes)
    }

    /// Nothing but installed plugin folders is left under `plugins/`.
    fn no_leftovers(&self) {
        let plugins = self.data().join("plugins");
        let left: Vec<String> = std::fs::read_dir(&plugins)
            .map(|r| {
                r.map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                    .filter(|n| n.starts_with('.'))
                    .collect()
            })
            .unwrap_or_default();
        assert!(left.is_empty(), "left under plugins/: {left:?}");
    }

    /// Healthy, and a valid plugin still installs (each call a new version).
    fn still_works(&self, version: &str) {
        self.healthy();
        let (status, body) = self.post(&valid_plugin(version));
        assert_eq!(status, 201, "{body}");
        self.no_leftovers();
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into()
}

fn json_of(status: u16, text: &str) -> (u16, Value) {
    let value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("status {status}, not JSON ({e}): {text}"));
    (status, value)
}

/// The admin's bearer header for the daemon at `url` (signed in when it started).
fn bearer(url: &str) -> String {
    let c = crate::common::credentials(url).expect("signed in at start");
    format!("Bearer {}", c.token)
}

fn get(url: &str) -> (u16, Value) {
    let mut r = agent()
        .get(url)
        .header("authorization", &bearer(url))
        .call()
        .unwrap();
    let status = r.status().as_u16();
    json_of(status, &r.body_mut().read_to_string().unwrap())
}

fn send(method: &str, url: &str, body: &[u8], content_type: &str) -> (u16, Value) {
    let mut req = ureq::http::Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", content_type);
    // The agents' endpoints take their own credentials, never the admin's.
    if !url.contains("/api/v1/agent/") {
        req = req.header("authorization", bearer(url));
    }
    let req = req.body(body.to_vec()).unwrap();
    let mut r = agent().run(req).unwrap();
    let status = r.status().as_u16();
    let text = r
        .body_mut()
        .with_config()
        .limit(16 << 20)
        .read_to_string()
        .unwrap();
    json_of(status, &text)
}

fn post_package(url: &str, bytes: &[u8]) -> (u16, Value) {
    send("POST", url, bytes, "application/gzip")
}

/// Send a body over a plain socket and read the answer, whether or not the server read the
/// whole body first (it answers 413 and closes as soon as it knows). `chunked`: no
/// Content-Length, so the server learns the size only as the body arrives.
fn post_raw(addr: &str, path: &str, body: &[u8], chunked: bool) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let length = if chunked {
        "Transfer-Encoding: chunked".to_string()
    } else {
        format!("Content-Length: {}", body.len())
    };
    let auth = bearer(&format!("http://{addr}"));
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/gzip\r\n{length}\r\n\
         Authorization: {auth}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    for piece in body.chunks(64 << 10) {
        let sent = if chunked {
            s.write_all(format!("{:x}\r\n", piece.len()).as_bytes())
                .and_then(|()| s.write_all(piece))
                .and_then(|()| s.write_all(b"\r\n"))
        } else {
            s.write_all(piece)
        };
        if sent.is_err() {
            break;
        }
    }
    if chunked {
        let _ = s.write_all(b"0\r\n\r\n");
    }
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).to_string();
    let status: u16 = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    json_of(status, body)
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/plugins")
        .join(name)
}

/// The v5-valid fixture as version `version`.
fn valid_plugin(version: &str) -> Vec<u8> {
    let mut m = fixture_files("v5-valid");
    let meta = String::from_utf8(m.read("metadata.yaml").unwrap()).unwrap();
    m.add(
        "metadata.yaml",
        meta.replace("version: '1.0.0'", &format!("version: '{version}'")),
    )
    .unwrap();
    build(&m, &format!("v5-valid-{version}"))
}

/// The v5-valid fixture with `path` replaced by `text`.
fn plugin_with(path: &str, text: &str) -> Vec<u8> {
    let mut m = fixture_files("v5-valid");
    m.add(path, text).unwrap();
    build(&m, "v5-valid-1.0.0")
}

/// Nine levels of ten aliases: 10^9 leaves from under 1 KiB.
fn laughs(indent: &str) -> String {
    let mut text = format!("{indent}a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let p = i - 1;
        let refs = vec![format!("*a{p}"); 10].join(", ");
        text.push_str(&format!("{indent}a{i}: &a{i} [{refs}]\n"));
    }
    text
}

/// The one diagnostic of a refused plugin that says `needle`.
fn diagnostic<'a>(body: &'a Value, needle: &str) -> &'a Value {
    assert_eq!(body["code"], "invalid_plugin", "{body}");
    body["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["message"].as_str().is_some_and(|m| m.contains(needle)))
        .unwrap_or_else(|| panic!("no diagnostic says {needle:?}: {body:#}"))
}

#[test]
fn yaml_bombs_and_deep_documents_are_refused_within_the_memory_bound() {
    let d = Daemon::start(&[]);

    // 1. The billion laughs, in metadata.yaml and in deployment_tasks.yaml.
    let meta = std::fs::read_to_string(fixture("v5-valid/metadata.yaml")).unwrap();
    let bomb = plugin_with("metadata.yaml", &format!("{meta}bomb:\n{}", laughs("  ")));
    assert!(bomb.len() < 4096, "{} bytes", bomb.len());
    let (status, body) = d.post(&bomb);
    assert_eq!(status, 400, "{body}");
    let diag = diagnostic(&body, "YAML nodes");
    assert_eq!(diag["file"], "metadata.yaml", "{diag}");
    assert!(diag["line"].as_u64().unwrap() > 17, "{diag}");
    d.within_bound("alias bomb in metadata.yaml");

    let tasks = format!(
        "- id: x\n  type: shell\n  version: 2.0.0\n  role: ['*']\n  parameters:\n    cmd: echo\n    \
         timeout: 1\n    bomb:\n{}",
        laughs("      ")
    );
    let (status, body) = d.post(&plugin_with("deployment_tasks.yaml", &tasks));
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        diagnostic(&body, "YAML nodes")["file"],
        "deployment_tasks.yaml"
    );
    d.within_bound("alias bomb in deployment_tasks.yaml");

    // 2. Nested 50,000 levels deep, in block and in flow style.
    let deep = format!("{meta}deep:\n{}1\n", "- ".repeat(50_000));
    let (status, body) = d.post(&plugin_with("metadata.yaml", &deep));
    assert_eq!(status, 400, "{body}");
    let diag = diagnostic(&body, "nests deeper than 100 levels");
    assert_eq!(diag["file"], "metadata.yaml", "{diag}");
    assert!(diag["line"].as_u64().unwrap() >= 18, "{diag}");
    let flow = format!("{}1{}\n", "[".repeat(50_000), "]".repeat(50_000));
    let (status, body) = d.post(&plugin_with("deployment_tasks.yaml", &flow));
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        diagnostic(&body, "nest too deep")["file"],
        "deployment_tasks.yaml"
    );
    d.within_bound("deep YAML");

    // 3. An alias that is shallow where it is written but deep once expanded.
    let nest = |n: usize, inner: &str| format!("{}{inner}{}", "[".repeat(n), "]".repeat(n));
    let text = format!("{meta}a: &a {}\nb: {}\n", nest(90, "1"), nest(90, "*a"));
    let (status, body) = d.post(&plugin_with("metadata.yaml", &text));
    assert_eq!(status, 400, "{body}");
    diagnostic(&body, "this alias, expanded, nests deeper");

    // 4. A release whose base names itself was a stack overflow.
    let mut release = fixture_files("v5-release-valid");
    release
        .add("template.yaml", "base_release_path: template.yaml\n")
        .unwrap();
    let (status, body) = d.post(&build(&release, "fixture-release-1.0.0"));
    assert_eq!(status, 400, "{body}");
    diagnostic(&body, "base_release_path files chain deeper than 8");

    // 5. YAQL conditions nested 30,000 deep, and 100,000 deep (past the length parsed).
    let task = |id: &str, n: usize| {
        format!(
            "- id: {id}\n  type: shell\n  version: 2.0.0\n  role: ['*']\n  condition:\n    \
             yaql_exp: '{}1{}'\n  parameters: {{cmd: echo, timeout: 1}}\n",
            "(".repeat(n),
            ")".repeat(n)
        )
    };
    let yaql = format!("{}{}", task("deep", 30_000), task("long", 100_000));
    let (status, body) = d.post(&plugin_with("deployment_tasks.yaml", &yaql));
    assert_eq!(status, 400, "{body}");
    let deep = diagnostic(&body, "RecursionError");
    assert_eq!(
        (deep["file"].as_str(), deep["line"].as_u64()),
        (Some("deployment_tasks.yaml"), Some(6)),
        "{deep}"
    );
    let long = diagnostic(&body, "200001 bytes long");
    assert_eq!(long["line"], 13, "{long}");

    d.within_bound("every YAML and YAQL attack");
    d.still_works("2.0.0");
}

/// Deflate `data` as a segment that stands alone (a full flush: no reference to what came
/// before it), so the segment may be repeated.
fn segment(c: &mut flate2::Compress, data: &[u8], flush: flate2::FlushCompress) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() / 2 + 4096);
    let start = c.total_in();
    loop {
        let done = (c.total_in() - start) as usize;
        if out.len() == out.capacity() {
            out.reserve(64 << 10);
        }
        let status = c.compress_vec(&data[done..], &mut out, flush).unwrap();
        let all_in = (c.total_in() - start) as usize == data.len();
        if all_in && (status == flate2::Status::StreamEnd || out.len() < out.capacity()) {
            return out;
        }
    }
}

/// Part of a stream to gzip: bytes as given, or `n` MiB of one byte.
enum Part {
    Bytes(Vec<u8>),
    Fill(u8, u64),
}

/// A gzip stream of `parts`, built without compressing a fill more than once: a 1 MiB
/// segment of it is deflated once and repeated (CRC and size in the trailer are exact).
fn gzip_of(parts: &[Part]) -> Vec<u8> {
    let mut c = flate2::Compress::new(Compression::best(), false);
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 255];
    let mut crc = flate2::Crc::new();
    for part in parts {
        match part {
            Part::Bytes(bytes) => {
                out.extend(segment(&mut c, bytes, flate2::FlushCompress::Full));
                crc.update(bytes);
            }
            Part::Fill(byte, mib) => {
                let block = vec![*byte; 1 << 20];
                let repeat = segment(&mut c, &block, flate2::FlushCompress::Full);
                let mut block_crc = flate2::Crc::new();
                block_crc.update(&block);
                for _ in 0..*mib {
                    out.extend_from_slice(&repeat);
                    crc.combine(&block_crc);
                }
            }
        }
    }
    out.extend(segment(&mut c, &[], flate2::FlushCompress::Finish));
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&crc.amount().to_le_bytes());
    out
}

/// A tar header for `name`, `size` bytes, of `kind`.
fn header(name: &[u8], size: u64, kind: tar::EntryType) -> Vec<u8> {
    let mut h = tar::Header::new_gnu();
    h.as_old_mut().name[..name.len()].copy_from_slice(name);
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(0o644);
    h.set_cksum();
    h.as_bytes().to_vec()
}

/// A package of 1 GiB of zeros in eight members of 128 MiB (each under the per-file
/// limit, so only counting what comes out of the decoder stops it): about 1,000 to 1.
fn gzip_bomb() -> Vec<u8> {
    let mut meta = header(b"bomb-1.0.0/metadata.yaml", 2, tar::EntryType::Regular);
    let mut data = b"{}".to_vec();
    data.resize(512, 0);
    meta.extend(data);
    let mut parts = vec![Part::Bytes(meta)];
    for i in 0..8 {
        let name = format!("bomb-1.0.0/zeros-{i}");
        parts.push(Part::Bytes(header(
            name.as_bytes(),
            128 << 20,
            tar::EntryType::Regular,
        )));
        parts.push(Part::Fill(0, 128));
    }
    parts.push(Part::Bytes(vec![0; 1024]));
    gzip_of(&parts)
}

#[test]
fn gzip_bombs_are_refused_within_the_memory_bound() {
    let d = Daemon::start(&[]);
    let started = Instant::now();
    let bomb = gzip_bomb();
    eprintln!(
        "a {} KiB gzip of 1 GiB of zeros, built in {:?}",
        bomb.len() >> 10,
        started.elapsed()
    );
    assert!(bomb.len() < 1_200_000, "{}", bomb.len());
    let check = |status: u16, body: &Value| {
        assert_eq!(
            (status, body["code"].as_str()),
            (413, Some("payload_too_large")),
            "{body}"
        );
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains("times its compressed size")
                && message.contains("plugins.max_ratio")
                && message.contains("entry \"bomb-1.0.0/zeros-0\""),
            "{message}"
        );
    };
    let (status, body) = d.post(&bomb);
    check(status, &body);
    d.within_bound("one gzip bomb");
    d.no_leftovers();

    // Four at once.
    let url = d.url("/api/v1/plugins");
    let answers: Vec<(u16, Value)> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..4)
            .map(|_| s.spawn(|| post_package(&url, &bomb)))
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    for (status, body) in &answers {
        check(*status, body);
    }
    d.within_bound("four gzip bombs at once");
    d.no_leftovers();

    // A GNU long name of 512 MiB: tar readers keep such a header in memory whole.
    let head = header(b"././@LongLink", 512 << 20, tar::EntryType::GNULongName);
    let long = gzip_of(&[
        Part::Bytes(head),
        Part::Fill(b'a', 512),
        Part::Bytes(vec![0; 1024]),
    ]);
    let (status, body) = d.post(&long);
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("a GNU long name of 536870912 bytes (at most 4096"),
        "{body}"
    );
    d.within_bound("a huge tar header");

    d.still_works("2.0.0");
    d.within_bound("the bombs and a valid install");
}

#[test]
fn an_upload_past_the_limit_is_refused_with_413_json() {
    let d = Daemon::start(&["--plugins-max-upload-bytes", "1MiB"]);
    let big: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    for chunked in [false, true] {
        let (status, body) = post_raw(&d.served.addr, "/api/v1/plugins", &big, chunked);
        assert_eq!(
            body,
            json!({
                "code": "payload_too_large",
                "message": "the package is larger than 1048576 bytes (1 MiB) (plugins.max_upload_bytes)"
            }),
            "chunked: {chunked}"
        );
        assert_eq!(status, 413);
        d.no_leftovers();
    }
    d.within_bound("uploads past the limit");
    d.still_works("2.0.0");
}

/// A tar.gz of the v5-valid package plus one member written as given.
fn with_member(kind: tar::EntryType, name: &[u8], link: Option<&str>) -> Vec<u8> {
    let files = fixture_files("v5-valid");
    let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
    for e in files.entries() {
        let mut h = tar::Header::new_gnu();
        let path = format!("v5-valid-1.0.0/{}", e.path);
        if e.is_dir {
            h.set_entry_type(tar::EntryType::Directory);
            h.set_size(0);
            tar.append_data(&mut h, format!("{path}/"), std::io::empty())
                .unwrap();
        } else {
            let data = files.read(&e.path).unwrap();
            h.set_size(data.len() as u64);
            tar.append_data(&mut h, path, data.as_slice()).unwrap();
        }
    }
    let mut h = tar::Header::new_gnu();
    h.as_old_mut().name[..name.len()].copy_from_slice(name);
    h.set_entry_type(kind);
    h.set_size(0);
    if let Some(target) = link {
        h.set_link_name(target).unwrap();
    }
    h.set_cksum();
    tar.append(&h, std::io::empty()).unwrap();
    tar.into_inner().unwrap().finish().unwrap()
}

#[test]
fn links_devices_fifos_sparse_files_and_escaping_paths_are_refused_by_name() {
    use tar::EntryType as T;
    let d = Daemon::start(&[]);
    let cases: [(T, &[u8], Option<&str>, &str); 8] = [
        (
            T::Symlink,
            b"v5-valid-1.0.0/deployment_scripts/x",
            Some("/etc/shadow"),
            "entry \"v5-valid-1.0.0/deployment_scripts/x\" is a symbolic link; links are not \
             allowed in a package (it points to \"/etc/shadow\")",
        ),
        (
            T::Link,
            b"v5-valid-1.0.0/h",
            Some("../../../etc/shadow"),
            "entry \"v5-valid-1.0.0/h\" is a hard link",
        ),
        (
            T::Fifo,
            b"v5-valid-1.0.0/fifo",
            None,
            "entry \"v5-valid-1.0.0/fifo\" is a FIFO",
        ),
        (
            T::Char,
            b"v5-valid-1.0.0/null",
            None,
            "entry \"v5-valid-1.0.0/null\" is a character device",
        ),
        (
            T::Block,
            b"v5-valid-1.0.0/sda",
            None,
            "entry \"v5-valid-1.0.0/sda\" is a block device",
        ),
        (
            T::GNUSparse,
            b"v5-valid-1.0.0/holes",
            None,
            "entry \"v5-valid-1.0.0/holes\" is a GNU sparse file",
        ),
        (
            T::Regular,
            b"/etc/cron.d/stoker",
            None,
            "entry \"/etc/cron.d/stoker\" leaves the package",
        ),
        (
            T::Regular,
            b"v5-valid-1.0.0/../../x",
            None,
            "entry \"v5-valid-1.0.0/../../x\" leaves the package",
        ),
    ];
    for (kind, name, link, expected) in cases {
        let (status, body) = d.post(&with_member(kind, name, link));
        assert_eq!(
            (status, body["code"].as_str()),
            (400, Some("bad_request")),
            "{body}"
        );
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains(expected),
            "{message}\nexpected: {expected}"
        );
        d.no_leftovers();
    }
    assert!(!d.data().join("plugins/v5-valid-1.0.0").exists());

    // Folders nested past what a package is read to (64) are the package's fault: a 400.
    let mut deep = fixture_files("v5-valid");
    deep.add(&format!("{}x.txt", "d/".repeat(70)), "x").unwrap();
    let (status, body) = d.post(&build(&deep, "v5-valid-1.0.0"));
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("bad_request")),
        "{body}"
    );
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("directories nest too deep")
            && !message.contains(&*d.data().to_string_lossy()),
        "{message}"
    );
    d.no_leftovers();
    d.still_works("1.0.0");
}

#[test]
fn graphs_with_a_cycle_or_unknown_tasks_are_refused_at_install() {
    let d = Daemon::start(&[]);
    let mut release = fixture_files("v5-release-valid");
    release
        .add(
            "graphs/default/c-cycle.yaml",
            "- {id: a, type: shell, version: 2.1.0, roles: ['*'], requires: [b], \
             parameters: {cmd: x, timeout: 1}}\n\
             - {id: b, type: shell, version: 2.1.0, roles: ['*'], requires: [a], \
             parameters: {cmd: x, timeout: 1}}\n\
             - {id: c, type: shell, version: 2.1.0, roles: ['*'], requires: [nowhere], \
             parameters: {cmd: x, timeout: 1}}\n",
        )
        .unwrap();
    let (status, body) = d.post(&build(&release, "fixture-release-1.0.0"));
    assert_eq!(status, 400, "{body}");
    let cycle = diagnostic(&body, "make a cycle");
    assert_eq!(
        (cycle["file"].as_str(), cycle["line"].as_u64()),
        (Some("graphs/default/c-cycle.yaml"), Some(1)),
        "{cycle}"
    );
    let message = cycle["message"].as_str().unwrap();
    assert!(
        message.contains("a (") && message.contains("-> b ("),
        "{message}"
    );
    let unknown = diagnostic(
        &body,
        "task c requires nowhere, which no task of the graph defines",
    );
    assert_eq!(unknown["line"], 3);

    // An extension plugin may name the release's tasks, but not wait for itself.
    let tasks = std::fs::read_to_string(fixture("v5-valid/deployment_tasks.yaml")).unwrap();
    let looped = tasks.replace(
        "requires: [deploy_start]",
        "requires: [deploy_start, fixture-deploy]",
    );
    let (status, body) = d.post(&plugin_with("deployment_tasks.yaml", &looped));
    assert_eq!(status, 400, "{body}");
    diagnostic(&body, "fixture-deploy (deployment_tasks.yaml:1");
    d.no_leftovers();
    d.still_works("1.0.0");
}

/// A package as a gzipped tar without compression.
fn stored(files: &MemFiles, top: &str) -> Vec<u8> {
    let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::none()));
    for e in files.entries() {
        let mut h = tar::Header::new_gnu();
        if e.is_dir {
            h.set_entry_type(tar::EntryType::Directory);
            h.set_size(0);
            tar.append_data(&mut h, format!("{top}/{}/", e.path), std::io::empty())
                .unwrap();
        } else {
            let data = files.read(&e.path).unwrap();
            h.set_size(data.len() as u64);
            tar.append_data(&mut h, format!("{top}/{}", e.path), data.as_slice())
                .unwrap();
        }
    }
    tar.into_inner().unwrap().finish().unwrap()
}

/// Every file of a package, path → bytes.
fn contents(files: &dyn PackageFiles) -> Vec<(String, Vec<u8>)> {
    files
        .entries()
        .into_iter()
        .filter(|e| !e.is_dir)
        .map(|e| {
            let bytes = files.read(&e.path).unwrap();
            (e.path, bytes)
        })
        .collect()
}

#[test]
fn concurrent_installs_of_one_plugin_serialize_and_the_winner_is_complete() {
    let d = Daemon::start(&[]);
    // A few hundred files of noise, so that a shared or half-written folder would show.
    let mut m = fixture_files("v5-valid");
    for i in 0..300u32 {
        let noise: Vec<u8> = (0..3_000 + i)
            .map(|j| (j.wrapping_add(i << 16).wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        m.add(&format!("repositories/ubuntu/pool/p{i:03}.deb"), noise)
            .unwrap();
    }
    let bytes = build(&m, "v5-valid-1.0.0");
    let url = d.url("/api/v1/plugins");
    let answers: Vec<(u16, Value)> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..6)
            .map(|_| s.spawn(|| post_package(&url, &bytes)))
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let created = answers.iter().filter(|(s, _)| *s == 201).count();
    let refused: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == 409)
        .map(|(_, b)| b)
        .collect();
    assert_eq!((created, refused.len()), (1, 5), "{answers:#?}");
    for body in refused {
        assert_eq!(body["code"], "conflict", "{body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("plugin v5-valid 1.0.0 is already installed"),
            "{body}"
        );
    }
    let installed = DirFiles::new(&d.data().join("plugins/v5-valid-1.0.0")).unwrap();
    assert_eq!(contents(&installed), contents(&m));
    let (_, plugins) = get(&d.url("/api/v1/plugins"));
    assert_eq!(plugins.as_array().unwrap().len(), 1, "{plugins}");
    d.no_leftovers();
    d.within_bound("six concurrent installs");
}

#[test]
fn an_install_killed_midway_leaves_nothing_after_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let plugins = data.join("plugins");
    // About 60 MiB in 600 files, stored without compression (quick to build in a debug
    // test): long enough to be caught at every step.
    let mut m = fixture_files("v5-valid");
    for i in 0..600u32 {
        let fill = b'a' + (i % 26) as u8;
        m.add(
            &format!("repositories/ubuntu/pool/p{i:03}.deb"),
            vec![fill; 100_000],
        )
        .unwrap();
    }
    let bytes = stored(&m, "v5-valid-1.0.0");
    let hidden = |prefix: &str| {
        std::fs::read_dir(&plugins).is_ok_and(|r| {
            r.filter_map(Result::ok)
                .any(|e| e.file_name().to_string_lossy().starts_with(prefix))
        })
    };
    let mut caught = Vec::new();
    for prefix in [".upload-", ".staging-", ".pending-"] {
        let served = Served::spawn(command(&data, &[]));
        crate::common::sign_in(&format!("http://{}", served.addr), &data);
        let url = format!("http://{}/api/v1/plugins", served.addr);
        let body = bytes.clone();
        let auth = bearer(&url);
        let upload = std::thread::spawn(move || {
            let _ = agent()
                .post(&url)
                .header("authorization", &auth)
                .header("content-type", "application/gzip")
                .send(&body[..]);
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while !hidden(prefix) && Instant::now() < deadline && !upload.is_finished() {
            std::thread::sleep(Duration::from_micros(200));
        }
        if hidden(prefix) {
            caught.push(prefix);
        }
        let status = Command::new("kill")
            .args(["-KILL", &served.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let _ = upload.join();
        drop(served);

        // The next start clears what was left: either the plugin is installed whole, or it
        // is not there at all.
        let served = Served::spawn(command(&data, &[]));
        crate::common::sign_in(&format!("http://{}", served.addr), &data);
        let left: Vec<String> = std::fs::read_dir(&plugins)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        let (_, listed) = get(&format!("http://{}/api/v1/plugins", served.addr));
        match listed.as_array().unwrap().len() {
            0 => assert!(left.is_empty(), "after a kill at {prefix}: {left:?}"),
            1 => {
                assert_eq!(left, ["v5-valid-1.0.0"], "after a kill at {prefix}");
                let installed = DirFiles::new(&plugins.join("v5-valid-1.0.0")).unwrap();
                assert_eq!(contents(&installed), contents(&m));
                // Start over for the next step.
                let url = format!("http://{}/api/v1/plugins/v5-valid", served.addr);
                let r = agent()
                    .delete(&url)
                    .header("authorization", &bearer(&url))
                    .call()
                    .unwrap();
                assert_eq!(r.status().as_u16(), 200);
            }
            n => panic!("{n} plugins after a kill at {prefix}"),
        }
        let status = Command::new("kill")
            .args(["-TERM", &served.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        served.wait();
    }
    eprintln!("killed while {caught:?} existed");
    // The upload and the unpacking take long enough to be caught every time; the last rename
    // is a moment, so it is caught only sometimes (and then the next start finishes it).
    assert!(
        caught.contains(&".upload-") && caught.contains(&".staging-"),
        "{caught:?}"
    );
}

#[test]
fn deep_json_bodies_are_clean_400s() {
    let d = Daemon::start(&[]);
    let deep = "[".repeat(100_000);
    // Both under the 256 KiB that these endpoints read.
    let deep_object = format!("{}1{}", "{\"a\":".repeat(40_000), "}".repeat(40_000));
    for (method, path) in [
        ("POST", "/api/v1/agent/hello"),
        ("POST", "/api/nodes"),
        ("PUT", "/api/nodes/agent"),
        ("POST", "/api/v1/clusters"),
        ("PUT", "/api/v1/clusters/1/settings"),
        ("POST", "/api/v1/clusters/1/deploy"),
        ("POST", "/api/v1/clusters/1/assignment"),
    ] {
        for text in [&deep, &deep_object] {
            let (status, body) = send(method, &d.url(path), text.as_bytes(), "application/json");
            // Typed documents (an inventory) fail at the first wrong type or skip an unknown
            // field without recursing; untyped ones (settings, steps) stop at serde_json's
            // depth limit of 128.
            let message = body["message"].as_str().unwrap_or("");
            let code = body["code"].as_str().unwrap_or("");
            assert!(
                status == 400 && matches!(code, "invalid_json" | "invalid_input"),
                "{method} {path}: {status} {body}"
            );
            if path.ends_with("/settings") {
                assert!(
                    message.contains("recursion limit exceeded"),
                    "{path}: {body}"
                );
            }
        }
    }
    // A user step's args are free JSON.
    let steps = format!(
        r#"{{"steps": [{{"interface": "deploy", "step": "x", "priority": 1, "args": {{"a": {}1{}}}}}]}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let (status, body) = send(
        "POST",
        &d.url("/api/v1/clusters/1/deploy"),
        steps.as_bytes(),
        "application/json",
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("recursion limit exceeded"),
        "{body}"
    );
    // Past what an endpoint reads, the answer is a JSON 413 too (actix's own is text).
    let big = format!("[{}1]", "1,".repeat(200_000));
    for (method, path) in [
        ("POST", "/api/v1/agent/hello"),
        ("PUT", "/api/v1/clusters/1/settings"),
    ] {
        let (status, body) = send(method, &d.url(path), big.as_bytes(), "application/json");
        assert_eq!(
            (status, body["code"].as_str()),
            (413, Some("payload_too_large")),
            "{method} {path}: {body}"
        );
    }
    d.healthy();
    d.within_bound("deep JSON");
}

#[test]
fn the_yaql_cli_reads_yaml_within_the_same_bounds() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("bomb.yaml", laughs("")),
        ("deep.yaml", format!("{}1\n", "- ".repeat(50_000))),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = Command::new("prlimit")
            .arg(ADDRESS_SPACE)
            .arg(STOKER)
            .args(["yaql", "eval", "$", "--data"])
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("parsing YAML {}", path.display())),
            "{stderr}"
        );
    }
}

#[test]
fn error_answers_name_no_host_path() {
    let d = Daemon::start(&["--plugins-bundled", "install"]);
    let data = d.data().display().to_string();
    let (_, releases) = get(&d.url("/api/v1/releases"));
    let release = releases[0]["id"].as_i64().unwrap();
    let (status, cluster) = send(
        "POST",
        &d.url("/api/v1/clusters"),
        format!(r#"{{"name": "env", "release_id": {release}}}"#).as_bytes(),
        "application/json",
    );
    assert_eq!(status, 201, "{cluster}");
    let cluster = cluster["id"].as_i64().unwrap();
    let hello = super::common::inventory("52:54:00:00:20:01").to_string();
    let (status, node) = send(
        "POST",
        &d.url("/api/v1/agent/hello"),
        hello.as_bytes(),
        "application/json",
    );
    assert_eq!(status, 201, "{node}");
    let node = node["node"]["id"].as_i64().unwrap();
    let (status, body) = send(
        "PUT",
        &d.url(&format!("/api/v1/clusters/{cluster}/nodes/{node}")),
        br#"{"roles": ["controller"]}"#,
        "application/json",
    );
    assert_eq!(status, 200, "{body}");
    let (status, plan) = get(&d.url(&format!("/api/v1/clusters/{cluster}/plan")));
    assert_eq!(status, 200, "{plan}");

    // The release's folder gone: the plan fails naming it as the store does.
    let plugins = d.data().join("plugins");
    let folder = std::fs::read_dir(&plugins)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name();
    std::fs::rename(plugins.join(&folder), d.dir.path().join("moved")).unwrap();
    // A change of input, so the plan is made anew rather than answered from the kept one.
    let (status, body) = send(
        "PUT",
        &d.url(&format!("/api/v1/clusters/{cluster}/nodes/{node}")),
        br#"{"roles": ["compute"]}"#,
        "application/json",
    );
    assert_eq!(status, 200, "{body}");
    let mut answers = vec![get(&d.url(&format!("/api/v1/clusters/{cluster}/plan")))];
    answers.push(get(&d.url("/boot/images/vmlinuz")));
    answers.push(get(&d.url("/boot/ipxe/nothing.efi")));
    for (status, body) in &answers {
        let message = body["message"].as_str().unwrap();
        assert!(
            *status >= 400 && !message.contains(&data),
            "{status} {message}"
        );
    }
    assert!(
        answers[0].1["message"]
            .as_str()
            .unwrap()
            .contains(&format!("plugins/{}", folder.to_string_lossy())),
        "{}",
        answers[0].1
    );
    assert!(
        answers[1].1["message"]
            .as_str()
            .unwrap()
            .contains("images/ in the data directory")
    );
}
