//! OpenIPMI's BMC simulator, `ipmi_sim` (Debian package `openipmi`), serving IPMI 2.0 on a free
//! UDP port of 127.0.0.1 for the IPMI driver's tests, with a chassis whose power and boot device
//! live in files: ipmi_sim runs the `chassis_control` script of its config for every chassis
//! command (`<script> 0x20 get power`, `set power 0|1`, `set reset 1`, `set shutdown 1`,
//! `set boot pxe|default|...`), and the script here keeps the state in `power` and `boot` and logs
//! each call to `calls.log`. The simulator is killed by its PID when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use stoker::bmc::{Driver, Endpoint};

pub const USER: &str = "admin";
pub const PASSWORD: &str = "secret";

/// The chassis: state in files next to the script, every call logged; `set` fails while a file
/// `refuse` exists, as a BMC refusing the command would.
const CHASSIS: &str = r#"#!/bin/sh
d=$(dirname "$0")
echo "$*" >> "$d/calls.log"
shift
op=$1
shift
case $op in
get)
    for p in "$@"; do
        case $p in
        power) echo "power:$(cat "$d/power")" ;;
        boot) echo "boot:$(cat "$d/boot")" ;;
        *) echo "unknown parameter $p"; exit 1 ;;
        esac
    done
    ;;
set)
    if [ -e "$d/refuse" ]; then echo "refused by the test"; exit 1; fi
    while [ $# -ge 2 ]; do
        case $1 in
        power) echo "$2" > "$d/power" ;;
        # ACPI soft-off: the OS shuts down at once.
        shutdown) echo 0 > "$d/power" ;;
        # A reset is a pulse; the power stays as it is.
        reset) ;;
        boot) echo "$2" > "$d/boot" ;;
        *) echo "unknown parameter $1"; exit 1 ;;
        esac
        shift 2
    done
    ;;
*) echo "unknown operation $op"; exit 1 ;;
esac
"#;

/// The tool at `path`, or a panic saying how to get it: the tests that need these must fail,
/// not pass, where they are missing.
fn required(found: Option<PathBuf>, name: &str, package: &str) -> PathBuf {
    match found {
        Some(p) if p.is_file() => p,
        _ => panic!(
            "{name} is not installed: this test needs the Debian package {package} \
             (.ci/bmc-emulators.sh installs it)"
        ),
    }
}

/// `ipmitool` as the driver finds it (`STOKER_IPMITOOL` or `PATH`).
pub fn ipmitool() -> PathBuf {
    required(stoker::bmc::ipmi::locate_ipmitool(), "ipmitool", "ipmitool")
}

/// A UDP port of 127.0.0.1 nothing is bound to (the kernel's pick for port 0, released).
pub fn free_udp_port() -> u16 {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.local_addr().unwrap().port()
}

/// Whether a UDP socket is bound to 127.0.0.1:`port` (or to every address), from
/// /proc/net/udp: probing by binding it ourselves could take the port from under ipmi_sim.
fn udp_bound(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
    let wanted = [
        format!("0100007F:{port:04X}"),
        format!("00000000:{port:04X}"),
    ];
    table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1))
        .any(|local| wanted.iter().any(|w| w == local))
}

pub struct IpmiSim {
    child: Child,
    dir: tempfile::TempDir,
    pub port: u16,
}

impl IpmiSim {
    /// Start a simulator on a free port and wait until it listens.
    pub fn start() -> IpmiSim {
        ipmitool();
        let ipmi_sim = required(
            stoker::agent::exec::find_on_path("ipmi_sim"),
            "ipmi_sim",
            "openipmi",
        );
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let script = d.join("chassis");
        assert!(
            !script.display().to_string().contains(char::is_whitespace),
            "{script:?}: ipmi_sim runs the chassis_control line through sh"
        );
        std::fs::write(&script, CHASSIS).unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(d.join("power"), "0\n").unwrap();
        std::fs::write(d.join("boot"), "default\n").unwrap();
        std::fs::create_dir(d.join("state")).unwrap();

        let port = free_udp_port();
        assert!(!udp_bound(port), "port {port} is taken");
        // ipmi_lan(5): one LAN channel on 127.0.0.1:port; IPMI 2.0 sessions (RMCP+) need the
        // guid. Users are read from here only while the state directory has none of its own,
        // and the state directory is new.
        let conf = format!(
            r#"name "stoker-test"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 {port}
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a123456789abcdefa123456789abcdef
  endlan
  chassis_control "{script} 0x20"
  user 2 true "{USER}" "{PASSWORD}" admin 10 none md2 md5 straight
"#,
            script = script.display()
        );
        std::fs::write(d.join("lan.conf"), conf).unwrap();
        // ipmi_sim_cmd(5): the BMC at IPMB 0x20. Without mc_setbmc ipmi_sim exits at once
        // ("No bmc_ipmb specified or configured", to syslog only).
        std::fs::write(
            d.join("ipmisim.emu"),
            "mc_setbmc 0x20\n\
             mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\n\
             mc_enable 0x20\n",
        )
        .unwrap();
        let log = std::fs::File::create(d.join("ipmi_sim.log")).unwrap();
        // -n: no console on stdin/stdout; -s: persistent state (users, SDRs) in the temporary
        // directory instead of /var/lib/ipmi_sim.
        let mut child = Command::new(ipmi_sim)
            .arg("-c")
            .arg(d.join("lan.conf"))
            .arg("-f")
            .arg(d.join("ipmisim.emu"))
            .arg("-n")
            .arg("-s")
            .arg(d.join("state"))
            .current_dir(d)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let started = Instant::now();
        while !udp_bound(port) {
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "ipmi_sim exited ({status}) before listening on 127.0.0.1:{port}: {}",
                    std::fs::read_to_string(d.join("ipmi_sim.log")).unwrap_or_default()
                );
            }
            if started.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("ipmi_sim did not listen on 127.0.0.1:{port} within 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        IpmiSim { child, dir, port }
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn endpoint(&self) -> Endpoint {
        Endpoint {
            driver: Driver::Ipmi,
            address: self.address(),
            username: USER.to_string(),
            password: PASSWORD.to_string(),
            verify_tls: false,
            timeout: Duration::from_secs(10),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    /// The chassis power as the script keeps it: "1" on, "0" off.
    pub fn power(&self) -> String {
        self.read("power")
    }

    /// The boot device last set: "pxe", "default" (a hard disk), ...
    pub fn boot(&self) -> String {
        self.read("boot")
    }

    /// Every call of the chassis script so far, "get power", "set power 1", ... (without the
    /// MC address).
    pub fn calls(&self) -> Vec<String> {
        self.read("calls.log")
            .lines()
            .map(|l| l.strip_prefix("0x20 ").unwrap_or(l).to_string())
            .collect()
    }

    /// Make the chassis refuse (or accept again) every `set`.
    pub fn refuse(&self, refuse: bool) {
        let flag = self.path("refuse");
        if refuse {
            std::fs::write(flag, "").unwrap();
        } else if Path::new(&flag).exists() {
            std::fs::remove_file(flag).unwrap();
        }
    }
}

impl Drop for IpmiSim {
    fn drop(&mut self) {
        // SIGKILL to ipmi_sim's own PID, then reap it.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
