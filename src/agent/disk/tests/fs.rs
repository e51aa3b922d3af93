//! Filesystems made by the real tools in partitions of a test disk: [`fs::probe`] agrees with
//! `blkid -p` on type, label and UUID, and [`fs::find_root`] picks the root by label, by GPT
//! type, or as the only Linux filesystem, and names what it saw when it cannot.

use super::*;
use crate::agent::disk::fs::{self, FsKind, ROOT_LABELS};
use crate::agent::disk::table;
use crate::agent::disk::{Disk, DiskError};

/// A GPT disk with the given partitions (sfdisk lines), each 4 MiB from 1 MiB on.
fn gpt_disk(dir: &std::path::Path, types: &[&str]) -> std::path::PathBuf {
    let img = blank(dir, "disk.img", (2 + 4 * types.len() as u64) * MIB);
    let mut script = "label: gpt\n".to_string();
    for t in types {
        script.push_str(&format!(",4MiB,{t}\n"));
    }
    sfdisk(&img, &script);
    img
}

fn at(n: u64) -> u64 {
    MIB + (n - 1) * 4 * MIB
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn probe_agrees_with_blkid() {
    let dir = tempfile::tempdir().unwrap();
    let img = gpt_disk(dir.path(), &["L", "L", "L", "U", "S", "L"]);
    let size = 4 * MIB;
    put_fs(
        &img,
        at(1),
        size,
        &["mke2fs", "-q", "-F", "-t", "ext4", "-L", "stoker-root"],
    );
    put_fs(
        &img,
        at(2),
        size,
        &["mke2fs", "-q", "-F", "-t", "ext3", "-L", "three"],
    );
    put_fs(&img, at(3), size, &["mke2fs", "-q", "-F", "-t", "ext2"]);
    put_fs(&img, at(4), size, &["mkfs.vfat", "-n", "EFI"]);
    put_fs(&img, at(5), size, &["mkswap", "-L", "swp"]);
    put_fs(
        &img,
        at(6),
        size,
        &[
            "mkfs.vfat",
            "-F",
            "32",
            "-S",
            "512",
            "-s",
            "1",
            "-n",
            "BIG32",
        ],
    );
    let disk = Disk::open_read_only(&img).unwrap();
    let parts = table::read(&disk).unwrap().partitions;
    let expected = [
        (FsKind::Ext4, Some("stoker-root")),
        (FsKind::Ext3, Some("three")),
        (FsKind::Ext2, None),
        (FsKind::Vfat, Some("EFI")),
        (FsKind::Swap, Some("swp")),
        (FsKind::Vfat, Some("BIG32")),
    ];
    for (p, (kind, label)) in parts.iter().zip(expected) {
        let info = fs::probe_partition(&disk, p).unwrap().unwrap();
        let b = blkid(&img, p.start);
        assert_eq!(info.kind.name(), b["TYPE"], "partition {}", p.number);
        assert_eq!(info.kind, kind);
        assert_eq!(info.label.as_deref(), b.get("LABEL").map(String::as_str));
        assert_eq!(info.label.as_deref(), label);
        assert_eq!(info.uuid.as_deref(), b.get("UUID").map(String::as_str));
    }
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn a_fat_label_is_the_root_directorys_as_blkid_says() {
    // mkfs.vfat writes both labels; a relabel with mlabel-like tools changes only the root
    // directory's entry. Here the boot sector's copy is changed instead: blkid (and probe)
    // still report the directory's.
    let dir = tempfile::tempdir().unwrap();
    let img = blank(dir.path(), "fat.img", 4 * MIB);
    tool("mkfs.vfat", &["-n", "DIRLABEL", &img.display().to_string()]);
    let mut bytes = std::fs::read(&img).unwrap();
    bytes[43..54].copy_from_slice(b"BOOTLABEL  ");
    std::fs::write(&img, &bytes).unwrap();
    assert_eq!(blkid(&img, 0)["LABEL"], "DIRLABEL");
    assert_eq!(
        fs::probe(&bytes).unwrap().label.as_deref(),
        Some("BOOTLABEL")
    );
    let (at, len) = fs::fat_root_dir(&bytes).unwrap();
    let dir_bytes = &bytes[at as usize..(at + len) as usize];
    assert_eq!(fs::fat_dir_label(dir_bytes).as_deref(), Some("DIRLABEL"));
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn xfs_and_iso9660_headers_are_recognized() {
    // No mkfs.xfs or ISO maker in the base system: their headers, by the layouts blkid reads.
    let mut xfs = vec![0u8; fs::PROBE_BYTES];
    xfs[..4].copy_from_slice(b"XFSB");
    xfs[32..48].copy_from_slice(&[0x11; 16]);
    xfs[108..112].copy_from_slice(b"root");
    let info = fs::probe(&xfs).unwrap();
    assert_eq!(info.kind, FsKind::Xfs);
    assert_eq!(info.label.as_deref(), Some("root"));
    assert_eq!(
        info.uuid.as_deref(),
        Some("11111111-1111-1111-1111-111111111111")
    );

    let mut iso = vec![0u8; fs::PROBE_BYTES];
    iso[32768] = 1;
    iso[32769..32774].copy_from_slice(b"CD001");
    iso[32768 + 40..32768 + 72].copy_from_slice(b"config-2                        ");
    iso[32768 + 813..32768 + 829].copy_from_slice(b"2024010212304500");
    let info = fs::probe(&iso).unwrap();
    assert_eq!(info.kind, FsKind::Iso9660);
    assert_eq!(info.label.as_deref(), Some("config-2"));
    assert_eq!(info.uuid.as_deref(), Some("2024-01-02-12-30-45-00"));

    // Truncated or empty heads are nothing, without a panic.
    assert_eq!(fs::probe(&[]), None);
    assert_eq!(fs::probe(&xfs[..3]), None);
    assert_eq!(fs::probe(&vec![0u8; fs::PROBE_BYTES]), None);
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn root_by_label_wins_over_type_and_kind() {
    let dir = tempfile::tempdir().unwrap();
    let img = gpt_disk(
        dir.path(),
        &["U", "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709", "L"],
    );
    put_fs(&img, at(1), 4 * MIB, &["mkfs.vfat", "-n", "EFI"]);
    put_fs(
        &img,
        at(2),
        4 * MIB,
        &["mke2fs", "-q", "-F", "-t", "ext4", "-L", "boot"],
    );
    put_fs(
        &img,
        at(3),
        4 * MIB,
        &["mke2fs", "-q", "-F", "-t", "ext4", "-L", "cloudimg-rootfs"],
    );
    let disk = Disk::open_read_only(&img).unwrap();
    let (part, info) = fs::find_root(&disk, ROOT_LABELS).unwrap();
    assert_eq!(part.number, 3);
    assert_eq!(info.label.as_deref(), Some("cloudimg-rootfs"));
    // Earlier labels in the list win.
    let (part, _) = fs::find_root(&disk, &["boot", "cloudimg-rootfs"]).unwrap();
    assert_eq!(part.number, 2);
    // Without a listed label: the GPT root type.
    let (part, _) = fs::find_root(&disk, &["nothing"]).unwrap();
    assert_eq!(part.number, 2);
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn root_is_the_only_linux_filesystem_on_mbr() {
    let dir = tempfile::tempdir().unwrap();
    let img = blank(dir.path(), "mbr.img", 14 * MIB);
    sfdisk(&img, "label: dos\n,4MiB,c\n,4MiB,82\n,4MiB,83\n");
    put_fs(&img, MIB, 4 * MIB, &["mkfs.vfat", "-n", "ESP"]);
    put_fs(&img, 5 * MIB, 4 * MIB, &["mkswap"]);
    put_fs(
        &img,
        9 * MIB,
        4 * MIB,
        &["mke2fs", "-q", "-F", "-t", "ext4"],
    );
    let disk = Disk::open_read_only(&img).unwrap();
    let (part, info) = fs::find_root(&disk, ROOT_LABELS).unwrap();
    assert_eq!(
        (part.number, part.start, info.kind),
        (3, 9 * MIB, FsKind::Ext4)
    );
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn two_candidates_are_an_error_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let img = gpt_disk(dir.path(), &["L", "L"]);
    put_fs(&img, at(1), 4 * MIB, &["mke2fs", "-q", "-F", "-t", "ext4"]);
    put_fs(&img, at(2), 4 * MIB, &["mke2fs", "-q", "-F", "-t", "ext2"]);
    let disk = Disk::open_read_only(&img).unwrap();
    let err = fs::find_root(&disk, ROOT_LABELS).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, DiskError::AmbiguousRoot { .. }), "{text}");
    assert!(
        text.contains("1: 4194304 bytes ext4 without a label"),
        "{text}"
    );
    assert!(
        text.contains("2: 4194304 bytes ext2 without a label"),
        "{text}"
    );

    let img = gpt_disk(dir.path(), &["L", "L"]);
    put_fs(
        &img,
        at(1),
        4 * MIB,
        &["mke2fs", "-q", "-F", "-t", "ext4", "-L", "root"],
    );
    put_fs(
        &img,
        at(2),
        4 * MIB,
        &["mke2fs", "-q", "-F", "-t", "ext4", "-L", "root"],
    );
    let err = fs::find_root(&Disk::open_read_only(&img).unwrap(), ROOT_LABELS).unwrap_err();
    assert!(
        err.to_string()
            .contains("two partitions have the label root"),
        "{err}"
    );
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn no_root_lists_every_partition() {
    let dir = tempfile::tempdir().unwrap();
    let img = gpt_disk(dir.path(), &["U", "S", "L"]);
    put_fs(&img, at(1), 4 * MIB, &["mkfs.vfat", "-n", "EFI"]);
    put_fs(&img, at(2), 4 * MIB, &["mkswap", "-L", "root"]);
    let err = fs::find_root(&Disk::open_read_only(&img).unwrap(), ROOT_LABELS).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, DiskError::NoRoot { .. }), "{text}");
    assert!(text.contains("disk.img"), "{text}");
    assert!(text.contains("1: 4194304 bytes vfat label EFI"), "{text}");
    assert!(text.contains("2: 4194304 bytes swap label root"), "{text}");
    assert!(
        text.contains("3: 4194304 bytes no known filesystem"),
        "{text}"
    );
    assert!(
        text.contains("stoker-root, root, cloudimg-rootfs"),
        "{text}"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
    /// Whatever a partition starts with, probing it and locating and reading a FAT root
    /// directory return without panicking, and a located directory is within 64 KiB.
    #[test]
    fn any_head_probes_without_panic(
        mut head in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..70_000),
        fat in proptest::prelude::any::<bool>(),
    ) {
        if fat && head.len() >= 512 {
            head[510] = 0x55;
            head[511] = 0xAA;
            head[54..62].copy_from_slice(b"FAT16   ");
            head[11..13].copy_from_slice(&512u16.to_le_bytes());
            head[13] = 1 << (head[13] % 8);
        }
        let _ = fs::probe(&head);
        if let Some((_, len)) = fs::fat_root_dir(&head) {
            proptest::prop_assert!(len <= 65536);
        }
        let _ = fs::fat_dir_label(&head);
    }
}
