//! Gathering the hardware inventory from a Linux system's /proc and /sys, under a root
//! directory (`/` on a node; a prepared tree in tests). Interfaces: every device under
//! /sys/class/net that is backed by hardware (has a `device` link) plus, failing that, every
//! non-loopback one. Disks: /sys/block entries that are not loop, ram, zram or device-mapper.
//! The BMC: what [`bmc_probe`] finds, the field left out when it finds nothing.

use std::fs;
use std::path::Path;

use serde_json::{Value, json};

use crate::agent::bmc_probe;

fn read(root: &Path, rel: &str) -> Option<String> {
    fs::read_to_string(root.join(rel))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn entries(root: &Path, rel: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root.join(rel))
        .map(|dir| {
            dir.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// CPU count and model from /proc/cpuinfo.
pub fn parse_cpuinfo(text: &str) -> (u64, Option<String>) {
    let count = text
        .lines()
        .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor"))
        .count() as u64;
    let model = text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_string())
    });
    (count.max(1), model)
}

/// MemTotal from /proc/meminfo, in bytes.
pub fn parse_meminfo(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix("MemTotal:")?;
        let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kib * 1024)
    })
}

fn interfaces(root: &Path) -> Vec<Value> {
    let names = entries(root, "sys/class/net");
    let physical: Vec<&String> = names
        .iter()
        .filter(|n| root.join("sys/class/net").join(n).join("device").exists())
        .collect();
    let chosen: Vec<&String> = if physical.is_empty() {
        names.iter().filter(|n| n.as_str() != "lo").collect()
    } else {
        physical
    };
    chosen
        .into_iter()
        .filter_map(|name| {
            let base = format!("sys/class/net/{name}");
            let mac = read(root, &format!("{base}/address"))?;
            if mac == "00:00:00:00:00:00" {
                return None;
            }
            let speed = read(root, &format!("{base}/speed"))
                .and_then(|s| s.parse::<i64>().ok())
                .filter(|s| *s > 0);
            let link = read(root, &format!("{base}/carrier")).map(|c| c == "1");
            Some(json!({"name": name, "mac": mac, "speed_mbps": speed, "link": link}))
        })
        .collect()
}

fn disks(root: &Path) -> Vec<Value> {
    entries(root, "sys/block")
        .into_iter()
        .filter(|n| !["loop", "ram", "zram", "dm-", "sr", "fd"].iter().any(|p| n.starts_with(p)))
        .filter_map(|name| {
            let base = format!("sys/block/{name}");
            let sectors: u64 = read(root, &format!("{base}/size"))?.parse().ok()?;
            let model = read(root, &format!("{base}/device/model"));
            let serial = read(root, &format!("{base}/device/serial"))
                .or_else(|| read(root, &format!("{base}/serial")));
            let removable = read(root, &format!("{base}/removable")).map(|r| r == "1");
            Some(json!({"name": name, "size_bytes": sectors * 512, "model": model, "serial": serial, "removable": removable}))
        })
        .collect()
}

/// The inventory document the hello endpoint takes, gathered under `root`.
pub fn gather(root: &Path) -> Value {
    let (cpus, model) = read(root, "proc/cpuinfo")
        .map(|t| parse_cpuinfo(&t))
        .unwrap_or((1, None));
    let memory = read(root, "proc/meminfo").and_then(|t| parse_meminfo(&t));
    let dmi = |f: &str| read(root, &format!("sys/class/dmi/id/{f}"));
    let boot_mode = if root.join("sys/firmware/efi").exists() {
        "uefi"
    } else {
        "bios"
    };
    let mut doc = json!({
        "interfaces": interfaces(root),
        "cpu": {"count": cpus, "model": model},
        "memory_bytes": memory,
        "disks": disks(root),
        "system": {"vendor": dmi("sys_vendor"), "product": dmi("product_name"), "serial": dmi("product_serial")},
        "boot_mode": boot_mode,
    });
    if let Some(bmc) = bmc_probe::probe(root)
        && let Ok(value) = serde_json::to_value(&bmc)
    {
        doc["bmc"] = value;
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_and_memory() {
        let cpuinfo = "processor\t: 0\nmodel name\t: QEMU Virtual CPU version 2.5+\n\nprocessor\t: 1\nmodel name\t: QEMU Virtual CPU version 2.5+\n";
        assert_eq!(
            parse_cpuinfo(cpuinfo),
            (2, Some("QEMU Virtual CPU version 2.5+".to_string()))
        );
        assert_eq!(
            parse_meminfo("MemTotal:        8029720 kB\nMemFree: 1 kB\n"),
            Some(8_029_720 * 1024)
        );
        assert_eq!(parse_meminfo("nothing"), None);
    }

    #[test]
    fn the_bmc_field_is_absent_unless_the_probe_finds_one() {
        let dir = tempfile::tempdir().unwrap();
        assert!(gather(dir.path()).get("bmc").is_none());
        // A Network Host Interface whose one Redfish-over-IP record names 10.20.0.7:8443.
        let mut data = vec![0u8; 91];
        data[50] = 0x01; // static
        data[51] = 0x01; // IPv4
        data[52..56].copy_from_slice(&[10, 20, 0, 7]);
        data[84..86].copy_from_slice(&8443u16.to_le_bytes());
        let mut raw = vec![42, 0, 0, 0, 0x40, 0, 1, 0x04, data.len() as u8];
        raw.extend(&data);
        raw[1] = raw.len() as u8;
        raw.extend([0, 0]);
        let entry = dir.path().join("sys/firmware/dmi/entries/42-0");
        fs::create_dir_all(&entry).unwrap();
        fs::write(entry.join("raw"), raw).unwrap();
        assert_eq!(
            gather(dir.path())["bmc"],
            json!({"driver": "redfish", "address": "https://10.20.0.7:8443"})
        );
    }
}
