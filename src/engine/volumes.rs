//! A node's disk layout as Nailgun's volume_manager extension makes it (`manager.py`): which
//! volumes a node's roles get (`volumes_roles_mapping`, `other` when none), their sizes from
//! the size generators (`calc_root_size`, `calc_swap_size`, `calc_gb_to_mb` ...), allocated on
//! the node's disks as `VolumeManager.gen_volumes_info` does (service partitions on every
//! disk, `min` volumes first, `full-disk`, then `all` sharing the rest), in Nailgun's "full"
//! format (what `node_volumes` carries to the deployment), and converted to and from the
//! "simple" format `fuel2 node disks` reads and uploads (`DisksFormatConvertor`). An upload is
//! checked as `NodeDisksValidator` checks it, and further: unknown disks and volumes, sizes
//! past a disk's space and volumes under their minimum are refused by field.
//!
//! Sizes are MiB in integers, with Python 2's integer division where Nailgun divided ints.

use serde_json::{Map, Value as J, json};

use crate::model::FieldError;

/// One of a node's disks as its inventory reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskInfo {
    /// The disk's id and name (`sda`).
    pub name: String,
    pub size_bytes: u64,
}

/// What the volume manager cannot do with a release's `volumes_metadata`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VolumeError {
    #[error("volumes_metadata: unknown size generator {0:?}")]
    UnknownGenerator(String),
    #[error("volumes_metadata: generator {name:?} needs {what}")]
    BadArguments { name: String, what: &'static str },
    #[error("volumes_metadata.volumes_roles_mapping names volume {0:?}, which volumes lacks")]
    UnknownSpace(String),
    #[error("volumes_metadata.rule_to_pick_boot_disk: bad regex {0:?}")]
    BadRule(String),
}

const LVM_META: i64 = 64;
const BOOT: i64 = 200;
const BOOT_RECORDS: i64 = 300;

fn gb_to_mb(gb: f64) -> i64 {
    (gb * 1024.0) as i64
}

/// Nailgun's `is_service`: `/boot`, and anything not a PV, partition or RAID.
fn is_service(v: &J) -> bool {
    v.get("mount").and_then(J::as_str) == Some("/boot")
        || !matches!(
            v.get("type").and_then(J::as_str),
            Some("pv" | "partition" | "raid")
        )
}

fn size_of(v: &J) -> i64 {
    v.get("size").and_then(J::as_i64).unwrap_or(0)
}

/// `get_node_spaces`: the spaces (`volumes` entries) the node's roles map to, in role order,
/// each once with its `_allocate_size`; `other`'s when no role maps to any. `images_ceph`
/// drops the controller's `image` volume, as Nailgun's `exclude_glance_partition` does.
pub fn node_spaces(
    volumes_metadata: &J,
    roles: &[String],
    disks: usize,
    images_ceph: bool,
) -> Result<Vec<J>, VolumeError> {
    let mapping = volumes_metadata.get("volumes_roles_mapping");
    let all: &[J] = volumes_metadata
        .get("volumes")
        .and_then(J::as_array)
        .map_or(&[], Vec::as_slice);
    let mut out: Vec<J> = Vec::new();
    let add = |role: &str, out: &mut Vec<J>| -> Result<(), VolumeError> {
        let vols = mapping
            .and_then(|m| m.get(role))
            .and_then(J::as_array)
            .map_or(&[][..], Vec::as_slice);
        for vol in vols {
            let id = vol.get("id").and_then(J::as_str).unwrap_or_default();
            if images_ceph && role == "controller" && id == "image" {
                continue;
            }
            let space = all
                .iter()
                .find(|s| s.get("id").and_then(J::as_str) == Some(id))
                .ok_or_else(|| VolumeError::UnknownSpace(id.to_string()))?;
            if out.iter().any(|s| s.get("id") == space.get("id")) {
                continue;
            }
            let mut allocate = vol
                .get("allocate_size")
                .and_then(J::as_str)
                .unwrap_or("min");
            if disks == 1 && allocate == "full-disk" {
                allocate = "all";
            }
            let mut space = space.clone();
            if let Some(o) = space.as_object_mut() {
                o.insert("_allocate_size".into(), json!(allocate));
            }
            out.push(space);
        }
        Ok(())
    };
    for role in roles {
        add(role, &mut out)?;
    }
    if out.is_empty() && !roles.is_empty() {
        add("other", &mut out)?;
    }
    Ok(out)
}

/// One disk while volumes are allocated on it (Nailgun's `Disk`).
#[derive(Debug, Clone)]
struct Disk {
    id: String,
    name: String,
    size: i64,
    free_space: i64,
    volumes: Vec<J>,
    bootable: bool,
    boot_is_raid: bool,
    max_lvm_meta_pool: i64,
}

impl Disk {
    fn new(info: &DiskInfo, existing: Option<&J>, boot_is_raid: bool, pvs: i64) -> Disk {
        let size = i64::try_from(info.size_bytes / (1024 * 1024)).unwrap_or(i64::MAX);
        let volumes: Vec<J> = existing
            .and_then(|d| d.get("volumes"))
            .and_then(J::as_array)
            .cloned()
            .unwrap_or_default();
        let used: i64 = volumes.iter().map(size_of).sum();
        let mut d = Disk {
            id: info.name.clone(),
            name: info.name.clone(),
            size,
            free_space: size - used,
            volumes,
            bootable: existing
                .and_then(|d| d.get("bootable"))
                .and_then(J::as_bool)
                .unwrap_or(false),
            boot_is_raid,
            max_lvm_meta_pool: LVM_META * pvs,
        };
        d.create_service_partitions();
        d
    }

    fn get_size(&mut self, size: i64) -> i64 {
        let s = if self.free_space >= size { size } else { 0 };
        self.free_space -= s;
        s
    }

    fn has(&self, pred: impl Fn(&J) -> bool) -> bool {
        self.volumes.iter().any(pred)
    }

    fn create_service_partitions(&mut self) {
        if !self.has(|v| v.get("type").and_then(J::as_str) == Some("boot")) {
            let size = self.get_size(BOOT_RECORDS);
            self.volumes.push(json!({"type": "boot", "size": size}));
        }
        if !self.has(|v| v.get("mount").and_then(J::as_str) == Some("/boot")) {
            let ptype = if self.boot_is_raid {
                "raid"
            } else {
                "partition"
            };
            let size = self.get_size(BOOT);
            self.volumes.push(
                json!({"type": ptype, "file_system": "ext2", "mount": "/boot",
                                     "name": "Boot", "size": size}),
            );
        }
        if !self.has(|v| v.get("type").and_then(J::as_str) == Some("lvm_meta_pool")) {
            let size = self.get_size(self.max_lvm_meta_pool);
            self.volumes
                .push(json!({"type": "lvm_meta_pool", "size": size}));
        }
    }

    fn reset(&mut self) {
        self.volumes.clear();
        self.free_space = self.size;
        self.create_service_partitions();
    }

    fn pool(&mut self) -> Option<&mut Map<String, J>> {
        self.volumes
            .iter_mut()
            .find(|v| v.get("type").and_then(J::as_str) == Some("lvm_meta_pool"))
            .and_then(J::as_object_mut)
    }

    fn lvm_meta_from_pool(&mut self) -> i64 {
        let Some(pool) = self.pool() else { return 0 };
        let size = pool.get("size").and_then(J::as_i64).unwrap_or(0);
        if size >= LVM_META {
            pool.insert("size".into(), json!(size - LVM_META));
            LVM_META
        } else {
            0
        }
    }

    fn create_pv(&mut self, vg: &str, size: Option<i64>) {
        let size = size.unwrap_or(self.free_space);
        self.free_space -= size;
        let meta = if size != 0 {
            self.lvm_meta_from_pool()
        } else {
            0
        };
        self.volumes
            .push(json!({"type": "pv", "vg": vg, "size": size + meta,
                                 "lvm_meta_size": meta}));
    }

    fn create_partition(&mut self, info: &J, size: Option<i64>, ptype: &str) {
        let size = size.unwrap_or(self.free_space);
        self.free_space -= size;
        self.volumes.push(json!({
            "size": size,
            "type": ptype,
            "name": info.get("id").cloned().unwrap_or(J::Null),
            "file_system": info.get("file_system").cloned().unwrap_or(J::Null),
            "disk_label": info.get("disk_label").cloned().unwrap_or(J::Null),
            "partition_guid": info.get("partition_guid").cloned().unwrap_or(J::Null),
            "mount": info.get("mount").cloned().unwrap_or(J::Null),
        }));
    }

    fn allocate(&mut self, space: &J, size: Option<i64>) {
        let id = space.get("id").and_then(J::as_str).unwrap_or_default();
        match space.get("type").and_then(J::as_str) {
            Some("vg") => self.create_pv(id, size),
            Some("partition") => self.create_partition(space, size, "partition"),
            Some("raid") => self.create_partition(space, size, "raid"),
            _ => {}
        }
    }

    fn remove_pv(&mut self, vg: &str) {
        if let Some(i) = self.volumes.iter().position(|v| {
            v.get("type").and_then(J::as_str) == Some("pv")
                && v.get("vg").and_then(J::as_str) == Some(vg)
        }) {
            let v = self.volumes.remove(i);
            let meta = v.get("lvm_meta_size").and_then(J::as_i64).unwrap_or(0);
            if let Some(pool) = self.pool() {
                let size = pool.get("size").and_then(J::as_i64).unwrap_or(0);
                pool.insert("size".into(), json!(size + meta));
            }
            self.free_space += size_of(&v) - meta;
        }
    }

    fn set_pv_size(&mut self, vg: &str, size: i64) {
        if self.has(|v| {
            v.get("type").and_then(J::as_str) == Some("pv")
                && v.get("vg").and_then(J::as_str) == Some(vg)
        }) {
            self.remove_pv(vg);
            self.create_pv(vg, Some(size));
        }
    }

    fn set_part_size(&mut self, ptype: &str, name: &str, size: i64) {
        for v in &mut self.volumes {
            if v.get("type").and_then(J::as_str) == Some(ptype)
                && v.get("name").and_then(J::as_str) == Some(name)
                && v.get("mount").and_then(J::as_str) != Some("/boot")
            {
                self.free_space += size_of(v) - size;
                v["size"] = json!(size);
            }
        }
    }

    fn set_keep_data(&mut self, name: &str, keep: bool) {
        for v in &mut self.volumes {
            if !matches!(
                v.get("type").and_then(J::as_str),
                Some("pv" | "partition" | "raid")
            ) {
                continue;
            }
            let n = v
                .get("name")
                .and_then(J::as_str)
                .or_else(|| v.get("vg").and_then(J::as_str));
            if n == Some(name) {
                v["keep_data"] = json!(keep);
            }
        }
    }

    fn render(&self, free_space: i64) -> J {
        json!({"id": self.id, "extra": [], "name": self.name, "type": "disk",
               "size": self.size, "volumes": self.volumes, "free_space": free_space,
               "bootable": self.bootable})
    }
}

/// Nailgun's `VolumeManager` for one node.
pub struct VolumeManager {
    disks: Vec<Disk>,
    ram_bytes: u64,
    allowed: Vec<J>,
    rules: Vec<J>,
}

/// A volume an upload sets on a disk (the simple format).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleVolume {
    pub name: String,
    pub size: i64,
    pub keep_data: bool,
}

/// A disk of an upload (the simple format).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleDisk {
    pub id: String,
    pub bootable: Option<bool>,
    pub volumes: Vec<SimpleVolume>,
}

impl VolumeManager {
    /// A manager for a node with `disks` (sorted by name as Nailgun does), `ram_bytes` of
    /// memory, the `allowed` spaces ([`node_spaces`]), the release's
    /// `rule_to_pick_boot_disk`, and its `current` full-format volumes (empty: none yet).
    pub fn new(
        disks: &[DiskInfo],
        ram_bytes: u64,
        allowed: Vec<J>,
        rules: &J,
        current: &[J],
    ) -> VolumeManager {
        let mut sorted: Vec<&DiskInfo> = disks.iter().collect();
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        let pvs = allowed
            .iter()
            .filter(|s| s.get("type").and_then(J::as_str) == Some("vg"))
            .count() as i64;
        let raid = sorted.len() > 1;
        let disks = sorted
            .iter()
            .map(|d| {
                let existing = current.iter().find(|v| {
                    v.get("type").and_then(J::as_str) == Some("disk")
                        && v.get("id").and_then(J::as_str) == Some(d.name.as_str())
                });
                Disk::new(d, existing, raid, pvs)
            })
            .collect();
        VolumeManager {
            disks,
            ram_bytes,
            allowed,
            rules: rules.as_array().cloned().unwrap_or_default(),
        }
    }

    /// The names of the volumes this node may have.
    pub fn allowed_names(&self) -> Vec<String> {
        self.allowed
            .iter()
            .filter_map(|s| s.get("id").and_then(J::as_str).map(str::to_string))
            .collect()
    }

    /// Each disk's space for volumes as the simple format gives it, by disk id.
    pub fn disk_space(&self) -> Vec<(String, i64)> {
        let full = self.full();
        to_simple(&full)
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|d| {
                        (
                            d["id"].as_str().unwrap_or_default().to_string(),
                            d["size"].as_i64().unwrap_or(0),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn swap_size(&self) -> i64 {
        let mem = (self.ram_bytes / (1024 * 1024)) as i64;
        if mem <= 2048 {
            2 * mem
        } else if mem <= 8192 {
            mem
        } else if mem <= 65536 {
            mem / 2
        } else {
            gb_to_mb(4.0)
        }
    }

    fn root_size(&self) -> i64 {
        let size = self
            .disks
            .first()
            .map_or(0, |d| (d.size as f64 * 0.2) as i64);
        size.clamp(gb_to_mb(15.0), gb_to_mb(50.0))
    }

    fn total_vg(&self, vg: &str) -> i64 {
        self.disks
            .iter()
            .flat_map(|d| &d.volumes)
            .filter(|v| {
                v.get("type").and_then(J::as_str) == Some("pv")
                    && v.get("vg").and_then(J::as_str) == Some(vg)
            })
            .map(|v| size_of(v) - v.get("lvm_meta_size").and_then(J::as_i64).unwrap_or(0))
            .sum()
    }

    /// Nailgun's `call_generator`; `vg` is the volume group being expanded, which
    /// `calc_total_vg` without arguments means (Nailgun required the argument).
    fn generator(&self, name: &str, args: &[J], vg: Option<&str>) -> Result<i64, VolumeError> {
        let bad = |what| VolumeError::BadArguments {
            name: name.to_string(),
            what,
        };
        Ok(match name {
            "calc_swap_size" => self.swap_size(),
            "calc_root_size" => self.root_size(),
            "calc_boot_size" => BOOT,
            "calc_boot_records_size" => BOOT_RECORDS,
            "calc_mbr_size" => 10,
            "calc_lvm_meta_size" => LVM_META,
            "calc_total_vg" => {
                let vg = args
                    .first()
                    .and_then(J::as_str)
                    .or(vg)
                    .ok_or_else(|| bad("a volume group name"))?;
                self.total_vg(vg)
            }
            "calc_min_vm_size" | "calc_min_glance_size" => gb_to_mb(5.0),
            "calc_min_cinder_size" => gb_to_mb(1.5),
            "calc_min_mongo_size" => gb_to_mb(10.0),
            "calc_total_root_vg" => self.total_vg("os") - self.swap_size(),
            "calc_min_ceph_size" => gb_to_mb(3.0),
            "calc_min_ceph_journal_size" => 0,
            "calc_min_mysql_size" => gb_to_mb(20.0),
            "calc_gb_to_mb" => {
                let gb = args
                    .first()
                    .and_then(J::as_f64)
                    .ok_or_else(|| bad("a number of GB"))?;
                gb_to_mb(gb)
            }
            "calc_os_size" | "calc_os_vg_size" | "calc_min_os_size" => {
                self.root_size() + self.swap_size()
            }
            other => return Err(VolumeError::UnknownGenerator(other.to_string())),
        })
    }

    /// Nailgun's `expand_generators`: every `{generator, generator_args}` replaced by its value.
    fn expand(&self, value: &J, vg: Option<&str>) -> Result<J, VolumeError> {
        Ok(match value {
            J::Object(o) => match o.get("generator").and_then(J::as_str) {
                Some(g) => {
                    let args = o
                        .get("generator_args")
                        .and_then(J::as_array)
                        .map_or(&[][..], Vec::as_slice);
                    json!(self.generator(g, args, vg)?)
                }
                None => J::Object(
                    o.iter()
                        .map(|(k, v)| Ok((k.clone(), self.expand(v, vg)?)))
                        .collect::<Result<Map<_, _>, VolumeError>>()?,
                ),
            },
            J::Array(a) => J::Array(
                a.iter()
                    .map(|v| self.expand(v, vg))
                    .collect::<Result<_, _>>()?,
            ),
            other => other.clone(),
        })
    }

    fn min_size(&self, space: &J) -> Result<i64, VolumeError> {
        Ok(self
            .expand(
                space.get("min_size").unwrap_or(&J::Null),
                space.get("id").and_then(J::as_str),
            )?
            .as_i64()
            .unwrap_or(0))
    }

    fn with_allocate(&self, kind: &str) -> Vec<J> {
        self.allowed
            .iter()
            .filter(|s| s.get("_allocate_size").and_then(J::as_str) == Some(kind))
            .cloned()
            .collect()
    }

    fn allocate_size(&mut self, space: &J, size: i64) {
        let mut left = size;
        for d in &mut self.disks {
            let s = if d.free_space >= left {
                left
            } else if d.free_space > 0 {
                d.free_space
            } else {
                0
            };
            d.allocate(space, Some(s));
            left -= s;
        }
    }

    /// The volumes in Nailgun's full format: the disks, then the volume groups expanded.
    fn full(&self) -> Vec<J> {
        self.full_with(None).unwrap_or_default()
    }

    fn full_with(&self, free: Option<&[i64]>) -> Result<Vec<J>, VolumeError> {
        let mut out: Vec<J> = self
            .disks
            .iter()
            .enumerate()
            .map(|(i, d)| d.render(free.and_then(|f| f.get(i).copied()).unwrap_or(d.free_space)))
            .collect();
        for s in &self.allowed {
            if s.get("type").and_then(J::as_str) == Some("vg") {
                out.push(self.expand(s, s.get("id").and_then(J::as_str))?);
            }
        }
        Ok(out)
    }

    /// Nailgun's `gen_volumes_info`: the default layout.
    pub fn generate(&mut self) -> Result<Vec<J>, VolumeError> {
        for d in &mut self.disks {
            d.reset();
        }
        // Nailgun renders the disks before allocating: their free_space stays that of a
        // disk holding only its service partitions.
        let free: Vec<i64> = self.disks.iter().map(|d| d.free_space).collect();
        if self.allowed.is_empty() {
            return self.full_with(Some(&free));
        }
        for space in self.with_allocate("min") {
            let min = self.min_size(&space)?;
            self.allocate_size(&space, min);
        }
        for space in self.with_allocate("full-disk") {
            for d in &mut self.disks {
                let used = d.volumes.iter().any(|v| !is_service(v) && size_of(v) > 0);
                d.allocate(&space, if used { Some(0) } else { None });
            }
        }
        let all = self.with_allocate("all");
        if all.len() > 1 {
            let free_total: i64 = self.disks.iter().map(|d| d.free_space).sum();
            let size = free_total.div_euclid(all.len() as i64);
            for space in &all[..all.len() - 1] {
                self.allocate_size(space, size);
            }
        }
        if let Some(last) = all.last() {
            for d in &mut self.disks {
                if d.free_space > 0 {
                    d.allocate(last, None);
                } else {
                    d.allocate(last, Some(0));
                }
            }
        }
        self.pick_default_bootable()?;
        self.full_with(Some(&free))
    }

    fn root_disk(&self, mount: &str) -> Option<usize> {
        self.disks.iter().position(|d| {
            d.volumes.iter().any(|v| {
                v.get("mount").and_then(J::as_str) == Some(mount)
                    || (size_of(v) > 0
                        && v.get("vg").and_then(J::as_str).is_some_and(|vg| {
                            self.allowed.iter().any(|s| {
                                s.get("id").and_then(J::as_str) == Some(vg)
                                    && s.get("volumes").and_then(J::as_array).is_some_and(|lvs| {
                                        lvs.iter().any(|lv| {
                                            lv.get("mount").and_then(J::as_str) == Some(mount)
                                        })
                                    })
                            })
                        }))
            })
        })
    }

    fn pick(&mut self, i: usize) {
        for (j, d) in self.disks.iter_mut().enumerate() {
            d.bootable = i == j;
        }
    }

    /// Nailgun's `pick_default_bootable_disk`: by the release's rules, else the first disk.
    fn pick_default_bootable(&mut self) -> Result<(), VolumeError> {
        let regex = |r: &J| -> Result<regex::Regex, VolumeError> {
            let src = r.get("regex").and_then(J::as_str).unwrap_or_default();
            // Python's re.match anchors at the start.
            regex::Regex::new(&format!("^(?:{src})")).map_err(|_| VolumeError::BadRule(src.into()))
        };
        for rule in self.rules.clone() {
            if rule.get("type").and_then(J::as_str) != Some("pick_root_disk_if_disk_name_match") {
                continue;
            }
            let mount = rule.get("root_mount").and_then(J::as_str).unwrap_or("/");
            if let Some(i) = self.root_disk(mount)
                && regex(&rule)?.is_match(&self.disks[i].name)
            {
                self.pick(i);
                return Ok(());
            }
        }
        let mut candidates: Vec<usize> = (0..self.disks.len()).collect();
        for rule in &self.rules {
            if rule.get("type").and_then(J::as_str) != Some("exclude_disks_by_name") {
                continue;
            }
            let re = regex(rule)?;
            candidates.retain(|i| !re.is_match(&self.disks[*i].name));
        }
        if !self.disks.is_empty() {
            self.pick(candidates.first().copied().unwrap_or(0));
        }
        Ok(())
    }

    /// Nailgun's `format_disks_to_full`: the upload's sizes, flags and bootable disk applied
    /// over the current layout. The upload must have passed [`VolumeManager::check`].
    pub fn apply(&mut self, upload: &[SimpleDisk]) -> Result<Vec<J>, VolumeError> {
        for disk in upload {
            let Some(d) = self.disks.iter_mut().find(|d| d.id == disk.id) else {
                continue;
            };
            for v in &disk.volumes {
                match self
                    .allowed
                    .iter()
                    .find(|s| s.get("id").and_then(J::as_str) == Some(v.name.as_str()))
                    .and_then(|s| s.get("type"))
                    .and_then(J::as_str)
                {
                    Some("vg") => d.set_pv_size(&v.name, v.size),
                    Some("partition") => d.set_part_size("partition", &v.name, v.size),
                    Some("raid") => d.set_part_size("raid", &v.name, v.size),
                    _ => {}
                }
                if v.keep_data {
                    d.set_keep_data(&v.name, true);
                }
            }
        }
        if upload.iter().any(|d| d.bootable == Some(true)) {
            for disk in upload {
                if let Some(d) = self.disks.iter_mut().find(|d| d.id == disk.id) {
                    d.bootable = disk.bootable.unwrap_or(false);
                }
            }
        } else {
            self.pick_default_bootable()?;
        }
        self.full_with(None)
    }

    /// What Nailgun's `NodeDisksValidator` refuses, each problem named by its field
    /// (`[0].volumes[1].size`), and what stoker refuses besides: a disk the node lacks, a
    /// volume its roles do not have, volumes past the disk's space (its space, not the size
    /// the upload claims), and a volume below its minimum once applied.
    pub fn check(&self, upload: &[SimpleDisk], is_ubuntu: bool) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let mut bad = |field: String, message: String| errors.push(FieldError { field, message });
        if upload.is_empty() {
            bad(
                "$".into(),
                "the node seems not to have disks: list at least one".into(),
            );
        }
        let space = self.disk_space();
        let allowed = self.allowed_names();
        let mut os_disks = 0;
        let mut keep: std::collections::BTreeMap<&str, (bool, bool)> = Default::default();
        for (i, disk) in upload.iter().enumerate() {
            let Some((_, available)) = space.iter().find(|(id, _)| *id == disk.id) else {
                bad(
                    format!("[{i}].id"),
                    format!(
                        "the node has no disk {:?} (it has {})",
                        disk.id,
                        space
                            .iter()
                            .map(|(id, _)| id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
                continue;
            };
            let mut total = 0i64;
            for (j, v) in disk.volumes.iter().enumerate() {
                if !allowed.contains(&v.name) {
                    bad(
                        format!("[{i}].volumes[{j}].name"),
                        format!(
                            "unknown volume {:?}: this node's roles have {}",
                            v.name,
                            if allowed.is_empty() {
                                "none (it is in no environment)".to_string()
                            } else {
                                allowed.join(", ")
                            }
                        ),
                    );
                }
                if v.size < 0 {
                    bad(
                        format!("[{i}].volumes[{j}].size"),
                        "must not be negative".into(),
                    );
                }
                total = total.saturating_add(v.size.max(0));
                if v.name == "os" && v.size > 0 {
                    os_disks += 1;
                }
                let e = keep.entry(v.name.as_str()).or_insert((false, false));
                if v.keep_data {
                    e.0 = true;
                } else {
                    e.1 = true;
                }
            }
            if total > *available {
                bad(
                    format!("[{i}].volumes"),
                    format!(
                        "not enough free space on disk {}: the volumes take {total} MB, it has {available} MB",
                        disk.id
                    ),
                );
            }
        }
        let mixed: Vec<&str> = keep
            .iter()
            .filter(|(_, (y, n))| *y && *n)
            .map(|(k, _)| *k)
            .collect();
        if !mixed.is_empty() {
            bad(
                "keep_data".into(),
                format!(
                    "all volumes with the same name should have the same value for keep_data, incorrect volumes: {}",
                    mixed.join(", ")
                ),
            );
        }
        if is_ubuntu && os_disks > 1 {
            bad(
                "os".into(),
                "base system should be allocated on one disk only".into(),
            );
        }
        let bootable: Vec<&str> = upload
            .iter()
            .filter(|d| d.bootable == Some(true))
            .map(|d| d.id.as_str())
            .collect();
        if bootable.len() > 1 {
            bad(
                "bootable".into(),
                format!(
                    "disks {} can not be selected as bootable at the same time; only one disk should be",
                    bootable.join(", ")
                ),
            );
        }
        if errors.is_empty() {
            let mut after = VolumeManager {
                disks: self.disks.clone(),
                ram_bytes: self.ram_bytes,
                allowed: self.allowed.clone(),
                rules: self.rules.clone(),
            };
            if after.apply(upload).is_ok() {
                for s in &self.allowed {
                    let id = s.get("id").and_then(J::as_str).unwrap_or_default();
                    let got: i64 = after
                        .disks
                        .iter()
                        .flat_map(|d| &d.volumes)
                        .filter(|v| {
                            v.get("name").and_then(J::as_str) == Some(id)
                                || v.get("vg").and_then(J::as_str) == Some(id)
                        })
                        .map(size_of)
                        .sum();
                    let min = self.min_size(s).unwrap_or(0);
                    if got < min {
                        let label = s.get("label").and_then(J::as_str).unwrap_or(id);
                        errors.push(FieldError {
                            field: id.to_string(),
                            message: format!(
                                "volume group '{label}' requires a minimum of {min} MB, the upload gives it {got} MB"
                            ),
                        });
                    }
                }
            }
        }
        errors
    }
}

/// Nailgun's `format_disks_to_simple`: each disk's space for volumes and its volumes, service
/// partitions left out.
pub fn to_simple(full: &[J]) -> J {
    let disks = full
        .iter()
        .filter(|v| v.get("type").and_then(J::as_str) == Some("disk"))
        .map(|disk| {
            let volumes: &[J] = disk
                .get("volumes")
                .and_then(J::as_array)
                .map_or(&[], Vec::as_slice);
            let reserved: i64 = volumes.iter().filter(|v| is_service(v)).map(size_of).sum();
            let lvm: i64 = volumes
                .iter()
                .map(|v| v.get("lvm_meta_size").and_then(J::as_i64).unwrap_or(0))
                .sum();
            let size = size_of(disk);
            let size = if size >= reserved {
                size - reserved - lvm
            } else {
                0
            };
            let keep = |v: &J| v.get("keep_data").and_then(J::as_bool).unwrap_or(false);
            let live: Vec<&J> = volumes.iter().filter(|v| !is_service(v)).collect();
            let mut simple = Vec::new();
            for ptype in ["pv", "partition", "raid"] {
                for v in live
                    .iter()
                    .filter(|v| v.get("type").and_then(J::as_str) == Some(ptype))
                {
                    let (name, size) = if ptype == "pv" {
                        let meta = v.get("lvm_meta_size").and_then(J::as_i64).unwrap_or(0);
                        (v.get("vg").cloned(), (size_of(v) - meta).max(0))
                    } else {
                        (v.get("name").cloned(), size_of(v))
                    };
                    simple.push(json!({"name": name, "size": size, "keep_data": keep(v)}));
                }
            }
            json!({
                "id": disk.get("id"),
                "name": disk.get("name"),
                "size": size,
                "volumes": simple,
                "extra": disk.get("extra").cloned().unwrap_or(json!([])),
                "bootable": disk.get("bootable").and_then(J::as_bool).unwrap_or(false),
            })
        })
        .collect();
    J::Array(disks)
}

/// Parse an upload in the simple format (Nailgun's `disks_simple_format_schema`), every bad
/// field named.
pub fn parse_simple(doc: &J) -> Result<Vec<SimpleDisk>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut bad = |field: String, message: &str| {
        errors.push(FieldError {
            field,
            message: message.to_string(),
        })
    };
    let Some(items) = doc.as_array() else {
        bad("$".into(), "expected a list of disks");
        return Err(errors);
    };
    let mut out = Vec::new();
    for (i, d) in items.iter().enumerate() {
        let id = d.get("id").and_then(J::as_str);
        if id.is_none() {
            bad(format!("[{i}].id"), "is required and must be a string");
        }
        if !d.get("size").is_some_and(J::is_i64) {
            bad(
                format!("[{i}].size"),
                "is required and must be an integer (MB)",
            );
        }
        let bootable = match d.get("bootable") {
            None => None,
            Some(J::Bool(b)) => Some(*b),
            Some(_) => {
                bad(format!("[{i}].bootable"), "must be true or false");
                None
            }
        };
        let mut volumes = Vec::new();
        match d.get("volumes").and_then(J::as_array) {
            None => bad(format!("[{i}].volumes"), "is required and must be a list"),
            Some(vs) => {
                for (j, v) in vs.iter().enumerate() {
                    let name = v.get("name").and_then(J::as_str);
                    let size = v.get("size").and_then(J::as_i64);
                    if name.is_none() {
                        bad(
                            format!("[{i}].volumes[{j}].name"),
                            "is required and must be a string",
                        );
                    }
                    if size.is_none() {
                        bad(
                            format!("[{i}].volumes[{j}].size"),
                            "is required and must be an integer (MB)",
                        );
                    }
                    let keep_data = match v.get("keep_data") {
                        None => false,
                        Some(J::Bool(b)) => *b,
                        Some(_) => {
                            bad(
                                format!("[{i}].volumes[{j}].keep_data"),
                                "must be true or false",
                            );
                            false
                        }
                    };
                    if let (Some(name), Some(size)) = (name, size) {
                        volumes.push(SimpleVolume {
                            name: name.to_string(),
                            size,
                            keep_data,
                        });
                    }
                }
            }
        }
        if let Some(id) = id {
            out.push(SimpleDisk {
                id: id.to_string(),
                bootable,
                volumes,
            });
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata() -> J {
        json!({
            "volumes_roles_mapping": {
                "controller": [{"allocate_size": "min", "id": "os"},
                               {"allocate_size": "all", "id": "image"}],
                "other": [{"allocate_size": "all", "id": "os"}]
            },
            "volumes": [
                {"id": "os", "type": "vg", "label": "Base System",
                 "min_size": {"generator": "calc_min_os_size"},
                 "volumes": [
                    {"mount": "/", "size": {"generator": "calc_root_size"}, "name": "root", "type": "lv"},
                    {"mount": "swap", "size": {"generator": "calc_swap_size"}, "name": "swap", "type": "lv"}]},
                {"id": "image", "type": "vg", "label": "Image Storage",
                 "min_size": {"generator": "calc_gb_to_mb", "generator_args": [5]},
                 "volumes": [{"mount": "/var/lib/glance", "size": {"generator": "calc_total_vg", "generator_args": ["image"]},
                              "name": "glance", "type": "lv"}]}
            ],
            "rule_to_pick_boot_disk": [{"type": "exclude_disks_by_name", "regex": "^nvme"}]
        })
    }

    const GIB: u64 = 1024 * 1024 * 1024;

    /// Two 100 GiB disks, an NVMe one first.
    fn disks() -> Vec<DiskInfo> {
        ["nvme0n1", "sda"]
            .into_iter()
            .map(|name| DiskInfo {
                name: name.into(),
                size_bytes: 100 * GIB,
            })
            .collect()
    }

    fn manager(roles: &[&str]) -> VolumeManager {
        let md = metadata();
        let roles: Vec<String> = roles.iter().map(|r| r.to_string()).collect();
        let disks = disks();
        let spaces = node_spaces(&md, &roles, disks.len(), false).unwrap();
        VolumeManager::new(&disks, 16 * GIB, spaces, &md["rule_to_pick_boot_disk"], &[])
    }

    /// Worked by hand from Nailgun's manager.py for two 102400 MB disks, 16 GiB of RAM:
    /// root = 20% of the first disk = 20480, swap = 8192, so os min = 28672 on the first
    /// disk; image takes the rest of both; each disk loses 300 + 200 + 2 * 64 to service
    /// partitions and LVM metadata.
    #[test]
    fn defaults_allocate_as_nailgun_does() {
        let mut m = manager(&["controller"]);
        let full = m.generate().unwrap();
        let simple = to_simple(&full);
        let disk0 = &simple[0];
        assert_eq!(disk0["id"], "nvme0n1");
        assert_eq!(disk0["size"], 102400 - 500 - 128);
        assert_eq!(
            disk0["volumes"][0],
            json!({"name": "os", "size": 28672, "keep_data": false})
        );
        assert_eq!(disk0["volumes"][1]["name"], "image");
        assert_eq!(disk0["volumes"][1]["size"], 102400 - 500 - 128 - 28672);
        assert_eq!(
            simple[1]["volumes"][0]["size"], 0,
            "os is whole on the first disk"
        );
        assert_eq!(disk0["bootable"], false, "nvme is excluded from booting");
        assert_eq!(simple[1]["bootable"], true);
        let image = full.iter().find(|v| v["id"] == "image").unwrap();
        assert_eq!(image["min_size"], 5120);
        assert_eq!(
            image["volumes"][0]["size"],
            2 * (102400 - 500 - 128) - 28672
        );
        let os = full.iter().find(|v| v["id"] == "os").unwrap();
        assert_eq!(os["volumes"][1]["size"], 8192);
    }

    #[test]
    fn an_upload_is_applied_and_checked_by_field() {
        let mut m = manager(&["controller"]);
        let full = m.generate().unwrap();
        let mut m = VolumeManager::new(
            &disks(),
            16 * GIB,
            node_spaces(&metadata(), &["controller".into()], 2, false).unwrap(),
            &metadata()["rule_to_pick_boot_disk"],
            &full,
        );
        let upload = parse_simple(&json!([
            {"id": "nvme0n1", "size": 1, "volumes": [{"name": "os", "size": 30000}, {"name": "image", "size": 10000}]},
        ]))
        .unwrap();
        assert!(
            m.check(&upload, true).is_empty(),
            "{:?}",
            m.check(&upload, true)
        );
        let after = to_simple(&m.apply(&upload).unwrap());
        assert_eq!(after[0]["volumes"][0]["size"], 30000);
        assert_eq!(after[0]["volumes"][1]["size"], 10000);

        let bad = parse_simple(&json!([
            {"id": "sdz", "size": 1, "volumes": []},
            {"id": "sda", "size": 1, "bootable": true, "volumes": [{"name": "ceph", "size": 1}, {"name": "image", "size": 999999999}]},
            {"id": "nvme0n1", "size": 1, "bootable": true, "volumes": []},
        ]))
        .unwrap();
        let fields: Vec<String> = m.check(&bad, true).into_iter().map(|f| f.field).collect();
        assert_eq!(
            fields,
            ["[0].id", "[1].volumes[0].name", "[1].volumes", "bootable"]
        );
        let small = parse_simple(
            &json!([{"id": "nvme0n1", "size": 1, "volumes": [{"name": "os", "size": 100}]}]),
        )
        .unwrap();
        let fields: Vec<String> = m.check(&small, true).into_iter().map(|f| f.field).collect();
        assert_eq!(fields, ["os"]);
        let err = parse_simple(&json!([{"id": 1, "volumes": [{"size": "x"}]}])).unwrap_err();
        let fields: Vec<&str> = err.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "[0].id",
                "[0].size",
                "[0].volumes[0].name",
                "[0].volumes[0].size"
            ]
        );
    }

    #[test]
    fn a_node_without_mapped_roles_gets_other_and_without_roles_nothing() {
        let md = metadata();
        let spaces = node_spaces(&md, &["compute".into()], 1, false).unwrap();
        assert_eq!(spaces.len(), 1);
        assert_eq!(spaces[0]["_allocate_size"], "all");
        assert!(node_spaces(&md, &[], 1, false).unwrap().is_empty());
        let bad = json!({"volumes_roles_mapping": {"x": [{"id": "nope"}]}, "volumes": []});
        assert_eq!(
            node_spaces(&bad, &["x".into()], 1, false).unwrap_err(),
            VolumeError::UnknownSpace("nope".into())
        );
    }
}
