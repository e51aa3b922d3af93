#!/usr/bin/env bash
# Build a small bootable Debian disk image for the nodes stoker deploys: a raw disk with an MBR,
# GRUB for BIOS, and one ext4 root partition (MBR type 0x83, filesystem label stoker-root) holding
# Debian stable with the cloud kernel, systemd, DHCP by systemd-networkd on the first NIC, a serial
# console on ttyS0, root login disabled, and a unit that prints
# `STOKER-OS-BOOTED host=<hostname>` on the console once the system is up.
#
# usage: images/build-os-image.sh [--out DIR] [--cloud-init] [--size MIB] [--qcow2]
#
#   --out DIR      where the image and its manifest go (default: stoker-data/images)
#   --cloud-init   add cloud-init, reading only the ConfigDrive and NoCloud datasources (no
#                  network metadata service is ever asked); the image is stoker-os-cloud-init.img
#                  instead of stoker-os-base.img
#   --size MIB     size of the root partition (default: what the files need plus 48 MiB free)
#   --qcow2        also write the image as qcow2 beside the raw one (needs qemu-img)
#
# Needs root (mmdebstrap --mode=root and chroot), mmdebstrap, sfdisk (package fdisk) and mke2fs
# 1.43 or later (populates the filesystem with -d: nothing is mounted, no loop device is used).
# The root tree comes from mmdebstrap; GRUB's boot sector and core image from grub-pc-bin and
# grub-common, unpacked with dpkg-deb, never installed. Downloads are cached in DIR/.debs, or in
# $STOKER_DEB_CACHE when set: the .debs, and the package lists for a day (STOKER_LISTS_MAX_AGE,
# minutes), so a rerun within a day needs no network; with older lists the build fetches new ones
# and falls back to the old ones when it cannot. What the image holds: images/README.md.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
IMG_TOOL=build-os-image
# shellcheck source=images/lib.sh
. "$here/images/lib.sh"
OUT=$here/stoker-data/images
VARIANT=base
SIZE=
QCOW2=0
while [ $# -gt 0 ]; do
  case $1 in
    --out) OUT=$2; shift 2 ;;
    --cloud-init) VARIANT=cloud-init; shift ;;
    --size) SIZE=$2; shift 2 ;;
    --qcow2) QCOW2=1; shift ;;
    -h|--help) usage "$0"; exit 0 ;;
    *) echo "build-os-image: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
case $SIZE in ''|*[!0-9]*) [ -z "$SIZE" ] || die "--size wants a whole number of MiB, not '$SIZE'" ;; esac
[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap --mode=root, chroot)"
need mmdebstrap sfdisk mke2fs dpkg-deb apt-get chroot sha256sum find du
[ "$QCOW2" = 0 ] || need qemu-img
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
CACHE=${STOKER_DEB_CACHE:-$OUT/.debs}
ARCHIVES=$CACHE/os-image/archives   # mmdebstrap's apt cache, kept between builds
LISTS=$CACHE/os-image/lists         # its package lists, reused for STOKER_LISTS_MAX_AGE minutes
mkdir -p "$ARCHIVES" "$LISTS"

SUITE=bookworm
LABEL=stoker-root
HOST=stoker-os
NAME=stoker-os-$VARIANT
UUID=$(cat /proc/sys/kernel/random/uuid)   # the root filesystem's: the initramfs mounts root=UUID=
# The kernel: Debian's cloud flavour has the virtio drivers and is the smallest (its vmlinuz is
# LZ4-packed: quick to unpack under QEMU's TCG). Its disk drivers are modules, so it needs an
# initramfs: tiny-initramfs (Debian's smallest: one static init, the modules below, ~1 MB) rather
# than initramfs-tools (udev and its libraries, 7 MB): GRUB reads every byte of it through the
# BIOS, slowly under TCG, and the udev in it cost another 4 s there. It mounts root=UUID=.
# dbus: systemd-logind needs it.
PACKAGES="systemd-sysv udev dbus e2fsprogs linux-image-cloud-amd64 tiny-initramfs"
# curl: the user data of stoker's config drive fetches the service agent with it (as cloud
# images, which all have curl, do); cloud-init itself does not bring it.
[ "$VARIANT" = cloud-init ] && PACKAGES+=" cloud-init curl"
# Disk drivers only: the root filesystem's own (ext4) is built into the kernel; ata_piix (IDE)
# is left out, its probe of an emulated controller's empty channels is slow.
INITRD_MODULES="virtio_pci virtio_blk virtio_scsi sd_mod ahci nvme"
# Files a node never reads, left out as dpkg unpacks (dpkg path-exclude): documentation,
# translations, udev's hardware database (names of devices for humans; 21 MB), and kernel modules
# for hardware and filesystems a VM disk image has no use for (InfiniBand, SAN targets, media and
# data-acquisition cards, network and cluster filesystems, btrfs and xfs).
EXCLUDE=('/usr/share/doc/*' '/usr/share/man/*' '/usr/share/info/*' '/usr/share/locale/*'
  '/usr/share/lintian/*' '/usr/lib/udev/hwdb.d/*' '/lib/udev/hwdb.d/*')
for m in drivers/infiniband drivers/target drivers/media drivers/comedi drivers/gpu \
    fs/btrfs fs/xfs fs/nfs fs/nfsd fs/ceph fs/smb fs/ocfs2 fs/gfs2 fs/dlm net/ceph net/sunrpc; do
  EXCLUDE+=("/lib/modules/*/kernel/$m/*" "/usr/lib/modules/*/kernel/$m/*")
done

work=$(mktemp -d "${TMPDIR:-/tmp}/stoker-os-image.XXXXXX")
cleanup() {
  # mmdebstrap unmounts what it mounted in the tree, unless it was killed: never let rm reach
  # the host's /proc, /sys or /dev through a mount left behind.
  local m
  for m in $(awk -v w="$work/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
root=$work/root
t0=$(date +%s)

# ---- the root tree ----------------------------------------------------------------------------
# mmdebstrap's merged-usr hook makes /bin, /lib, /sbin links into /usr itself and installs
# usr-is-merged: without it apt would pick usrmerge, which brings perl (46 MB).
mmopts=(--mode=root --variant=essential --format=directory --include="$PACKAGES"
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
  --skip=essential/unlink
  --setup-hook='mkdir -p "$1"/var/cache/apt/archives "$1"/var/lib/apt/lists'
  --setup-hook="sync-in $ARCHIVES /var/cache/apt/archives/"
  # Before the kernel is installed, so its initramfs is made this way the first time: the
  # modules named here, not those of the build host's root device.
  --essential-hook='mkdir -p "$1"/etc/tiny-initramfs'
  --essential-hook="printf 'AUTO_MODULES=no\nINCLUDE_MODULES=%s\nMICROCODE=no\n' '${INITRD_MODULES// /,}' > \"\$1\"/etc/tiny-initramfs/tiny-initramfs.conf"
  --customize-hook="sync-out /var/cache/apt/archives $ARCHIVES"
  --customize-hook="sync-out /var/lib/apt/lists $LISTS")
for p in "${EXCLUDE[@]}"; do mmopts+=(--dpkgopt="path-exclude=$p"); done
# dpkg takes the last pattern that matches: these come back (licences; a directory dpkg needs).
mmopts+=(--dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-include=/usr/share/locale/locale.alias')
[ "$VARIANT" = cloud-init ] && mmopts+=(--aptopt='Apt::Install-Recommends "false"')
maxage=${STOKER_LISTS_MAX_AGE:-1440}
fresh=$(find "$LISTS" -maxdepth 1 -name '*_InRelease' -mmin -"$maxage" 2>/dev/null | head -n1)
old=$(find "$LISTS" -maxdepth 1 -name '*_InRelease' 2>/dev/null | head -n1)
cached_lists=(--skip=update --setup-hook="sync-in $LISTS /var/lib/apt/lists/")
mmdebstrap_run() { mmdebstrap "${mmopts[@]}" "$@" "$SUITE" "$root" >>"$work/mmdebstrap.log" 2>&1; }
echo "build-os-image: $VARIANT: mmdebstrap $SUITE ($PACKAGES)" >&2
if [ -n "$fresh" ]; then
  mmdebstrap_run "${cached_lists[@]}" || { tail -25 "$work/mmdebstrap.log" >&2; die "mmdebstrap failed"; }
elif ! mmdebstrap_run; then
  [ -n "$old" ] || { tail -25 "$work/mmdebstrap.log" >&2; die "mmdebstrap failed (and no package lists are cached)"; }
  echo "build-os-image: could not fetch package lists: using the cached ones" >&2
  rm -rf "$root"
  mmdebstrap_run "${cached_lists[@]}" || { tail -25 "$work/mmdebstrap.log" >&2; die "mmdebstrap failed"; }
else
  touch "$LISTS"/*_InRelease
fi
t_tree=$(date +%s)

vmlinuz=$(readlink "$root/vmlinuz" || true)
kver=${vmlinuz##*/vmlinuz-}
[ -n "$kver" ] && [ -f "$root/boot/vmlinuz-$kver" ] && [ -f "$root/boot/initrd.img-$kver" ] \
  || die "no kernel and initramfs in the tree (/vmlinuz -> '${vmlinuz}')"

# ---- configuration ----------------------------------------------------------------------------
echo "$HOST" > "$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' "$HOST" > "$root/etc/hosts"
# mmdebstrap copied the build host's resolver configuration in; a node has its own.
echo "# no resolver is configured: stoker's agent reaches the master by address" > "$root/etc/resolv.conf"
# No fsck at boot (pass 0): the journal covers a crash, and a check of the whole root filesystem
# cost 5 s of every boot under TCG.
echo "LABEL=$LABEL / ext4 defaults,errors=remount-ro 0 0" > "$root/etc/fstab"
cat > "$root/etc/systemd/network/20-stoker-dhcp.network" <<'EOF'
# Written by stoker's images/build-os-image.sh: DHCP on every wired NIC.
[Match]
Name=en* eth*

[Network]
DHCP=yes
EOF
cat > "$root/etc/systemd/system/stoker-os-booted.service" <<'EOF'
# Written by stoker's images/build-os-image.sh: tells the console (and so the lab) the system is
# up. Not ordered after the network or cloud-init: it reports the OS, not them.
[Unit]
Description=Say on the console that the stoker OS image booted

[Service]
Type=oneshot
ExecStart=/bin/sh -c 'echo "STOKER-OS-BOOTED host=$(hostname) uptime=$(cut -d" " -f1 /proc/uptime)"'
StandardOutput=journal+console

[Install]
WantedBy=multi-user.target
EOF
chroot "$root" systemctl enable --quiet systemd-networkd.service stoker-os-booted.service
# Housekeeping a short-lived node does not need, each a unit fewer to start on a slow CPU: weekly
# TRIM, ext4 snapshot scrubbing (LVM only), the daily dpkg database backup.
chroot "$root" systemctl mask --quiet fstrim.timer e2scrub_all.timer e2scrub_reap.service dpkg-db-backup.timer
# A network that never answers DHCP must not hold up what waits for network-online.target
# (cloud-init's later stages, an agent) for systemd's default two minutes.
mkdir -p "$root/etc/systemd/system/systemd-networkd-wait-online.service.d"
cat > "$root/etc/systemd/system/systemd-networkd-wait-online.service.d/stoker.conf" <<'EOF'
[Service]
ExecStart=
ExecStart=/lib/systemd/systemd-networkd-wait-online --any --timeout=30
EOF
chroot "$root" passwd --quiet --lock root
if [ "$VARIANT" = cloud-init ]; then
  cat > "$root/etc/cloud/cloud.cfg.d/90-stoker.cfg" <<'EOF'
# Written by stoker's images/build-os-image.sh: only local datasources (a config drive, or a
# NoCloud seed: a filesystem labelled cidata or /var/lib/cloud/seed/nocloud). Without one,
# ds-identify turns cloud-init off for the boot; no network metadata service is ever asked.
datasource_list: [ ConfigDrive, NoCloud ]
EOF
fi

# ---- GRUB (BIOS) --------------------------------------------------------------------------------
mkdir -p "$work/grub"
for p in grub-pc-bin grub-common; do dpkg-deb -x "$(deb_fetch "$p")" "$work/grub"; done
gmod=$work/grub/usr/lib/grub/i386-pc
mkimage=$work/grub/usr/bin/grub-mkimage
libs=$(ldd "$mkimage" 2>&1 || true)
if grep -q 'not found' <<<"$libs"; then
  die "grub-mkimage (from grub-common) lacks libraries: $(grep 'not found' <<<"$libs" | tr -s ' \t\n' ' ')"
fi
mkdir -p "$root/boot/grub/i386-pc"
cp "$gmod"/*.mod "$gmod"/*.lst "$root/boot/grub/i386-pc/"
cat > "$root/boot/grub/grub.cfg" <<EOF
# Written by stoker's images/build-os-image.sh. /vmlinuz and /initrd.img follow the installed kernel.
set timeout=0
set default=0
menuentry 'Debian GNU/Linux ($NAME)' {
	search --no-floppy --label $LABEL --set root
	linux /vmlinuz root=UUID=$UUID ro console=ttyS0,115200n8
	initrd /initrd.img
}
EOF
# core.img finds the root filesystem by its label, then reads /boot/grub from it.
cat > "$work/early.cfg" <<EOF
search --no-floppy --label $LABEL --set root
set prefix=(\$root)/boot/grub
EOF
"$mkimage" -d "$gmod" -O i386-pc -o "$work/core.img" -c "$work/early.cfg" -p /boot/grub \
  biosdisk part_msdos ext2 search search_label normal linux \
  || die "grub-mkimage failed"

# ---- the disk -----------------------------------------------------------------------------------
# Partition 1 starts at 1 MiB; GRUB's core image lives in the sectors before it (as grub-install
# would put it), its boot sector in the MBR's first 440 bytes.
used_kib=$(du -s --block-size=1K "$root" | cut -f1)
files=$(find "$root" | wc -l)
inodes=$((files + files / 2 + 4096))
# Files, 5% for directories and extent blocks, the inode tables, a 16 MiB journal, and 48 MiB
# free: room for the agent (10-15 MB), its unit and credential, the journal's files and tasks'.
need_mib=$(( (used_kib * 105 / 100 + inodes / 4) / 1024 + 16 + 48 ))
part_mib=${SIZE:-$(( (need_mib + 3) / 4 * 4 ))}
[ "$part_mib" -ge $((need_mib - 48)) ] || die "--size $part_mib MiB is too small: the files need about $((need_mib - 48)) MiB"
img=$OUT/$NAME.img
rm -f "$img"
truncate -s $(( (part_mib + 1) * 1024 * 1024 )) "$img"
printf 'label: dos\nunit: sectors\n\nstart=2048, size=%d, type=83, bootable\n' $((part_mib * 2048)) \
  | sfdisk -q "$img" || die "sfdisk failed"
# A mke2fs.conf of our own: the filesystem must not depend on the build host's defaults (GRUB
# 2.06 cannot read ext4 with metadata_csum_seed or orphan_file, which newer hosts turn on).
cat > "$work/mke2fs.conf" <<'EOF'
[defaults]
	base_features = sparse_super,large_file,filetype,resize_inode,dir_index,ext_attr
	default_mntopts = acl,user_xattr
	blocksize = 4096
	inode_size = 256
[fs_types]
	small = {
		blocksize = 4096
	}
	ext4 = {
		features = has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize
	}
EOF
MKE2FS_CONFIG=$work/mke2fs.conf mke2fs -q -F -t ext4 -L "$LABEL" -U "$UUID" -N "$inodes" -m 1 -J size=16 \
  -d "$root" -E offset=$((2048 * 512)) "$img" "${part_mib}M" || die "mke2fs failed"
core_bytes=$(stat -c %s "$work/core.img")
[ "$core_bytes" -le $((2047 * 512)) ] || die "GRUB's core image ($core_bytes bytes) does not fit before the partition"
dd if="$gmod/boot.img" of="$img" bs=440 count=1 conv=notrunc status=none
dd if="$work/core.img" of="$img" bs=512 seek=1 conv=notrunc status=none
t_img=$(date +%s)

# ---- cache upkeep, outputs ----------------------------------------------------------------------
# Keep only the .debs of what is installed now, so superseded versions do not pile up.
inst=$(chroot "$root" dpkg-query -W -f '${Package}_${Version}_${Architecture}.deb\n' | sed 's/:/%3a/g')
for f in "$ARCHIVES"/*.deb; do
  [ -e "$f" ] || continue
  grep -qxF "$(basename "$f")" <<<"$inst" || rm -f "$f"
done
if [ "$QCOW2" = 1 ]; then
  qemu-img convert -f raw -O qcow2 "$img" "$OUT/$NAME.qcow2" || die "qemu-img convert failed"
fi
bytes=$(stat -c %s "$img")
{
  echo "image: $NAME.img $bytes bytes ($(du -k "$img" | cut -f1) KiB allocated) sha256 $(sha256sum < "$img" | cut -d' ' -f1)"
  [ "$QCOW2" = 0 ] || echo "qcow2: $NAME.qcow2 $(stat -c %s "$OUT/$NAME.qcow2") bytes sha256 $(sha256sum < "$OUT/$NAME.qcow2" | cut -d' ' -f1)"
  echo "variant: $VARIANT"
  echo "layout: MBR, partition 1 from sector 2048, ${part_mib} MiB, type 0x83, bootable; ext4 LABEL=$LABEL UUID=$UUID; GRUB (BIOS) in the MBR and sectors 1-$(( (core_bytes + 511) / 512 ))"
  echo "kernel: $kver ($(stat -c %s "$root/boot/vmlinuz-$kver") bytes); tiny-initramfs $(stat -c %s "$root/boot/initrd.img-$kver") bytes, modules: $INITRD_MODULES"
  echo "root filesystem: $((used_kib / 1024)) MiB in $files files"
  echo "built in: $((t_img - t0)) s (tree $((t_tree - t0)) s)"
  echo "packages: $(wc -l <<<"$inst")"
  chroot "$root" dpkg-query -W -f '  ${Package} ${Version}\n'
} > "$OUT/$NAME.manifest.txt"
sed -n '1,/^packages:/p' "$OUT/$NAME.manifest.txt" | sed 's/^/build-os-image: /' >&2
echo "os-image: $img $bytes $VARIANT kernel=$kver"
[ "$QCOW2" = 0 ] || echo "os-image: $OUT/$NAME.qcow2 $(stat -c %s "$OUT/$NAME.qcow2") $VARIANT kernel=$kver"
