//! RAID layouts, as Ironic's `target_raid_config`: the logical disks an operator asks for, read
//! and checked by field, then placed on a BMC's physical drives before anything is created.
//!
//! A layout is `{"logical_disks": [{"size_gb": 100 | "MAX", "raid_level": "1", ...}]}` with
//! Ironic's keys (`size_gb`, `raid_level`, `is_root_volume`, `volume_name`, `physical_disks`,
//! `controller`, `number_of_physical_disks`). [`parse`] refuses unknown keys and levels, naming
//! the field (`logical_disks[0].raid_level`); [`plan`] gives each logical disk its drives (the
//! ones it names, else the smallest free ones that suffice) and its capacity from the RAID
//! level's usable share, and refuses a layout larger than the drives, saying how much is
//! missing. Sizes are in GiB as Ironic's are. Pure: data in, data out.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::FieldError;

const GIB: u64 = 1 << 30;

/// A physical drive behind a BMC's storage controller, as RAID planning needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drive {
    /// The BMC's id for it (Redfish: the drive's `@odata.id`).
    pub id: String,
    /// The storage controller it is behind (Redfish: the Storage resource's `@odata.id`).
    pub controller: String,
    pub name: String,
    pub capacity_bytes: u64,
}

/// A RAID level Ironic accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RaidLevel {
    R0,
    R1,
    R5,
    R6,
    R10,
    R50,
    R60,
}

impl RaidLevel {
    const ALL: [(&'static str, RaidLevel); 7] = [
        ("0", RaidLevel::R0),
        ("1", RaidLevel::R1),
        ("5", RaidLevel::R5),
        ("6", RaidLevel::R6),
        ("1+0", RaidLevel::R10),
        ("5+0", RaidLevel::R50),
        ("6+0", RaidLevel::R60),
    ];

    pub fn parse(s: &str) -> Option<RaidLevel> {
        Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, l)| *l)
    }

    /// Ironic's name: `1+0`.
    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, l)| *l == self)
            .map_or("0", |(n, _)| n)
    }

    /// Redfish's `RAIDType`.
    pub fn redfish(self) -> &'static str {
        match self {
            RaidLevel::R0 => "RAID0",
            RaidLevel::R1 => "RAID1",
            RaidLevel::R5 => "RAID5",
            RaidLevel::R6 => "RAID6",
            RaidLevel::R10 => "RAID10",
            RaidLevel::R50 => "RAID50",
            RaidLevel::R60 => "RAID60",
        }
    }

    /// The fewest drives the level needs.
    pub fn min_drives(self) -> usize {
        match self {
            RaidLevel::R0 => 1,
            RaidLevel::R1 => 2,
            RaidLevel::R5 => 3,
            RaidLevel::R6 => 4,
            RaidLevel::R10 => 4,
            RaidLevel::R50 => 6,
            RaidLevel::R60 => 8,
        }
    }

    /// Usable bytes of `n` drives whose smallest holds `each` bytes.
    pub fn usable(self, n: usize, each: u64) -> u64 {
        let n = n as u64;
        let data = match self {
            RaidLevel::R0 => n,
            RaidLevel::R1 => 1,
            RaidLevel::R5 => n.saturating_sub(1),
            RaidLevel::R6 => n.saturating_sub(2),
            RaidLevel::R10 => n / 2,
            RaidLevel::R50 => n.saturating_sub(2),
            RaidLevel::R60 => n.saturating_sub(4),
        };
        data.saturating_mul(each)
    }
}

/// A logical disk's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Size {
    Gib(u64),
    /// All that is left on its drives (Ironic's `"MAX"`).
    Max,
}

/// One logical disk asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogicalDisk {
    pub size: Size,
    pub level: RaidLevel,
    pub root: bool,
    pub name: Option<String>,
    /// Drives named by id or name; absent: chosen.
    pub physical_disks: Option<Vec<String>>,
    pub controller: Option<String>,
    pub drive_count: Option<usize>,
}

/// A whole layout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaidConfig {
    pub logical_disks: Vec<LogicalDisk>,
}

/// One volume to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedVolume {
    pub name: String,
    pub level: RaidLevel,
    pub capacity_bytes: u64,
    /// Drive ids ([`Drive::id`]).
    pub drives: Vec<String>,
    /// The controller they are behind ([`Drive::controller`]).
    pub controller: String,
    pub root: bool,
}

/// The volumes of a layout placed on drives, in the layout's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaidPlan {
    pub volumes: Vec<PlannedVolume>,
}

const KEYS: [&str; 7] = [
    "size_gb",
    "raid_level",
    "is_root_volume",
    "volume_name",
    "physical_disks",
    "controller",
    "number_of_physical_disks",
];

fn problem(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

/// Read a layout; `at` is the field the document sits in (`steps[0].args.target_raid_config`).
pub fn parse(doc: &Value, at: &str) -> Result<RaidConfig, Vec<FieldError>> {
    let mut errors = Vec::new();
    let Some(obj) = doc.as_object() else {
        return Err(vec![problem(at, "expected an object with logical_disks")]);
    };
    for k in obj.keys().filter(|k| *k != "logical_disks") {
        errors.push(problem(
            format!("{at}.{k}"),
            "unknown key; a RAID configuration has logical_disks only",
        ));
    }
    let Some(list) = obj.get("logical_disks").and_then(Value::as_array) else {
        errors.push(problem(
            format!("{at}.logical_disks"),
            "expected a list of logical disks",
        ));
        return Err(errors);
    };
    if list.is_empty() {
        errors.push(problem(
            format!("{at}.logical_disks"),
            "at least one logical disk is needed",
        ));
    }
    if list.len() > 64 {
        errors.push(problem(
            format!("{at}.logical_disks"),
            format!("{} logical disks; at most 64", list.len()),
        ));
        return Err(errors);
    }
    let mut disks = Vec::new();
    let mut roots = 0;
    for (i, d) in list.iter().enumerate() {
        let f = format!("{at}.logical_disks[{i}]");
        let Some(d) = d.as_object() else {
            errors.push(problem(f, "expected an object"));
            continue;
        };
        for k in d.keys().filter(|k| !KEYS.contains(&k.as_str())) {
            errors.push(problem(
                format!("{f}.{k}"),
                format!("unknown key; the keys are: {}", KEYS.join(", ")),
            ));
        }
        let size = match d.get("size_gb") {
            Some(Value::String(s)) if s == "MAX" => Some(Size::Max),
            Some(v) if v.as_u64().is_some_and(|g| g > 0 && g < (1 << 40)) => {
                v.as_u64().map(Size::Gib)
            }
            Some(_) => {
                errors.push(problem(
                    format!("{f}.size_gb"),
                    "expected a positive whole number of GiB or \"MAX\"",
                ));
                None
            }
            None => {
                errors.push(problem(format!("{f}.size_gb"), "required"));
                None
            }
        };
        let level = match d.get("raid_level") {
            Some(Value::String(s)) => RaidLevel::parse(s).or_else(|| {
                errors.push(problem(
                    format!("{f}.raid_level"),
                    format!("{s:?} is not one of: 0, 1, 5, 6, 1+0, 5+0, 6+0"),
                ));
                None
            }),
            Some(_) => {
                errors.push(problem(format!("{f}.raid_level"), "expected a string"));
                None
            }
            None => {
                errors.push(problem(format!("{f}.raid_level"), "required"));
                None
            }
        };
        let root = match d.get("is_root_volume") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                errors.push(problem(format!("{f}.is_root_volume"), "expected a boolean"));
                false
            }
        };
        roots += usize::from(root);
        let name = match d.get("volume_name") {
            None => None,
            Some(Value::String(s)) if !s.is_empty() && s.len() <= 64 => Some(s.clone()),
            Some(_) => {
                errors.push(problem(
                    format!("{f}.volume_name"),
                    "expected a name of 1 to 64 characters",
                ));
                None
            }
        };
        let controller = match d.get("controller") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                errors.push(problem(format!("{f}.controller"), "expected a string"));
                None
            }
        };
        let physical_disks = match d.get("physical_disks") {
            None => None,
            Some(Value::Array(a)) if a.iter().all(Value::is_string) && a.len() <= 256 => Some(
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect::<Vec<_>>(),
            ),
            Some(_) => {
                errors.push(problem(
                    format!("{f}.physical_disks"),
                    "expected a list of drive names or ids",
                ));
                None
            }
        };
        let drive_count = match d.get("number_of_physical_disks") {
            None => None,
            Some(v) => match v.as_u64() {
                Some(n) if (1..=256).contains(&n) => Some(n as usize),
                _ => {
                    errors.push(problem(
                        format!("{f}.number_of_physical_disks"),
                        "expected a whole number from 1 to 256",
                    ));
                    None
                }
            },
        };
        if let (Some(level), Some(n)) =
            (level, drive_count.or(physical_disks.as_ref().map(Vec::len)))
            && n < level.min_drives()
        {
            errors.push(problem(
                format!("{f}.raid_level"),
                format!(
                    "RAID {} needs at least {} drives, {n} given",
                    level.as_str(),
                    level.min_drives()
                ),
            ));
        }
        if let (Some(size), Some(level)) = (size, level) {
            disks.push(LogicalDisk {
                size,
                level,
                root,
                name,
                physical_disks,
                controller,
                drive_count,
            });
        }
    }
    if roots > 1 {
        errors.push(problem(
            format!("{at}.logical_disks"),
            "only one logical disk may be the root volume",
        ));
    }
    if errors.is_empty() {
        Ok(RaidConfig {
            logical_disks: disks,
        })
    } else {
        Err(errors)
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / GIB as f64)
}

/// Place `config` on `drives`: each logical disk gets drives of its own (Redfish volumes here
/// do not share drives), the ones it names or else the smallest free drives of one controller
/// that hold it, and a capacity (`MAX`: all its drives give at its level). Refused, naming the
/// logical disk, when its drives are unknown or taken, or too small for it.
pub fn plan(config: &RaidConfig, drives: &[Drive], at: &str) -> Result<RaidPlan, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut taken: BTreeSet<&str> = BTreeSet::new();
    // Named drives are taken first, so a chosen set never steals them.
    let mut order: Vec<usize> = (0..config.logical_disks.len()).collect();
    order.sort_by_key(|&i| config.logical_disks[i].physical_disks.is_none());
    let mut placed: Vec<Option<PlannedVolume>> = vec![None; config.logical_disks.len()];
    for i in order {
        let d = &config.logical_disks[i];
        let f = format!("{at}.logical_disks[{i}]");
        let errors_before = errors.len();
        let name = d.name.clone().unwrap_or_else(|| format!("stoker-{i}"));
        let want = match d.size {
            Size::Gib(g) => g.saturating_mul(GIB),
            Size::Max => 0,
        };
        let chosen: Vec<&Drive> = if let Some(names) = &d.physical_disks {
            let mut out = Vec::new();
            for n in names {
                match drives.iter().find(|x| x.id == *n || x.name == *n) {
                    None => errors.push(problem(
                        format!("{f}.physical_disks"),
                        format!(
                            "no drive {n:?}; the drives are: {}",
                            drives
                                .iter()
                                .map(|x| x.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )),
                    Some(x) if taken.contains(x.id.as_str()) => errors.push(problem(
                        format!("{f}.physical_disks"),
                        format!("drive {n:?} is already used by another logical disk"),
                    )),
                    Some(x) => out.push(x),
                }
            }
            if errors.len() > errors_before {
                continue;
            }
            out
        } else {
            let n = d.drive_count.unwrap_or(d.level.min_drives());
            // Per controller (the one named, else each), the smallest free drives that hold it.
            let mut best: Option<Vec<&Drive>> = None;
            let controllers: BTreeSet<&str> =
                drives.iter().map(|x| x.controller.as_str()).collect();
            for c in controllers {
                if d.controller
                    .as_deref()
                    .is_some_and(|w| w != c && !c.ends_with(w))
                {
                    continue;
                }
                let mut free: Vec<&Drive> = drives
                    .iter()
                    .filter(|x| x.controller == c && !taken.contains(x.id.as_str()))
                    .collect();
                free.sort_by_key(|x| (x.capacity_bytes, x.id.clone()));
                let fits = match d.size {
                    // MAX takes the n largest drives.
                    Size::Max => free.len().checked_sub(n).map(|s| free[s..].to_vec()),
                    // Else the smallest n in a row whose smallest drive makes the size.
                    Size::Gib(_) => free
                        .windows(n.max(1))
                        .find(|set| d.level.usable(n, set[0].capacity_bytes) >= want)
                        .map(<[&Drive]>::to_vec),
                };
                if let Some(set) = fits
                    && best
                        .as_ref()
                        .is_none_or(|b| set[0].capacity_bytes < b[0].capacity_bytes)
                {
                    best = Some(set);
                }
            }
            match best {
                Some(set) => set,
                None => {
                    let free: Vec<&Drive> = drives
                        .iter()
                        .filter(|x| !taken.contains(x.id.as_str()))
                        .collect();
                    let most = if free.len() >= n {
                        let mut caps: Vec<u64> = free.iter().map(|x| x.capacity_bytes).collect();
                        caps.sort_unstable();
                        d.level.usable(n, caps[caps.len() - n])
                    } else {
                        0
                    };
                    errors.push(problem(
                        format!("{f}.size_gb"),
                        if free.len() < n {
                            format!(
                                "RAID {} on {n} drives needs {n} free drives; {} are free",
                                d.level.as_str(),
                                free.len()
                            )
                        } else {
                            format!(
                                "larger than the drives: {} asked, at most {} free at RAID {} on \
                                 {n} drives",
                                gib(want),
                                gib(most),
                                d.level.as_str()
                            )
                        },
                    ));
                    continue;
                }
            }
        };
        if chosen.len() < d.level.min_drives() {
            errors.push(problem(
                format!("{f}.physical_disks"),
                format!(
                    "RAID {} needs at least {} drives",
                    d.level.as_str(),
                    d.level.min_drives()
                ),
            ));
            continue;
        }
        let controller = chosen[0].controller.clone();
        if chosen.iter().any(|x| x.controller != controller) {
            errors.push(problem(
                format!("{f}.physical_disks"),
                "the drives are behind different controllers",
            ));
            continue;
        }
        let smallest = chosen.iter().map(|x| x.capacity_bytes).min().unwrap_or(0);
        let usable = d.level.usable(chosen.len(), smallest);
        if want > usable {
            errors.push(problem(
                format!("{f}.size_gb"),
                format!(
                    "larger than the drives: {} asked, {} usable at RAID {} on {}",
                    gib(want),
                    gib(usable),
                    d.level.as_str(),
                    chosen
                        .iter()
                        .map(|x| x.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
            continue;
        }
        taken.extend(chosen.iter().map(|x| x.id.as_str()));
        placed[i] = Some(PlannedVolume {
            name,
            level: d.level,
            capacity_bytes: if want == 0 { usable } else { want },
            drives: chosen.iter().map(|x| x.id.clone()).collect(),
            controller,
            root: d.root,
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(RaidPlan {
        volumes: placed.into_iter().flatten().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn drives(sizes: &[u64]) -> Vec<Drive> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, g)| Drive {
                id: format!("/redfish/v1/Systems/1/Storage/1/Drives/{i}"),
                controller: "/redfish/v1/Systems/1/Storage/1".into(),
                name: format!("disk{i}"),
                capacity_bytes: g * GIB,
            })
            .collect()
    }

    #[test]
    fn parses_ironics_layout_and_names_bad_fields() {
        let c = parse(
            &json!({"logical_disks": [
                {"size_gb": 100, "raid_level": "1", "is_root_volume": true},
                {"size_gb": "MAX", "raid_level": "5"}]}),
            "cfg",
        )
        .unwrap();
        assert_eq!(c.logical_disks[0].level, RaidLevel::R1);
        assert_eq!(c.logical_disks[1].size, Size::Max);
        let e = parse(
            &json!({"logical_disks": [
                {"size_gb": -1, "raid_level": "7", "colour": 1},
                {"size_gb": 1, "raid_level": "1", "physical_disks": ["a"]}]}),
            "cfg",
        )
        .unwrap_err();
        let fields: Vec<_> = e.iter().map(|p| p.field.as_str()).collect();
        assert!(fields.contains(&"cfg.logical_disks[0].size_gb"), "{e:?}");
        assert!(fields.contains(&"cfg.logical_disks[0].raid_level"), "{e:?}");
        assert!(fields.contains(&"cfg.logical_disks[0].colour"), "{e:?}");
        assert!(fields.contains(&"cfg.logical_disks[1].raid_level"), "{e:?}");
        assert!(parse(&json!([]), "cfg").is_err());
        assert!(parse(&json!({"logical_disks": []}), "cfg").is_err());
    }

    #[test]
    fn places_on_the_smallest_drives_that_hold_it() {
        let c = parse(
            &json!({"logical_disks": [
                {"size_gb": 50, "raid_level": "1", "is_root_volume": true},
                {"size_gb": "MAX", "raid_level": "0", "number_of_physical_disks": 2}]}),
            "c",
        )
        .unwrap();
        let p = plan(&c, &drives(&[100, 40, 60, 60, 200]), "c").unwrap();
        assert_eq!(p.volumes[0].drives.len(), 2);
        assert_eq!(p.volumes[0].capacity_bytes, 50 * GIB);
        // 60+60 hold a 50 GiB mirror; the 40 cannot.
        assert!(
            p.volumes[0]
                .drives
                .iter()
                .all(|d| d.ends_with("/2") || d.ends_with("/3"))
        );
        // MAX takes the two largest left: 100 and 200, RAID 0 of the smaller = 200 GiB.
        assert_eq!(p.volumes[1].capacity_bytes, 200 * GIB);
        assert_eq!(p.volumes[1].level.redfish(), "RAID0");
    }

    #[test]
    fn refuses_a_layout_larger_than_the_disks() {
        let c = parse(
            &json!({"logical_disks": [{"size_gb": 500, "raid_level": "1"}]}),
            "c",
        )
        .unwrap();
        let e = plan(&c, &drives(&[100, 100, 100]), "c").unwrap_err();
        assert_eq!(e[0].field, "c.logical_disks[0].size_gb");
        assert!(e[0].message.contains("larger than the drives"), "{e:?}");
        let c = parse(
            &json!({"logical_disks": [{"size_gb": 10, "raid_level": "5"}]}),
            "c",
        )
        .unwrap();
        let e = plan(&c, &drives(&[100, 100]), "c").unwrap_err();
        assert!(e[0].message.contains("2 are free"), "{e:?}");
        let c = parse(
            &json!({"logical_disks": [{"size_gb": 10, "raid_level": "1",
                "physical_disks": ["disk0", "nope"]}]}),
            "c",
        )
        .unwrap();
        let e = plan(&c, &drives(&[100, 100]), "c").unwrap_err();
        assert!(e[0].message.contains("no drive \"nope\""), "{e:?}");
    }

    #[test]
    fn named_drives_are_not_shared() {
        let c = parse(
            &json!({"logical_disks": [
                {"size_gb": 10, "raid_level": "1", "physical_disks": ["disk0", "disk1"]},
                {"size_gb": 10, "raid_level": "1", "physical_disks": ["disk1", "disk2"]}]}),
            "c",
        )
        .unwrap();
        let e = plan(&c, &drives(&[100, 100, 100]), "c").unwrap_err();
        assert!(e[0].message.contains("already used"), "{e:?}");
    }
}
