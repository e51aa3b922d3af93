//! Config drives built by [`config_drive::build`], checked by the tools cloud-init's hosts
//! have: `blkid` (type and label, what cloud-init searches by); for config-2's ISO 9660,
//! `isoinfo` (the Rock Ridge names and the files' exact bytes) and `isovfy`; for NoCloud's FAT,
//! mtools (the files and their exact bytes) and `fsck.vfat -n` (a clean filesystem); and
//! drives appended to GPT and MBR disks, found again by [`config_drive::find`].

use serde_json::json;

use super::*;
use crate::agent::disk::config_drive::{self, Contents, Flavor};
use crate::agent::disk::fs::{self, FsKind};
use crate::agent::disk::iso9660::Image;
use crate::agent::disk::table;
use crate::agent::disk::{Disk, Guid, PartKind};

fn contents() -> Contents {
    Contents {
        meta_data: json!({
            "uuid": "0f3b1a2c-5d6e-4f70-8192-a3b4c5d6e7f8",
            "instance-id": "node-7",
            "hostname": "node-7",
            "local-hostname": "node-7",
        }),
        user_data: b"#cloud-config\nwrite_files:\n- path: /etc/stoker/agent.toml\n  content: |\n    master = \"https://10.20.0.2\"\n".to_vec(),
        network_data: Some(json!({"links": [], "networks": [], "services": []})),
    }
}

/// Writes the FAT image to a file and checks what cloud-init's hosts would see.
fn check_fat(flavor: Flavor, image: &[u8], label: &str, dir: &str, files: &[(&str, Vec<u8>)]) {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("drive.img");
    std::fs::write(&path, image).unwrap();
    let file = path.display().to_string();

    let b = blkid(&path, 0);
    assert_eq!(b["TYPE"], "vfat", "{b:?}");
    assert_eq!(b["LABEL"], label, "{b:?}");
    // The probe of this module says the same.
    let info = fs::probe(image).unwrap();
    assert_eq!(info.kind, FsKind::Vfat);
    let (at, len) = fs::fat_root_dir(image).unwrap();
    let root = &image[at as usize..(at + len) as usize];
    assert_eq!(fs::fat_dir_label(root).as_deref(), Some(label));

    let listing = tool("mdir", &["-i", &file, &format!("::/{dir}")]);
    assert!(
        listing.contains("1980-01-01"),
        "timestamps are FAT's epoch: {listing}"
    );
    for (name, bytes) in files {
        let short = name.rsplit('/').next().unwrap();
        assert!(
            listing.contains(short),
            "{flavor:?}: {short} not in\n{listing}"
        );
        let out = tool_bytes("mtype", &["-i", &file, &format!("::/{name}")]);
        assert!(
            out == *bytes,
            "{flavor:?}: {name} read back {} bytes, {} written",
            out.len(),
            bytes.len()
        );
    }
    let (fsck, _) = tool_io("fsck.vfat", &["-n", &file], b"");
    assert!(
        !fsck.contains("differ") && !fsck.contains("ree cluster"),
        "{fsck}"
    );
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn config_two_is_an_iso_with_the_names_cloud_init_reads() {
    let c = contents();
    let image = config_drive::build(Flavor::ConfigTwo, &c).unwrap();
    assert_eq!(image.len() as u64, MIB);
    let meta = serde_json::to_vec_pretty(&c.meta_data).unwrap();
    let net = serde_json::to_vec_pretty(c.network_data.as_ref().unwrap()).unwrap();
    let files = [
        ("openstack/latest/meta_data.json", meta.clone()),
        ("openstack/latest/user_data", c.user_data.clone()),
        ("openstack/latest/network_data.json", net),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("drive.iso");
    std::fs::write(&path, &image).unwrap();
    let file = path.display().to_string();

    let b = blkid(&path, 0);
    assert_eq!(
        (b["TYPE"].as_str(), b["LABEL"].as_str()),
        ("iso9660", "config-2"),
        "{b:?}"
    );
    let info = fs::probe(&image).unwrap();
    assert_eq!(
        (info.kind, info.label.as_deref()),
        (FsKind::Iso9660, Some("config-2"))
    );
    let listed = tool("isoinfo", &["-R", "-f", "-i", &file]);
    let mut listed: Vec<&str> = listed.lines().collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            "/openstack",
            "/openstack/latest",
            "/openstack/latest/meta_data.json",
            "/openstack/latest/network_data.json",
            "/openstack/latest/user_data",
        ]
    );
    let iso = Image::open(&image).unwrap();
    for (name, bytes) in &files {
        let out = isoinfo_extract(&file, name);
        assert!(
            out == *bytes,
            "{name}: isoinfo read {} bytes, {} written",
            out.len(),
            bytes.len()
        );
        assert_eq!(iso.read(name).unwrap(), Some(&bytes[..]), "{name}");
    }
    assert!(tool("isovfy", &[&file]).contains("No errors found"));
    // The JSON read back is the JSON given.
    let back: serde_json::Value = serde_json::from_slice(&meta).unwrap();
    assert_eq!(back, c.meta_data);
    // Same contents, same bytes.
    assert!(config_drive::build(Flavor::ConfigTwo, &c).unwrap() == image);
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn nocloud_is_what_cloud_init_reads() {
    let mut c = contents();
    c.network_data = None;
    let image = config_drive::build(Flavor::NoCloud, &c).unwrap();
    let meta = serde_json::to_vec_pretty(&c.meta_data).unwrap();
    check_fat(
        Flavor::NoCloud,
        &image,
        "cidata",
        "",
        &[("meta-data", meta), ("user-data", c.user_data.clone())],
    );
    let file_list = {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("d.img");
        std::fs::write(&path, &image).unwrap();
        tool("mdir", &["-b", "-i", &path.display().to_string(), "::/"])
    };
    assert!(!file_list.contains("network-config"), "{file_list}");
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn a_large_drive_is_still_clean() {
    let mut c = contents();
    c.user_data = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
    let image = config_drive::build(Flavor::NoCloud, &c).unwrap();
    assert!(image.len() as u64 >= 4 * MIB);
    check_fat(
        Flavor::NoCloud,
        &image,
        "cidata",
        "",
        &[("user-data", c.user_data.clone())],
    );
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn a_config_drive_appended_to_a_gpt_disk_is_found_by_label() {
    let dir = tempfile::tempdir().unwrap();
    let img = blank(dir.path(), "disk.img", 8 * MIB);
    sfdisk(&img, "label: gpt\n,4MiB,L\n");
    resize(&img, 16 * MIB);
    let drive = config_drive::build(Flavor::ConfigTwo, &contents()).unwrap();
    let disk = Disk::open(&img).unwrap();
    let part = table::append(&disk, &drive, &Flavor::ConfigTwo.append()).unwrap();
    let b = blkid(&img, part.start);
    assert_eq!(
        (b["TYPE"].as_str(), b["LABEL"].as_str()),
        ("iso9660", "config-2")
    );
    let PartKind::Gpt {
        name, type_guid, ..
    } = &part.kind
    else {
        panic!("{part:?}")
    };
    assert_eq!(
        (name.as_str(), *type_guid),
        ("config-2", Guid::LINUX_FILESYSTEM)
    );
    let t = sfdisk_json(&img);
    assert_eq!(
        t["partitions"][1]["type"], "0FC63DAF-8483-4772-8E79-3D69D8477DE4",
        "{t}"
    );
    let info = fs::probe_partition(&disk, &part).unwrap().unwrap();
    assert_eq!(info.label.as_deref(), Some("config-2"));
    assert_eq!(
        config_drive::find(&disk).unwrap(),
        Some((part, Flavor::ConfigTwo))
    );
    assert!(sfdisk_verify(&img).contains("No errors detected"));
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn on_mbr_config_two_is_a_linux_partition_and_nocloud_a_fat_one() {
    let dir = tempfile::tempdir().unwrap();
    let img = blank(dir.path(), "disk.img", 16 * MIB);
    sfdisk(&img, "label: dos\n,4MiB,L\n");
    let disk = Disk::open(&img).unwrap();
    assert_eq!(config_drive::find(&disk).unwrap(), None);
    let mut c = contents();
    let iso = config_drive::build(Flavor::ConfigTwo, &c).unwrap();
    let p2 = table::append(&disk, &iso, &Flavor::ConfigTwo.append()).unwrap();
    assert_eq!(p2.kind, PartKind::Mbr(0x83));
    c.network_data = None;
    let fat = config_drive::build(Flavor::NoCloud, &c).unwrap();
    let p3 = table::append(&disk, &fat, &Flavor::NoCloud.append()).unwrap();
    assert_eq!(p3.kind, PartKind::Mbr(0x0c));
    let t = sfdisk_json(&img);
    assert_eq!(
        (
            t["partitions"][1]["type"].as_str(),
            t["partitions"][2]["type"].as_str()
        ),
        (Some("83"), Some("c")),
        "{t}"
    );
    assert_eq!(blkid(&img, p2.start)["TYPE"], "iso9660");
    assert_eq!(blkid(&img, p3.start)["TYPE"], "vfat");
    // The last drive is the one found.
    assert_eq!(
        config_drive::find(&disk).unwrap(),
        Some((p3, Flavor::NoCloud))
    );
}
