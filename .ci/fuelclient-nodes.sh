#!/usr/bin/env bash
# The real python-fuelclient 11.0.0 against a fresh stoker for issue 16's nodes part: node list
# by environment, update (name, hostname), labels, ansible-inventory, disks download / upload /
# get-default, roles and tags per release and environment, release components, extensions,
# VMs configuration, spawn-vms's refusal, node attributes download / upload, undiscover, and the
# old `fuel node --disk`.
# usage: fuelclient-nodes.sh BIN VENV      (VENV: a python-fuelclient 11.0.0 virtualenv)
# Prints one PASS/FAIL line per command and the totals; exits 1 on any FAIL.
set -uo pipefail
bin=$(realpath "$1")
venv=${2:-/tmp/fcvenv}
. "$(dirname "$0")/stoker-daemon.sh"
. "$(dirname "$0")/checks.sh"
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

n1=$(register 52:54:00:aa:00:01); n2=$(register 52:54:00:aa:00:02); n3=$(register 52:54:00:aa:00:03)
rel=$(fuel2 release list -f value -c id | head -1)
fuel2 env create -r "$rel" -nst vlan envA >/dev/null 2>&1
env=$(fuel2 env list -f value -c id | head -1)
fuel2 env add nodes -e "$env" -n "$n1" -r controller >/dev/null 2>&1

# Each check named by its command (NAME ""); REGEX "": only the exit status counts.
check "" "$n1" -- fuel2 node list -e "$env"
check "" ctrl-01 -- fuel2 node update "$n1" --hostname ctrl-01 --name first
check "" "" -- fuel2 node label set -l rack=r1 -n "$n1"
check "" rack -- fuel2 node label list -n "$n1"
check "" "" -- fuel2 node label delete -l rack -n "$n1"
check "" "" -- fuel2 node ansible-inventory -e "$env"
refused "" "" -- fuel2 node update "$n1" --hostname bad_name
check "" "" -- fuel2 node disks download "$n1" -f yaml -d "$work"
check "" "" -- fuel2 node disks upload "$n1" -f yaml -d "$work"
check "" "" -- fuel2 node disks get-default "$n1" -f yaml -d "$work/default"
check "" controller -- fuel2 role list -r "$rel"
check "" "" -- fuel2 role download -r "$rel" -n controller -f yaml -d "$work/roles"
src=$(find "$work/roles" -name '*.yaml' | head -1)
dir=$(dirname "$src")
sed -e 's/^name: controller/name: dbrole/' "$src" >"$dir/dbrole.yaml"
check "" "" -- fuel2 role create -r "$rel" -n dbrole -f yaml -d "$work/roles"
check "" "" -- fuel2 role update -r "$rel" -n dbrole -f yaml -d "$work/roles"
check "" "" -- fuel2 env add nodes -e "$env" -n "$n2" -r dbrole
refused "" "" -- fuel2 role delete -r "$rel" -n dbrole
check "" dbrole -- fuel2 role list -e "$env"
check "" "" -- fuel2 tag list -r "$rel"
check "" "" -- fuel2 release component list "$rel"
# A release's repositories: listed, replaced from a file and read back, a bad one refused.
check "" "archive.ubuntu.com" -- fuel2 release repos list "$rel"
printf '%s\n' '- {name: ubuntu, type: deb, uri: "http://mirror.example.org/ubuntu/", suite: xenial, section: main, priority: null}' \
  '- {name: mos, type: deb, uri: "http://mirror.example.org/mos/", suite: mos10.0, section: main, priority: 1050}' >"$work/repos.yaml"
check "" "were set from" -- fuel2 release repos update "$rel" -f "$work/repos.yaml"
check "" "mirror.example.org/mos" -- fuel2 release repos list "$rel"
printf '%s\n' '- {name: bad, type: zip, uri: "gopher://x"}' >"$work/bad-repos.yaml"
refused "" 'value\[0\]\.type' -- fuel2 release repos update "$rel" -f "$work/bad-repos.yaml"
check "" "" -- fuel2 extension list
check "" volume_manager -- fuel2 env extension show "$env"
refused "" "" -- fuel2 env extension enable "$env" -E bogus
refused "" "" -- fuel2 env extension disable "$env" -E volume_manager
# These two need /version's feature_groups with "advanced" (the lead's /version work).
check "" "" -- fuel2 node create-vms-conf "$n1" --conf '{"id":1,"mem":2,"cpu":1}'
check "" "" -- fuel2 node list-vms-conf "$n1"
refused "" "" -- fuel2 env spawn-vms "$env"
# Node attributes: downloaded, one value changed in the YAML and uploaded, read back; pinning
# both of the node's CPUs refused by name.
attrs="$work/attrs/node_$n1/attributes.yaml"
mkdir -p "$work/attrs"  # fuel2 makes node_N, not its parent
yamlset() { "$venv/bin/python" -c 'import sys, yaml; p = sys.argv[1]; d = yaml.safe_load(open(p)); d["cpu_pinning"]["nova"]["value"] = int(sys.argv[2]); yaml.safe_dump(d, open(p, "w"))' "$attrs" "$1"; }
yamlget() { "$venv/bin/python" -c 'import sys, yaml; print("nova pins", yaml.safe_load(open(sys.argv[1]))["cpu_pinning"]["nova"]["value"])' "$attrs"; }
check "" "were written to" -- fuel2 node attributes-download "$n1" --dir "$work/attrs"
check "downloaded attributes: cpu_pinning.nova.value 0" "nova pins 0" -- yamlget
yamlset 1
check "" "were uploaded" -- fuel2 node attributes-upload "$n1" --dir "$work/attrs"
rm -f "$attrs"
check "" "were written to" -- fuel2 node attributes-download "$n1" --dir "$work/attrs"
check "downloaded again: cpu_pinning.nova.value 1" "nova pins 1" -- yamlget
yamlset 2
refused "" 'cpu_pinning\.nova\.value' -- fuel2 node attributes-upload "$n1" --dir "$work/attrs"
mkdir -p "$work/old"
check "" "" -- fuel node --node-id "$n1" --disk --download --dir "$work/old"
check "" "" -- fuel node --node-id "$n1" --disk --upload --dir "$work/old"
refused "" "" -- fuel2 node undiscover -n "$n1" --force
check "" "" -- fuel2 node undiscover -n "$n3" --force
summary fuelclient-nodes
