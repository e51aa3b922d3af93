//! The Redfish driver against two BMCs.
//!
//! A fake BMC on loopback (`common::redfish_bmc`) models what sushy-tools does not and real
//! vendors do: a SessionService (a session made, reused, renewed once after a 401, deleted when
//! the driver is dropped; a wrong password answered 401), ETags required on PATCH, a reset
//! action without ForceRestart or PowerCycle (so Reboot must be ForceOff, wait for Off, On), a
//! system document without `BootSourceOverrideEnabled` that refuses the property, a 400 with
//! `@Message.ExtendedInfo`, an HTML login page, an answer that never comes, a body too large,
//! volumes made through a task monitor and deleted, firmware tasks going Running 30% →
//! Completed or to Exception, and HTTPS with a self-signed certificate.
//!
//! The real sushy-tools emulator (ignored by default; `.ci/bmc-emulators.sh` installs it, and
//! `SUSHY_EMULATOR` / `SUSHY_LIBVIRT_URI` say where) checks the driver against the Redfish
//! service Ironic's own CI uses: its fake driver for power (changes land 1-11 s later) and the
//! boot device behind Basic auth; its libvirt driver, on a domain and a storage pool defined
//! for the test, for BIOS attributes, SimpleUpdate and RAID volumes.

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use stoker::bmc::redfish::Redfish;
use stoker::bmc::{Bmc, BmcError, BootDevice, Driver, Endpoint, PowerAction, PowerState};
use stoker::engine::raid;

use crate::common::redfish_bmc::{self as fake, FakeBmc, PASSWORD, SYSTEM};
use crate::common::sushy::{self, Domain, Pool, Sushy, required_env};

fn driver(bmc: &FakeBmc) -> Redfish {
    Redfish::new(bmc.endpoint("", PASSWORD)).with_poll_interval(Duration::from_millis(10))
}

fn settings(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

#[test]
fn a_session_is_made_once_renewed_after_a_401_and_deleted_when_dropped() {
    let bmc = FakeBmc::start();
    let mut rf = driver(&bmc);
    assert_eq!(rf.power_state().unwrap(), PowerState::On);
    assert_eq!(rf.power_state().unwrap(), PowerState::On);
    assert_eq!(bmc.state().sessions_made, 1, "one session for both calls");
    // The BMC forgets its sessions (a reset of the BMC, a timeout): log in again, once.
    bmc.state().sessions.clear();
    assert_eq!(rf.power_state().unwrap(), PowerState::On);
    assert_eq!(bmc.state().sessions_made, 2);
    drop(rf);
    let st = bmc.state();
    assert_eq!(
        st.sessions_deleted,
        vec!["/redfish/v1/SessionService/Sessions/2"]
    );
    assert!(st.sessions.is_empty(), "no session left open");
    assert!(!st.basic_seen, "a BMC with sessions never sees Basic auth");
}

#[test]
fn a_wrong_password_is_a_credentials_error_that_does_not_repeat_it() {
    let bmc = FakeBmc::start();
    let password = "not-the-password-4711";
    let mut rf = Redfish::new(bmc.endpoint("", password));
    let e = rf.power_state().unwrap_err();
    assert!(matches!(e, BmcError::Credentials { .. }), "{e:?}");
    let shown = e.to_string();
    assert!(
        shown.contains(&bmc.addr.to_string()) && shown.contains("root"),
        "{shown}"
    );
    assert!(!shown.contains(password), "{shown}");
    assert_eq!(bmc.state().sessions_made, 0);
}

#[test]
fn reboot_without_force_restart_is_force_off_then_on_once_off() {
    let bmc = FakeBmc::start();
    let mut rf = driver(&bmc);
    rf.power(PowerAction::Reboot).unwrap();
    let st = bmc.state();
    // The BMC refuses On unless the system is off: On came after polling saw Off.
    assert_eq!(st.resets, vec!["ForceOff", "On"]);
    assert_eq!(st.power, "On");
    let polls = st
        .requests
        .iter()
        .filter(|r| **r == format!("GET {SYSTEM}"))
        .count();
    assert!(
        polls >= 4,
        "the system was polled while powering off: {polls}"
    );
}

#[test]
fn reset_types_can_come_from_an_action_info_resource() {
    let bmc = FakeBmc::start();
    bmc.state().action_info = true;
    let mut rf = driver(&bmc);
    rf.power(PowerAction::Reboot).unwrap();
    assert_eq!(bmc.state().resets, vec!["PowerCycle"]);
    let e = rf.power(PowerAction::SoftOff).unwrap_err();
    assert!(
        matches!(&e, BmcError::Unsupported { what, .. } if what.contains("On, ForceOff, PowerCycle")),
        "{e:?}"
    );
    assert_eq!(bmc.state().resets, vec!["PowerCycle"], "nothing sent");
}

#[test]
fn power_changes_nothing_when_already_there_and_soft_off_is_graceful() {
    let bmc = FakeBmc::start();
    let mut rf = driver(&bmc);
    rf.power(PowerAction::On).unwrap();
    assert!(bmc.state().resets.is_empty(), "on when on sends nothing");
    rf.power(PowerAction::SoftOff).unwrap();
    assert_eq!(rf.power_state().unwrap(), PowerState::Off);
    rf.power(PowerAction::Off).unwrap();
    rf.power(PowerAction::SoftOff).unwrap();
    assert_eq!(bmc.state().resets, vec!["GracefulShutdown"]);
    // Rebooting a node that is off switches it on.
    rf.power(PowerAction::Reboot).unwrap();
    assert_eq!(bmc.state().resets, vec!["GracefulShutdown", "On"]);
    assert_eq!(rf.power_state().unwrap(), PowerState::On);
}

#[test]
fn boot_once_leaves_out_what_the_vendor_does_not_show_and_sends_the_etag() {
    let bmc = FakeBmc::start();
    let mut rf = driver(&bmc);
    rf.boot_once(BootDevice::Pxe).unwrap();
    assert_eq!(bmc.state().boot_target, "Pxe");
    // The second PATCH needs the ETag as it is after the first.
    rf.boot_once(BootDevice::Disk).unwrap();
    let st = bmc.state();
    assert_eq!(st.boot_target, "Hdd");
    assert_eq!(st.system_etag, 2);
}

#[test]
fn bios_values_are_staged_in_the_settings_object_and_unknown_names_change_nothing() {
    let bmc = FakeBmc::start();
    let mut rf = driver(&bmc);
    let bios = rf.bios().unwrap();
    assert_eq!(bios["ProcVirtualization"], "Enabled");
    assert_eq!(bios.len(), 3);
    rf.apply_bios(&settings(&[("ProcVirtualization", json!("Disabled"))]))
        .unwrap();
    {
        let st = bmc.state();
        assert_eq!(st.bios_pending["ProcVirtualization"], "Disabled");
        assert_eq!(
            st.bios["ProcVirtualization"], "Enabled",
            "staged, not applied"
        );
    }
    let patches = || {
        bmc.state()
            .requests
            .iter()
            .filter(|r| r.starts_with("PATCH"))
            .count()
    };
    let before = patches();
    let e = rf
        .apply_bios(&settings(&[
            ("SysProfile", json!("Custom")),
            ("NoSuchKnob", json!(1)),
        ]))
        .unwrap_err();
    match &e {
        BmcError::Invalid { field, message } => {
            assert_eq!(field, "settings.NoSuchKnob");
            assert!(message.contains("nothing was changed"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(patches(), before, "nothing sent");
    assert_eq!(bmc.state().bios_pending["SysProfile"], "PerfOptimized");
    // A value the BMC refuses: its ExtendedInfo message is the error's.
    let e = rf
        .apply_bios(&settings(&[("BootMode", json!("Bogus"))]))
        .unwrap_err();
    match &e {
        BmcError::Refused {
            address,
            request,
            message,
        } => {
            assert!(address.contains(&bmc.addr.to_string()));
            assert!(request.starts_with("PATCH ") && request.ends_with("/Bios/Settings"));
            assert!(
                message.contains(
                    "The value \"Bogus\" for the property BootMode is not in the list of \
                     acceptable values."
                ),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn raid_volumes_are_listed_deleted_and_created_through_a_task_monitor() {
    let bmc = FakeBmc::start();
    let mut rf = driver(&bmc);
    let caps = rf.capabilities().unwrap();
    assert!(caps.bios && caps.raid && caps.firmware, "{caps:?}");
    let drives = rf.drives().unwrap();
    assert_eq!(drives.len(), 4, "the empty bay is left out: {drives:?}");
    assert!(drives.iter().all(|d| d.controller == fake::STORAGE
        && d.capacity_bytes == fake::DRIVE_BYTES
        && d.id.starts_with("/redfish/v1/Chassis/")));
    assert_eq!(drives[0].name, "Physical Disk 0:1:0");
    let names: Vec<String> = rf.volumes().unwrap().into_iter().map(|v| v.name).collect();
    assert_eq!(names, vec!["os", "data"]);
    assert_eq!(rf.delete_volumes().unwrap(), 2);
    assert!(rf.volumes().unwrap().is_empty());

    let layout = json!({"logical_disks": [
        {"size_gb": "MAX", "raid_level": "1+0", "is_root_volume": true, "volume_name": "root"}
    ]});
    let config = raid::parse(&layout, "target_raid_config").unwrap();
    let plan = raid::plan(&config, &drives, "target_raid_config").unwrap();
    let made = rf.create_volumes(&plan).unwrap();
    assert_eq!(made.len(), 1);
    assert_eq!(made[0].name, "root");
    assert_eq!(made[0].raid_type.as_deref(), Some("RAID10"));
    assert_eq!(made[0].capacity_bytes, Some(2 * fake::DRIVE_BYTES));
    assert!(
        made[0]
            .id
            .starts_with(&format!("{}/Volumes/", fake::STORAGE))
    );
    let monitor_polls = bmc
        .state()
        .requests
        .iter()
        .filter(|r| r.starts_with("GET /redfish/v1/TaskService/TaskMonitors/"))
        .count();
    assert_eq!(monitor_polls, 2, "202 while running, then the volume");
    assert_eq!(rf.volumes().unwrap(), made);
}

#[test]
fn firmware_tasks_are_followed_to_completion_or_to_their_exception() {
    let bmc = FakeBmc::start();
    let mut rf = driver(&bmc);
    let mut lines = Vec::new();
    let summary = rf
        .update_firmware(
            "https://user:pa55word@mirror.invalid/fw/bios-2.1.exe",
            Duration::from_secs(10),
            &mut |l: &str| lines.push(l.to_string()),
        )
        .unwrap();
    assert!(
        summary.contains("https://mirror.invalid/fw/bios-2.1.exe")
            && summary.contains("completed")
            && summary.contains("applied at the next reboot"),
        "{summary}"
    );
    assert!(!summary.contains("pa55word"), "{summary}");
    let states: Vec<&str> = lines
        .iter()
        .filter(|l| l.starts_with("task "))
        .map(|l| l.rsplit(": ").next().unwrap())
        .collect();
    assert_eq!(states, vec!["New 0%", "Running 30%", "Completed 100%"]);
    {
        let st = bmc.state();
        assert_eq!(st.updates[0]["TransferProtocol"], "HTTPS");
        assert_eq!(st.updates[0]["Targets"], json!([SYSTEM]));
    }

    let e = rf
        .update_firmware(
            "http://mirror.invalid/fw/unsigned.bin",
            Duration::from_secs(10),
            &mut |_: &str| {},
        )
        .unwrap_err();
    match &e {
        BmcError::Failed { message, .. } => assert!(
            message.contains("Exception") && message.contains("Image signature is invalid."),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }

    // A wait shorter than the task: failed, saying where it was.
    let e = rf
        .update_firmware(
            "http://mirror.invalid/fw/bios.bin",
            Duration::ZERO,
            &mut |_: &str| {},
        )
        .unwrap_err();
    assert!(
        matches!(&e, BmcError::Failed { message, .. } if message.contains("did not end within 0 s (last: New 0%)")),
        "{e:?}"
    );

    let e = rf
        .update_firmware(
            "ftp://mirror.invalid/fw.bin",
            Duration::ZERO,
            &mut |_: &str| {},
        )
        .unwrap_err();
    assert!(
        matches!(&e, BmcError::Invalid { field, .. } if field == "image_url"),
        "{e:?}"
    );
    assert_eq!(bmc.state().updates.len(), 3, "the ftp URL was not sent");
}

#[test]
fn answers_that_are_not_redfish_are_protocol_errors_and_silence_is_unreachable() {
    let bmc = FakeBmc::start();
    let e = Redfish::new(bmc.endpoint(fake::HTML, PASSWORD))
        .power_state()
        .unwrap_err();
    match &e {
        BmcError::Protocol { what, .. } => {
            assert!(
                what.contains("text/html") && what.contains(fake::HTML),
                "{what}"
            )
        }
        other => panic!("{other:?}"),
    }
    let e = Redfish::new(bmc.endpoint(fake::HUGE, PASSWORD))
        .power_state()
        .unwrap_err();
    assert!(
        matches!(&e, BmcError::Protocol { what, .. } if what.contains("larger than 4 MiB")),
        "{e:?}"
    );

    let mut silent = bmc.endpoint(fake::SILENT, PASSWORD);
    silent.timeout = Duration::from_secs(1);
    let started = Instant::now();
    let e = Redfish::new(silent).power_state().unwrap_err();
    assert!(
        matches!(&e, BmcError::Unreachable { reason, .. } if reason.contains("no answer")),
        "{e:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "bounded by the timeout"
    );

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let nobody = Endpoint {
        driver: Driver::Redfish,
        address: format!("http://127.0.0.1:{port}"),
        username: "root".into(),
        password: PASSWORD.into(),
        verify_tls: false,
        timeout: Duration::from_secs(2),
    };
    let e = Redfish::new(nobody).power_state().unwrap_err();
    assert!(matches!(e, BmcError::Unreachable { .. }), "{e:?}");
    assert!(!e.to_string().contains(PASSWORD));
}

#[test]
fn several_systems_need_one_named_in_the_address() {
    let bmc = FakeBmc::start();
    bmc.state().several_systems = true;
    let e = driver(&bmc).power_state().unwrap_err();
    match &e {
        BmcError::Invalid { field, message } => {
            assert_eq!(field, "address");
            assert!(
                message.contains(SYSTEM) && message.contains("System.Embedded.2"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        bmc.state().sessions.is_empty(),
        "the session made before the refusal is deleted"
    );
    let mut named = Redfish::new(bmc.endpoint(SYSTEM, PASSWORD));
    assert_eq!(named.power_state().unwrap(), PowerState::On);
}

#[test]
fn a_self_signed_certificate_is_taken_only_without_verify_tls() {
    let dir = tempfile::tempdir().unwrap();
    let bmc = FakeBmc::start_tls(dir.path());
    let mut rf = Redfish::new(bmc.endpoint("", PASSWORD));
    assert_eq!(rf.power_state().unwrap(), PowerState::On);
    let mut strict = bmc.endpoint("", PASSWORD);
    strict.verify_tls = true;
    let e = Redfish::new(strict).power_state().unwrap_err();
    assert!(
        matches!(&e, BmcError::Unreachable { reason, .. } if reason.contains("certificate")),
        "{e:?}"
    );
}

// --- Against sushy-tools ---------------------------------------------------------------------

const SUSHY_USER: &str = "admin";
const SUSHY_PASSWORD: &str = "sushy-pa55";

fn sushy_endpoint(sushy: &Sushy, path: &str, password: &str) -> Endpoint {
    Endpoint {
        driver: Driver::Redfish,
        address: sushy.url(path),
        username: SUSHY_USER.into(),
        password: password.into(),
        verify_tls: false,
        timeout: Duration::from_secs(10),
    }
}

/// Poll the power state until `want` (the fake driver applies changes 1-11 s later).
fn wait_power(rf: &mut Redfish, want: PowerState) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let now = rf.power_state().unwrap();
        if now == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still {now:?} after 15 s, waiting for {want:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// GET a document of the emulator as a test sees it (Basic auth when given).
fn raw_get(url: &str, auth: Option<&str>) -> Value {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let mut req = agent.get(url);
    if let Some(a) = auth {
        req = req.header("Authorization", a);
    }
    req.call().unwrap().body_mut().read_json().unwrap()
}

#[test]
#[ignore = "needs sushy-emulator (.ci/bmc-emulators.sh installs it)"]
fn sushy_fake_driver_power_and_boot_once_behind_basic_auth() {
    let emulator = std::path::PathBuf::from(required_env("SUSHY_EMULATOR"));
    let (_, a) = sushy::unique("a");
    let (_, b) = sushy::unique("b");
    let htpasswd = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        htpasswd.path(),
        format!(
            "{}\n",
            sushy::htpasswd_line(&emulator, SUSHY_USER, SUSHY_PASSWORD)
        ),
    )
    .unwrap();
    let sushy = Sushy::start(&format!(
        "SUSHY_EMULATOR_FAKE_DRIVER = True\n\
         SUSHY_EMULATOR_AUTH_FILE = {:?}\n\
         SUSHY_EMULATOR_FAKE_SYSTEMS = [\n\
         {{'uuid': '{a}', 'name': 'stoker-a', 'power_state': 'Off',\n\
           'nics': [{{'mac': '52:54:00:5a:00:01', 'ip': '192.0.2.11'}}]}},\n\
         {{'uuid': '{b}', 'name': 'stoker-b', 'power_state': 'Off',\n\
           'nics': [{{'mac': '52:54:00:5a:00:02', 'ip': '192.0.2.12'}}]}},\n\
         ]",
        htpasswd.path().display().to_string()
    ));
    let system = format!("/redfish/v1/Systems/{a}");

    // No SessionService in sushy-tools: Basic auth, and a wrong password is refused.
    let e = Redfish::new(sushy_endpoint(&sushy, &system, "wrong"))
        .power_state()
        .unwrap_err();
    assert!(matches!(e, BmcError::Credentials { .. }), "{e:?}");
    // Two systems and no path: refused, naming both.
    let e = Redfish::new(sushy_endpoint(&sushy, "", SUSHY_PASSWORD))
        .power_state()
        .unwrap_err();
    assert!(
        matches!(&e, BmcError::Invalid { field, message }
            if field == "address" && message.contains(&a) && message.contains(&b)),
        "{e:?}"
    );

    let mut rf = Redfish::new(sushy_endpoint(&sushy, &system, SUSHY_PASSWORD));
    assert_eq!(rf.power_state().unwrap(), PowerState::Off);
    let caps = rf.capabilities().unwrap();
    assert!(!caps.bios && !caps.raid && caps.firmware, "{caps:?}");
    // The fake driver keeps no firmware versions: the emulator's own message comes back.
    let e = rf
        .update_firmware(
            "http://127.0.0.1:9/fw.bin",
            Duration::from_secs(5),
            &mut |_: &str| {},
        )
        .unwrap_err();
    assert!(
        matches!(&e, BmcError::Refused { message, .. } if message.contains("Failed fetching BIOS information")),
        "{e:?}"
    );

    rf.power(PowerAction::On).unwrap();
    wait_power(&mut rf, PowerState::On);
    rf.power(PowerAction::On).unwrap();
    assert_eq!(
        rf.power_state().unwrap(),
        PowerState::On,
        "on when on: nothing"
    );

    // ForceRestart: the fake driver shows Off at once and On 1-11 s later, from the next whole
    // second on; posting early in a second keeps the Off readable right after.
    while std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_millis()
        > 400
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    rf.power(PowerAction::Reboot).unwrap();
    assert_eq!(rf.power_state().unwrap(), PowerState::Off, "restarting");
    wait_power(&mut rf, PowerState::On);

    rf.power(PowerAction::SoftOff).unwrap();
    wait_power(&mut rf, PowerState::Off);
    rf.power(PowerAction::On).unwrap();
    wait_power(&mut rf, PowerState::On);
    rf.power(PowerAction::Off).unwrap();
    wait_power(&mut rf, PowerState::Off);

    let auth = sushy::basic(SUSHY_USER, SUSHY_PASSWORD);
    for (device, target) in [(BootDevice::Pxe, "Pxe"), (BootDevice::Disk, "Hdd")] {
        rf.boot_once(device).unwrap();
        let doc = raw_get(&sushy.url(&system), Some(&auth));
        assert_eq!(doc["Boot"]["BootSourceOverrideTarget"], target);
    }
    // The other system was left alone.
    let other = raw_get(&sushy.url(&format!("/redfish/v1/Systems/{b}")), Some(&auth));
    assert_eq!(other["PowerState"], "Off");
}

#[test]
#[ignore = "needs sushy-emulator (.ci/bmc-emulators.sh installs it)"]
fn sushy_libvirt_bios_firmware_and_raid_volumes() {
    let uri = required_env("SUSHY_LIBVIRT_URI");
    required_env("SUSHY_EMULATOR");
    let dir = tempfile::tempdir().unwrap();
    let domain = Domain::define(&uri, dir.path());
    let pool_dir = dir.path().join("pool");
    std::fs::create_dir(&pool_dir).unwrap();
    let pool = Pool::create(&uri, &pool_dir);
    let u = &domain.uuid;
    const MIB16: u64 = 16 << 20;
    let sushy = Sushy::start(&format!(
        "SUSHY_EMULATOR_LIBVIRT_URI = {uri:?}\n\
         SUSHY_EMULATOR_ALLOWED_INSTANCES = ['{u}']\n\
         SUSHY_EMULATOR_STORAGE_POOL = '{pool}'\n\
         SUSHY_EMULATOR_STORAGE = {{'{u}': [{{'Id': '1', 'Name': 'Local Storage Controller',\n\
           'StorageControllers': [{{'MemberId': '0', 'Name': 'Contoso Integrated RAID',\n\
                                    'SpeedGbps': 12}}],\n\
           'Drives': ['32ADF365C6C1B7BD', '58CFF987G8J2V9KL']}}]}}\n\
         SUSHY_EMULATOR_DRIVES = {{('{u}', '1'): [\n\
           {{'Id': '32ADF365C6C1B7BD', 'Name': 'Drive A', 'CapacityBytes': {MIB16},\n\
             'Protocol': 'SAS'}},\n\
           {{'Id': '58CFF987G8J2V9KL', 'Name': 'Drive B', 'CapacityBytes': {MIB16},\n\
             'Protocol': 'SAS'}}]}}\n\
         SUSHY_EMULATOR_VOLUMES = {{('{u}', '1'): []}}\n",
        pool = pool.name
    ));
    let system = format!("/redfish/v1/Systems/{u}");
    let mut endpoint = sushy_endpoint(&sushy, "", "unused: no auth file");
    // The emulator redefines the domain to store BIOS attributes and firmware versions, and a
    // libvirtd that re-probes QEMU on each define (this CI machine's takes ~30 s) makes such a
    // request that slow.
    endpoint.timeout = Duration::from_secs(180);
    // One system allowed: found without a path.
    let mut rf = Redfish::new(endpoint).with_poll_interval(Duration::from_millis(100));
    assert_eq!(rf.power_state().unwrap(), PowerState::Off);
    let caps = rf.capabilities().unwrap();
    assert!(caps.bios && caps.raid && caps.firmware, "{caps:?}");

    // BIOS: read, applied, and an unknown name refused with nothing changed.
    let bios = rf.bios().unwrap();
    assert_eq!(bios["ProcTurboMode"], "Enabled", "{bios:?}");
    rf.apply_bios(&settings(&[("ProcTurboMode", json!("Disabled"))]))
        .unwrap();
    assert_eq!(rf.bios().unwrap()["ProcTurboMode"], "Disabled");
    let e = rf
        .apply_bios(&settings(&[
            ("ProcTurboMode", json!("Enabled")),
            ("NoSuchAttribute", json!("x")),
        ]))
        .unwrap_err();
    assert!(
        matches!(&e, BmcError::Invalid { field, .. } if field == "settings.NoSuchAttribute"),
        "{e:?}"
    );
    assert_eq!(rf.bios().unwrap()["ProcTurboMode"], "Disabled");

    // Firmware: SimpleUpdate bumps BiosVersion; its task (static, Completed) is followed.
    let version = || raw_get(&sushy.url(&system), None)["BiosVersion"].clone();
    assert_eq!(version(), "1.0.0");
    let mut lines = Vec::new();
    let summary = rf
        .update_firmware(
            "http://127.0.0.1:9/bios-1.1.bin",
            Duration::from_secs(30),
            &mut |l: &str| lines.push(l.to_string()),
        )
        .unwrap();
    assert!(
        summary.contains("/redfish/v1/TaskService/Tasks/42"),
        "{summary}"
    );
    assert!(
        lines.iter().any(|l| l.ends_with("Completed 100%")),
        "{lines:?}"
    );
    assert_eq!(version(), "1.1.0");

    // RAID: the configured drives, a volume planned and made (a libvirt volume in the pool),
    // listed; sushy-tools cannot delete volumes (405), and says so.
    let drives = rf.drives().unwrap();
    assert_eq!(drives.len(), 2, "{drives:?}");
    assert!(
        drives
            .iter()
            .all(|d| d.capacity_bytes == MIB16 && d.controller == format!("{system}/Storage/1"))
    );
    assert!(rf.volumes().unwrap().is_empty());
    let layout = json!({"logical_disks": [
        {"size_gb": "MAX", "raid_level": "1", "is_root_volume": true, "volume_name": "stoker-root"}
    ]});
    let config = raid::parse(&layout, "target_raid_config").unwrap();
    let plan = raid::plan(&config, &drives, "target_raid_config").unwrap();
    let made = rf.create_volumes(&plan).unwrap();
    assert_eq!(made.len(), 1);
    assert_eq!(made[0].name, "stoker-root");
    assert_eq!(made[0].raid_type.as_deref(), Some("Mirrored"));
    assert_eq!(made[0].capacity_bytes, Some(MIB16));
    assert!(
        made[0]
            .id
            .starts_with(&format!("{system}/Storage/1/Volumes/"))
    );
    assert_eq!(rf.volumes().unwrap(), made);
    let id = made[0].id.rsplit('/').next().unwrap().to_string();
    assert_eq!(
        pool.volumes(),
        vec![id],
        "the emulator made a libvirt volume"
    );
    let e = rf.delete_volumes().unwrap_err();
    assert!(
        matches!(&e, BmcError::Unsupported { what, .. } if what.contains("405")),
        "{e:?}"
    );
    assert_eq!(rf.volumes().unwrap().len(), 1, "nothing deleted");
    drop(rf);
    drop(sushy);
}

/// Drive `nodes`' agents until deployment `dep` has ended (the master's BMC steps run on their
/// own, so the agents are told to wait meanwhile); its final document.
fn deploy_to_end(base: &str, nodes: &[crate::deploy::Node], dep: i64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        crate::deploy::drive(base, nodes, &|_| false, 1000);
        let d = crate::deploy::deployment(base, dep);
        if d["status"] != "running" {
            return d;
        }
        assert!(
            Instant::now() < deadline,
            "deployment {dep} did not end: {d}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A daemon with the bundled release, an environment with one compute node, and that node's
/// BMC: the loopback Redfish BMC, set through the API.
fn environment_with_bmc() -> (
    FakeBmc,
    crate::common::TestDaemon,
    i64,
    Vec<crate::deploy::Node>,
) {
    let bmc = FakeBmc::start();
    let d = crate::common::TestDaemon::start_bundled("install");
    let (cluster, nodes) = crate::deploy::setup(&d.url(""), &["compute"]);
    let r = d.http().put(
        &format!("/api/v1/nodes/{}/bmc", nodes[0].id),
        &json!({"driver": "redfish", "address": bmc.url(""), "username": fake::USER,
                "password": PASSWORD})
        .to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    (bmc, d, cluster, nodes)
}

fn start_deploy(base: &str, cluster: i64, steps: Value) -> i64 {
    let r = crate::common::Http::raw_post(
        &format!("{base}/api/v1/clusters/{cluster}/deploy"),
        &json!({ "steps": steps }).to_string(),
        &[],
    );
    assert_eq!(r.status, 202, "{}", r.body);
    r.json()["id"].as_i64().unwrap()
}

fn step_of<'a>(dep: &'a Value, name: &str) -> &'a Value {
    dep["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            format!(
                "{}.{}",
                s["interface"].as_str().unwrap_or(""),
                s["step"].as_str().unwrap_or("")
            ) == name
        })
        .unwrap_or_else(|| panic!("no step {name} in {dep}"))
}

#[test]
fn a_deployment_runs_its_bmc_steps_on_the_master_in_step_order() {
    let (bmc, d, cluster, nodes) = environment_with_bmc();
    let (base, http, node) = (d.url(""), d.http(), nodes[0].id);
    // The firmware image: any file the master can fetch over HTTP, with its checksum.
    let image = format!("{base}/assets/css/stoker.css");
    let bytes = ureq::get(&image)
        .call()
        .unwrap()
        .body_mut()
        .read_to_vec()
        .unwrap();
    let sum = {
        use sha2::Digest;
        sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let dep = start_deploy(
        &base,
        cluster,
        json!([
            {"interface": "bios", "step": "apply_configuration", "priority": 99,
             "args": {"settings": [{"name": "ProcVirtualization", "value": "Disabled"}]}},
            {"interface": "raid", "step": "create_configuration", "priority": 98,
             "args": {"target_raid_config": {"logical_disks": [
                 {"size_gb": 100, "raid_level": "1", "is_root_volume": true,
                  "volume_name": "root"}]}, "delete_existing": true}},
            {"interface": "management", "step": "update_firmware", "priority": 97,
             "args": {"firmware_images": [{"url": image, "checksum": format!("sha256:{sum}"),
                                            "wait": 30}]}}
        ]),
    );
    let done = deploy_to_end(&base, &nodes, dep);
    assert_eq!(done["status"], "done", "{done}");
    // On the BMC: BIOS staged, the old volumes replaced by the layout, the image installed,
    // then a network boot and a power cycle (ForceOff, then On: this BMC has no restart).
    {
        let st = bmc.state();
        assert_eq!(st.bios_pending["ProcVirtualization"], "Disabled");
        let names: Vec<&str> = st
            .volumes
            .values()
            .map(|v| v["Name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["root"], "{:?}", st.volumes);
        assert_eq!(st.updates.len(), 1);
        assert_eq!(st.updates[0]["ImageURI"], image.as_str());
        assert_eq!(st.boot_target, "Pxe");
        assert_eq!(st.resets, vec!["ForceOff", "On"]);
        let first = |prefix: &str| {
            st.requests
                .iter()
                .position(|r| r.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix}: {:?}", st.requests))
        };
        let bios = first(&format!("PATCH {SYSTEM}/Bios/Settings"));
        let volume = first(&format!("POST {}/Volumes", fake::STORAGE));
        let update = first("POST /redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate");
        let reset = first(&format!("POST {SYSTEM}/Actions/ComputerSystem.Reset"));
        assert!(
            bios < volume && volume < update && update < reset,
            "{:?}",
            st.requests
        );
    }
    // In the deployment: each BMC step ran on the master, before the agent's first step.
    let configure = step_of(&done, "deploy.configure");
    for name in [
        "bios.apply_configuration",
        "raid.create_configuration",
        "management.update_firmware",
        "power.boot_network",
    ] {
        let s = step_of(&done, name);
        assert_eq!(s["status"], "ok", "{s}");
        // Earlier in the node's sequence (a node runs one step at a time, in sequence), and
        // over before the agent's first step started (timestamps are whole seconds).
        assert!(
            s["seq"].as_u64().unwrap() < configure["seq"].as_u64().unwrap(),
            "{s}"
        );
        assert!(
            s["finished_at"].as_i64().unwrap() <= configure["started_at"].as_i64().unwrap(),
            "{s}"
        );
    }
    let fw = step_of(&done, "management.update_firmware");
    assert!(
        fw["output_tail"]
            .as_str()
            .unwrap()
            .contains("Completed 100%"),
        "{fw}"
    );
    // The node page shows them.
    let page = http.get(&format!("/nodes/{node}")).body;
    assert!(
        page.contains("raid.create_configuration") && page.contains("badge-ok\">ok<"),
        "{page}"
    );
}

#[test]
fn bmc_steps_that_cannot_be_done_fail_before_anything_changes() {
    let (bmc, d, cluster, nodes) = environment_with_bmc();
    let base = d.url("");
    let volumes_before = bmc.state().volumes.clone();
    // A layout larger than the drives: refused by field, the existing volumes kept.
    let dep = start_deploy(
        &base,
        cluster,
        json!([{"interface": "raid", "step": "create_configuration", "priority": 98,
                "args": {"target_raid_config": {"logical_disks": [
                    {"size_gb": 5000, "raid_level": "1"}]}, "delete_existing": true}}]),
    );
    let failed = deploy_to_end(&base, &nodes, dep);
    assert_eq!(failed["status"], "error", "{}", failed["runs"]);
    let s = step_of(&failed, "raid.create_configuration");
    assert_eq!(s["status"], "failed");
    let error = s["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("target_raid_config.logical_disks[0].size_gb"),
        "{s}"
    );
    assert!(error.contains("larger than the drives"), "{s}");
    {
        let st = bmc.state();
        assert_eq!(st.volumes, volumes_before);
        assert!(
            st.requests
                .iter()
                .all(|r| !r.starts_with("DELETE") || r.contains("Sessions")),
            "{:?}",
            st.requests
        );
        assert!(
            st.resets.is_empty(),
            "the node did not go on: {:?}",
            st.resets
        );
    }
    // A firmware URL that answers 404: failed naming it, nothing sent to the BMC.
    let dep = start_deploy(
        &base,
        cluster,
        json!([{"interface": "management", "step": "update_firmware", "priority": 97,
                "args": {"firmware_images": [{"url": format!("{base}/assets/no-such.bin")}]}}]),
    );
    let failed = deploy_to_end(&base, &nodes, dep);
    assert_eq!(failed["status"], "error", "{}", failed["runs"]);
    let s = step_of(&failed, "management.update_firmware");
    let error = s["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("firmware_images[0].url") && error.contains("404"),
        "{s}"
    );
    assert!(bmc.state().updates.is_empty());
    // A BIOS attribute the BMC does not have: the BMC's own message, nothing staged.
    let dep = start_deploy(
        &base,
        cluster,
        json!([{"interface": "bios", "step": "apply_configuration", "priority": 99,
                "args": {"settings": [{"name": "NoSuchKnob", "value": "On"}]}}]),
    );
    let failed = deploy_to_end(&base, &nodes, dep);
    assert_eq!(failed["status"], "error", "{}", failed["runs"]);
    let s = step_of(&failed, "bios.apply_configuration");
    assert!(
        s["error"]
            .as_str()
            .unwrap_or_default()
            .contains("NoSuchKnob"),
        "{s}"
    );
    let st = bmc.state();
    assert_eq!(st.bios_pending, st.bios);
}

#[test]
fn resetting_or_deleting_an_environment_can_power_its_nodes_off() {
    let (bmc, d, cluster, nodes) = environment_with_bmc();
    let (base, http, node) = (d.url(""), d.http(), nodes[0].id);
    let dep = start_deploy(&base, cluster, json!([]));
    assert_eq!(deploy_to_end(&base, &nodes, dep)["status"], "done");
    bmc.state().resets.clear();
    // With power_off=1: the node's disk is erased on its OS, then the master switches it off.
    let r = http.put(&format!("/api/v1/clusters/{cluster}/reset?power_off=1"), "");
    assert_eq!(r.status, 202, "{}", r.body);
    let reset = r.json()["id"].as_i64().unwrap();
    let done = deploy_to_end(&base, &nodes, reset);
    assert_eq!(done["status"], "done", "{}", done["runs"]);
    let erase = done["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["task"] == "erase_node")
        .unwrap();
    let off = step_of(&done, "power.power_off");
    assert_eq!(
        (erase["status"].as_str(), off["status"].as_str()),
        (Some("ok"), Some("ok"))
    );
    assert!(
        off["seq"].as_u64().unwrap() > erase["seq"].as_u64().unwrap(),
        "{off}"
    );
    assert!(
        off["started_at"].as_i64().unwrap() >= erase["finished_at"].as_i64().unwrap(),
        "{off}"
    );
    assert_eq!(bmc.state().resets, vec!["ForceOff"]);
    let v = http.get(&format!("/api/v1/nodes/{node}")).json();
    assert_eq!(v["status"], "discover", "{v}");
    // Deleting the environment with power_off=1: a result per node in the answer.
    bmc.state().power = "On".into();
    bmc.state().resets.clear();
    let r = http.delete(&format!("/api/v1/clusters/{cluster}?power_off=1"));
    assert_eq!(r.status, 202, "{}", r.body);
    let results = &r.json()["result"]["power_off"];
    assert_eq!(results[0]["node"], node, "{results}");
    assert_eq!(results[0]["ok"], true, "{results}");
    assert_eq!(bmc.state().resets, vec!["ForceOff"]);
    let r = http.put(
        &format!("/api/v1/clusters/{cluster}/reset?power_off=maybe"),
        "",
    );
    assert_eq!(r.status, 400, "{}", r.body);
}

/// `stoker node bmc|power` as an operator runs it: the built binary against the daemon.
#[test]
fn the_cli_sets_a_bmc_and_powers_nodes_with_a_line_per_node() {
    let (bmc, d, _cluster, nodes) = environment_with_bmc();
    let node = nodes[0].id;
    let token = d.admin_token();
    let cwd = tempfile::tempdir().unwrap();
    let stoker = |args: &[&str], stdin: &str| {
        let mut cmd = crate::common::bin::stoker(cwd.path());
        cmd.args(args)
            .args(["--url", &d.url(""), "--token", &token]);
        let (code, out, err) = crate::common::bin::run_with_stdin(&mut cmd, stdin);
        (code, out + &err)
    };
    let id = node.to_string();
    let (code, out) = stoker(
        &[
            "node",
            "bmc",
            "set",
            &id,
            "--driver",
            "redfish",
            "--address",
            &bmc.url(""),
            "--username",
            fake::USER,
        ],
        &format!("{PASSWORD}\n"),
    );
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = stoker(&["node", "bmc", "show", &id], "");
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains(&bmc.url("")) && !out.contains(PASSWORD),
        "{out}"
    );
    bmc.state().resets.clear();
    let (code, out) = stoker(&["node", "power", "off", &id], "");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(&format!("node {node}: off done")), "{out}");
    assert_eq!(bmc.state().resets, vec!["ForceOff"]);
    // A node without a BMC among them: refused by the master, nothing done, exit 4.
    let plain = d
        .http()
        .post(
            "/api/v1/agent/hello",
            &crate::common::inventory("52:54:00:aa:09:01").to_string(),
        )
        .json()["node"]["id"]
        .as_i64()
        .unwrap();
    let (code, out) = stoker(&["node", "power", "on", &id, &plain.to_string()], "");
    assert_eq!(code, Some(4), "{out}");
    assert!(out.contains(&format!("node {plain} has no BMC")), "{out}");
    assert_eq!(bmc.state().resets, vec!["ForceOff"], "nothing was sent");
    // An empty password on standard input is refused before anything is sent.
    let (code, out) = stoker(
        &[
            "node",
            "bmc",
            "set",
            &id,
            "--driver",
            "ipmi",
            "--address",
            "10.0.0.9",
            "--username",
            "admin",
        ],
        "\n",
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("no password"), "{out}");
}

/// How many of the BMC's requests so far are `what` (`METHOD path`).
fn count(bmc: &FakeBmc, what: &str) -> usize {
    bmc.state().requests.iter().filter(|r| *r == what).count()
}

/// Wait until the BMC has had at least `n` requests `what`.
fn wait_requests(bmc: &FakeBmc, what: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(bmc, what) < n {
        assert!(
            Instant::now() < deadline,
            "{n} × {what} not seen in 30 s: {:?}",
            bmc.state().requests
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_power_sync_keeps_one_session_per_bmc_from_sweep_to_sweep() {
    let bmc = FakeBmc::start();
    let d = crate::common::TestDaemon::start_in(
        tempfile::tempdir().unwrap(),
        &[("bmc.sync_interval", "1".to_string())],
    );
    let http = d.http();
    let body = |verify: bool| {
        json!({"driver": "redfish", "address": bmc.url(""), "username": fake::USER,
               "password": PASSWORD, "verify_tls": verify})
        .to_string()
    };
    let r = http.post(
        "/api/v1/nodes",
        &format!(r#"{{"mac": "52:54:00:aa:09:01", "bmc": {}}}"#, body(false)),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let node = r.json()["id"].as_i64().unwrap();
    let read = format!("GET {SYSTEM}");
    let login = "POST /redfish/v1/SessionService/Sessions";
    // Three sweeps: one login, one service root, then one GET of the system per reading.
    wait_requests(&bmc, &read, 3);
    assert_eq!(count(&bmc, login), 1, "{:?}", bmc.state().requests);
    assert_eq!(count(&bmc, "GET /redfish/v1/"), 1);
    assert!(
        bmc.state().sessions_deleted.is_empty(),
        "the session is kept"
    );
    // The BMC forgets its sessions (its own reset): the next reading logs in again and the
    // node is not flagged.
    bmc.state().sessions.clear();
    let seen = count(&bmc, &read);
    wait_requests(&bmc, &read, seen + 2);
    assert_eq!(count(&bmc, login), 2, "{:?}", bmc.state().requests);
    let b = http.get(&format!("/api/v1/nodes/{node}/bmc")).json();
    assert_eq!(b["power_state"], "on", "{b}");
    assert!(b["power_error"].is_null(), "{b}");
    // The BMC changed on the node: the kept session is not used for the new endpoint, and
    // is deleted on the BMC.
    let r = http.put(&format!("/api/v1/nodes/{node}/bmc"), &body(true));
    assert_eq!(r.status, 200, "{}", r.body);
    wait_requests(&bmc, login, 3);
    let deadline = Instant::now() + Duration::from_secs(10);
    while bmc.state().sessions_deleted.is_empty() {
        assert!(Instant::now() < deadline, "the old session was not deleted");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(bmc.state().sessions.len(), 1, "{:?}", bmc.state().sessions);
    // A stop logs out of the kept sessions (within a few seconds, whatever the BMCs do).
    drop(http);
    drop(d);
    assert!(
        bmc.state().sessions.is_empty(),
        "{:?}",
        bmc.state().sessions
    );
}
