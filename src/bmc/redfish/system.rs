//! The ComputerSystem resource: its power state, the power actions sent through its
//! `ComputerSystem.Reset` action, and the device it boots from once (`Boot`'s override).
//!
//! Which reset types a BMC takes comes from the action's `ResetType@Redfish.AllowableValues`,
//! else from its `@Redfish.ActionInfo` resource, else the standard set is assumed (what sushy
//! does). [`reset_plan`] picks the reset types for a [`PowerAction`] from those, falling back
//! as Ironic does (`ForceRestart`, else `PowerCycle`, else `ForceOff` then `On`). Asking for the
//! state a node is already in changes nothing, as in Ironic.

use std::time::Instant;

use serde_json::{Map, Value, json};

use super::super::{BmcError, BootDevice, PowerAction, PowerState};
use super::Conn;

/// A Redfish `ResetType` value.
pub(super) type ResetType = &'static str;

/// What a BMC is assumed to take when it publishes no allowed values.
const STANDARD_RESET_TYPES: [ResetType; 9] = [
    "On",
    "ForceOff",
    "GracefulShutdown",
    "GracefulRestart",
    "ForceRestart",
    "Nmi",
    "ForceOn",
    "PushPowerButton",
    "PowerCycle",
];

/// The system document's `PowerState`.
pub(super) fn parse_power_state(doc: &Value) -> Result<PowerState, String> {
    match doc.get("PowerState") {
        Some(Value::String(s)) => match s.as_str() {
            "On" => Ok(PowerState::On),
            "Off" => Ok(PowerState::Off),
            "PoweringOn" => Ok(PowerState::PoweringOn),
            "PoweringOff" => Ok(PowerState::PoweringOff),
            other => Err(format!(
                "the system's PowerState is {:?}, not On, Off, PoweringOn or PoweringOff",
                super::http::clean(other)
            )),
        },
        Some(Value::Null) | None => Err("the system has no PowerState".to_string()),
        Some(other) => Err(format!(
            "the system's PowerState is {}, not a string",
            super::http::clean(&other.to_string())
        )),
    }
}

/// The reset types to send, in order, for `action` on a BMC that allows `allowed`; more than
/// one means waiting for the system to be off between them. `Err` says what is allowed.
pub(super) fn reset_plan(
    action: PowerAction,
    allowed: &[String],
) -> Result<Vec<ResetType>, String> {
    let has = |t: &str| allowed.iter().any(|a| a == t);
    let first = |choices: &[ResetType]| choices.iter().copied().find(|t| has(t));
    let plan = match action {
        PowerAction::On => first(&["On", "ForceOn"]).map(|t| vec![t]),
        PowerAction::Off => first(&["ForceOff"]).map(|t| vec![t]),
        PowerAction::SoftOff => first(&["GracefulShutdown"]).map(|t| vec![t]),
        PowerAction::Reboot => first(&["ForceRestart", "PowerCycle"])
            .map(|t| vec![t])
            .or_else(|| {
                let on = first(&["On", "ForceOn"])?;
                has("ForceOff").then(|| vec!["ForceOff", on])
            }),
    };
    plan.ok_or_else(|| {
        format!(
            "power {} (its ResetType allows only: {})",
            action.as_str(),
            if allowed.is_empty() {
                "nothing".to_string()
            } else {
                allowed.join(", ")
            }
        )
    })
}

/// The strings of a JSON list (at most 64).
fn strings(list: &[Value]) -> Vec<String> {
    list.iter()
        .filter_map(Value::as_str)
        .take(64)
        .map(str::to_string)
        .collect()
}

impl Conn {
    pub(super) fn power_state(&mut self) -> Result<PowerState, BmcError> {
        let doc = self.system_doc()?;
        parse_power_state(&doc).map_err(|m| self.client.protocol(m))
    }

    pub(super) fn power(&mut self, action: PowerAction) -> Result<(), BmcError> {
        let doc = self.system_doc()?;
        let state = parse_power_state(&doc).map_err(|m| self.client.protocol(m))?;
        use PowerAction as A;
        use PowerState as S;
        let action = match (action, state) {
            (A::On, S::On | S::PoweringOn) | (A::Off | A::SoftOff, S::Off | S::PoweringOff) => {
                return Ok(());
            }
            // Rebooting a node that is off is switching it on.
            (A::Reboot, S::Off | S::PoweringOff) => A::On,
            (a, _) => a,
        };
        let (target, allowed) = self.reset_action(&doc)?;
        let plan = reset_plan(action, &allowed).map_err(|m| self.client.unsupported(m))?;
        if state == S::PoweringOff {
            self.wait_for_power(S::Off)?;
        }
        for (i, reset) in plan.iter().enumerate() {
            if i > 0 {
                self.wait_for_power(S::Off)?;
            }
            let body = json!({ "ResetType": reset });
            let answer = self.client.request("POST", &target, Some(&body), None)?;
            if !answer.success() {
                return Err(self.client.refused("POST", &target, &answer));
            }
        }
        Ok(())
    }

    /// The reset action's target and the reset types it allows.
    fn reset_action(&mut self, doc: &Value) -> Result<(String, Vec<String>), BmcError> {
        let action = &doc["Actions"]["#ComputerSystem.Reset"];
        let Some(target) = action["target"].as_str() else {
            return Err(self
                .client
                .unsupported("change power (the system has no ComputerSystem.Reset action)"));
        };
        let target = self.client.path(target)?;
        if let Some(list) = action["ResetType@Redfish.AllowableValues"].as_array() {
            return Ok((target, strings(list)));
        }
        if let Some(info) = action["@Redfish.ActionInfo"].as_str() {
            let info = self.client.path(info)?;
            match self.client.get(&info) {
                Ok(doc) => {
                    let listed = doc["Parameters"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|p| p["Name"] == "ResetType")
                        .and_then(|p| p["AllowableValues"].as_array())
                        .map(|l| strings(l));
                    if let Some(allowed) = listed {
                        return Ok((target, allowed));
                    }
                }
                // An ActionInfo the BMC cannot serve says nothing: assume the standard set.
                Err(BmcError::Refused { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok((
            target,
            STANDARD_RESET_TYPES.iter().map(|t| t.to_string()).collect(),
        ))
    }

    /// Poll the power state until it is `want`, within the endpoint's timeout.
    fn wait_for_power(&mut self, want: PowerState) -> Result<(), BmcError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let now = self.power_state()?;
            if now == want {
                return Ok(());
            }
            if Instant::now() + self.poll_interval > deadline {
                return Err(BmcError::Failed {
                    address: self.client.address().to_string(),
                    message: format!(
                        "the system did not power {} within {} s (it is {})",
                        want.as_str(),
                        self.timeout.as_secs(),
                        now.as_str()
                    ),
                });
            }
            std::thread::sleep(self.poll_interval);
        }
    }

    pub(super) fn boot_once(&mut self, device: BootDevice) -> Result<(), BmcError> {
        let path = self.system.clone();
        let answer = self.client.get_answer(&path)?;
        let etag = answer.etag();
        let boot = &answer.body["Boot"];
        if !boot.is_object() {
            return Err(self
                .client
                .unsupported("choose a boot device (the system has no Boot property)"));
        }
        let target = match device {
            BootDevice::Pxe => "Pxe",
            BootDevice::Disk => "Hdd",
        };
        let allowed = |key: &str| boot[key].as_array().map(|l| strings(l));
        if let Some(targets) = allowed("BootSourceOverrideTarget@Redfish.AllowableValues")
            && !targets.iter().any(|t| t == target)
        {
            return Err(self.client.unsupported(format!(
                "boot from {target} (BootSourceOverrideTarget allows only: {})",
                targets.join(", ")
            )));
        }
        let mut patch = Map::new();
        patch.insert("BootSourceOverrideTarget".into(), target.into());
        // Some vendors leave BootSourceOverrideEnabled out of the document and refuse it in a
        // PATCH; their override lasts one boot anyway. Send it only when the BMC shows it.
        if boot.get("BootSourceOverrideEnabled").is_some() {
            if let Some(modes) = allowed("BootSourceOverrideEnabled@Redfish.AllowableValues")
                && !modes.iter().any(|m| m == "Once")
            {
                return Err(self.client.unsupported(format!(
                    "boot from {target} once (BootSourceOverrideEnabled allows only: {})",
                    modes.join(", ")
                )));
            }
            patch.insert("BootSourceOverrideEnabled".into(), "Once".into());
        }
        self.patch(&path, &json!({ "Boot": patch }), etag)
    }

    /// PATCH `body` to `path` with `If-Match: etag` when there is one; a 412 (the resource
    /// changed, or the BMC wants the tag in another form) is retried once with a fresh tag.
    pub(super) fn patch(
        &mut self,
        path: &str,
        body: &Value,
        etag: Option<String>,
    ) -> Result<(), BmcError> {
        let mut answer = self
            .client
            .request("PATCH", path, Some(body), etag.as_deref())?;
        if answer.status == 412 {
            let fresh = self.client.get_answer(path)?.etag();
            answer = self
                .client
                .request("PATCH", path, Some(body), fresh.as_deref())?;
        }
        if answer.success() {
            Ok(())
        } else {
            Err(self.client.refused("PATCH", path, &answer))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn reset_types_fall_back_as_ironic_does() {
        let all = list(&STANDARD_RESET_TYPES);
        assert_eq!(reset_plan(PowerAction::On, &all), Ok(vec!["On"]));
        assert_eq!(reset_plan(PowerAction::Off, &all), Ok(vec!["ForceOff"]));
        assert_eq!(
            reset_plan(PowerAction::SoftOff, &all),
            Ok(vec!["GracefulShutdown"])
        );
        assert_eq!(
            reset_plan(PowerAction::Reboot, &all),
            Ok(vec!["ForceRestart"])
        );
        // No ForceRestart: PowerCycle; neither: ForceOff then On (or ForceOn).
        let cycle = list(&["On", "ForceOff", "PowerCycle"]);
        assert_eq!(
            reset_plan(PowerAction::Reboot, &cycle),
            Ok(vec!["PowerCycle"])
        );
        let bare = list(&["ForceOn", "ForceOff", "GracefulShutdown"]);
        assert_eq!(
            reset_plan(PowerAction::Reboot, &bare),
            Ok(vec!["ForceOff", "ForceOn"])
        );
        assert_eq!(reset_plan(PowerAction::On, &bare), Ok(vec!["ForceOn"]));
    }

    #[test]
    fn a_reset_type_not_allowed_is_refused_naming_the_allowed_ones() {
        let only_on = list(&["On", "GracefulRestart"]);
        let e = reset_plan(PowerAction::Off, &only_on).unwrap_err();
        assert!(
            e.contains("power off") && e.contains("On, GracefulRestart"),
            "{e}"
        );
        let e = reset_plan(PowerAction::Reboot, &only_on).unwrap_err();
        assert!(e.contains("power reboot"), "{e}");
        assert!(reset_plan(PowerAction::SoftOff, &[]).is_err());
        assert!(
            reset_plan(PowerAction::Reboot, &list(&["ForceOff"])).is_err(),
            "ForceOff alone cannot reboot"
        );
    }

    #[test]
    fn power_states_are_read_strictly() {
        assert_eq!(
            parse_power_state(&json!({"PowerState": "PoweringOn"})),
            Ok(PowerState::PoweringOn)
        );
        assert_eq!(
            parse_power_state(&json!({"PowerState": "Off"})),
            Ok(PowerState::Off)
        );
        let e = parse_power_state(&json!({"PowerState": "Paused"})).unwrap_err();
        assert!(e.contains("\"Paused\""), "{e}");
        assert!(parse_power_state(&json!({})).is_err());
        assert!(parse_power_state(&json!({"PowerState": 1})).is_err());
    }
}
