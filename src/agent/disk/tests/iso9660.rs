//! ISO 9660 images built by [`iso9660::build`], checked by the tools Linux hosts have
//! (`blkid`, `isoinfo`, `isovfy`, `xorriso`, and as root the kernel's own isofs through a loop mount),
//! and [`iso9660::Image`] reading what `genisoimage` and `xorriso` write as well as its own;
//! broken and hostile images are errors, never panics, loops or large allocations.

use std::path::Path;

use proptest::prelude::*;

use super::*;
use crate::agent::disk::DiskError;
use crate::agent::disk::fs::{self, FsKind};
use crate::agent::disk::iso9660::{self, Image, SECTOR};

const MAX: u64 = 64 * MIB;

/// What config-2 holds, plus a file bigger than a sector, an empty one, and two names whose
/// level-1 ISO names collide.
fn files() -> Vec<(String, Vec<u8>)> {
    vec![
        (
            "openstack/latest/meta_data.json".into(),
            br#"{"uuid": "0f3b1a2c", "hostname": "node-7"}"#.to_vec(),
        ),
        (
            "openstack/latest/user_data".into(),
            b"#cloud-config\n{\"write_files\": []}\n".to_vec(),
        ),
        (
            "openstack/latest/user_datA".into(),
            b"the same ISO name as user_data".to_vec(),
        ),
        (
            "openstack/2012-08-10/network_data.json".into(),
            (0..5000u32).map(|i| (i % 251) as u8).collect(),
        ),
        ("openstack/content/0000".into(), Vec::new()),
        ("ec2/Mixed.Case-Name.tar.gz".into(), b"x".to_vec()),
    ]
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

/// The files as `genisoimage` sees them: a directory tree.
fn tree(dir: &Path, files: &[(String, Vec<u8>)]) -> String {
    let root = dir.join("tree");
    for (path, bytes) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    root.display().to_string()
}

/// `isoinfo -R -f`'s file list (directories too), without the leading `/`, sorted.
fn isoinfo_paths(img: &str, rock: bool) -> Vec<String> {
    let mut args = vec!["-f", "-i", img];
    if rock {
        args.insert(0, "-R");
    }
    let mut v: Vec<String> = tool("isoinfo", &args)
        .lines()
        .map(|l| l.trim_start_matches('/').to_string())
        .collect();
    v.sort();
    v
}

fn paths_with_dirs(files: &[(String, Vec<u8>)]) -> Vec<String> {
    let mut v: Vec<String> = files
        .iter()
        .flat_map(|(p, _)| {
            let parts: Vec<&str> = p.split('/').collect();
            (1..=parts.len()).map(move |i| parts[..i].join("/"))
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn the_tools_see_the_volume_label_and_the_exact_rock_ridge_names() {
    let files = files();
    let image = iso9660::build("config-2", &files, MAX).unwrap();
    assert_eq!(image.len() as u64, MIB, "padded to a whole MiB");
    let dir = tempfile::tempdir().unwrap();
    let img = write(dir.path(), "drive.iso", &image);

    let b = blkid(Path::new(&img), 0);
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

    let d = tool("isoinfo", &["-d", "-i", &img]);
    assert!(d.contains("Volume id: config-2"), "{d}");
    assert!(d.contains("Rock Ridge signatures version 1 found"), "{d}");
    assert!(d.contains("Logical block size is: 2048"), "{d}");
    assert!(d.contains("Volume size is: 512"), "{d}");

    // isovfy checks the directory records against the path tables.
    let v = tool("isovfy", &[&img]);
    assert!(v.contains("No errors found"), "{v}");

    // Rock Ridge: the exact names, lowercase and mixed case, long and with two dots.
    assert_eq!(isoinfo_paths(&img, true), paths_with_dirs(&files));
    // Plain ISO 9660: level-1 names, unique in their directory.
    let plain = isoinfo_paths(&img, false);
    assert!(
        plain.contains(&"OPENSTAC/LATEST/META_DAT.JSO;1".to_string()),
        "{plain:?}"
    );
    assert!(
        plain.contains(&"OPENSTAC/LATEST/USER_DAT.;1".to_string())
            && plain.contains(&"OPENSTAC/LATEST/USER_DA1.;1".to_string()),
        "{plain:?}"
    );
    for (path, bytes) in &files {
        let out = isoinfo_extract(&img, path);
        assert!(
            out == *bytes,
            "{path}: isoinfo read {} bytes, {} written",
            out.len(),
            bytes.len()
        );
    }
    // isoinfo -l: Rock Ridge modes (directories dr-xr-xr-x, files -r--r--r--) and the date.
    let l = tool("isoinfo", &["-R", "-l", "-i", &img]);
    assert!(l.contains("dr-xr-xr-x") && l.contains("-r--r--r--"), "{l}");
    assert!(l.contains("Jan  1 1980"), "{l}");

    // xorriso checks the tree and the path tables as it loads the image.
    let (o, e) = tool_io(
        "xorriso",
        &[
            "-abort_on",
            "WARNING",
            "-indev",
            &img,
            "-find",
            "/",
            "-type",
            "f",
        ],
        b"",
    );
    let mut found: Vec<String> = o
        .lines()
        .map(|l| l.trim_matches('\'').trim_start_matches('/').to_string())
        .collect();
    found.sort();
    let mut want: Vec<String> = files.iter().map(|(p, _)| p.clone()).collect();
    want.sort();
    assert_eq!(found, want, "{e}");
    let (o, e) = tool_io(
        "xorriso",
        &["-indev", &img, "-check_media", "--", "-report_about", "ALL"],
        b"",
    );
    assert!(!format!("{o}{e}").contains("FAILURE"), "{o}{e}");
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn many_names_that_shorten_alike_stay_unique() {
    let files: Vec<(String, Vec<u8>)> = (0..3000)
        .map(|i| (format!("d/user_data_{i}.json"), vec![i as u8]))
        .collect();
    let image = iso9660::build("config-2", &files, MAX).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let img = write(dir.path(), "many.iso", &image);
    let plain = isoinfo_paths(&img, false);
    assert_eq!(plain.len(), 3001, "unique ISO names");
    assert!(plain.contains(&"D/USER_DAT.JSO;1".to_string()));
    assert!(
        plain.contains(&"D/USER2999.JSO;1".to_string()),
        "{:?}",
        &plain[..5]
    );
    assert_eq!(isoinfo_paths(&img, true), paths_with_dirs(&files));
    assert!(tool("isovfy", &[&img]).contains("No errors found"));
    let iso = Image::open(&image).unwrap();
    assert_eq!(
        iso.read("d/user_data_2999.json").unwrap(),
        Some(&[2999u32 as u8][..])
    );
}

#[test]
fn the_same_files_give_the_same_bytes_in_any_order() {
    let mut files = files();
    let a = iso9660::build("config-2", &files, MAX).unwrap();
    files.reverse();
    let b = iso9660::build("config-2", &files, MAX).unwrap();
    assert!(a == b, "the image depends on the files' order");
}

/// Reads every file of `image` with [`Image`] and compares it with `files`.
fn read_back(image: &[u8], files: &[(String, Vec<u8>)]) {
    let iso = Image::open(image).unwrap();
    assert_eq!(iso.label(), "config-2");
    let mut want: Vec<(String, u32)> = files
        .iter()
        .map(|(p, b)| (p.clone(), b.len() as u32))
        .collect();
    want.sort();
    assert_eq!(iso.files().unwrap(), want);
    for (path, bytes) in files {
        assert_eq!(iso.read(path).unwrap(), Some(&bytes[..]), "{path}");
    }
    assert_eq!(iso.read("openstack/latest/nothing").unwrap(), None);
    assert_eq!(iso.read("openstack/latest").unwrap(), None, "a directory");
    assert_eq!(
        iso.read("openstack/latest/user_data/x").unwrap(),
        None,
        "a file as a directory"
    );
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn the_reader_reads_its_own_genisoimage_s_and_xorriso_s_images() {
    let files = files();
    read_back(&iso9660::build("config-2", &files, MAX).unwrap(), &files);

    let dir = tempfile::tempdir().unwrap();
    let src = tree(dir.path(), &files);
    // As Nova and Ironic make a config drive.
    let geniso = dir.path().join("genisoimage.iso").display().to_string();
    tool_io(
        "genisoimage",
        &["-quiet", "-J", "-r", "-V", "config-2", "-o", &geniso, &src],
        b"",
    );
    read_back(&std::fs::read(&geniso).unwrap(), &files);
    let xorr = dir.path().join("xorriso.iso").display().to_string();
    tool_io(
        "xorriso",
        &[
            "-as", "mkisofs", "-quiet", "-J", "-r", "-V", "config-2", "-o", &xorr, &src,
        ],
        b"",
    );
    read_back(&std::fs::read(&xorr).unwrap(), &files);

    // Without Rock Ridge, the ISO names lowercased without their version.
    let plain = dir.path().join("plain.iso").display().to_string();
    let only = dir.path().join("only");
    std::fs::create_dir_all(only.join("openstack/latest")).unwrap();
    std::fs::write(only.join("openstack/latest/user_data"), b"u").unwrap();
    tool_io(
        "genisoimage",
        &[
            "-quiet",
            "-V",
            "config-2",
            "-o",
            &plain,
            &only.display().to_string(),
        ],
        b"",
    );
    let bytes = std::fs::read(&plain).unwrap();
    let iso = Image::open(&bytes).unwrap();
    assert_eq!(
        iso.files().unwrap(),
        [("openstac/latest/user_dat".to_string(), 1)]
    );
}

/// As root: the kernel's isofs mounts the image and sees the exact names and bytes. Without
/// root, or on a kernel without iso9660 (containers and micro-VMs share a host kernel that may
/// lack it and cannot load modules), the test fails saying which; `.ci/run` checks both first
/// and skips it by name, saying why, where they do not hold.
#[test]
#[ignore = "needs root (mount -o loop) and a kernel with iso9660; .ci/run runs it where both hold"]
fn linux_mounts_it_and_reads_the_files() {
    assert_eq!(
        tool("id", &["-u"]).trim(),
        "0",
        "linux_mounts_it_and_reads_the_files needs root (mount -o loop)"
    );
    let files = files();
    let dir = tempfile::tempdir().unwrap();
    let img = write(
        dir.path(),
        "drive.iso",
        &iso9660::build("config-2", &files, MAX).unwrap(),
    );
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let at_s = at.display().to_string();
    let out = std::process::Command::new("mount")
        .args(["-t", "iso9660", "-o", "loop,ro", &img, &at_s])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "mount: {stderr}{}",
        if stderr.contains("unknown filesystem type") {
            " (this kernel has no iso9660: the test cannot run here)"
        } else {
            ""
        }
    );
    struct Unmount(String);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let mounted = Unmount(at_s.clone());
    for (path, bytes) in &files {
        let read = std::fs::read(at.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(read == *bytes, "{path}: {} bytes read", read.len());
    }
    let mut names: Vec<String> = std::fs::read_dir(at.join("openstack/latest"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["meta_data.json", "user_datA", "user_data"]);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(at.join("openstack/latest/user_data"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode, 0o100_444);
    drop(mounted);
}

#[test]
fn too_big_and_bad_paths_are_refused_by_name() {
    let big = vec![("user-data".to_string(), vec![0u8; (MAX + 1) as usize])];
    match iso9660::build("config-2", &big, MAX) {
        Err(DiskError::ConfigDriveTooBig { bytes, max }) => {
            assert_eq!((bytes, max), (MAX + 1, MAX));
        }
        other => panic!("{other:?}"),
    }
    // The files fit; with the filesystem's own sectors the image does not.
    let almost = vec![("user-data".to_string(), vec![0u8; (MAX - 1000) as usize])];
    let err = iso9660::build("config-2", &almost, MAX).unwrap_err();
    assert!(
        matches!(err, DiskError::ConfigDriveTooBig { bytes, .. } if bytes == MAX + MIB),
        "{err}"
    );
    assert!(err.to_string().contains(&(MAX + MIB).to_string()), "{err}");

    let one = |path: &str| vec![(path.to_string(), b"x".to_vec())];
    for (path, says) in [
        ("", "\"\""),
        ("a//b", "\"\""),
        ("a/../b", "\"..\""),
        ("./a", "\".\""),
        (&"n".repeat(129), "over 128 bytes"),
        ("1/2/3/4/5/6/7/8/9", "deeper than 8"),
    ] {
        let err = iso9660::build("config-2", &one(path), MAX)
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{path}: {err}");
    }
    let twice = vec![("a/b".to_string(), vec![]), ("a/b".to_string(), vec![1])];
    let err = iso9660::build("config-2", &twice, MAX)
        .unwrap_err()
        .to_string();
    assert!(err.contains("a/b is given twice"), "{err}");
    let file_as_dir = vec![("a".to_string(), vec![]), ("a/b".to_string(), vec![])];
    let err = iso9660::build("config-2", &file_as_dir, MAX)
        .unwrap_err()
        .to_string();
    assert!(err.contains("a/b: a is a file"), "{err}");
    let err = iso9660::build(&"L".repeat(33), &one("a"), MAX)
        .unwrap_err()
        .to_string();
    assert!(err.contains("volume id"), "{err}");
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn set_both32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    b[at + 4..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// The byte offset of the directory record whose ISO identifier is `id`.
fn record_of(image: &[u8], id: &[u8]) -> usize {
    let mut needle = vec![id.len() as u8];
    needle.extend(id);
    let at = image
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap();
    at - 32
}

const PVD_ROOT: usize = 16 * SECTOR + 156;

#[test]
fn hostile_images_are_errors_not_panics() {
    let files = files();
    let good = iso9660::build("config-2", &files, MAX).unwrap();
    let err = |image: &[u8]| -> String {
        match Image::open(image).and_then(|i| i.files()) {
            Err(e) => e.to_string(),
            Ok(f) => panic!("read {f:?}"),
        }
    };

    // Not an ISO at all; cut before the descriptors end.
    assert!(err(&vec![0u8; MIB as usize]).contains("not a volume descriptor"));
    assert!(err(&good[..17 * SECTOR]).contains("no volume descriptor set terminator"));
    // Cut after the descriptors: the directories lie past the end.
    let root_extent = le32(&good, PVD_ROOT + 2);
    let e = err(&good[..(root_extent as usize) * SECTOR]);
    assert!(e.contains("past the image's end"), "{e}");

    // A root directory claiming 4 GiB.
    let mut huge = good.clone();
    set_both32(&mut huge, PVD_ROOT + 10, u32::MAX);
    let e = err(&huge);
    assert!(e.contains("4294967295 bytes") && e.contains("over"), "{e}");

    // A file claiming 2 GiB: read is an error, not an allocation.
    let mut big_file = good.clone();
    let r = record_of(&big_file, b"META_DAT.JSO;1");
    set_both32(&mut big_file, r + 10, 0x7FFF_FFFF);
    let iso = Image::open(&big_file).unwrap();
    let e = iso
        .read("openstack/latest/meta_data.json")
        .unwrap_err()
        .to_string();
    assert!(e.contains("2147483647 bytes") && e.contains("past"), "{e}");

    // openstack/latest pointing back at the root: a loop.
    let mut looped = good.clone();
    let r = record_of(&looped, b"LATEST");
    set_both32(&mut looped, r + 2, root_extent);
    let e = err(&looped);
    assert!(e.contains("loop"), "{e}");

    // A Rock Ridge continuation area that continues into itself.
    let mut ce_loop = good.clone();
    let ce_sector = root_extent as usize - 1;
    let ce = |to: &mut [u8], at: usize| {
        to[at..at + 4].copy_from_slice(b"CE\x1c\x01");
        set_both32(to, at + 4, ce_sector as u32);
        set_both32(to, at + 12, 0);
        set_both32(to, at + 20, 28);
    };
    ce(&mut ce_loop, ce_sector * SECTOR);
    let r = record_of(&ce_loop, b"OPENSTAC");
    let px = r + ce_loop[r..r + 255]
        .windows(4)
        .position(|w| w == b"PX\x24\x01")
        .unwrap();
    ce(&mut ce_loop, px);
    let e = err(&ce_loop);
    assert!(e.contains("continuation"), "{e}");

    // A record length running past its directory; a record shorter than its fixed part.
    let mut overrun = good.clone();
    let r = record_of(&overrun, b"OPENSTAC");
    overrun[r] = 8;
    assert!(err(&overrun).contains("record of 8 bytes"));
    // A name of "..": refused, not followed.
    let mut dotdot = good.clone();
    let r = record_of(&dotdot, b"EC2");
    let nm = r + dotdot[r..r + 255]
        .windows(4)
        .position(|w| w == b"NM\x08\x01")
        .unwrap();
    dotdot[nm + 5..nm + 8].copy_from_slice(b"../");
    assert!(err(&dotdot).contains("\"../\""));

    // More records than a config drive ever has: refused, not walked for ever.
    let many: Vec<(String, Vec<u8>)> = (0..=iso9660::MAX_RECORDS)
        .map(|i| (format!("{}/{i}", ["a", "b"][i % 2]), Vec::new()))
        .collect();
    let image = iso9660::build("config-2", &many, MAX).unwrap();
    let e = err(&image);
    assert!(e.contains("more than 10000 directory records"), "{e}");
    // A lookup reads only the directories on its way.
    let iso = Image::open(&image).unwrap();
    assert_eq!(iso.read("b/9999").unwrap(), Some(&[][..]));

    // Every prefix of the image, by 512 bytes: an error or the files, never a panic.
    for len in (0..good.len()).step_by(512) {
        if let Ok(iso) = Image::open(&good[..len]) {
            let _ = iso.files();
            let _ = iso.read("openstack/latest/user_data");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    /// Any bytes of the metadata changed: `open`, `files` and `read` return, never panic.
    #[test]
    fn any_corruption_reads_without_panic(
        changes in prop::collection::vec((16 * SECTOR..40 * SECTOR, any::<u8>()), 1..16)
    ) {
        let mut image = GOOD.with(|g| g.clone());
        for (at, b) in changes {
            image[at] = b;
        }
        if let Ok(iso) = Image::open(&image) {
            let _ = iso.files();
            let _ = iso.read("openstack/latest/meta_data.json");
        }
    }
}

thread_local! {
    static GOOD: Vec<u8> = iso9660::build("config-2", &files(), MAX).unwrap()[..40 * SECTOR].to_vec();
}
