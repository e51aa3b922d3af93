#!/usr/bin/env bash
# The real python-fuelclient 11.0.0 against stoker's network endpoints (issue 16): a fresh
# daemon of BIN in a temp dir, two fake nodes registered as nailgun-agent registers them, an
# environment with roles, then `fuel2 env network`, `network-group`, `network-template`, `vip`,
# `node interfaces`, `env network verify` and the old `fuel network` (with --verify) / `fuel node --network`,
# each checked by exit code and output (and an upload read back to see that it stuck).
# usage: fuelclient-net.sh BIN   (FCVENV: the client's venv, /tmp/fcvenv by default)
# Ends with "N passed, M failed"; exits non-zero on a failure.
set -euo pipefail
bin=$(realpath "$1")

. "$(dirname "$0")/stoker-daemon.sh"
. "$(dirname "$0")/checks.sh"
fuel_client_venv "${FCVENV:-/tmp/fcvenv}"
start_stoker "$bin" 18800 fuelclient-net
fuel_client_config

# A VERBOSE expect's PASS shows the last check's output too.
expect_shows_out=1

# nailgun-agent's POST /api/nodes/ with NICs eth0 (PXE) and eth1.
register() {
  local mac0=$1 mac1=$2 ip=$3
  "$py" - "$mac0" "$mac1" "$ip" "http://127.0.0.1:$port/api/nodes/" <<'PY'
import json, sys, requests
mac0, mac1, ip, url = sys.argv[1:5]
def nic(name, mac, pxe, bus):
    return {"name": name, "mac": mac, "ip": ip if pxe else None,
            "netmask": "255.255.255.0" if pxe else None, "pxe": pxe, "state": "up",
            "driver": "virtio_net", "bus_info": bus, "max_speed": None,
            "current_speed": None, "offloading_modes": [],
            "interface_properties": {"sriov": {"sriov_totalvfs": 0, "available": False,
                                               "pci_id": ""},
                                     "pci_id": "", "numa_node": None, "max_queues": 1}}
data = {"mac": mac0, "ip": ip, "os_platform": "ubuntu", "manufacturer": "QEMU",
        "platform_name": None, "status": "discover", "is_agent": True,
        "meta": {"system": {"manufacturer": "QEMU", "fqdn": "bootstrap",
                            "uuid": "00000000-0000-0000-0000-" + mac0.replace(":", "")},
                 "interfaces": [nic("eth0", mac0, True, "0000:00:03.0"),
                                nic("eth1", mac1, False, "0000:00:04.0")],
                 "cpu": {"total": 2, "real": 1,
                         "spec": [{"frequency": 2400, "model": "QEMU Virtual CPU"}] * 2},
                 "disks": [{"name": "vda", "model": None, "size": 53687091200,
                            "disk": "disk/by-path/pci-0000:00:05.0", "extra": [],
                            "removable": "0", "paths": None, "opt_io": 512}],
                 "memory": {"total": 4294967296}, "pci_devices": {},
                 "numa_topology": {"numa_nodes": [{"id": 0, "cpus": [0, 1],
                                                   "memory": 4294967296, "pcidevs": []}],
                                   "supported_hugepages": [2048], "distances": [["1.0"]]}},
        "agent_checksum": "fuelclient-net"}
r = requests.post(url, data=json.dumps(data), timeout=10,
                  headers={"Content-Type": "application/json"})
if r.status_code != 201:
    sys.exit(f"register {mac0}: {r.status_code} {r.text}")
print(r.json()["id"])
PY
}

# first FILE...: the first of the files that exists, else the first named (a later check
# then fails on it, naming it).
first() {
  local f
  for f in "$@"; do [ -e "$f" ] && { echo "$f"; return; }; done
  echo "$1"
}

# A JSON edit of FILE by a python expression over `d` (the document), written back.
edit() {
  "$py" - "$1" "$2" <<'PY'
import json, sys, yaml
path, code = sys.argv[1], sys.argv[2]
load = json.load if path.endswith(".json") else yaml.safe_load
with open(path) as f:
    d = load(f)
exec(code)
with open(path, "w") as f:
    if path.endswith(".json"):
        json.dump(d, f)
    else:
        yaml.safe_dump(d, f)
PY
}

node1=$(register 52:54:00:aa:00:01 52:54:00:bb:00:01 10.20.0.11)
node2=$(register 52:54:00:aa:00:02 52:54:00:bb:00:02 10.20.0.12)
echo "# nodes $node1 $node2"

check "release list" "[Uu]buntu" -- "$fuel2" release list -f json
rel=$("$py" -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])' <<<"$OUT")
check "env create" "netenv" -- "$fuel2" env create -r "$rel" -nst vlan netenv -f json
env=$("$py" -c 'import json,sys; print(json.load(sys.stdin)["id"])' <<<"$OUT")
check "env add nodes" "." -- "$fuel2" env add nodes -e "$env" -n "$node1" "$node2" -r controller

# ---- network configuration
d=$work/net
mkdir -p "$d"
check "env network download" "stored in" -- "$fuel2" env network download -f yaml -d "$d" "$env"
netfile=$(first "$d/environment_$env/network.yaml")
expect "network file has networks" "$(judge "$netfile" '{n["name"] for n in d["networks"]} >= {"public","management","storage","fuelweb_admin"}')"
edit "$netfile" '[n.update(vlan_start=111) for n in d["networks"] if n["name"] == "management"]'
check "env network upload" "." -- "$fuel2" env network upload -f yaml -d "$d" "$env"
rm -rf "$d"; mkdir -p "$d"
"$fuel2" env network download -f yaml -d "$d" "$env" >/dev/null 2>&1 || true
netfile=$(first "$d/environment_$env/network.yaml")
expect "network upload stuck" "$(judge "$netfile" '[n["vlan_start"] for n in d["networks"] if n["name"] == "management"] == [111]')"

# ---- network groups
check "network-group list" "management" -- "$fuel2" network-group list
check "fuel nodegroup" "default" -- "$fuel" nodegroup --env "$env"
group=$("$py" - "http://127.0.0.1:$port" "$env" "$password" <<'PY'
import sys, requests
base, env, pw = sys.argv[1:4]
tok = requests.post(base + "/keystone/v2.0/tokens", timeout=10, json={"auth": {
    "tenantName": "admin", "passwordCredentials": {"username": "admin", "password": pw}}})
tok = tok.json()["access"]["token"]["id"]
r = requests.get(f"{base}/api/v1/nodegroups/?cluster_id={env}", timeout=10,
                 headers={"X-Auth-Token": tok})
print(r.json()[0]["id"])
PY
)
check "network-group create" "netgroup-x" -- "$fuel2" network-group create -N "$group" -C 10.99.0.0/24 -V 555 -g 10.99.0.1 -f json netgroup-x
ng=$("$py" -c 'import json,sys; print(json.load(sys.stdin)["id"])' <<<"$OUT" 2>/dev/null || echo 0)
check "network-group show" "10.99.0.0/24" -- "$fuel2" network-group show "$ng"
check "network-group update" "10.98.0.0/24" -- "$fuel2" network-group update -C 10.98.0.0/24 -g 10.98.0.1 "$ng"
check "network-group show after update" '"vlan_start": 555' -- "$fuel2" network-group show -f json "$ng"
check "network-group delete" "." -- "$fuel2" network-group delete "$ng"
rc=0; "$fuel2" network-group show "$ng" >/dev/null 2>&1 || rc=$?
expect "network-group gone" "$([ "$rc" -ne 0 ] && echo ok || echo "still shown")"

# ---- network template
cat >"$work/template.yaml" <<'EOF'
adv_net_template:
  default:
    nic_mapping:
      default:
        if1: eth0
        if2: eth1
    templates_for_node_role:
      controller: [common]
    network_assignments:
      management: {ep: br-mgmt}
      storage: {ep: br-storage}
      public: {ep: br-ex}
      private: {ep: br-prv}
      fuelweb_admin: {ep: br-fw-admin}
    network_scheme:
      common:
        transformations:
          - {action: add-br, name: br-fw-admin}
          - {action: add-port, bridge: br-fw-admin, name: <% if1 %>}
        endpoints: [br-fw-admin]
        roles:
          admin/pxe: br-fw-admin
          fw-admin: br-fw-admin
EOF
check "network-template upload" "." -- "$fuel2" network-template upload -f "$work/template.yaml" "$env"
mkdir -p "$work/tpl"
check "network-template download" "." -- "$fuel2" network-template download -d "$work/tpl" "$env"
tplfile=$(ls "$work/tpl"/network_template_"$env".yaml 2>/dev/null || echo "$work/tpl/none.yaml")
expect "network-template round trip" "$(judge "$tplfile" 'd["adv_net_template"]["default"]["nic_mapping"]["default"]["if2"] == "eth1"')"
check "network-template delete" "." -- "$fuel2" network-template delete "$env"

# ---- VIPs
check "vip download" "." -- "$fuel2" vip download -e "$env" -f "$work/vips.yaml"
expect "vips file lists the public vip" "$(judge "$work/vips.yaml" 'any(v["vip_name"] == "public" for v in d)')"
edit "$work/vips.yaml" '[v.update(ip_addr="172.16.0.100", is_user_defined=True) for v in d if v["vip_name"] == "public"]'
# fuel2 vip upload checks that FILE exists, then reads FILE.yaml (the client's quirk).
cp "$work/vips.yaml" "$work/vips"
check "vip upload" "." -- "$fuel2" vip upload -e "$env" -f "$work/vips"
"$fuel2" vip download -e "$env" -f "$work/vips2.yaml" >/dev/null 2>&1 || true
expect "vip upload stuck" "$(judge "$work/vips2.yaml" '[v["ip_addr"] for v in d if v["vip_name"] == "public"] == ["172.16.0.100"]')"
mgmt=$("$fuel2" network-group list -f json | "$py" -c 'import json,sys; print([n["id"] for n in json.load(sys.stdin) if n["name"] == "management"][0])')
check "vip create" "." -- "$fuel2" vip create -e "$env" -n "$mgmt" -N extra_vip -a 192.168.0.200
"$fuel2" vip download -e "$env" -f "$work/vips3.yaml" >/dev/null 2>&1 || true
expect "vip create listed" "$(judge "$work/vips3.yaml" 'any(v["vip_name"] == "extra_vip" and v["ip_addr"] == "192.168.0.200" for v in d)')"

# ---- node interfaces
i=$work/ifaces
mkdir -p "$i"
check "node interfaces get-default" "." -- "$fuel2" node interfaces get-default -f json -d "$i/def" "$node1"
check "node interfaces download" "." -- "$fuel2" node interfaces download -f json -d "$i" "$node1"
iffile=$(ls "$i"/node_"$node1"/interfaces.json 2>/dev/null || ls "$i"/*/interfaces.json 2>/dev/null | head -1 || echo "$i/none.json")
expect "interfaces file names eth0 and eth1" "$(judge "$iffile" '{n["name"] for n in d} == {"eth0","eth1"}')"
# Move storage from where it is to the other NIC.
edit "$iffile" '
src = next(n for n in d if any(a["name"] == "storage" for a in n["assigned_networks"]))
dst = next(n for n in d if n is not src)
net = next(a for a in src["assigned_networks"] if a["name"] == "storage")
src["assigned_networks"].remove(net); dst["assigned_networks"].append(net)
open(path + ".dst", "w").write(dst["name"])'
dst=$(cat "$iffile.dst"); rm -f "$iffile.dst"
check "node interfaces upload" "." -- "$fuel2" node interfaces upload -f json -d "$i" "$node1"
rm -rf "$i/again"
"$fuel2" node interfaces download -f json -d "$i/again" "$node1" >/dev/null 2>&1 || true
again=$(ls "$i"/again/node_"$node1"/interfaces.json 2>/dev/null || echo "$i/none.json")
expect "interfaces upload stuck" "$(judge "$again" "any(n['name'] == '$dst' and any(a['name'] == 'storage' for a in n['assigned_networks']) for n in d)")"

# ---- the old client
o=$work/old
mkdir -p "$o"
check "fuel network --download" "." -- "$fuel" network --env "$env" --download --dir "$o"
oldfile=$(ls "$o"/network_"$env".yaml 2>/dev/null || echo "$o/none.yaml")
edit "$oldfile" '[n.update(vlan_start=112) for n in d["networks"] if n["name"] == "storage"]'
check "fuel network --upload" "." -- "$fuel" network --env "$env" --upload --dir "$o"
check "fuel network upload stuck" '"vlan_start": 112' -- "$fuel2" network-group list -f json
check "fuel node --network --download" "." -- "$fuel" node --node "$node2" --network --download --dir "$o"
check "fuel node --network --upload" "." -- "$fuel" node --node "$node2" --network --upload --dir "$o"

# ---- deployment and provisioning facts: defaults, upload (used by the next deployment), delete
fd="$work/facts"; mkdir -p "$fd/down"
check "fuel2 env deployment-facts get-default" "." -- "$fuel2" env deployment-facts get-default -e "$env" -d "$fd" -f yaml
check "the defaults hold the node's facts" "uid: '$node2'" -- cat "$fd/deployment_$env/$node2.yaml"
edit "$fd/deployment_$env/$node2.yaml" 'd["stoker_probe"] = "edited"'
check "fuel2 env deployment-facts upload" "." -- "$fuel2" env deployment-facts upload -e "$env" -d "$fd" -f yaml
check "fuel2 env deployment-facts download" "." -- "$fuel2" env deployment-facts download -e "$env" -d "$fd/down" -f yaml
check "the edited upload reads back" "stoker_probe: edited" -- cat "$fd/down/deployment_$env/$node2.yaml"
check "fuel2 env deployment-facts delete" "." -- "$fuel2" env deployment-facts delete "$env"
check "deleted: nothing uploaded" "There is no deployment info" -- sh -c "'$fuel2' env deployment-facts download -e '$env' -d '$fd/down' -f yaml 2>&1; true"
check "fuel2 env provisioning-facts get-default" "." -- "$fuel2" env provisioning-facts get-default -e "$env" -d "$fd" -f yaml
edit "$fd/provisioning_$env/engine.yaml" 'd["stoker_probe"] = "edited"'
check "fuel2 env provisioning-facts upload" "." -- "$fuel2" env provisioning-facts upload -e "$env" -d "$fd" -f yaml
check "fuel2 env provisioning-facts download" "." -- "$fuel2" env provisioning-facts download -e "$env" -d "$fd/down" -f yaml
check "the edited upload reads back" "stoker_probe: edited" -- cat "$fd/down/provisioning_$env/engine.yaml"
check "fuel2 env provisioning-facts delete" "." -- "$fuel2" env provisioning-facts delete "$env"
mkdir -p "$fd/old"
check "fuel deployment --default (old CLI)" "." -- "$fuel" deployment --env "$env" --default --dir "$fd/old"
check "fuel provisioning --default (old CLI)" "." -- "$fuel" provisioning --env "$env" --default --dir "$fd/old"

# ---- verification (the real probe between agents is .ci/net-verify.sh): these fake nodes have
# no agent and were last seen at registration, so the task either runs (until stopped here) or
# was refused at once for want of two online nodes, saying so.
check "fuel2 env network verify" "Network verification task with id [0-9]+ for the environment $env has been started" -- "$fuel2" env network verify "$env"
vtask=$(grep -oE 'task with id [0-9]+' <<<"$OUT" | grep -oE '[0-9]+$' || echo 0)
check "fuel2 task list shows it" "verify_networks" -- "$fuel2" task list
check "fuel2 task show: running, or why not" "running|At least two online nodes" -- "$fuel2" task show "$vtask"
"$fuel2" env stop-deployment "$env" >/dev/null 2>&1 || true
check "fuel network --verify" "Verification status is '(running|error)'" -- "$fuel" --env "$env" network --verify --dir "$o"
"$fuel2" env stop-deployment "$env" >/dev/null 2>&1 || true

summary
