//! Partition tables made by `sfdisk`, read by [`table::read`], appended to by
//! [`table::append`], and read back by `sfdisk --json` and `sfdisk --verify`; corrupt and
//! hostile tables.

use std::os::unix::fs::FileExt;

use proptest::prelude::*;

use super::*;
use crate::agent::disk::table::{self, Append, PartKind, Scheme};
use crate::agent::disk::{Disk, DiskError, Guid};

/// A 1 MiB pattern plus a ragged tail, so the last sector is padded.
fn content() -> Vec<u8> {
    (0..MIB as usize + 1000).map(|i| (i % 251) as u8).collect()
}

fn sectors(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap()
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn gpt_is_read_as_sfdisk_wrote_it() {
    let dir = tempfile::tempdir().unwrap();
    let img = blank(dir.path(), "gpt.img", 8 * MIB);
    sfdisk(
        &img,
        "label: gpt\nsize=2MiB,type=U,name=EFI\n\
         size=3MiB,type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709,name=root\n",
    );
    let t = table::read(&Disk::open_read_only(&img).unwrap()).unwrap();
    assert_eq!(t.scheme, Scheme::Gpt);
    assert_eq!(t.sector, 512);
    let json = sfdisk_json(&img);
    let parts = json["partitions"].as_array().unwrap();
    assert_eq!(t.partitions.len(), parts.len());
    for (p, j) in t.partitions.iter().zip(parts) {
        assert_eq!(p.start, sectors(&j["start"]) * 512);
        assert_eq!(p.size, sectors(&j["size"]) * 512);
        let PartKind::Gpt {
            type_guid,
            uuid,
            name,
        } = &p.kind
        else {
            panic!("{p:?}")
        };
        assert_eq!(type_guid.to_string(), j["type"].as_str().unwrap());
        assert_eq!(uuid.to_string(), j["uuid"].as_str().unwrap());
        assert_eq!(name, j["name"].as_str().unwrap());
    }
    assert_eq!(t.partitions[1].number, 2);
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn gpt_append_on_a_larger_disk_moves_the_backup_and_sfdisk_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let img = blank(dir.path(), "gpt.img", 8 * MIB);
    sfdisk(&img, "label: gpt\n,2MiB,U\n,3MiB,L\n");
    // The image is written to a 20 MiB disk: its backup GPT is now in the middle.
    resize(&img, 20 * MIB);
    let before = sfdisk_verify(&img);
    assert!(
        before.contains("backup GPT table is not on the end"),
        "{before}"
    );

    let disk = Disk::open(&img).unwrap();
    let data = content();
    let added = table::append(&disk, &data, &Append::fat("config-2")).unwrap();
    assert_eq!(added.number, 3);
    assert_eq!(added.start, 6 * MIB, "1 MiB after 1 MiB + 2 MiB + 3 MiB");
    assert_eq!(added.size, (data.len() as u64).div_ceil(512) * 512);

    let json = sfdisk_json(&img);
    assert_eq!(sectors(&json["lastlba"]), 20 * MIB / 512 - 34);
    let p3 = &json["partitions"][2];
    assert_eq!(sectors(&p3["start"]) * 512, added.start);
    assert_eq!(sectors(&p3["size"]) * 512, added.size);
    assert_eq!(p3["type"], "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7");
    assert_eq!(p3["name"], "config-2");
    let PartKind::Gpt { uuid, .. } = &added.kind else {
        panic!("{added:?}")
    };
    assert_eq!(p3["uuid"].as_str().unwrap(), uuid.to_string());
    let verify = sfdisk_verify(&img);
    assert!(verify.contains("No errors detected"), "{verify}");
    assert!(!verify.contains("mismatch"), "{verify}");
    assert!(!verify.contains("not on the end"), "{verify}");

    // The content is there, zero-padded to the sector.
    let mut back = vec![0u8; added.size as usize];
    disk.file().read_exact_at(&mut back, added.start).unwrap();
    assert_eq!(&back[..data.len()], &data[..]);
    assert!(back[data.len()..].iter().all(|&b| b == 0));
    // The old backup header, left in free space past the new partition, is wiped.
    let mut old = [0u8; 8];
    disk.file().read_exact_at(&mut old, 8 * MIB - 512).unwrap();
    assert_eq!(old, [0; 8]);
    // And this reader agrees with itself.
    let again = table::read(&disk).unwrap();
    assert_eq!(again.partitions.last(), Some(&added));
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn mbr_is_read_and_appended_as_sfdisk_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let img = blank(dir.path(), "mbr.img", 8 * MIB);
    sfdisk(&img, "label: dos\n,2MiB,83,*\n,3MiB,82\n");
    resize(&img, 20 * MIB);
    let disk = Disk::open(&img).unwrap();
    let t = table::read(&disk).unwrap();
    assert_eq!(t.scheme, Scheme::Mbr);
    assert_eq!(
        t.partitions.iter().map(|p| &p.kind).collect::<Vec<_>>(),
        [&PartKind::Mbr(0x83), &PartKind::Mbr(0x82)]
    );
    assert_eq!(
        (t.partitions[0].start, t.partitions[0].size),
        (MIB, 2 * MIB)
    );

    let data = content();
    let added = table::append(&disk, &data, &Append::fat("cidata")).unwrap();
    assert_eq!((added.number, added.start), (3, 6 * MIB));
    let json = sfdisk_json(&img);
    let p3 = &json["partitions"][2];
    assert_eq!(sectors(&p3["start"]) * 512, added.start);
    assert_eq!(sectors(&p3["size"]) * 512, added.size);
    assert_eq!(p3["type"], "c");
    let verify = sfdisk_verify(&img);
    assert!(verify.contains("No errors detected"), "{verify}");
    // The first two entries are untouched.
    assert_eq!(
        &table::read(&disk).unwrap().partitions[..2],
        &t.partitions[..]
    );
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn an_extended_partition_is_listed_and_appended_after() {
    let dir = tempfile::tempdir().unwrap();
    let img = blank(dir.path(), "ext.img", 16 * MIB);
    // The third line is logical partition 5 inside the extended partition 2.
    sfdisk(
        &img,
        "label: dos\n,2MiB,83\n,5MiB,5\nstart=4MiB,size=1MiB,type=83\n",
    );
    assert_eq!(sfdisk_json(&img)["partitions"].as_array().unwrap().len(), 3);
    let disk = Disk::open(&img).unwrap();
    let t = table::read(&disk).unwrap();
    assert_eq!(
        t.partitions.len(),
        2,
        "the logical partition inside is not read"
    );
    assert!(t.partitions[1].kind.is_extended());
    let added = table::append(&disk, b"x", &Append::fat("cidata")).unwrap();
    // After the extended partition's end: 1 + 2 + 5 MiB.
    assert_eq!((added.number, added.start, added.size), (3, 8 * MIB, 512));
    let json = sfdisk_json(&img);
    assert_eq!(json["partitions"].as_array().unwrap().len(), 4);
    assert!(sfdisk_verify(&img).contains("No errors detected"));
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn a_full_table_or_a_full_disk_is_refused_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let mbr = blank(dir.path(), "full.img", 16 * MIB);
    sfdisk(&mbr, "label: dos\n,1MiB,83\n,1MiB,83\n,1MiB,83\n,1MiB,83\n");
    let before = std::fs::read(&mbr).unwrap();
    let err = table::append(&Disk::open(&mbr).unwrap(), b"x", &Append::fat("cidata")).unwrap_err();
    assert!(
        matches!(err, DiskError::TableFull { entries: 4, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("full.img"), "{err}");
    assert_eq!(std::fs::read(&mbr).unwrap(), before);

    let gpt = blank(dir.path(), "gpt4.img", 16 * MIB);
    sfdisk(
        &gpt,
        "label: gpt\ntable-length: 4\n,1MiB\n,1MiB\n,1MiB\n,1MiB\n",
    );
    let err = table::append(&Disk::open(&gpt).unwrap(), b"x", &Append::fat("x")).unwrap_err();
    assert!(
        matches!(err, DiskError::TableFull { entries: 4, .. }),
        "{err}"
    );

    // The image fills its disk: 2 MiB asked, less than 1 MiB free.
    let tight = blank(dir.path(), "tight.img", 8 * MIB);
    sfdisk(&tight, "label: gpt\n,6MiB\n");
    let before = std::fs::read(&tight).unwrap();
    let err = table::append(
        &Disk::open(&tight).unwrap(),
        &vec![1u8; 2 * MIB as usize],
        &Append::fat("config-2"),
    )
    .unwrap_err();
    let text = err.to_string();
    match err {
        DiskError::NoSpace {
            needed,
            free,
            start,
            ..
        } => {
            assert_eq!(needed, 2 * MIB);
            assert_eq!(start, 7 * MIB);
            assert_eq!(free, 8 * MIB - 33 * 512 - 7 * MIB);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        text.contains("2097152 bytes") && text.contains("backup GPT"),
        "{text}"
    );
    assert_eq!(std::fs::read(&tight).unwrap(), before);
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn no_table_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let zero = blank(dir.path(), "zero.img", MIB);
    let err = table::read(&Disk::open_read_only(&zero).unwrap()).unwrap_err();
    assert!(matches!(err, DiskError::NoTable { .. }), "{err}");
    assert!(err.to_string().contains("0x55AA"), "{err}");
    // A FAT filesystem on the whole disk has 0x55AA but boot code where entries would be.
    let fat = blank(dir.path(), "fat.img", 4 * MIB);
    tool("mkfs.vfat", &["-n", "WHOLE", &fat.display().to_string()]);
    let err = table::read(&Disk::open_read_only(&fat).unwrap()).unwrap_err();
    assert!(err.to_string().contains("FAT boot sector"), "{err}");
    let tiny = blank(dir.path(), "tiny.img", 100);
    assert!(table::read(&Disk::open_read_only(&tiny).unwrap()).is_err());
}

/// Rewrites the primary GPT header's field at `at` and fixes its CRC, as a hostile image
/// would to get past the CRC check.
fn patch_header(img: &std::path::Path, at: usize, bytes: &[u8]) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(img)
        .unwrap();
    let mut h = [0u8; 92];
    f.read_exact_at(&mut h, 512).unwrap();
    h[at..at + bytes.len()].copy_from_slice(bytes);
    h[16..20].fill(0);
    let crc = crc32fast::hash(&h);
    h[16..20].copy_from_slice(&crc.to_le_bytes());
    f.write_all_at(&h, 512).unwrap();
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn a_corrupt_primary_falls_back_to_the_backup_which_append_repairs() {
    let dir = tempfile::tempdir().unwrap();
    let img = blank(dir.path(), "gpt.img", 8 * MIB);
    sfdisk(&img, "label: gpt\nsize=2MiB,type=L,name=root\n");
    let good = table::read(&Disk::open_read_only(&img).unwrap()).unwrap();
    resize(&img, 12 * MIB);
    // One flipped byte in the primary header.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&img)
        .unwrap();
    f.write_all_at(&[0xFF], 512 + 40).unwrap();
    let disk = Disk::open(&img).unwrap();
    // Not at the last LBA of the grown disk: found where the primary said it was.
    assert_eq!(table::read(&disk).unwrap(), good);
    table::append(&disk, b"hello", &Append::fat("config-2")).unwrap();
    let verify = sfdisk_verify(&img);
    assert!(verify.contains("No errors detected"), "{verify}");
    assert_eq!(sfdisk_json(&img)["partitions"].as_array().unwrap().len(), 2);

    // Both headers broken: an error naming both.
    f.write_all_at(&[0xFF], 512 + 40).unwrap();
    f.write_all_at(&[0xFF], 12 * MIB - 512 + 40).unwrap();
    let err = table::read(&Disk::open_read_only(&img).unwrap()).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, DiskError::Corrupt { .. }), "{text}");
    assert!(
        text.contains("primary header at LBA 1: header CRC32"),
        "{text}"
    );
    assert!(
        text.contains(&format!("backup header at LBA {}", 12 * MIB / 512 - 1)),
        "{text}"
    );
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn hostile_gpt_sizes_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(usize, &[u8], &str); 5] = [
        (80, &u32::MAX.to_le_bytes(), "over the 1024"),
        (84, &0u32.to_le_bytes(), "entry size 0"),
        (84, &100_000u32.to_le_bytes(), "entry size 100000"),
        (72, &(u64::MAX / 2).to_le_bytes(), "entries array"),
        (48, &u64::MAX.to_le_bytes(), "usable LBAs"),
    ];
    for (at, bytes, expect) in cases {
        let img = blank(dir.path(), "gpt.img", 4 * MIB);
        sfdisk(&img, "label: gpt\n,1MiB\n");
        // The backup too, so there is nothing to fall back to.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&img)
            .unwrap()
            .write_all_at(&[0; 512], 4 * MIB - 512)
            .unwrap();
        patch_header(&img, at, bytes);
        let err = table::read(&Disk::open_read_only(&img).unwrap()).unwrap_err();
        assert!(err.to_string().contains(expect), "{expect}: {err}");
    }
    // An image larger than its disk: the table reaches past the end.
    let img = blank(dir.path(), "gpt.img", 4 * MIB);
    sfdisk(&img, "label: gpt\n,1MiB\n");
    resize(&img, 2 * MIB);
    let err = table::read(&Disk::open_read_only(&img).unwrap()).unwrap_err();
    assert!(matches!(err, DiskError::Corrupt { .. }), "{err}");
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn guid_text_matches_what_sfdisk_prints() {
    let dir = tempfile::tempdir().unwrap();
    let img = blank(dir.path(), "gpt.img", 4 * MIB);
    sfdisk(
        &img,
        "label: gpt\nsize=1MiB,type=B921B045-1DF0-41C3-AF44-4C6F280D3FAE,\
         uuid=01234567-89AB-CDEF-0123-456789ABCDEF\n",
    );
    let t = table::read(&Disk::open_read_only(&img).unwrap()).unwrap();
    let PartKind::Gpt {
        type_guid, uuid, ..
    } = &t.partitions[0].kind
    else {
        panic!()
    };
    assert_eq!(*type_guid, Guid::LINUX_ROOT_AARCH64);
    assert_eq!(uuid.to_string(), "01234567-89AB-CDEF-0123-456789ABCDEF");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Whatever the first sectors hold, reading the table returns (an error or a table)
    /// without panicking, and never reports a partition outside the disk.
    #[test]
    fn any_bytes_read_without_panic(
        mut head in proptest::collection::vec(any::<u8>(), 512 * 4),
        gpt in any::<bool>(),
        tail in proptest::collection::vec(any::<u8>(), 512),
    ) {
        head[510] = 0x55;
        head[511] = 0xAA;
        if gpt {
            head[446 + 4] = 0xEE;
            head[512..520].copy_from_slice(b"EFI PART");
        }
        let dir = tempfile::tempdir().unwrap();
        let img = blank(dir.path(), "x.img", 64 * 1024);
        let f = std::fs::OpenOptions::new().write(true).open(&img).unwrap();
        f.write_all_at(&head, 0).unwrap();
        f.write_all_at(&tail, 64 * 1024 - 512).unwrap();
        if let Ok(t) = table::read(&Disk::open_read_only(&img).unwrap()) {
            for p in t.partitions {
                prop_assert!(p.start + p.size <= 64 * 1024);
            }
        }
    }
}
