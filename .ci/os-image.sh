#!/usr/bin/env bash
# The OS image stoker deploys, built and booted: images/build-os-image.sh builds both variants
# (base and cloud-init; Debian packages cached in $STOKER_DEB_CACHE), then each boots under QEMU
# (TCG, SeaBIOS, the image on virtio as the lab's VMs have it, copy-on-write so the image stays as
# built) and must print STOKER-OS-BOOTED on its serial console within 240 s. The cloud-init image
# boots with a NoCloud seed (a FAT filesystem labelled CIDATA) whose meta-data names the host
# ci-node and whose user-data prints STOKER-CLOUD-INIT-DONE: the marker must say host=ci-node
# (cloud-init read the seed before the system came up), the user-data must have run, and the NIC
# must have a DHCP lease (systemd-networkd's configuration), which the user-data prints. The NIC is on QEMU's user network
# with restrict=on: its DHCP server answers, nothing leaves QEMU.
#
# usage: .ci/os-image.sh [RUNS]    boots per variant (default 1; 0 only builds); prints each
#                                 boot's times
# OS_IMAGES_OUT=DIR: also copy the two images, as built, into DIR (CI hands the base one to
# .ci/pxe-deploy.sh as STOKER_OS_IMAGE, so it is built once).
# OS_IMAGES_IN=DIR: boot the two images in DIR instead of building them (CI builds them with
# OS_IMAGES_OUT and RUNS 0 while the tests compile, and its VM lane only boots them).
# OS_IMAGE_BOOT="VARIANT...": boot only these (default "base cloud-init"); CI boots only the
# cloud-init one here when the Redfish deploy (.ci/pxe-deploy.sh) will boot the base one from a
# VM's disk, with its agent running the OS's tasks.
# Needs root; installs mmdebstrap, fdisk, qemu-system-x86, dosfstools and mtools when missing.
# Otherwise it says why it skipped and exits 0. Only the QEMU processes started here are stopped,
# by PID. KEEP=1 keeps the work directory (images, console logs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-1}
# The limits only tell a hung boot from a slow one: TCG emulation on a loaded 2-core machine
# (CI boots these beside the real clients' lane) has taken 40 s for the base image and more
# than 90 s for the cloud-init one (its first boot generates SSH host keys in emulated code).
# Each boot's times are printed either way.
limit=240         # seconds from QEMU's start to STOKER-OS-BOOTED
ci_limit=300      # seconds from QEMU's start to the cloud-init user-data's line
skip() { echo "os-image: skipped: $*"; exit 0; }
fail() { echo "os-image: FAILED: $*"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root (mmdebstrap --mode=root)"
need=()
for t in mmdebstrap sfdisk qemu-system-x86_64 mkfs.vfat mcopy; do command -v "$t" >/dev/null || need+=("$t"); done
if [ ${#need[@]} -gt 0 ]; then
  echo "os-image: installing mmdebstrap fdisk qemu-system-x86 dosfstools mtools (missing: ${need[*]})"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      mmdebstrap fdisk qemu-system-x86 dosfstools mtools >/dev/null; } || skip "cannot install the tools here"
fi

work=$(mktemp -d /tmp/stoker-os-image-ci.XXXXXX)
cache=${STOKER_DEB_CACHE:-/var/cache/stoker-ci/debs}
mkdir -p "$cache"
vm=
cleanup() {
  if [ -n "$vm" ] && kill -0 "$vm" 2>/dev/null; then kill -TERM "$vm"; wait "$vm" 2>/dev/null || true; fi
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

images=${OS_IMAGES_IN:-$work/images}
for variant in base cloud-init; do
  if [ -n "${OS_IMAGES_IN:-}" ]; then
    [ -s "$images/stoker-os-$variant.img" ] || fail "OS_IMAGES_IN: no $images/stoker-os-$variant.img"
    echo "os-image: $images/stoker-os-$variant.img (built before this step)"
    continue
  fi
  flag=(); [ "$variant" = cloud-init ] && flag=(--cloud-init)
  t0=$(date +%s)
  STOKER_DEB_CACHE=$cache "$root/images/build-os-image.sh" --out "$work/images" "${flag[@]}" \
    >"$work/build-$variant.log" 2>&1 || { tail -30 "$work/build-$variant.log"; fail "building the $variant image"; }
  line=$(grep '^os-image: ' "$work/build-$variant.log" | head -n1)
  echo "$line (built in $(( $(date +%s) - t0 )) s)"
  if [ -n "${OS_IMAGES_OUT:-}" ]; then
    mkdir -p "$OS_IMAGES_OUT"
    cp --sparse=always "$work/images/stoker-os-$variant.img" "$OS_IMAGES_OUT/.stoker-os-$variant.img.tmp"
    mv "$OS_IMAGES_OUT/.stoker-os-$variant.img.tmp" "$OS_IMAGES_OUT/stoker-os-$variant.img"
  fi
done
[ "$runs" -gt 0 ] || { echo "os-image: built, not booted (RUNS 0)"; exit 0; }

# The cloud-init image's NoCloud seed.
mkdir -p "$work/seed"
printf 'instance-id: stoker-os-check\nlocal-hostname: ci-node\n' >"$work/seed/meta-data"
# The user-data waits (up to 60 s) for the NIC's lease before it says so: cloud-init's own
# network table is printed when systemd-networkd-wait-online has returned, which on a slow
# machine can be before the lease (a CI run saw the table without 10.0.2.x).
cat >"$work/seed/user-data" <<'EOF'
#cloud-config
runcmd:
  - |
    for i in $(seq 60); do ip -4 -o addr show scope global | grep -q inet && break; sleep 1; done
    echo "STOKER-CLOUD-INIT-DONE host=$(hostname) uptime=$(cut -d' ' -f1 /proc/uptime) ipv4=$(ip -4 -o addr show scope global | awk '{print $4; exit}')" > /dev/console
EOF
mkfs.vfat -n CIDATA -C "$work/seed.img" 2048 >/dev/null
mcopy -i "$work/seed.img" "$work/seed/meta-data" "$work/seed/user-data" ::

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# boot VARIANT N: boot the image once; prints the times, fails the script on a missed marker.
boot() {
  local variant=$1 n=$2 img=$images/stoker-os-$1.img log=$work/console-$1-$2.log extra=() t0 t_mark='' t_ci='' up ci_part=''
  [ "$variant" = cloud-init ] && extra=(-drive "file=$work/seed.img,format=raw,if=virtio,readonly=on")
  : >"$log"
  t0=$(now)
  qemu-system-x86_64 -name "stoker-os-$variant" -M pc,graphics=off -accel tcg -m 512 -smp 1 \
    -nodefaults -display none -vga none -no-reboot -monitor none \
    -chardev "file,id=ser0,path=$log" -serial chardev:ser0 \
    -drive "file=$img,format=raw,if=virtio,snapshot=on" "${extra[@]}" \
    -netdev user,id=n0,restrict=on -device virtio-net-pci,netdev=n0 2>"$work/qemu-$variant-$n.err" &
  vm=$!
  while :; do
    if [ -z "$t_mark" ] && grep -aq 'STOKER-OS-BOOTED' "$log"; then t_mark=$(since "$t0"); fi
    if [ -z "$t_ci" ] && grep -aq 'STOKER-CLOUD-INIT-DONE' "$log"; then t_ci=$(since "$t0"); fi
    [ -n "$t_mark" ] && { [ "$variant" = base ] || [ -n "$t_ci" ]; } && break
    grep -aqE 'Kernel panic|emergency mode|Give root password' "$log" && break
    kill -0 "$vm" 2>/dev/null || break
    [ -z "$t_mark" ] && [ "$(since "$t0" | cut -d. -f1)" -ge "$limit" ] && break
    [ "$(since "$t0" | cut -d. -f1)" -ge "$ci_limit" ] && break
    sleep 0.2
  done
  kill -TERM "$vm" 2>/dev/null || true; wait "$vm" 2>/dev/null || true; vm=
  if [ -z "$t_mark" ]; then
    tr -d '\r' <"$log" | tail -25; cat "$work/qemu-$variant-$n.err"
    fail "$variant: no STOKER-OS-BOOTED on the console within $limit s"
  fi
  up=$(tr -d '\r' <"$log" | grep -ao 'STOKER-OS-BOOTED host=[^ ]* uptime=[0-9.]*' | head -n1)
  [ -z "$t_ci" ] || ci_part=", the seed's user-data ran after ${t_ci} s"
  echo "os-image: $variant boot $n: STOKER-OS-BOOTED after ${t_mark} s (${up#STOKER-OS-BOOTED })$ci_part"
  if [ "$variant" = cloud-init ]; then
    [ -n "$t_ci" ] || { tr -d '\r' <"$log" | grep -a cloud-init | tail -15; fail "cloud-init: the seed's user-data did not run within $ci_limit s"; }
    grep -aq 'STOKER-OS-BOOTED host=ci-node ' "$log" || fail "cloud-init: the marker does not name the seed's host: $up"
    tr -d '\r' <"$log" | grep -aqE 'STOKER-CLOUD-INIT-DONE .* ipv4=10\.0\.2\.[0-9]+/' || {
      tr -d '\r' <"$log" | grep -aE 'STOKER-CLOUD-INIT-DONE|ci-info: \| +[a-z0-9]+ +\|' | tail -8
      fail "cloud-init: the NIC had no DHCP lease within 60 s of the user-data's start (no 10.0.2.x)"
    }
  else
    grep -aq 'STOKER-OS-BOOTED host=stoker-os ' "$log" || fail "base: unexpected marker: $up"
  fi
}
booted=0
for variant in ${OS_IMAGE_BOOT:-base cloud-init}; do
  case $variant in base|cloud-init) ;; *) fail "OS_IMAGE_BOOT: no variant $variant (base, cloud-init)" ;; esac
  for n in $(seq "$runs"); do boot "$variant" "$n"; booted=$((booted + 1)); done
done
echo "os-image: $booted passed, 0 failed"
