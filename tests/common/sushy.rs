//! The real sushy-tools emulator (`sushy-emulator`, PyPI sushy-tools 2.2.0) run for a test: a
//! configuration file written into a temporary directory (with its own state directory, so runs
//! share nothing), a free loopback port, readiness when `/redfish/v1/` answers, and the process
//! killed by its PID when the value is dropped. Its executable comes from `SUSHY_EMULATOR`;
//! tests that need it are ignored by default and fail (not pass) when run without it.
//!
//! Also the libvirt pieces the emulator's libvirt driver works on (a domain, a dir storage
//! pool), each removed by its guard's `Drop` even when the test fails.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An environment variable a test cannot run without; unset is a failure naming the script
/// that installs what it names.
pub fn required_env(name: &str) -> String {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v,
        _ => panic!(
            "{name} is not set: this test needs sushy-tools' emulator (and libvirt for \
             SUSHY_LIBVIRT_URI); run .ci/bmc-emulators.sh as root and export what it prints"
        ),
    }
}

/// A free port on loopback (bound then released; the emulator binds it next).
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The Python interpreter of the emulator's virtualenv (its script's `#!` line).
pub fn python_of(emulator: &Path) -> PathBuf {
    let script = std::fs::read_to_string(emulator)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", emulator.display()));
    let shebang = script.lines().next().unwrap_or_default();
    let interp = shebang.trim_start_matches("#!").split_whitespace().next();
    match interp {
        Some(p) if Path::new(p).is_file() => PathBuf::from(p),
        _ => emulator.with_file_name("python3"),
    }
}

/// An htpasswd line for `user` with a bcrypt digest (the only kind sushy-tools'
/// `auth_basic.py` takes), made with the `bcrypt` module of the emulator's own Python. Cost 4,
/// the least bcrypt allows: the emulator checks it on every request.
pub fn htpasswd_line(emulator: &Path, user: &str, password: &str) -> String {
    let out = Command::new(python_of(emulator))
        .args([
            "-c",
            "import bcrypt, sys; \
             print(bcrypt.hashpw(sys.argv[1].encode(), bcrypt.gensalt(rounds=4)).decode())",
            password,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bcrypt in the emulator's Python: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!("{user}:{}", String::from_utf8_lossy(&out.stdout).trim())
}

/// A running emulator.
pub struct Sushy {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl Drop for Sushy {
    fn drop(&mut self) {
        // Our own child, by its PID.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sushy {
    /// Start the emulator with `config` (Python, appended after the state directory's line).
    pub fn start(config: &str) -> Sushy {
        let emulator = PathBuf::from(required_env("SUSHY_EMULATOR"));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("emulator.conf");
        let state = dir.path().join("state");
        std::fs::write(
            &file,
            format!(
                "SUSHY_EMULATOR_STATE_DIR = {:?}\n{config}\n",
                state.display().to_string()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("emulator.log")).unwrap();
        let port = free_port();
        let child = Command::new(&emulator)
            .arg("--config")
            .arg(&file)
            .args(["--interface", "127.0.0.1", "--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", emulator.display()));
        let mut sushy = Sushy { child, port, dir };
        sushy.wait_ready();
        sushy
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn log(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(self.dir.path().join("emulator.log")) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    fn wait_ready(&mut self) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(2)))
            .build()
            .into();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("sushy-emulator exited ({status}):\n{}", self.log());
            }
            if let Ok(r) = agent.get(self.url("/redfish/v1/")).call()
                && r.status() == 200
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("sushy-emulator did not answer within 30 s:\n{}", self.log());
    }
}

/// `virsh -c URI args...`, which must succeed.
pub fn virsh(uri: &str, args: &[&str]) -> String {
    let out = Command::new("virsh")
        .arg("-c")
        .arg(uri)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run virsh: {e}"));
    assert!(
        out.status.success(),
        "virsh {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn virsh_quiet(uri: &str, args: &[&str]) {
    let _ = Command::new("virsh")
        .arg("-c")
        .arg(uri)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// A unique name and a random UUID for this test run.
pub fn unique(prefix: &str) -> (String, String) {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).unwrap();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    let uuid = format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    );
    (format!("{prefix}-{}", &hex[..12]), uuid)
}

/// A libvirt domain defined for a test (no disk, no NIC, never started), undefined on drop.
pub struct Domain {
    uri: String,
    pub uuid: String,
}

impl Domain {
    pub fn define(uri: &str, dir: &Path) -> Domain {
        let (name, uuid) = unique("stoker-redfish");
        let xml = format!(
            "<domain type='qemu'>\n  <name>{name}</name>\n  <uuid>{uuid}</uuid>\n  \
             <memory unit='MiB'>64</memory>\n  <vcpu>1</vcpu>\n  <os>\n    \
             <type arch='x86_64' machine='pc'>hvm</type>\n  </os>\n  <devices>\n    \
             <emulator>/usr/bin/qemu-system-x86_64</emulator>\n  </devices>\n</domain>\n"
        );
        let file = dir.join("domain.xml");
        std::fs::write(&file, xml).unwrap();
        virsh(uri, &["define", &file.display().to_string()]);
        Domain {
            uri: uri.to_string(),
            uuid,
        }
    }
}

impl Domain {
    fn exists(&self) -> bool {
        Command::new("virsh")
            .arg("-c")
            .arg(&self.uri)
            .args(["dominfo", &self.uuid])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        virsh_quiet(&self.uri, &["destroy", &self.uuid]);
        virsh_quiet(&self.uri, &["undefine", &self.uuid]);
        // A test that failed while the emulator was redefining the domain (it does so to store
        // BIOS attributes and firmware versions) leaves that define running in libvirtd after
        // the emulator is killed, and it brings the domain back: watch for it a while.
        if std::thread::panicking() {
            for _ in 0..30 {
                std::thread::sleep(Duration::from_secs(2));
                if self.exists() {
                    virsh_quiet(&self.uri, &["undefine", &self.uuid]);
                }
            }
        }
    }
}

/// A libvirt dir storage pool in `dir`, started; stopped and undefined on drop.
pub struct Pool {
    uri: String,
    pub name: String,
}

impl Pool {
    pub fn create(uri: &str, dir: &Path) -> Pool {
        let (name, _) = unique("stoker-redfish-pool");
        let target = dir.display().to_string();
        virsh(
            uri,
            &["pool-define-as", &name, "dir", "--target", target.as_str()],
        );
        let pool = Pool {
            uri: uri.to_string(),
            name,
        };
        virsh(uri, &["pool-start", &pool.name]);
        pool
    }

    /// The names of the pool's volumes.
    pub fn volumes(&self) -> Vec<String> {
        virsh(&self.uri, &["pool-refresh", &self.name]);
        virsh(&self.uri, &["vol-list", "--pool", &self.name])
            .lines()
            .skip(2)
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for v in self.volumes_quiet() {
            virsh_quiet(&self.uri, &["vol-delete", "--pool", &self.name, &v]);
        }
        virsh_quiet(&self.uri, &["pool-destroy", &self.name]);
        virsh_quiet(&self.uri, &["pool-undefine", &self.name]);
    }
}

impl Pool {
    fn volumes_quiet(&self) -> Vec<String> {
        let out = Command::new("virsh")
            .arg("-c")
            .arg(&self.uri)
            .args(["vol-list", "--pool", &self.name])
            .output();
        match out {
            Ok(o) => String::from_utf8_lossy(&o.stdout)
                .lines()
                .skip(2)
                .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// `Authorization: Basic` for a raw request of a test.
pub fn basic(user: &str, password: &str) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let data = format!("{user}:{password}").into_bytes();
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            out.push(if i <= c.len() {
                char::from(A[((n >> (18 - 6 * i)) & 63) as usize])
            } else {
                '='
            });
        }
    }
    format!("Basic {out}")
}
