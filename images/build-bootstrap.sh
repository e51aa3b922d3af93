#!/usr/bin/env bash
# Build stoker's bootstrap image from Debian packages only, around this same binary's `agent`.
#
# usage: images/build-bootstrap.sh [--stoker BIN] [--out DIR] [--tftp DIR] [--modules 'm1 m2']
#
#   --stoker BIN   the stoker binary to pack (default: target/release/stoker)
#   --out DIR      where vmlinuz, initrd.img and manifest.txt go (default: stoker-data/images,
#                  which `stoker serve` serves at /boot/images/)
#   --tftp DIR     where Debian's iPXE binaries go: undionly.kpxe (BIOS), ipxe.efi and
#                  snponly.efi (UEFI) (default: stoker-data/tftp)
#   --modules '…'  kernel modules to include with their dependencies; each driver is loaded at
#                  boot only when a device of the machine matches one of its aliases, each
#                  filesystem when something mounts it (default: NIC drivers for QEMU and common
#                  servers, disk controllers, and ext4 and vfat, which the configure step mounts
#                  to write into an installed OS; add xfs for images whose root is xfs: it is
#                  about three times ext4's size). The IPMI drivers are always added (below).
#
# Packages: the kernel that linux-image-amd64 depends on, busybox-static and ipxe, fetched
# with `apt-get download` (run `apt-get update` once first) and cached in DIR/.debs, or in
# $STOKER_DEB_CACHE when set (CI keeps one cache across runs).
# The agent's BMC probe (src/agent/bmc_probe.rs) reads the BMC's LAN address with `ipmitool lan
# print` through /dev/ipmi0, so the image also carries Debian's ipmitool with the libraries it
# links (libfreeipmi17, libreadline8, libssl3's libcrypto and theirs, resolved from the packages,
# not the host) and the IPMI drivers: ipmi_si (loaded by /init when the machine has a KCS, SMIC
# or BT interface: ACPI IPI0001, SMBIOS type 38 or PCI class 0c07), ipmi_msghandler, and
# ipmi_devintf, which makes /dev/ipmi0 and which /init loads once ipmi_msghandler is in: 13.6 MB
# unpacked, 5.4 MB more in the lz4 initramfs (images/README.md). SSIF (SMBus) BMCs are not covered.
# The kernel command-line contract the image understands is in images/README.md.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
IMG_TOOL=build-bootstrap
# shellcheck source=images/lib.sh
. "$here/images/lib.sh"
STOKER=$here/target/release/stoker
OUT=$here/stoker-data/images
TFTP=$here/stoker-data/tftp
MODULES="virtio_pci virtio_net e1000 e1000e igb ixgbe i40e tg3 bnxt_en virtio_blk virtio_scsi sd_mod ahci nvme ext4 vfat nls_cp437 nls_utf8"
# Added when the kernel has them as modules: ext4's checksums need a crc32c ("softdep", which
# add_mod's depends= does not follow); the name changed across kernels.
OPTIONAL_MODULES="crc32c_generic crc32c_intel crc32c_cryptoapi"
# Always added, whatever --modules says: what the agent's BMC probe needs (the header).
IPMI_MODULES="ipmi_msghandler ipmi_devintf ipmi_si"
while [ $# -gt 0 ]; do
  case $1 in
    --stoker) STOKER=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --tftp) TFTP=$2; shift 2 ;;
    --modules) MODULES=$2; shift 2 ;;
    -h|--help) usage "$0"; exit 0 ;;
    *) echo "build-bootstrap: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
need apt-get apt-cache dpkg-deb cpio gzip xz find sha256sum ldd readelf  # cpio, binutils
[ -x "$STOKER" ] || die "$STOKER is not an executable (cargo build --release first, or --stoker BIN)"
mkdir -p "$OUT" "$TFTP"
OUT=$(cd "$OUT" && pwd); TFTP=$(cd "$TFTP" && pwd)
CACHE=${STOKER_DEB_CACHE:-$OUT/.debs}
mkdir -p "$CACHE"

# ---- Debian packages --------------------------------------------------------------------------
KERNEL_PKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
[ -n "$KERNEL_PKG" ] || die "cannot resolve linux-image-amd64 (run 'apt-get update' first)"
kdeb=$(deb_fetch "$KERNEL_PKG"); bdeb=$(deb_fetch busybox-static); ideb=$(deb_fetch ipxe)

work=$(mktemp -d "${TMPDIR:-/tmp}/stoker-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$kdeb" "$work/kernel"
dpkg-deb -x "$bdeb" "$work/busybox"
dpkg-deb -x "$ideb" "$work/ipxe"
vmlinuz=$(ls "$work"/kernel/boot/vmlinuz-* | head -n1)
kver=${vmlinuz##*/vmlinuz-}
kmod=$work/kernel/lib/modules/$kver
[ -d "$kmod" ] || die "no modules for $kver in $kdeb"

# ---- iPXE for the TFTP root -------------------------------------------------------------------
for f in undionly.kpxe ipxe.efi snponly.efi; do
  src=$(find "$work/ipxe" -name "$f" | head -n1)
  [ -n "$src" ] || die "$f not in $(basename "$ideb")"
  install -m 0644 "$src" "$TFTP/$f"
done

# ---- root tree: busybox, modules, stoker ------------------------------------------------------
root=$work/root
mkdir -p "$root"/{bin,sbin,etc/udhcpc,proc,sys,dev,tmp,run,root,usr/bin,usr/sbin,lib/modules/"$kver"}
cp "$work/busybox/bin/busybox" "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list); do
  [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
# The agent's disk work runs these (src/agent/disk/mount.rs): re-read a partition table, load a
# filesystem module, mount, flush, unmount.
for applet in blockdev modprobe mount sync umount; do
  [ -e "$root/bin/$applet" ] || die "$(basename "$bdeb") has no $applet applet, which the agent needs"
done
# The kernel runs /sbin/modprobe itself to load what a mount needs (fs-ext4, crypto-crc32c, the
# nls codepages of vfat).
ln -s ../bin/busybox "$root/sbin/modprobe"
echo "root:x:0:0:root:/root:/bin/sh" > "$root/etc/passwd"
echo "root:x:0:" > "$root/etc/group"

declare -A seen=(); order=()
unpack() { case $1 in *.xz) xz -dc "$1" ;; *.zst) zstd -dcq "$1" ;; *.gz) gzip -dc "$1" ;; *) cat "$1" ;; esac; }
add_mod() { # module name: add its dependencies, then itself, once
  local n=${1//-/_} pat f d
  [ -n "${seen[$n]:-}" ] && return 0
  seen[$n]=1
  pat=${n//_/[_-]}
  grep -qE "/${pat}\.ko(\.[a-z]+)?\$" "$kmod/modules.builtin" 2>/dev/null && return 0
  f=$(find "$kmod/kernel" -regextype posix-extended -regex ".*/${pat}\.ko(\.xz|\.zst|\.gz)?" | head -n1)
  [ -n "$f" ] || die "module $n is not in $KERNEL_PKG"
  for d in $(unpack "$f" | tr '\0' '\n' | sed -n 's/^depends=//p' | head -n1 | tr ',' ' '); do add_mod "$d"; done
  order+=("$f")
}
have_mod() { # built in or in the kernel package
  local n=${1//-/_} pat
  pat=${n//_/[_-]}
  grep -qE "/${pat}\.ko(\.[a-z]+)?\$" "$kmod/modules.builtin" 2>/dev/null ||
    [ -n "$(find "$kmod/kernel" -regextype posix-extended -regex ".*/${pat}\.ko(\.xz|\.zst|\.gz)?" | head -n1)" ]
}
for m in $MODULES $IPMI_MODULES; do add_mod "$m"; done
for m in $OPTIONAL_MODULES; do if have_mod "$m"; then add_mod "$m"; fi; done
for f in "${order[@]}"; do
  rel=${f#"$kmod"/}; rel=${rel%.xz}; rel=${rel%.zst}; rel=${rel%.gz}
  mkdir -p "$root/lib/modules/$kver/$(dirname "$rel")"
  unpack "$f" > "$root/lib/modules/$kver/$rel"
done
# modules.dep and modules.alias (each module's device patterns), so /init's `modprobe` loads the
# drivers of the devices a machine has instead of every driver in the image.
"$root/bin/busybox" depmod -b "$root" "$kver" || die "busybox depmod failed"
[ -s "$root/lib/modules/$kver/modules.alias" ] || die "depmod wrote no modules.alias"

# Debug symbols are no use on a node and would double the initramfs.
if command -v strip >/dev/null; then strip -o "$root/bin/stoker" "$STOKER"; else cp "$STOKER" "$root/bin/stoker"; fi
# (ldd's output is captured first: `ldd | grep -q` under pipefail fails whenever grep exits
# before ldd has written everything, and the libraries were then silently left out.)
libs=$(ldd "$STOKER" 2>/dev/null || true)
if grep -q '=>' <<<"$libs"; then
  for lib in $(grep -oE '/[^ ]+' <<<"$libs"); do
    mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib"
  done
fi

# ---- ipmitool ---------------------------------------------------------------------------------
# From Debian's packages, never the host's files: usr/bin/ipmitool, then for each ELF file added,
# its program interpreter and every NEEDED soname, each taken from the image when it is already
# there (the C library stoker runs on), else from the package of the file that needs it or from
# one its .deb depends or pre-depends on (as Debian's shlibs make packages depend on the packages
# of the libraries they link), recursively. Only those files are copied, dereferenced, at their
# packaged paths, in the directories the loader searches without an ld.so.cache. A soname that is
# the interpreter's own (libc.so.6 needs ld-linux-x86-64.so.2) is the loader itself, already there.
LIBDIRS="lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu lib usr/lib"
declare -A unpacked=() added=() interp=() depends=()
ipmi_debs=()
unpack_pkg() { # PACKAGE: its .deb unpacked once under $work/pkg; 1 when it cannot be had
  local f
  [ -n "${unpacked[$1]:-}" ] && return 0
  f=$(deb_fetch "$1") || return 1
  mkdir -p "$work/pkg/$1" && dpkg-deb -x "$f" "$work/pkg/$1" || return 1
  unpacked[$1]=$(basename "$f")
}
pkg_depends() { # PACKAGE (unpacked): depends[PACKAGE], what its .deb depends or pre-depends on
  [ -n "${depends[$1]+set}" ] || depends[$1]=$(dpkg-deb -f "$CACHE/${unpacked[$1]}" Pre-Depends Depends |
    sed 's/^[A-Za-z-]*: //' | tr ',|' '\n' | sed -E 's/^ +//; s/[ (:].*//' | { grep . || true; } | tr '\n' ' ')
}
lookup() { # DIR KIND NAME: NAME's path relative to DIR (KIND soname: in a library directory)
  local d
  if [ "$2" = path ]; then [ -e "$1/$3" ] && echo "$3" && return 0; return 1; fi
  for d in $LIBDIRS; do [ -e "$1/$d/$3" ] && echo "$d/$3" && return 0; done
  return 1
}
add_elf() { # PACKAGE FILE: PACKAGE's FILE into the image, with what it needs to run
  local pkg=$1 rel=$2 src=$work/pkg/$1/$2 n
  [ -n "${added[$rel]:-}" ] && return 0
  added[$rel]=1
  case " ${ipmi_debs[*]} " in *" ${unpacked[$pkg]} "*) ;; *) ipmi_debs+=("${unpacked[$pkg]}") ;; esac
  mkdir -p "$root/$(dirname "$rel")"; cp -L "$src" "$root/$rel"
  n=$(readelf -lW "$src" | sed -n 's/.*Requesting program interpreter: \/\(.*\)\]$/\1/p')
  [ -z "$n" ] || { interp[${n##*/}]=1; add_need "$pkg" "$rel" path "$n"; }
  for n in $(readelf -dW "$src" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'); do add_need "$pkg" "$rel" soname "$n"; done
}
add_need() { # PACKAGE FILE KIND NAME: NAME (a soname, or the interpreter's path) for PACKAGE's FILE
  local pkg=$1 file=$2 kind=$3 name=$4 p found cands
  { [ "$kind" = soname ] && [ -n "${interp[$name]:-}" ]; } && return 0
  lookup "$root" "$kind" "$name" >/dev/null && return 0
  pkg_depends "$pkg"
  read -ra cands <<<"$pkg ${depends[$pkg]}"
  # Packages already unpacked first, then the others in order, so that fewer are downloaded.
  for p in "${cands[@]}"; do
    if [ -n "${unpacked[$p]:-}" ] && found=$(lookup "$work/pkg/$p" "$kind" "$name"); then add_elf "$p" "$found"; return 0; fi
  done
  for p in "${cands[@]}"; do
    unpack_pkg "$p" || continue # a virtual package, an alternative not in the archive
    if found=$(lookup "$work/pkg/$p" "$kind" "$name"); then add_elf "$p" "$found"; return 0; fi
  done
  die "$name, which $file needs, is neither in the image nor in $pkg or the packages it depends on"
}
unpack_pkg ipmitool || die "cannot fetch ipmitool (run 'apt-get update' first)"
add_elf ipmitool usr/bin/ipmitool
# The image's own loader must resolve it inside the image, symbol versions included: the C
# library there may be the host's (stoker's), not the one the packages were built against.
ld_so=$root/$(readelf -lW "$root/usr/bin/ipmitool" | sed -n 's/.*Requesting program interpreter: \/\(.*\)\]$/\1/p')
ld_list=$("$ld_so" --library-path "$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu" \
  --list "$root/usr/bin/ipmitool" 2>&1) || die "ipmitool does not load in the image: $ld_list"
outside=$(grep '=>' <<<"$ld_list" | grep -vF "=> $root/" || true)
[ -z "$outside" ] || die "ipmitool's libraries do not all resolve inside the image: $outside"

cat > "$root/etc/udhcpc/default.script" <<'EOF'
#!/bin/sh
# udhcpc hook: configure the interface; /init waits for /run/lease.
case "$1" in
  deconfig) ip -4 addr flush dev "$interface"; ip link set "$interface" up ;;
  bound|renew)
    ip -4 addr flush dev "$interface"
    ip addr add "$ip/${mask:-24}" dev "$interface"
    for r in $router; do ip route add default via "$r" dev "$interface" 2>/dev/null; break; done
    echo "$interface $ip" > /run/lease ;;
esac
exit 0
EOF
chmod 755 "$root/etc/udhcpc/default.script"

cat > "$root/init" <<'EOF'
#!/bin/sh
# stoker bootstrap /init: bring up the boot NIC, then hand over to `stoker agent`, which reads
# the rest of the kernel command line itself (images/README.md).
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /tmp
[ -d /sys/firmware/efi ] && mount -t efivarfs efivarfs /sys/firmware/efi/efivars 2>/dev/null
exec </dev/console >/dev/console 2>&1
POWEROFF=1; BOOTIF=
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    stoker.poweroff=*) POWEROFF=${arg#*=} ;;
    stoker.debug=1) set -x ;;
    BOOTIF=*) BOOTIF=${arg#*=} ;;
  esac
done
up() { cut -d' ' -f1 /proc/uptime; }
finish() { # only on failure: keep a shell (stoker.poweroff=0) or power off
  if [ "$POWEROFF" = 0 ]; then echo "stoker: stoker.poweroff=0: shell on the console"; setsid cttyhack sh; fi
  sync; poweroff -f; sleep 10
}
echo "stoker: bootstrap init at uptime=$(up)"
# Drivers for the devices this machine has, as udev picks them: each device's modalias matched
# against modules.alias. Again after each pass for the buses the new drivers bring (virtio,
# SCSI), until nothing more loads. Loading every driver of the image (36 modules) cost ~1.5 s
# under QEMU's TCG. sd_mod as soon as there is a SCSI host (AHCI, SAS, virtio-scsi): its disks
# appear after link training, often later than this. ipmi_devintf (/dev/ipmi0, which the agent's
# ipmitool opens) has no device alias: the kernel's softdep, which busybox modprobe does not
# read, loads it after ipmi_msghandler, the dependency of ipmi_si.
nmods() { wc -l < /proc/modules; }
for _ in 1 2 3 4; do
  before=$(nmods)
  modprobe -a -q $(cat /sys/bus/*/devices/*/modalias 2>/dev/null | sort -u) 2>/dev/null
  [ "$(nmods)" = "$before" ] && break
done
[ -n "$(ls /sys/class/scsi_host 2>/dev/null)" ] && modprobe -q sd_mod
grep -q '^ipmi_msghandler ' /proc/modules && modprobe -q ipmi_devintf
echo "stoker: $(nmods) modules loaded at uptime=$(up)"
ip link set lo up
want=; [ -n "$BOOTIF" ] && want=$(echo "${BOOTIF#01-}" | tr '-' ':' | tr 'A-F' 'a-f')
nics=
for _ in $(seq 50); do
  nics=$(for d in /sys/class/net/*; do n=${d##*/}; [ -e "$d/device" ] || continue
           { [ -z "$want" ] || [ "$(cat "$d/address")" = "$want" ]; } && echo "$n"; done)
  [ -n "$nics" ] && break; sleep 0.1
done
[ -n "$nics" ] || { echo "STOKER-AGENT-FAIL reason=no-nic bootif=$BOOTIF"; finish; }
for n in $nics; do
  ip link set "$n" up
  # Carrier comes a few ms after "up" on virtio, seconds on some NICs: poll finely (up to 10 s).
  for _ in $(seq 500); do
    c=; read -r c < "/sys/class/net/$n/carrier" 2>/dev/null; [ "$c" = 1 ] && break; sleep 0.02
  done
  udhcpc -i "$n" -s /etc/udhcpc/default.script -n -q -t 10 -T 1 -A 1 && [ -s /run/lease ] && break
done
[ -s /run/lease ] || { echo "STOKER-AGENT-FAIL reason=no-dhcp-lease"; finish; }
echo "stoker: lease $(cat /run/lease) at uptime=$(up)"
# The agent prints "STOKER-AGENT ok node=N ..." once the master knows the node, then
# stays up refreshing it and asking for deploy steps until it reboots to disk.
/bin/stoker agent --deploy --heartbeat 60
echo "STOKER-AGENT-FAIL rc=$? uptime=$(up); rebooting in 30 s to try again"
[ "$POWEROFF" = 0 ] && finish
sleep 30; reboot -f
EOF
chmod 755 "$root/init"

# ---- pack -------------------------------------------------------------------------------------
install -m 0644 "$vmlinuz" "$OUT/vmlinuz"
# lz4 when there is one (package lz4), else zstd, else gzip. Unpacking the ~20 MB initramfs is
# CPU work the node does before /init, slow wherever the CPU is (QEMU's TCG: the kernel's uptime
# at /init was 3.2 s with lz4 against 4.2 s with zstd and more with gzip); lz4's bigger file
# (+40% over zstd) costs less on the wire than that. The kernel wants lz4's legacy frame (-l).
# STOKER_INITRD_COMPRESS=lz4|zstd|gzip chooses.
compress=${STOKER_INITRD_COMPRESS:-$(if command -v lz4 >/dev/null; then echo lz4
  elif command -v zstd >/dev/null; then echo zstd; else echo gzip; fi)}
case $compress in
  lz4) pack() { lz4 -l -12 -q -c; } ;;
  zstd) pack() { zstd -q -19 -T0 -c; } ;;
  gzip) pack() { gzip -9 -n; } ;;
  *) echo "build-bootstrap: STOKER_INITRD_COMPRESS must be lz4, zstd or gzip" >&2; exit 2 ;;
esac
(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) | pack > "$OUT/initrd.img"
{
  echo "kernel: $KERNEL_PKG ($kver)"
  echo "initramfs: $compress, $(stat -c %s "$OUT/initrd.img") bytes"
  echo "busybox: $(basename "$bdeb")"
  echo "ipxe: $(basename "$ideb") -> $TFTP: undionly.kpxe ipxe.efi snponly.efi"
  echo "stoker: $("$STOKER" --version) ($(grep -q '=>' <<<"$libs" && echo dynamic || echo static))"
  echo "modules: ${#order[@]} (drivers loaded at boot by device modalias, filesystems when mounted)"
  echo "ipmitool: ${#added[@]} files from ${ipmi_debs[*]}"
  echo "vmlinuz: $(stat -c %s "$OUT/vmlinuz") bytes sha256 $(sha256sum < "$OUT/vmlinuz" | cut -d' ' -f1)"
  echo "initrd.img: $(stat -c %s "$OUT/initrd.img") bytes sha256 $(sha256sum < "$OUT/initrd.img" | cut -d' ' -f1)"
} > "$OUT/manifest.txt"
cat "$OUT/manifest.txt"
