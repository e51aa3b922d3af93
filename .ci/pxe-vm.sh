#!/usr/bin/env bash
# End to end with a VM: a disk-less QEMU VM PXE-boots from `stoker serve` (its own DHCP, TFTP
# and HTTP, bound inside the PXE lab's network namespace), loads the bootstrap image built by
# images/build-bootstrap.sh, and its agent's hello makes the node appear in stoker's database.
# The lab's own dnsmasq chain runs beside it in a second lab namespace (pxelabd), and the BIOS
# boots alternate between the two chains, so both see the same host load (this machine is
# shared; a burst of load during one chain's boots used to skew the ratio by 10% or more).
#
# The image must carry what the agent's BMC probe needs (ipmitool, every library it needs as the
# loader finds them in the image, the IPMI drivers), and one more BIOS VM, outside the ratio, has
# a BMC: QEMU's KCS interface backed by OpenIPMI's ipmi_sim, whose LAN channel says 10.77.5.5;
# its agent's hello must leave the node with the discovered BMC ipmi 10.77.5.5.
#
# usage: .ci/pxe-vm.sh STOKER_BIN SHARED_DIR [RUNS] [BOOTSTRAP_BIN]
#   BOOTSTRAP_BIN: the binary packed into the bootstrap image (default STOKER_BIN); CI passes
#   the tests' binary, stripped.
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
for t in qemu-system-x86_64 dnsmasq cpio lz4 ipmi_sim; do command -v "$t" >/dev/null || need+=("$t"); done
ls /usr/lib/ipxe/qemu/efi-virtio.rom >/dev/null 2>&1 || need+=(ipxe-qemu)
if [ ${#need[@]} -gt 0 ]; then
  echo "pxe-vm: installing qemu-system-x86 ipxe-qemu dnsmasq-base cpio lz4 ovmf openipmi (missing: ${need[*]})"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      qemu-system-x86 ipxe-qemu dnsmasq-base cpio lz4 ovmf openipmi >/dev/null; } || skip "cannot install QEMU here"
fi

work=$(mktemp -d /tmp/stoker-pxe.XXXXXX)
cache=${STOKER_DEB_CACHE:-/var/cache/stoker-ci/debs}
mkdir -p "$cache"
pid=; sim=
# The dnsmasq chain's lab: its own namespaces, same addresses, nothing shared with stoker's.
dns() { PXELAB_NS=pxelabd PXELAB_CACHE=$cache "$@"; }
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; fi
  if [ -n "$sim" ] && kill -0 "$sim" 2>/dev/null; then kill -TERM "$sim"; wait "$sim" 2>/dev/null || true; fi
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
grep -E '^(initramfs|stoker|ipmitool):' "$work/build.log" | sed 's/^/pxe-vm: image: /'

# What the agent's BMC probe needs in the initramfs, as the node will find it: ipmitool; each
# program interpreter and NEEDED soname of it and of the libraries found, recursively, as a file
# in the directories the loader searches without an ld.so.cache (a symbolic link is refused: an
# absolute one would be checked against this host), the interpreter's own soname being the
# loader itself; the three IPMI drivers in modules.dep; /init loading ipmi_devintf; and ipmitool
# running there (chroot). Prints what is missing.
image_ipmi() { # DIR: the unpacked initramfs
  local r=$1 f n d hit todo=(usr/bin/ipmitool)
  local -A seen=() interp=()
  while [ ${#todo[@]} -gt 0 ]; do
    f=${todo[0]}; todo=("${todo[@]:1}")
    [ -z "${seen[$f]:-}" ] || continue
    seen[$f]=1
    if [ -L "$r/$f" ] || [ ! -f "$r/$f" ]; then echo "$f: not a file in the image"; continue; fi
    n=$(readelf -lW "$r/$f" | sed -n 's/.*Requesting program interpreter: \/\(.*\)\]$/\1/p')
    [ -z "$n" ] || { todo+=("$n"); interp[${n##*/}]=1; }
    for n in $(readelf -dW "$r/$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'); do
      [ -z "${interp[$n]:-}" ] || continue
      hit=
      for d in lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu lib usr/lib; do
        if [ -e "$r/$d/$n" ] || [ -L "$r/$d/$n" ]; then hit=$d/$n; break; fi
      done
      if [ -n "$hit" ]; then todo+=("$hit"); else echo "$n (NEEDED by $f): in no library directory of the image"; fi
    done
  done
  for n in ipmi_msghandler ipmi_devintf ipmi_si; do
    grep -q "/$n\.ko:" "$r"/lib/modules/*/modules.dep || echo "module $n: not in modules.dep"
  done
  grep -q 'modprobe -q ipmi_devintf' "$r/init" || echo "/init: does not load ipmi_devintf"
  chroot "$r" /usr/bin/ipmitool -V >/dev/null 2>&1 || echo "usr/bin/ipmitool: does not run in the image (chroot)"
  echo "${#seen[@]}" >"$r.files"
}
fail=0
mkdir "$work/initrd"
case $(sed -n 's/^initramfs: \([a-z0-9]*\),.*/\1/p' "$work/data/images/manifest.txt") in
  lz4) unz=(lz4 -dc) ;; zstd) unz=(zstd -dcq) ;; *) unz=(gzip -dc) ;;
esac
"${unz[@]}" "$work/data/images/initrd.img" | (cd "$work/initrd" && cpio -idm --quiet)
missing=$(image_ipmi "$work/initrd")
if [ -z "$missing" ]; then
  echo "pxe-vm: image: ipmitool and the $(($(cat "$work/initrd.files") - 1)) files it needs resolve inside the image," \
    "it runs there; ipmi_msghandler ipmi_devintf ipmi_si in; ok"
else
  echo "pxe-vm: image: FAILED: what the agent's BMC probe needs:"
  while IFS= read -r line; do echo "pxe-vm:   $line"; done <<<"$missing"
  fail=1
fi
rm -rf "$work/initrd" "$work/initrd.files"
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

times=()
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

# A VM with a BMC, outside the ratio: QEMU's KCS interface (ACPI IPI0001, SMBIOS type 38, which
# /init's modalias pass loads ipmi_si for) backed by OpenIPMI's ipmi_sim over QEMU's external
# BMC protocol, on the lab namespace's loopback. ipmi_sim answers the LAN configuration
# parameters of channel 1 from its lan_config_program (without one it says 0.0.0.0), here a
# script saying 10.77.5.5, static, and logging each call. The agent's `ipmitool lan print 1`
# through /dev/ipmi0 reads it and its hello reports it; the master must keep it as the node's
# discovered BMC. Nothing answers on 10.77.5.5: only the address is checked.
ipmi_boot() {
  local d=$work/ipmi mac=52:54:00:77:03:01 bmc_ip=10.77.5.5 port=9002 fail_before=$fail id bmc verdict calls
  mkdir -p "$d/state"
  cat >"$d/lancontrol" <<'EOF'
#!/bin/sh
# ipmi_sim's lan_config_program: `lancontrol IP get PARM...` prints PARM:VALUE for each; set and
# check are accepted and change nothing.
echo "$*" >>"$(dirname "$0")/calls.log"
ip=$1; op=$2; shift 2
[ "$op" = get ] || exit 0
for p in "$@"; do
  case $p in
    ip_addr) echo "ip_addr:$ip" ;;
    ip_addr_src) echo "ip_addr_src:static" ;;
    subnet_mask) echo "subnet_mask:255.255.255.0" ;;
    mac_addr) echo "mac_addr:52:54:00:77:05:05" ;;
    default_gw_mac_addr|backup_gw_mac_addr) echo "$p:00:00:00:00:00:00" ;;
    *) echo "$p:0.0.0.0" ;;
  esac
done
EOF
  chmod 755 "$d/lancontrol"
  # ipmi_lan(5): LAN channel 1 (its UDP port on the namespace's loopback, unused here), the
  # system interface as QEMU's KCS over TCP.
  cat >"$d/lan.conf" <<EOF
name "stoker-pxe-vm"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 623
    priv_limit admin
    lan_config_program "$d/lancontrol $bmc_ip"
  endlan
  serial kcs 127.0.0.1 $port codec VM
EOF
  # ipmi_sim_cmd(5): the BMC at IPMB 0x20 (without it ipmi_sim exits at once).
  printf '%s\n' 'mc_setbmc 0x20' 'mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr' \
    'mc_enable 0x20' >"$d/bmc.emu"
  # `ip netns exec` execs ipmi_sim, so $! is its PID. -n: no console; -s: state here, not in
  # /var/lib/ipmi_sim.
  ip netns exec pxelab ipmi_sim -n -c "$d/lan.conf" -f "$d/bmc.emu" -s "$d/state" >"$d/ipmi_sim.log" 2>&1 &
  sim=$!
  for _ in $(seq 50); do
    ip netns exec pxelab ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
    kill -0 "$sim" 2>/dev/null || break
    sleep 0.1
  done
  if ! ip netns exec pxelab ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then
    tail -5 "$d/ipmi_sim.log"; echo "pxe-vm: ipmi-bios: FAILED: ipmi_sim does not listen on 127.0.0.1:$port"; fail=1; return
  fi
  fail=0
  # reconnect=1: QEMU then connects the chardev from its main loop, once the machine is built.
  # Connected at once, while ipmi-bmc-extern is being realised, QEMU 7.2 (Debian 12) segfaults
  # (object_get_class under qemu_chr_fe_set_handlers).
  boot ipmi-bios "$mac" -- -chardev "socket,id=ipmi0,host=127.0.0.1,port=$port,reconnect=1" \
    -device ipmi-bmc-extern,id=bmc0,chardev=ipmi0 -device isa-ipmi-kcs,bmc=bmc0
  if [ "$fail" = 0 ]; then
    # boot has checked that the node is there.
    id=$(api /api/v1/nodes | python3 -c '
import json, sys
nodes = json.load(sys.stdin)
nodes = nodes.get("nodes", nodes) if isinstance(nodes, dict) else nodes
print(next((n["id"] for n in nodes if n.get("mac") == sys.argv[1]), ""))' "$mac" || true)
    if bmc=$(api "/api/v1/nodes/$id/bmc" 2>&1); then
      verdict=$(python3 -c '
import json, sys
b = json.loads(sys.argv[1])
got = (b.get("driver"), b.get("address"), b.get("source"))
print("ok" if got == ("ipmi", sys.argv[2], "discovered") else f"got {got}")' "$bmc" "$bmc_ip")
    else
      verdict="GET /api/v1/nodes/$id/bmc: $bmc"
    fi
    if [ "$verdict" = ok ]; then
      calls=$(grep -sc ' get ' "$d/calls.log" || true)
      echo "pxe-vm: ipmi-bios: node $id's BMC: driver=ipmi address=$bmc_ip source=discovered, read by its agent" \
        "through KCS (ipmi_sim's lan_config_program answered ${calls:-0} parameters)"
    else
      echo "pxe-vm: ipmi-bios: FAILED: node $id's BMC is not the discovered ipmi $bmc_ip: $verdict"; fail=1
    fi
  fi
  fail=$((fail | fail_before))
  kill -TERM "$sim"; wait "$sim" 2>/dev/null || true; sim=
}
ipmi_boot
echo "pxe-vm: stoker counters: $(api /api/v1/pxe | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["dhcp"]["counters"], d["tftp"]["counters"])')"
kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{if(NR==0){print "n/a"} else if(NR%2){print a[(NR+1)/2]} else {printf "%.2f\n",(a[NR/2]+a[NR/2+1])/2}}'; }
ms=$(median "${times[@]}"); mb=$(median "${base[@]}")
ratio=n/a
[ "$ms" != n/a ] && [ "$mb" != n/a ] && ratio=$(awk -v a="$ms" -v b="$mb" 'BEGIN{printf "%.2f", a/b}')
echo "pxe-vm: BIOS VM start -> node discovered: stoker median ${ms}s (${times[*]:-}) vs dnsmasq chain to marker median ${mb}s (${base[*]:-}), boots alternating; ratio ${ratio}"
exit $fail
