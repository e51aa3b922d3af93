#!/usr/bin/env bash
# End to end with a VM: a disk-less QEMU VM PXE-boots from `stoker serve` (its own DHCP, TFTP
# and HTTP, bound inside the PXE lab's network namespace), loads the bootstrap image built by
# images/build-bootstrap.sh, and its agent's hello makes the node appear in stoker's database.
# The lab's own dnsmasq chain runs beside it in a second lab namespace (pxelabd), and the BIOS
# boots alternate between the two chains, so both see the same host load (this machine is
# shared; a burst of load during one chain's boots used to skew the ratio by 10% or more).
#
# usage: .ci/pxe-vm.sh STOKER_BIN SHARED_DIR [RUNS] [BOOTSTRAP_BIN]
#   BOOTSTRAP_BIN: the binary packed into the bootstrap image (default STOKER_BIN); CI passes
#   the `bootstrap` profile's smaller build.
# Needs root and ../shared/tools/pxe-lab; otherwise it says why it skipped and exits 0.
# Traffic stays inside the lab's namespaces; only processes started here are stopped, by PID.
set -euo pipefail
bin=$(readlink -f "$1"); shared=$2; runs=${3:-3}; agent_bin=$(readlink -f "${4:-$1}")
root=$(cd "$(dirname "$0")/.." && pwd)
lab=$shared/tools/pxe-lab
skip() { echo "pxe-vm: skipped: $*"; exit 0; }
[ -d "$lab" ] || skip "$lab not found"
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces and a tap)"
need=()
for t in qemu-system-x86_64 dnsmasq cpio lz4; do command -v "$t" >/dev/null || need+=("$t"); done
ls /usr/lib/ipxe/qemu/efi-virtio.rom >/dev/null 2>&1 || need+=(ipxe-qemu)
if [ ${#need[@]} -gt 0 ]; then
  echo "pxe-vm: installing qemu-system-x86 ipxe-qemu dnsmasq-base cpio lz4 ovmf (missing: ${need[*]})"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      qemu-system-x86 ipxe-qemu dnsmasq-base cpio lz4 ovmf >/dev/null; } || skip "cannot install QEMU here"
fi

work=$(mktemp -d /tmp/stoker-pxe.XXXXXX)
cache=${STOKER_DEB_CACHE:-/var/cache/stoker-ci/debs}
mkdir -p "$cache"
pid=
# The dnsmasq chain's lab: its own namespaces, same addresses, nothing shared with stoker's.
dns() { PXELAB_NS=pxelabd PXELAB_CACHE=$cache "$@"; }
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; fi
  dns "$lab/serve-dnsmasq.sh" stop "$work/dnsmasq" >/dev/null 2>&1 || true
  "$lab/lab-down.sh" >/dev/null 2>&1 || true
  dns "$lab/lab-down.sh" >/dev/null 2>&1 || true
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

echo "pxe-vm: building the bootstrap image"
STOKER_DEB_CACHE=$cache "$root/images/build-bootstrap.sh" --stoker "$agent_bin" \
  --out "$work/data/images" --tftp "$work/data/tftp" >"$work/build.log" 2>&1 \
  || { tail -20 "$work/build.log"; echo "pxe-vm: image build failed"; exit 1; }
grep -E '^(initramfs|stoker):' "$work/build.log" | sed 's/^/pxe-vm: image: /'
"$lab/lab-down.sh" >/dev/null 2>&1 || true
"$lab/lab-up.sh" >"$work/lab.log" 2>&1 || { cat "$work/lab.log"; exit 1; }
# The lab's dnsmasq chain: its own bootstrap (busybox, a wget as the agent) served by dnsmasq
# and python's http.server.
dnsmasq_ok=1
{ dns "$lab/build-bootstrap.sh" "$work/dnsmasq" && dns "$lab/lab-down.sh" && dns "$lab/lab-up.sh" \
    && dns "$lab/serve-dnsmasq.sh" start "$work/dnsmasq"; } >"$work/dnsmasq.log" 2>&1 \
  || { tail -10 "$work/dnsmasq.log"; echo "pxe-vm: dnsmasq baseline unavailable (not stoker's fault; no ratio)"; dnsmasq_ok=0; }

# `ip netns exec` execs stoker itself, so $! is stoker's PID.
# Not loopback, so HTTPS (a self-signed certificate) on 8443, and iPXE's files in clear on 8080.
ip netns exec pxelab "$bin" serve --data-dir "$work/data" --http-listen 10.77.0.1:8443 \
  --http-boot-listen 10.77.0.1:8080 \
  --dhcp-enabled true --dhcp-server-ip 10.77.0.1 \
  --dhcp-subnets '10.77.0.0/24 pool=10.77.0.100-10.77.0.199 router=10.77.0.1 lease=600' \
  --tftp-enabled true >"$work/stoker.log" 2>&1 &
pid=$!
for _ in $(seq 50); do
  [ -s "$work/data/tls/master.crt" ] && ip netns exec pxelab curl -fsS -o /dev/null \
    --cacert "$work/data/tls/master.crt" https://10.77.0.1:8443/healthz 2>/dev/null && break
  sleep 0.1
done
# The API needs a token: sign in as the first-start admin (its password is in the data dir).
token=$(ip netns exec pxelab curl -fsS --cacert "$work/data/tls/master.crt" -X POST https://10.77.0.1:8443/api/v1/login \
  -H 'content-type: application/json' \
  -d "{\"username\":\"admin\",\"password\":\"$(cat "$work/data/initial-admin-password")\"}" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])') \
  || { tail -20 "$work/stoker.log"; echo "pxe-vm: cannot sign in as admin"; exit 1; }
api() { ip netns exec pxelab curl -fsS --cacert "$work/data/tls/master.crt" -H "Authorization: Bearer $token" "https://10.77.0.1:8443$1"; }
echo "pxe-vm: stoker serves HTTPS with $(grep -o 'fingerprint=sha256:[0-9a-f]*' "$work/stoker.log" | head -1); iPXE's files in clear"

fail=0; times=()
boot() { # name mac [boot-vm options]
  local name=$1 mac=$2; shift 2
  local log="$work/vm-$name.log" out
  if out=$("$lab/boot-vm.sh" --log "$log" --mac "$mac" --marker STOKER-AGENT --fail STOKER-AGENT-FAIL \
        --timeout 120 "$@" 2>&1); then
    local t
    t=$(sed -n 's/.*OK marker after \([0-9.]*\)s.*/\1/p' <<<"$out")
    if api /api/v1/nodes | python3 -c '
import json, sys
mac = sys.argv[1]
nodes = json.load(sys.stdin)
nodes = nodes.get("nodes", nodes) if isinstance(nodes, dict) else nodes
found = [n for n in nodes if n.get("mac") == mac]
assert found, f"no node with {mac}"
inv = found[0].get("inventory") or {}
assert inv["memory_bytes"] > 0 and inv["cpu"], f"no inventory: {found[0]}"
assert any(i["mac"] == mac for i in inv["interfaces"]), f"inventory lacks {mac}"
' "$mac"; then
      echo "pxe-vm: $name: node $mac discovered ${t}s after VM start"
      grep -E '^boot-vm: +[0-9.]+s ' <<<"$out" | sed "s/^boot-vm:/pxe-vm:   $name/" || true
      # /init's own milestones, on the guest's clock (kernel uptime).
      echo "pxe-vm:   $name guest: $(tr -d '\r' <"$log" | grep -ao 'stoker: [a-z0-9 .]*at uptime=[0-9.]*' \
        | sed 's/^stoker: //; s/ at uptime=/ /; s/bootstrap init/init/; s/ modules loaded/ modules/; s/lease [^ ]* [^ ]*/lease/' | paste -sd, - | sed 's/,/, /g')"
      [ "$name" = "${name#bios}" ] || times+=("$t")
    else
      echo "pxe-vm: $name: the VM ran its agent but node $mac is not in the database"; fail=1
    fi
  else
    echo "$out" | tail -15; echo "pxe-vm: $name: FAILED"; tail -20 "$log" 2>/dev/null; fail=1
  fi
}

base=()
baseline() { # run
  local out t
  if out=$(dns "$lab/boot-vm.sh" --log "$work/dnsmasq-$1.log" --timeout 120 2>&1); then
    t=$(sed -n 's/.*OK marker after \([0-9.]*\)s.*/\1/p' <<<"$out")
    echo "pxe-vm: dnsmasq-$1: marker ${t}s after VM start"
    grep -E '^boot-vm: +[0-9.]+s ' <<<"$out" | sed "s/^boot-vm:/pxe-vm:   dnsmasq-$1/" || true
    base+=("$t")
  else
    echo "$out" | tail -5; echo "pxe-vm: dnsmasq-$1: failed (not stoker's fault)"
  fi
}
for i in $(seq "$runs"); do
  boot "bios-$i" "$(printf '52:54:00:77:01:%02x' "$i")"
  [ "$dnsmasq_ok" = 0 ] || baseline "$i"
done
if ls /usr/share/OVMF/OVMF_CODE*.fd >/dev/null 2>&1; then
  boot uefi-ipxe-rom 52:54:00:77:02:01 --firmware uefi
  # OVMF's own PXE client: TFTP of ipxe.efi (tsize probe, abort, windowsize 4), then the loop-break.
  boot uefi-ovmf-pxe 52:54:00:77:02:02 --firmware uefi --rom none
else
  echo "pxe-vm: UEFI boots skipped: OVMF not installed (apt-get install ovmf)"
fi
echo "pxe-vm: stoker counters: $(api /api/v1/pxe | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["dhcp"]["counters"], d["tftp"]["counters"])')"
kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{if(NR==0){print "n/a"} else if(NR%2){print a[(NR+1)/2]} else {printf "%.2f\n",(a[NR/2]+a[NR/2+1])/2}}'; }
ms=$(median "${times[@]}"); mb=$(median "${base[@]}")
ratio=n/a
[ "$ms" != n/a ] && [ "$mb" != n/a ] && ratio=$(awk -v a="$ms" -v b="$mb" 'BEGIN{printf "%.2f", a/b}')
echo "pxe-vm: BIOS VM start -> node discovered: stoker median ${ms}s (${times[*]:-}) vs dnsmasq chain to marker median ${mb}s (${base[*]:-}), boots alternating; ratio ${ratio}"
exit $fail
