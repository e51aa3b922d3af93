//! The IPMI driver end to end: the real `ipmitool` against OpenIPMI's `ipmi_sim`, whose chassis
//! keeps its power and boot device in files (see `common::ipmi_sim`), so every assertion reads
//! back what the simulated machine did, not what the driver says it asked for.

use std::time::{Duration, Instant};

use stoker::bmc::ipmi::Ipmi;
use stoker::bmc::{Bmc, BmcError, BootDevice, Capabilities, PowerAction, PowerState};

use crate::common::ipmi_sim::{self, IpmiSim};

/// Poll the power state until it is `want` (ipmi_sim powers back on 1 s after a cycle).
fn wait_for_power(bmc: &mut Ipmi, want: PowerState) {
    let started = Instant::now();
    loop {
        let now = bmc.power_state().unwrap();
        if now == want {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "power stayed {now:?}, wanted {want:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn count(calls: &[String], call: &str) -> usize {
    calls.iter().filter(|c| *c == call).count()
}

#[test]
#[ignore = "needs ipmi_sim and ipmitool (.ci/bmc-emulators.sh installs them)"]
fn power_actions_change_the_simulated_chassis() {
    let sim = IpmiSim::start();
    let mut bmc = Ipmi::new(sim.endpoint());
    assert_eq!(bmc.power_state().unwrap(), PowerState::Off);
    assert_eq!(sim.calls(), ["get power"]);

    bmc.power(PowerAction::On).unwrap();
    assert_eq!(sim.power(), "1");
    assert_eq!(bmc.power_state().unwrap(), PowerState::On);
    assert_eq!(count(&sim.calls(), "set power 1"), 1);

    // Already on: read, and nothing sent.
    bmc.power(PowerAction::On).unwrap();
    assert_eq!(count(&sim.calls(), "set power 1"), 1, "{:?}", sim.calls());

    // On: a power cycle, off now and on again a second later.
    let before = sim.calls().len();
    bmc.power(PowerAction::Reboot).unwrap();
    assert_eq!(sim.calls()[before..], ["get power", "set power 0"]);
    wait_for_power(&mut bmc, PowerState::On);
    assert_eq!(sim.power(), "1");
    assert_eq!(
        count(&sim.calls()[before..], "set power 1"),
        1,
        "{:?}",
        sim.calls()
    );

    bmc.power(PowerAction::Off).unwrap();
    assert_eq!(sim.power(), "0");
    assert_eq!(bmc.power_state().unwrap(), PowerState::Off);

    // Off: already off, nothing sent; a reboot is a plain power on.
    let before = sim.calls().len();
    bmc.power(PowerAction::Off).unwrap();
    bmc.power(PowerAction::SoftOff).unwrap();
    assert_eq!(sim.calls()[before..], ["get power", "get power"]);
    let before = sim.calls().len();
    bmc.power(PowerAction::Reboot).unwrap();
    assert_eq!(sim.calls()[before..], ["get power", "set power 1"]);
    assert_eq!(sim.power(), "1");

    // Soft off: the ACPI request (the script's OS shuts down at once).
    let before = sim.calls().len();
    bmc.power(PowerAction::SoftOff).unwrap();
    assert_eq!(sim.calls()[before..], ["get power", "set shutdown 1"]);
    assert_eq!(bmc.power_state().unwrap(), PowerState::Off);
    assert_eq!(sim.power(), "0");
}

#[test]
#[ignore = "needs ipmi_sim and ipmitool (.ci/bmc-emulators.sh installs them)"]
fn boot_once_sets_the_chassis_boot_device() {
    let sim = IpmiSim::start();
    let mut bmc = Ipmi::new(sim.endpoint());
    bmc.boot_once(BootDevice::Pxe).unwrap();
    assert_eq!(sim.boot(), "pxe");
    assert!(
        sim.calls().iter().any(|c| c == "set boot pxe"),
        "{:?}",
        sim.calls()
    );
    // ipmi_sim names "force boot from default hard drive" `default`.
    bmc.boot_once(BootDevice::Disk).unwrap();
    assert_eq!(sim.boot(), "default");
    assert!(
        sim.calls().iter().any(|c| c == "set boot default"),
        "{:?}",
        sim.calls()
    );
    // The power was not touched.
    assert_eq!(sim.power(), "0");
    assert!(!sim.calls().iter().any(|c| c.starts_with("set power")));
}

#[test]
#[ignore = "needs ipmi_sim and ipmitool (.ci/bmc-emulators.sh installs them)"]
fn wrong_password_or_unknown_user_is_credentials() {
    let sim = IpmiSim::start();
    let mut endpoint = sim.endpoint();
    endpoint.password = "not-the-password".into();
    let err = Ipmi::new(endpoint.clone()).power_state().unwrap_err();
    assert_eq!(
        err,
        BmcError::Credentials {
            address: sim.address(),
            username: "admin".into()
        }
    );
    endpoint.password = ipmi_sim::PASSWORD.into();
    endpoint.username = "nobody".into();
    let err = Ipmi::new(endpoint.clone())
        .power(PowerAction::On)
        .unwrap_err();
    assert_eq!(
        err,
        BmcError::Credentials {
            address: sim.address(),
            username: "nobody".into()
        }
    );
    // Nothing reached the chassis, and the right credentials still work.
    assert!(sim.calls().is_empty(), "{:?}", sim.calls());
    endpoint.username = ipmi_sim::USER.into();
    assert_eq!(Ipmi::new(endpoint).power_state().unwrap(), PowerState::Off);
}

#[test]
#[ignore = "needs ipmi_sim and ipmitool (.ci/bmc-emulators.sh installs them)"]
fn no_answer_is_unreachable_within_the_timeout() {
    ipmi_sim::ipmitool();
    // A port nobody listens on, and one bound by a socket that never answers.
    let closed = ipmi_sim::free_udp_port();
    let mute = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let silent = mute.local_addr().unwrap().port();
    for port in [closed, silent] {
        let endpoint = stoker::bmc::Endpoint {
            driver: stoker::bmc::Driver::Ipmi,
            address: format!("127.0.0.1:{port}"),
            username: "admin".into(),
            password: "secret".into(),
            verify_tls: false,
            timeout: Duration::from_secs(3),
        };
        let started = Instant::now();
        let err = Ipmi::new(endpoint).power(PowerAction::On).unwrap_err();
        let took = started.elapsed();
        assert!(took < Duration::from_millis(3500), "port {port}: {took:?}");
        match err {
            BmcError::Unreachable { address, reason } => {
                assert_eq!(address, format!("127.0.0.1:{port}"));
                // ipmitool's own verdict: its tries were sized to give up before the deadline.
                assert!(reason.contains("Get Auth Capabilities error"), "{reason}");
            }
            other => panic!("port {port}: {other:?}"),
        }
    }
}

#[test]
#[ignore = "needs ipmi_sim and ipmitool (.ci/bmc-emulators.sh installs them)"]
fn a_chassis_that_refuses_is_refused_with_ipmitools_message() {
    let sim = IpmiSim::start();
    let mut bmc = Ipmi::new(sim.endpoint());
    sim.refuse(true);
    let err = bmc.power(PowerAction::On).unwrap_err();
    assert_eq!(
        err,
        BmcError::Refused {
            address: sim.address(),
            request: "chassis power on".into(),
            message: "Set Chassis Power Control to Up/On failed: Unspecified error".into(),
        }
    );
    // ipmitool exits 0 here; its missing "Set Boot Device to pxe" gives it away.
    let err = bmc.boot_once(BootDevice::Pxe).unwrap_err();
    match err {
        BmcError::Refused {
            address,
            request,
            message,
        } => {
            assert_eq!(address, sim.address());
            assert_eq!(request, "chassis bootdev pxe");
            assert!(
                message.contains("Set Chassis Boot Parameter 5 failed"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        (sim.power().as_str(), sim.boot().as_str()),
        ("0", "default")
    );
    sim.refuse(false);
    bmc.power(PowerAction::On).unwrap();
    assert_eq!(sim.power(), "1");
}

#[test]
#[ignore = "needs ipmi_sim and ipmitool (.ci/bmc-emulators.sh installs them)"]
fn bios_raid_and_firmware_are_unsupported_and_send_nothing() {
    let sim = IpmiSim::start();
    let mut bmc = Ipmi::new(sim.endpoint());
    assert_eq!(bmc.capabilities().unwrap(), Capabilities::default());
    let errors = [
        bmc.bios().map(drop).unwrap_err(),
        bmc.apply_bios(&serde_json::Map::new()).unwrap_err(),
        bmc.drives().map(drop).unwrap_err(),
        bmc.volumes().map(drop).unwrap_err(),
        bmc.delete_volumes().map(drop).unwrap_err(),
        bmc.update_firmware(
            "http://127.0.0.1/fw.bin",
            Duration::from_secs(1),
            &mut |_| {},
        )
        .map(drop)
        .unwrap_err(),
    ];
    for err in errors {
        match &err {
            BmcError::Unsupported { address, what } => {
                assert_eq!(address, &sim.address());
                assert!(
                    what.contains("over IPMI (use the redfish driver)"),
                    "{what}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(sim.calls().is_empty(), "{:?}", sim.calls());
}
