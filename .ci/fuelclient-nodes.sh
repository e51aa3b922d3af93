#!/usr/bin/env bash
# The real python-fuelclient 11.0.0 against a fresh stoker for issue 16's nodes part: node list
# by environment, update (name, hostname), labels, ansible-inventory, disks download / upload /
# get-default, roles and tags per release and environment, release components, extensions,
# VMs configuration, spawn-vms's refusal, undiscover, and the old `fuel node --disk`.
# usage: fuelclient-nodes.sh BIN VENV      (VENV: a python-fuelclient 11.0.0 virtualenv)
# Prints one PASS/FAIL line per command and the totals; exits 1 on any FAIL.
set -uo pipefail
bin=$(realpath "$1")
venv=${2:-/tmp/fcvenv}
. "$(dirname "$0")/stoker-daemon.sh"
start_stoker "$bin" 18800 fuelclient-nodes
fuel_client_config
export PATH="$venv/bin:$PATH"

# A node as nailgun-agent registers one (POST /api/nodes).
register() {
  "$venv/bin/python" - "$port" "$1" <<'PY'
import json, sys, requests
port, mac = sys.argv[1], sys.argv[2]
iface = {"name": "eth0", "mac": mac, "ip": "10.20.0.9", "pxe": True, "state": "up"}
data = {"mac": mac, "status": "discover", "is_agent": True,
        "meta": {"system": {"manufacturer": "QEMU"}, "interfaces": [iface],
                 "cpu": {"total": 2, "real": 1, "spec": [{"frequency": 2400, "model": "QEMU"}] * 2},
                 "disks": [{"name": "vda", "model": None, "size": 107374182400,
                            "disk": "vda", "extra": [], "removable": "0"}],
                 "memory": {"total": 8589934592}}}
r = requests.post("http://127.0.0.1:%s/api/nodes" % port, data=json.dumps(data),
                  headers={"Content-Type": "application/json"}, timeout=10)
print(json.loads(r.text)["id"] if r.status_code in (200, 201) else "")
PY
}

pass=0 fail=0
# check EXPECT CMD...: run CMD, PASS when its exit status is EXPECT (0 or "fail") and, with
# GREP set, its output contains GREP.
check() {
  local want=$1; shift
  local out rc
  out=$("$@" 2>&1); rc=$?
  local ok=1
  if [ "$want" = 0 ] && [ $rc -ne 0 ]; then ok=0; fi
  if [ "$want" = fail ] && [ $rc -eq 0 ]; then ok=0; fi
  if [ -n "${GREP:-}" ] && ! grep -q -- "$GREP" <<<"$out"; then ok=0; fi
  if [ $ok = 1 ]; then pass=$((pass + 1)); echo "PASS  $*"
  else fail=$((fail + 1)); echo "FAIL  $* (exit $rc)"; echo "$out" | tail -5 | sed 's/^/      /'; fi
}

n1=$(register 52:54:00:aa:00:01); n2=$(register 52:54:00:aa:00:02); n3=$(register 52:54:00:aa:00:03)
rel=$(fuel2 release list -f value -c id | head -1)
fuel2 env create -r "$rel" -nst vlan envA >/dev/null 2>&1
env=$(fuel2 env list -f value -c id | head -1)
fuel2 env add nodes -e "$env" -n "$n1" -r controller >/dev/null 2>&1

GREP="$n1" check 0 fuel2 node list -e "$env"
GREP=ctrl-01 check 0 fuel2 node update "$n1" --hostname ctrl-01 --name first
check 0 fuel2 node label set -l rack=r1 -n "$n1"
GREP=rack check 0 fuel2 node label list -n "$n1"
check 0 fuel2 node label delete -l rack -n "$n1"
check 0 fuel2 node ansible-inventory -e "$env"
check fail fuel2 node update "$n1" --hostname bad_name
check 0 fuel2 node disks download "$n1" -f yaml -d "$work"
check 0 fuel2 node disks upload "$n1" -f yaml -d "$work"
check 0 fuel2 node disks get-default "$n1" -f yaml -d "$work/default"
GREP=controller check 0 fuel2 role list -r "$rel"
check 0 fuel2 role download -r "$rel" -n controller -f yaml -d "$work/roles"
src=$(find "$work/roles" -name '*.yaml' | head -1)
dir=$(dirname "$src")
sed -e 's/^name: controller/name: dbrole/' "$src" >"$dir/dbrole.yaml"
check 0 fuel2 role create -r "$rel" -n dbrole -f yaml -d "$work/roles"
check 0 fuel2 role update -r "$rel" -n dbrole -f yaml -d "$work/roles"
check 0 fuel2 env add nodes -e "$env" -n "$n2" -r dbrole
check fail fuel2 role delete -r "$rel" -n dbrole
GREP=dbrole check 0 fuel2 role list -e "$env"
check 0 fuel2 tag list -r "$rel"
check 0 fuel2 release component list "$rel"
check 0 fuel2 extension list
GREP=volume_manager check 0 fuel2 env extension show "$env"
check fail fuel2 env extension enable "$env" -E bogus
check fail fuel2 env extension disable "$env" -E volume_manager
# These two need /version's feature_groups with "advanced" (the lead's /version work).
check 0 fuel2 node create-vms-conf "$n1" --conf '{"id":1,"mem":2,"cpu":1}'
check 0 fuel2 node list-vms-conf "$n1"
check fail fuel2 env spawn-vms "$env"
mkdir -p "$work/old"
check 0 fuel node --node-id "$n1" --disk --download --dir "$work/old"
check 0 fuel node --node-id "$n1" --disk --upload --dir "$work/old"
check fail fuel2 node undiscover -n "$n1" --force
check 0 fuel2 node undiscover -n "$n3" --force
echo "fuelclient-nodes: $pass passed, $fail failed"
[ "$fail" = 0 ]
