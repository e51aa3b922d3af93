#!/usr/bin/env bash
# The real python-fuelclient 11.0.0 against stoker's OpenStack configuration and diagnostic
# snapshot (issue 16): a fresh daemon of BIN with two simulated nodes (`serve --demo-nodes 2`:
# the real agent over loopback, the release's commands recorded, not run), an environment of
# them deployed to ready with fuel2, then `fuel2 openstack-config upload|list|download|delete|
# execute` and the old `fuel openstack-config`, `fuel2 snapshot create|get-link|
# get-default-config` and the old `fuel snapshot`, each checked by exit code and output (an
# upload read back, an execute's transaction followed to its end and its history read, a
# snapshot downloaded from its link and listed).
# usage: fuelclient-config.sh BIN   (FCVENV: the client's venv, /tmp/fcvenv by default)
# Ends with "N passed, M failed"; exits non-zero on a failure.
set -euo pipefail
bin=$(realpath "$1")

. "$(dirname "$0")/stoker-daemon.sh"
. "$(dirname "$0")/checks.sh"
fuel_client_venv "${FCVENV:-/tmp/fcvenv}"
start_stoker "$bin" 19100 fuelclient-config --demo-nodes 2
fuel_client_config

# ---- an environment of the two simulated nodes, deployed
ids=$(node_ids 2)
n1=$(sed -n 1p <<<"$ids")
n2=$(sed -n 2p <<<"$ids")
echo "# nodes $n1 $n2"
check "release list" "[Uu]buntu" -- "$fuel2" release list
rel=$("$fuel2" release list -f value -c id | head -1)
check "env create" "cfgenv" -- "$fuel2" env create -r "$rel" -nst vlan cfgenv
env=$("$fuel2" env list -f value -c id | head -1)
check "env add controller" "." -- "$fuel2" env add nodes -e "$env" -n "$n1" -r controller
check "env add compute" "." -- "$fuel2" env add nodes -e "$env" -n "$n2" -r compute

# ---- uploads, before the environment is deployed
d=$work/cfg
mkdir -p "$d"
cat >"$d/env.yaml" <<'EOF'
configuration:
  nova_config:
    DEFAULT/debug: {value: "True"}
    DEFAULT/everywhere: {value: "1"}
EOF
cat >"$d/role.yaml" <<'EOF'
configuration:
  nova_config:
    DEFAULT/cpu_allocation_ratio: {value: "4.0"}
EOF
cat >"$d/node.yaml" <<'EOF'
configuration:
  keystone_config:
    DEFAULT/debug: {value: "False"}
  configuration_options:
    restart_services: true
EOF
check "openstack-config upload (environment)" "cluster" -- "$fuel2" openstack-config upload --env "$env" --file "$d/env.yaml"
check "openstack-config upload --role" "compute" -- "$fuel2" openstack-config upload --env "$env" --role compute --file "$d/role.yaml"
check "openstack-config upload --node (two)" "node" -- "$fuel2" openstack-config upload --env "$env" --node "$n1" "$n2" --file "$d/node.yaml" -f json
expect "one configuration per node" "$(judge - 'sorted(c["node_id"] for c in d) == sorted(['"$n1, $n2"']) and all(c["config_type"] == "node" for c in d)' <<<"$OUT")"
node2_cfg=$("$py" -c 'import json,sys; print([c["id"] for c in json.load(sys.stdin) if c["node_id"] == int(sys.argv[1])][0])' "$n2" <<<"$OUT" 2>/dev/null || echo 0)
check "openstack-config list" "." -- "$fuel2" openstack-config list --env "$env" -f json
expect "list has the four active ones" "$(judge - 'len(d) == 4 and all(c["is_active"] for c in d)' <<<"$OUT")"
check "openstack-config list --node" "." -- "$fuel2" openstack-config list --env "$env" --node "$n1" -f json
expect "list --node filters" "$(judge - 'len(d) == 1 and d[0]["node_id"] == '"$n1" <<<"$OUT")"
check "openstack-config list --role" "compute" -- "$fuel2" openstack-config list --env "$env" --role compute
check "openstack-config download" "downloaded to" -- "$fuel2" openstack-config download "$node2_cfg" --file "$d/down.yaml"
expect "download round trip" "$(judge "$d/down.yaml" 'd == {"configuration": {"keystone_config": {"DEFAULT/debug": {"value": "False"}}, "configuration_options": {"restart_services": True}}}')"
check "openstack-config delete" "was deleted" -- "$fuel2" openstack-config delete "$node2_cfg"
refused "openstack-config delete again" "already disabled" -- "$fuel2" openstack-config delete "$node2_cfg"
check "openstack-config list --deleted" "." -- "$fuel2" openstack-config list --env "$env" --deleted 1 -f json
expect "the deleted one is listed inactive" "$(judge - 'any(c["id"] == '"$node2_cfg"' and not c["is_active"] for c in d)' <<<"$OUT")"
refused "upload for a role the environment lacks" "node_role" -- "$fuel2" openstack-config upload --env "$env" --role no-such-role --file "$d/env.yaml"
refused "upload for a node outside the environment" "not assigned" -- "$fuel2" openstack-config upload --env "$env" --node 999 --file "$d/env.yaml"
refused "execute before the environment is operational" "operational" -- "$fuel2" openstack-config execute --env "$env"

# ---- the environment deployed, then configurations pushed to its ready nodes
check "env deploy" "started" -- "$fuel2" env deploy "$env"
dep=$(grep -oE 'id [0-9]+' <<<"$OUT" | head -1 | cut -d' ' -f2)
expect "deployment ends ready" "$( [ "$(wait_task "$dep")" = ready ] && echo ok || echo "task $dep: $("$fuel2" task show "$dep" 2>&1 | tail -5)")"
check "environment operational" "operational" -- "$fuel2" env show "$env"
cat >"$d/role2.yaml" <<'EOF'
configuration:
  nova_config:
    DEFAULT/cpu_allocation_ratio: {value: "8.0"}
EOF
check "openstack-config upload after the deployment" "compute" -- "$fuel2" openstack-config upload --env "$env" --role compute --file "$d/role2.yaml"
# fuel2 11.0.0's execute sends the request, then fails on the answer itself (v1's
# OpenstackConfigClient.execute reads `.data` of the dict it got): the update runs anyway.
latest() { "$fuel2" task list -f value -c id | sort -n | tail -1; }
before=$(latest)
refused "openstack-config execute --role (the client's own error after the request)" "'dict' object has no attribute 'data'" -- "$fuel2" openstack-config execute --env "$env" --role compute
task=$(latest)
expect "execute started a deployment" "$([ "$task" -gt "$before" ] && echo ok || echo "no new transaction after $before")"
expect "execute's deployment ends ready" "$( s=$(wait_task "$task"); [ "$s" = ready ] && echo ok || echo "task $task: $s")"
check "its history" "upload_configuration" -- "$fuel2" task history show "$task" -f json
expect "only the compute node ran" "$(judge - 'all(h["node_id"] in ("'"$n2"'", "null", None) for h in d if h["status"] == "ready") and any(h["node_id"] == "'"$n2"'" and h["task_name"] == "upload_configuration" for h in d)' <<<"$OUT")"
refused "execute with nothing changed" "nothing to run" -- "$fuel2" openstack-config execute --env "$env" --role compute
before=$(latest)
refused "openstack-config execute --node --force (the client's own error after the request)" "'dict' object has no attribute 'data'" -- "$fuel2" openstack-config execute --env "$env" --node "$n1" --force
task=$(latest)
expect "forced update ends ready" "$( s=$(wait_task "$task"); [ "$task" -gt "$before" ] && [ "$s" = ready ] && echo ok || echo "task $task: $s")"
refused "execute for a node outside the environment" "not assigned" -- "$fuel2" openstack-config execute --env "$env" --node 999

# ---- the old client
o=$work/old
mkdir -p "$o"
check "fuel openstack-config --upload" "cluster" -- "$fuel" openstack-config --upload --env "$env" --file "$d/role.yaml"
check "fuel openstack-config --list" "cluster" -- "$fuel" openstack-config --list --env "$env"
old_id=$("$fuel2" openstack-config list --env "$env" -f json | "$py" -c 'import json,sys; print(max(c["id"] for c in json.load(sys.stdin) if c["config_type"] == "cluster"))')
check "fuel openstack-config --download" "" -- "$fuel" openstack-config --download --config-id "$old_id" --file "$o/old.yaml"
expect "fuel download round trip" "$(judge "$o/old.yaml" 'd["configuration"]["nova_config"]["DEFAULT/cpu_allocation_ratio"] == {"value": "4.0"}')"
check "fuel openstack-config --execute" "update is started" -- "$fuel" openstack-config --execute --env "$env"
wait_task "$("$fuel2" task list -f value -c id | sort -n | tail -1)" >/dev/null
check "fuel openstack-config --delete" "has been deleted" -- "$fuel" openstack-config --delete --config-id "$old_id"

# ---- the diagnostic snapshot
check "snapshot get-default-config" "stored in" -- "$fuel2" snapshot get-default-config -f yaml -d "$work/snap"
check "snapshot create" "task with id [0-9]+ was started" -- "$fuel2" snapshot create -c "$work/snap/snapshot_conf.yaml"
snap=$(grep -oE 'id [0-9]+' <<<"$OUT" | grep -oE '[0-9]+' || echo 0)
expect "snapshot task ends ready" "$( s=$(wait_task "$snap"); [ "$s" = ready ] && echo ok || echo "task $snap: $s")"
check "snapshot get-link" "http://127.0.0.1:$port/api/dump/stoker-snapshot-" -- "$fuel2" snapshot get-link "$snap" -f json
link=$("$py" -c 'import json,sys; print(json.load(sys.stdin)["link"])' <<<"$OUT" 2>/dev/null || echo none)
check "task list shows the dump" "dump" -- "$fuel2" task list
refused "get-link of a deployment" "not a snapshot" -- "$fuel2" snapshot get-link "$dep"
# The link downloads with the admin's Keystone token.
token=$("$py" - "http://127.0.0.1:$port" "$password" <<'PY'
import sys, requests
base, pw = sys.argv[1:3]
r = requests.post(base + "/keystone/v2.0/tokens", timeout=10, json={"auth": {
    "tenantName": "admin", "passwordCredentials": {"username": "admin", "password": pw}}})
print(r.json()["access"]["token"]["id"])
PY
)
check "the link downloads" "" -- curl -sf --noproxy '*' -H "X-Auth-Token: $token" -o "$work/snap.tar.gz" "$link"
check "the archive lists every part" "stoker.db" -- tar tzf "$work/snap.tar.gz"
expect "the archive has its text parts" "$(for p in README.txt version.txt config.txt history.txt audit.txt deployments.txt journal.txt; do grep -q "/$p\$" <<<"$OUT" || { echo "no $p"; exit 0; }; done; echo ok)"
expect "no admin password in the archive" "$(tar xzOf "$work/snap.tar.gz" | grep -qF "$password" && echo "the password is in it" || echo ok)"
# A viewer may neither make one nor download one.
"$py" - "http://127.0.0.1:$port" "$token" <<'PY' >/dev/null
import sys, requests
base, tok = sys.argv[1:3]
requests.post(base + "/api/v1/users", timeout=10, headers={"X-Auth-Token": tok},
              json={"name": "vera", "role": "viewer", "password": "vera-password-123"})
PY
refused "snapshot create as a viewer" "403|[Ff]orbidden" -- env OS_USERNAME=vera OS_PASSWORD=vera-password-123 "$fuel2" snapshot create
vtoken=$("$py" - "http://127.0.0.1:$port" <<'PY'
import sys, requests
r = requests.post(sys.argv[1] + "/keystone/v2.0/tokens", timeout=10, json={"auth": {
    "tenantName": "admin", "passwordCredentials": {"username": "vera", "password": "vera-password-123"}}})
print(r.json()["access"]["token"]["id"])
PY
)
check "a viewer's download is refused" "^403$" -- curl -s --noproxy '*' -o /dev/null -w '%{http_code}' -H "X-Auth-Token: $vtoken" "$link"
# The old client waits for the task and prints the link (its config from stdin: none here).
check "fuel snapshot" "can be downloaded from http://127.0.0.1:$port/api/dump/" -- "$fuel" snapshot

summary
