//! The deploy steps that run on the master against a node's BMC (Ironic's bios, raid,
//! management and power interfaces), their `argsinfo`, and the deeper checks of their
//! arguments that run when a deployment is created, each problem named by its request field
//! (`steps[0].args.target_raid_config.logical_disks[1].raid_level`).
//!
//! - `power.boot_network` (90, on): a node with a BMC boots once from the network and is
//!   powered on, or power-cycled, unless its bootstrap agent already answers and no BMC step
//!   before it changed the machine. Nodes without a BMC skip it.
//! - `bios.apply_configuration` (off): Ironic's `settings`, a list of `{name, value}`.
//! - `raid.create_configuration` (off): `target_raid_config` as Ironic's, `delete_existing`.
//! - `raid.delete_configuration` (off).
//! - `management.update_firmware` (off): Ironic's `firmware_images`, a list of `{url,
//!   checksum, wait}`; the master fetches each image's head first, so a URL that 404s fails
//!   before the BMC is asked.
//!
//! The BMC steps are off until a deployment's user steps enable them; give them a priority
//! above 90 to run before the node boots. Pure: data in, data out.

use std::collections::BTreeMap;

use serde_json::Value;

use super::steps::{ArgInfo, ArgType, Interface, Location, Source, StepDef, UserStep};
use crate::model::{Checksum, FieldError};

/// The priority of `power.boot_network`: after BMC steps an operator places above it, before
/// the ramdisk's `deploy.write_image` (80).
pub const BOOT_NETWORK_PRIORITY: u32 = 90;

fn def(interface: Interface, step: &str, priority: u32, args: &[(&str, ArgInfo)]) -> StepDef {
    StepDef {
        interface,
        step: step.to_string(),
        priority,
        argsinfo: args
            .iter()
            .map(|(n, a)| ((*n).to_string(), a.clone()))
            .collect::<BTreeMap<_, _>>(),
        args: serde_json::Map::new(),
        core: false,
        runs_on: Location::Master,
        source: Source::Builtin,
    }
}

/// The master's steps, as [`super::steps::builtins_with`] lists them.
pub fn defs() -> Vec<StepDef> {
    vec![
        def(Interface::Power, "boot_network", BOOT_NETWORK_PRIORITY, &[]),
        def(
            Interface::Bios,
            "apply_configuration",
            0,
            &[(
                "settings",
                ArgInfo::typed(
                    "BIOS attributes to set: a list of {\"name\": ..., \"value\": ...}",
                    true,
                    ArgType::Array,
                ),
            )],
        ),
        def(
            Interface::Raid,
            "create_configuration",
            0,
            &[
                (
                    "target_raid_config",
                    ArgInfo::typed(
                        "the logical disks to create, as Ironic's target_raid_config: \
                         {\"logical_disks\": [{\"size_gb\": 100 or \"MAX\", \"raid_level\": \"1\", ...}]}",
                        true,
                        ArgType::Object,
                    ),
                ),
                (
                    "delete_existing",
                    ArgInfo::typed(
                        "delete the existing logical disks first (default false)",
                        false,
                        ArgType::Boolean,
                    ),
                ),
            ],
        ),
        def(Interface::Raid, "delete_configuration", 0, &[]),
        // Off unless asked for: a reset with power_off puts it after the erase.
        def(Interface::Power, "power_off", 0, &[]),
        def(
            Interface::Management,
            "update_firmware",
            0,
            &[(
                "firmware_images",
                ArgInfo::typed(
                    "images to apply in order: a list of {\"url\": http(s) URL, \"checksum\": \
                     \"sha256:<hex>\" or \"md5:<hex>\" (optional), \"wait\": seconds for the BMC's task (optional)}",
                    true,
                    ArgType::Array,
                ),
            )],
        ),
    ]
}

/// Whether running the step moves its node through the provisioning states. The master's
/// `power.power_off` does not: it ends a reset after the erase, and leaves the node where the
/// erase put it (back in discover).
pub fn moves_node(interface: &str, step: &str) -> bool {
    !(interface == "power" && step == "power_off")
}

/// Whether a step needs the node's BMC (every step on the master but `power.boot_network`,
/// which nodes without one skip).
pub fn needs_bmc(interface: Interface, step: &str) -> bool {
    !(interface == Interface::Power && step == "boot_network")
}

fn problem(field: String, message: impl Into<String>) -> FieldError {
    FieldError {
        field,
        message: message.into(),
    }
}

/// BIOS settings as `(name, value)` pairs from Ironic's list (or an object of name → value).
pub fn bios_settings(
    v: &Value,
    at: &str,
) -> Result<serde_json::Map<String, Value>, Vec<FieldError>> {
    let mut out = serde_json::Map::new();
    let mut errors = Vec::new();
    match v {
        Value::Array(items) => {
            if items.is_empty() {
                errors.push(problem(at.to_string(), "at least one setting is needed"));
            }
            for (i, item) in items.iter().enumerate() {
                let f = format!("{at}[{i}]");
                let name = item.get("name").and_then(Value::as_str);
                let value = item.get("value");
                match (name, value) {
                    (Some(n), Some(v)) if !n.is_empty() && n.len() <= 128 && !v.is_object() && !v.is_array() => {
                        if out.insert(n.to_string(), v.clone()).is_some() {
                            errors.push(problem(format!("{f}.name"), format!("{n} is set twice")));
                        }
                    }
                    (None, _) => errors.push(problem(format!("{f}.name"), "required: the attribute's name")),
                    (_, None) => errors.push(problem(format!("{f}.value"), "required")),
                    _ => errors.push(problem(f, "expected a name of 1 to 128 characters and a string, number or boolean value")),
                }
            }
        }
        Value::Object(m) => out.extend(m.iter().map(|(k, v)| (k.clone(), v.clone()))),
        _ => errors.push(problem(at.to_string(), "expected a list of {name, value}")),
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// One firmware image to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirmwareImage {
    pub url: String,
    /// What the download must hash to, checked by the master before the BMC is asked.
    pub checksum: Option<Checksum>,
    /// Seconds to wait for the BMC's update task.
    pub wait_s: u64,
}

/// Ironic's `firmware_images`.
pub fn firmware_images(v: &Value, at: &str) -> Result<Vec<FirmwareImage>, Vec<FieldError>> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let Some(items) = v.as_array() else {
        return Err(vec![problem(
            at.to_string(),
            "expected a list of {url, checksum, wait}",
        )]);
    };
    if items.is_empty() || items.len() > 16 {
        errors.push(problem(at.to_string(), "expected 1 to 16 images"));
    }
    for (i, item) in items.iter().enumerate() {
        let f = format!("{at}[{i}]");
        let Some(obj) = item.as_object() else {
            errors.push(problem(f, "expected an object with url"));
            continue;
        };
        for k in obj
            .keys()
            .filter(|k| !["url", "checksum", "wait"].contains(&k.as_str()))
        {
            errors.push(problem(
                format!("{f}.{k}"),
                "unknown key; the keys are: url, checksum, wait",
            ));
        }
        let url = match obj.get("url").and_then(Value::as_str) {
            Some(u)
                if (u.starts_with("http://") || u.starts_with("https://"))
                    && u.len() <= 2048
                    && !u.contains(char::is_whitespace) =>
            {
                u.to_string()
            }
            Some(_) => {
                errors.push(problem(
                    format!("{f}.url"),
                    "expected an http:// or https:// URL of at most 2,048 characters",
                ));
                continue;
            }
            None => {
                errors.push(problem(format!("{f}.url"), "required"));
                continue;
            }
        };
        let checksum = match obj.get("checksum") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => match Checksum::parse(s) {
                Ok(c) => Some(c),
                Err(_) => {
                    errors.push(problem(
                        format!("{f}.checksum"),
                        "expected sha256:<64 hex digits> or md5:<32 hex digits>",
                    ));
                    None
                }
            },
            Some(_) => {
                errors.push(problem(format!("{f}.checksum"), "expected a string"));
                None
            }
        };
        let wait_s = match obj.get("wait") {
            None | Some(Value::Null) => 1800,
            Some(v) => match v.as_u64() {
                Some(s) if (1..=14_400).contains(&s) => s,
                _ => {
                    errors.push(problem(
                        format!("{f}.wait"),
                        "expected whole seconds from 1 to 14400",
                    ));
                    1800
                }
            },
        };
        out.push(FirmwareImage {
            url,
            checksum,
            wait_s,
        });
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// The deeper checks of the BMC steps' arguments in a deployment's user steps (`user[i]` is
/// `steps[i]`); types and required arguments are `steps::plan`'s.
pub fn check(user: &[UserStep]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, u) in user.iter().enumerate() {
        if u.priority == 0 {
            continue;
        }
        let at = |name: &str| format!("steps[{i}].args.{name}");
        let result = match (u.interface, u.step.as_str()) {
            (Interface::Bios, "apply_configuration") => u
                .args
                .get("settings")
                .map(|v| bios_settings(v, &at("settings")).map(|_| ())),
            (Interface::Raid, "create_configuration") => u
                .args
                .get("target_raid_config")
                .map(|v| super::raid::parse(v, &at("target_raid_config")).map(|_| ())),
            (Interface::Management, "update_firmware") => u
                .args
                .get("firmware_images")
                .map(|v| firmware_images(v, &at("firmware_images")).map(|_| ())),
            _ => None,
        };
        if let Some(Err(mut e)) = result {
            errors.append(&mut e);
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(interface: Interface, step: &str, args: Value) -> UserStep {
        UserStep {
            interface,
            step: step.into(),
            priority: 100,
            args: args.as_object().cloned().unwrap_or_default(),
        }
    }

    #[test]
    fn bmc_steps_run_on_the_master_and_are_off_but_the_boot() {
        for d in defs() {
            assert_eq!(d.runs_on, Location::Master);
            assert_eq!(d.priority > 0, d.step == "boot_network", "{}", d.step);
        }
    }

    #[test]
    fn names_each_bad_argument_by_field() {
        let e = check(&[
            user(
                Interface::Bios,
                "apply_configuration",
                json!({"settings": [{"name": "A"}]}),
            ),
            user(
                Interface::Raid,
                "create_configuration",
                json!({"target_raid_config": {"logical_disks": [{"size_gb": 1, "raid_level": "9"}]}}),
            ),
            user(
                Interface::Management,
                "update_firmware",
                json!({"firmware_images": [{"url": "ftp://x", "checksum": "md5:1"}]}),
            ),
        ]);
        let fields: Vec<_> = e.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "steps[0].args.settings[0].value",
                "steps[1].args.target_raid_config.logical_disks[0].raid_level",
                "steps[2].args.firmware_images[0].url",
            ],
            "{e:?}"
        );
        assert!(
            check(&[user(
                Interface::Bios,
                "apply_configuration",
                json!({"settings": [{"name": "ProcTurboMode", "value": "Disabled"}]})
            )])
            .is_empty()
        );
        let images = firmware_images(
            &json!([{"url": "http://m/f.bin",
            "checksum": format!("sha256:{}", "AB".repeat(32)), "wait": 60}]),
            "x",
        )
        .unwrap();
        assert_eq!(images[0].checksum, Some(Checksum::Sha256("ab".repeat(32))));
        let e = firmware_images(
            &json!([{"url": "http://m/f.bin", "checksum": "crc32:deadbeef"}]),
            "x",
        )
        .unwrap_err();
        assert_eq!(e[0].field, "x[0].checksum");
    }
}
