//! The system's Storage: the physical drives behind each storage controller and the RAID
//! volumes on them, as Ironic's `redfish` RAID interface reads and makes them.
//!
//! A volume is created by a POST to its controller's `Volumes` collection with `RAIDType` and,
//! for BMCs older than Redfish 2019.1 (and sushy-tools), the Swordfish `VolumeType` it implies,
//! as Ironic sends both. The answer may be the new volume (201), a task to follow (202), or
//! nothing (204); the volume is then found by name. Deleting is a DELETE of each volume; a BMC
//! that answers 405 (or whose `Allow` header leaves DELETE out) cannot, and says so before
//! anything is deleted when it can tell.

use std::time::Duration;

use serde_json::{Value, json};

use super::super::{BmcError, Drive, Volume};
use super::{Conn, MAX_MEMBERS, refused_is_no, task};
use crate::engine::raid::{PlannedVolume, RaidLevel, RaidPlan};

/// How long a volume's creation or deletion task may run.
const VOLUME_TASK_WAIT: Duration = Duration::from_secs(600);

/// The Swordfish `VolumeType` of a RAID level (Ironic's `RAID_LEVELS`).
pub(super) fn volume_type(level: RaidLevel) -> &'static str {
    match level {
        RaidLevel::R0 => "NonRedundant",
        RaidLevel::R1 => "Mirrored",
        RaidLevel::R5 | RaidLevel::R6 => "StripedWithParity",
        RaidLevel::R10 => "SpannedMirrors",
        RaidLevel::R50 | RaidLevel::R60 => "SpannedStripesWithParity",
    }
}

/// The body of the POST creating `v`.
pub(super) fn volume_payload(v: &PlannedVolume) -> Value {
    let drives: Vec<Value> = v.drives.iter().map(|d| json!({ "@odata.id": d })).collect();
    json!({
        "Name": v.name,
        "RAIDType": v.level.redfish(),
        "VolumeType": volume_type(v.level),
        "CapacityBytes": v.capacity_bytes,
        "Links": { "Drives": drives },
    })
}

/// A volume document read.
fn volume_of(path: &str, doc: &Value) -> Volume {
    let text = |k: &str| doc[k].as_str().map(super::http::clean);
    Volume {
        id: path.to_string(),
        name: text("Name")
            .or_else(|| text("Id"))
            .unwrap_or_else(|| path.to_string()),
        raid_type: text("RAIDType").or_else(|| text("VolumeType")),
        capacity_bytes: doc["CapacityBytes"].as_u64(),
    }
}

/// Whether an `Allow` header lists DELETE.
fn allows_delete(allow: &str) -> bool {
    allow
        .split(',')
        .any(|m| m.trim().eq_ignore_ascii_case("DELETE"))
}

impl Conn {
    /// Each storage resource of the system (path, document); `None` when it links no Storage.
    fn storage(&mut self) -> Result<Option<Vec<(String, Value)>>, BmcError> {
        let Some(collection) = self.system_link("Storage")? else {
            return Ok(None);
        };
        let mut out = Vec::new();
        for path in self.members(&collection)? {
            let doc = self.client.get(&path)?;
            out.push((path, doc));
        }
        Ok(Some(out))
    }

    fn storage_or_unsupported(&mut self, what: &str) -> Result<Vec<(String, Value)>, BmcError> {
        self.storage()?.ok_or_else(|| {
            self.client
                .unsupported(format!("{what} (the system links no Storage)"))
        })
    }

    /// RAID is possible when some storage has a Volumes collection; a BMC that links Storage
    /// but refuses to list it cannot do RAID.
    pub(super) fn can_raid(&mut self) -> Result<bool, BmcError> {
        refused_is_no(self.storage().map(|s| {
            s.into_iter()
                .flatten()
                .any(|(_, doc)| doc["Volumes"]["@odata.id"].is_string())
        }))
    }

    pub(super) fn drives(&mut self) -> Result<Vec<Drive>, BmcError> {
        let mut out = Vec::new();
        let mut walked = 0;
        for (controller, doc) in self.storage_or_unsupported("list drives")? {
            for link in doc["Drives"].as_array().into_iter().flatten() {
                walked += 1;
                if walked > MAX_MEMBERS {
                    return Err(self
                        .client
                        .protocol(format!("the system has more than {MAX_MEMBERS} drives")));
                }
                let Some(id) = link["@odata.id"].as_str() else {
                    return Err(self
                        .client
                        .protocol(format!("a drive of {controller} has no @odata.id")));
                };
                let path = self.client.path(id)?;
                let drive = self.client.get(&path)?;
                // An empty bay or a failed drive has no capacity: nothing to build on.
                let Some(capacity_bytes) = drive["CapacityBytes"].as_u64() else {
                    continue;
                };
                let text = |k: &str| drive[k].as_str().map(super::http::clean);
                out.push(Drive {
                    name: text("Name")
                        .or_else(|| text("Id"))
                        .unwrap_or_else(|| path.clone()),
                    id: path,
                    controller: controller.clone(),
                    capacity_bytes,
                });
            }
        }
        Ok(out)
    }

    /// Every volume with the `Allow` header of its answer.
    pub(super) fn volumes(&mut self) -> Result<Vec<(Volume, Option<String>)>, BmcError> {
        let mut out = Vec::new();
        for (_, doc) in self.storage_or_unsupported("list volumes")? {
            let Some(collection) = self.link_of(&doc, "Volumes")? else {
                continue;
            };
            for path in self.members(&collection)? {
                if out.len() >= MAX_MEMBERS {
                    return Err(self
                        .client
                        .protocol(format!("the system has more than {MAX_MEMBERS} volumes")));
                }
                let answer = self.client.get_answer(&path)?;
                out.push((volume_of(&path, &answer.body), answer.allow));
            }
        }
        Ok(out)
    }

    pub(super) fn create_volumes(&mut self, plan: &RaidPlan) -> Result<Vec<Volume>, BmcError> {
        // Every controller is checked before anything is created.
        let mut collections = Vec::new();
        for v in &plan.volumes {
            let controller = self.client.path(&v.controller)?;
            let doc = self.client.get(&controller)?;
            let Some(collection) = self.link_of(&doc, "Volumes")? else {
                return Err(self.client.unsupported(format!(
                    "create volumes on {controller} (it links no Volumes collection)"
                )));
            };
            collections.push(collection);
        }
        let mut made = Vec::new();
        for (v, collection) in plan.volumes.iter().zip(collections) {
            made.push(self.create_volume(v, &collection)?);
        }
        Ok(made)
    }

    fn create_volume(&mut self, v: &PlannedVolume, collection: &str) -> Result<Volume, BmcError> {
        let body = volume_payload(v);
        let answer = self.client.request("POST", collection, Some(&body), None)?;
        if !answer.success() {
            return Err(self.client.refused("POST", collection, &answer));
        }
        if answer.status == 202 {
            if let Some(link) = task::monitor_link(answer.location.as_deref(), &answer.body) {
                let monitor = self.client.path(&link)?;
                let bmc = self.client.address().to_string();
                self.follow_task(
                    &monitor,
                    VOLUME_TASK_WAIT,
                    &mut |line| tracing::info!(bmc = %bmc, "creating volume {}: {line}", v.name),
                )?;
            }
        } else {
            let created = answer
                .location
                .as_deref()
                .or_else(|| answer.body["@odata.id"].as_str());
            if let Some(link) = created {
                let path = self.client.path(link)?;
                let doc = self.client.get(&path)?;
                return Ok(volume_of(&path, &doc));
            }
        }
        self.volume_named(collection, v)
    }

    /// The volume of `collection` named as `v`; when the BMC shows none yet (applied at the
    /// next reset), the planned volume with an empty id.
    fn volume_named(&mut self, collection: &str, v: &PlannedVolume) -> Result<Volume, BmcError> {
        for path in self.members(collection)?.into_iter().rev() {
            let doc = self.client.get(&path)?;
            if doc["Name"] == v.name.as_str() {
                return Ok(volume_of(&path, &doc));
            }
        }
        Ok(Volume {
            id: String::new(),
            name: v.name.clone(),
            raid_type: Some(v.level.redfish().to_string()),
            capacity_bytes: Some(v.capacity_bytes),
        })
    }

    pub(super) fn delete_volumes(&mut self) -> Result<usize, BmcError> {
        let volumes = self.volumes()?;
        for (v, allow) in &volumes {
            if let Some(allow) = allow
                && !allows_delete(allow)
            {
                return Err(self.client.unsupported(format!(
                    "delete volumes ({} allows only {})",
                    v.id,
                    super::http::clean(allow)
                )));
            }
        }
        let mut deleted = 0;
        for (v, _) in volumes {
            let answer = self.client.request("DELETE", &v.id, None, None)?;
            match answer.status {
                405 => {
                    return Err(self.client.unsupported(format!(
                        "delete volumes (DELETE {} answered 405 Method Not Allowed; {deleted} \
                         deleted before)",
                        v.id
                    )));
                }
                202 => {
                    if let Some(link) = task::monitor_link(answer.location.as_deref(), &answer.body)
                    {
                        let monitor = self.client.path(&link)?;
                        self.follow_task(&monitor, VOLUME_TASK_WAIT, &mut |_| {})?;
                    }
                }
                s if (200..300).contains(&s) => {}
                _ => return Err(self.client.refused("DELETE", &v.id, &answer)),
            }
            deleted += 1;
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_volume_is_asked_for_with_both_raid_type_and_volume_type() {
        let v = PlannedVolume {
            name: "root".into(),
            level: RaidLevel::R10,
            capacity_bytes: 1 << 30,
            drives: vec!["/d/1".into(), "/d/2".into()],
            controller: "/s/1".into(),
            root: true,
        };
        assert_eq!(
            volume_payload(&v),
            json!({
                "Name": "root",
                "RAIDType": "RAID10",
                "VolumeType": "SpannedMirrors",
                "CapacityBytes": 1u64 << 30,
                "Links": {"Drives": [{"@odata.id": "/d/1"}, {"@odata.id": "/d/2"}]},
            })
        );
        assert_eq!(volume_type(RaidLevel::R0), "NonRedundant");
        assert_eq!(volume_type(RaidLevel::R1), "Mirrored");
        assert_eq!(volume_type(RaidLevel::R6), "StripedWithParity");
        assert_eq!(volume_type(RaidLevel::R60), "SpannedStripesWithParity");
    }

    #[test]
    fn volumes_are_read_with_legacy_fallbacks() {
        let v = volume_of(
            "/v/1",
            &json!({"Id": "1", "VolumeType": "Mirrored", "CapacityBytes": 42}),
        );
        assert_eq!(v.name, "1");
        assert_eq!(v.raid_type.as_deref(), Some("Mirrored"));
        assert_eq!(v.capacity_bytes, Some(42));
        assert!(allows_delete("GET, PATCH, delete"));
        assert!(!allows_delete("GET,PATCH"));
    }
}
