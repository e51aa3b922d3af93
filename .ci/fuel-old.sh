#!/usr/bin/env bash
# The old `fuel` CLI of python-fuelclient 11.0.0 against stoker (issue 16, "the commands that
# work on Python 3"): a fresh daemon of BIN with two simulated nodes (`serve --demo-nodes 2`:
# the real agent over loopback, the release's commands recorded, not run), then `fuel
# release`, `env` (create, set --name, delete), `node` (list, per environment, --provision
# and --deploy of one node), `settings` and `network` (download, upload, default, verify),
# `plugins` (--list, --sync), `deploy-changes`, `redeploy-changes`, `stop` and `reset`, each
# checked by exit code and output and the state it leaves read back with fuel2. What the
# client itself breaks on Python 3 is checked as the client's own failure, so a change in it
# shows: `fuel node set|remove` (json.dumps of a map), and `fuel node` listing nothing (a map
# exhausted before it prints). fuel 11.0.0 has no `task`, `provision` or `deploy` command:
# those are `fuel2 task`, `fuel node --provision|--deploy`.
# usage: fuel-old.sh BIN   (FCVENV: the client's venv, /tmp/fcvenv by default)
# Ends with "N passed, M failed"; exits non-zero on a failure.
set -euo pipefail
bin=$(realpath "$1")

. "$(dirname "$0")/stoker-daemon.sh"
. "$(dirname "$0")/checks.sh"
fuel_client_venv "${FCVENV:-/tmp/fcvenv}"
start_stoker "$bin" 19300 fuel-old --demo-nodes 2
fuel_client_config

# The newest transaction's id (the old client prints no id for some of the tasks it starts).
latest() { "$fuel2" task list -f value -c id | sort -n | tail -1; }
# field NODE COLUMN: a node's column as fuel2 shows it.
field() { "$fuel2" node show "$1" -f value -c "$2" 2>/dev/null; }

ids=$(node_ids 2)
n1=$(sed -n 1p <<<"$ids")
n2=$(sed -n 2p <<<"$ids")
echo "# nodes $n1 $n2"
d=$work/old
mkdir -p "$d"

# ---- releases, plugins, environments
check "fuel release" "id +\| name" -- "$fuel" release
check "fuel release --rel 1" "newton" -- "$fuel" release --rel 1
check "fuel plugins --list" "ubuntu-newton" -- "$fuel" plugins --list
check "fuel plugins --sync" "successfully synchronized" -- "$fuel" plugins --sync
check "fuel env create" "Environment 'oldenv' with id=[0-9]+ was created" -- "$fuel" env create --name oldenv --release 1 --nst vlan
env=$(grep -oE 'id=[0-9]+' <<<"$OUT" | cut -d= -f2)
check "fuel env" "oldenv" -- "$fuel" env
check "fuel env set --name" "name=oldenv2" -- "$fuel" env set --env "$env" --name oldenv2
expect "the rename is read back" "$([ "$("$fuel2" env show "$env" -f value -c name)" = oldenv2 ] && echo ok || echo "name: $("$fuel2" env show "$env" -f value -c name)")"
refused "fuel env create with an unknown release" "release 999 not found" -- "$fuel" env create --name x --release 999 --nst vlan

# ---- nodes: the client's own Python 3 failures, then the rest through it
refused "fuel node set fails in the client on Python 3 (json.dumps of a map)" "map is not JSON serializable" -- "$fuel" --env "$env" node set --node "$n1" --role controller
expect "and sent nothing" "$([ -z "$(field "$n1" cluster)" ] || [ "$(field "$n1" cluster)" = None ] && echo ok || echo "node $n1 in $(field "$n1" cluster)")"
check "fuel node prints its header (the rows are lost in the client on Python 3)" "id +\| status" -- "$fuel" node
check "assign with fuel2 (controller)" "." -- "$fuel2" env add nodes -e "$env" -n "$n1" -r controller
check "assign with fuel2 (compute)" "." -- "$fuel2" env add nodes -e "$env" -n "$n2" -r compute
check "fuel node --env" "id +\| status" -- "$fuel" node --env "$env"

# ---- settings and networks
check "fuel settings --download" "downloaded to $d/settings_$env.yaml" -- "$fuel" settings --env "$env" --download --dir "$d"
expect "settings are Nailgun's editable document" "$(judge "$d/settings_$env.yaml" '"access" in d["editable"] and "repo_setup" in d["editable"]')"
sed -i 's/^\(\s*value:\) admin$/\1 admin/' "$d/settings_$env.yaml"
"$py" - "$d/settings_$env.yaml" <<'PY'
import sys, yaml
p = sys.argv[1]
d = yaml.safe_load(open(p))
d["editable"]["access"]["email"]["value"] = "ops@example.org"
yaml.safe_dump(d, open(p, "w"))
PY
check "fuel settings --upload" "uploaded" -- "$fuel" settings --env "$env" --upload --dir "$d"
check "fuel2 downloads the settings" "stored in" -- "$fuel2" env settings download "$env" -d "$d/back" -f json
check "fuel2 reads the uploaded setting back" "ops@example.org" -- cat "$d/back/environment_$env/settings.json"
mkdir -p "$d/default"
check "fuel settings --default" "downloaded to" -- "$fuel" settings --env "$env" --default --dir "$d/default"
expect "defaults are the release's" "$(judge "$d/default/settings_$env.yaml" 'd["editable"]["access"]["email"]["value"] != "ops@example.org"')"
"$py" - "$d/settings_$env.yaml" <<'PY'
import sys, yaml
p = sys.argv[1]
d = yaml.safe_load(open(p))
d["editable"]["access"]["no_such_setting"] = {"type": "text", "value": "x"}
yaml.safe_dump(d, open(p, "w"))
PY
refused "fuel settings --upload of an unknown setting names it" "no_such_setting" -- "$fuel" settings --env "$env" --upload --dir "$d"
check "fuel network --download" "downloaded to $d/network_$env.yaml" -- "$fuel" network --env "$env" --download --dir "$d"
expect "network configuration has Neutron's parameters" "$(judge "$d/network_$env.yaml" '"networking_parameters" in d and len(d["networks"]) >= 4')"
"$py" - "$d/network_$env.yaml" <<'PY'
import sys, yaml
p = sys.argv[1]
d = yaml.safe_load(open(p))
for n in d["networks"]:
    if n["name"] == "storage":
        n["vlan_start"] = 142
yaml.safe_dump(d, open(p, "w"))
PY
check "fuel network --upload" "uploaded" -- "$fuel" network --env "$env" --upload --dir "$d"
check "fuel2 downloads the network configuration" "stored in" -- "$fuel2" env network download "$env" -d "$d/back" -f yaml
check "fuel2 reads the uploaded VLAN back" "vlan_start: 142" -- cat "$d/back/environment_$env/network.yaml"
# The client reads the task back once, right after starting it: on a loaded machine the
# simulated agents' empty reports may already have ended it (in error, nothing heard).
check "fuel network --verify starts a verification" "Verification status is '(running|ready|error)'" -- "$fuel" network --env "$env" --verify --dir "$d"
t=$(latest)
# The simulated nodes' agents are sandboxed: they probe no interface and hear nothing, so the
# verification ends in error naming what was not heard (.ci/net-verify.sh runs real probes).
expect "the verification is a verify_networks task that ends in error, nothing heard" "$( s=$(wait_task "$t"); n=$("$fuel2" task show -f value -c name "$t"); r=$("$fuel2" task show -f value -c result "$t"); [ "$n" = verify_networks ] && [ "$s" = error ] && grep -q "absent_vlans" <<<"$r" && echo ok || echo "task $t ($n): $s: $r")"

# ---- provisioning and deployment of single nodes, then the whole environment
check "fuel node --provision" "Started provisioning nodes \\[$n1\\]" -- "$fuel" node --env "$env" --provision --node "$n1"
t=$(latest)
expect "the provisioning ends ready" "$( s=$(wait_task "$t"); [ "$s" = ready ] && echo ok || echo "task $t: $s")"
expect "only that node is provisioned" "$([ "$(field "$n1" status)" = provisioned ] && [ "$(field "$n2" status)" != provisioned ] && echo ok || echo "statuses: $(field "$n1" status) $(field "$n2" status)")"
check "fuel node --deploy" "[Dd]eploy" -- "$fuel" node --env "$env" --deploy --node "$n1"
t=$(latest)
expect "the node's deployment ends ready" "$( s=$(wait_task "$t"); [ "$s" = ready ] && echo ok || echo "task $t: $s")"
expect "that node is ready" "$([ "$(field "$n1" status)" = ready ] && echo ok || echo "status: $(field "$n1" status)")"
refused "fuel node --deploy of an unknown node" "node 999 not found" -- "$fuel" node --env "$env" --deploy --node 999
check "fuel deploy-changes" "Deployment task with id [0-9]+ for the environment $env has been started" -- "$fuel" --env "$env" deploy-changes
t=$(latest)
expect "the deployment ends ready" "$( s=$(wait_task "$t"); [ "$s" = ready ] && echo ok || echo "task $t: $s")"
expect "both nodes are ready" "$([ "$(field "$n1" status)" = ready ] && [ "$(field "$n2" status)" = ready ] && echo ok || echo "statuses: $(field "$n1" status) $(field "$n2" status)")"
check "fuel redeploy-changes" "Deployment task with id [0-9]+ for the environment $env has been started" -- "$fuel" --env "$env" redeploy-changes
t=$(latest)
# The stop races the demo nodes' agents, which take each step the moment it is due.
rc=0
stop=$(cd "$work" && "$fuel" --env "$env" stop 2>&1 </dev/null) || rc=$?
if [ "$rc" -eq 0 ]; then
  if grep -qE "Stop task of environment with id=$env started" <<<"$stop"; then ok "fuel stop"; else bad "fuel stop" "$stop"; fi
  expect "the stopped deployment ends in error" "$( s=$(wait_task "$t"); [ "$s" = error ] && echo ok || echo "task $t: $s")"
elif grep -q "nothing to stop" <<<"$stop" && [ "$(wait_task "$t")" = ready ]; then
  skip "fuel stop" "the redeploy of the two demo nodes (agents held by long-poll take each step the moment it is due) ended before the client could send its stop; the stop itself is tested by fake agents in tests/deploy.rs and tests/chains.rs"
else
  bad "fuel stop (exit $rc)" "$stop"
fi
refused "fuel stop with nothing running" "nothing to stop" -- "$fuel" --env "$env" stop
check "fuel reset" "Reset task of environment with id=$env started" -- "$fuel" --env "$env" reset
t=$(latest)
expect "the reset ends ready" "$( s=$(wait_task "$t"); [ "$s" = ready ] && echo ok || echo "task $t: $s")"
expect "the environment is new again" "$([ "$("$fuel2" env show "$env" -f value -c status)" = new ] && echo ok || echo "status: $("$fuel2" env show "$env" -f value -c status)")"
refused "fuel task is no command of fuel 11.0.0" "invalid choice: 'task'" -- "$fuel" task
check "fuel env --delete" "was deleted" -- "$fuel" env --env "$env" --delete
expect "the environment is gone" "$("$fuel2" env list -f value -c id | grep -qx "$env" && echo "still listed" || echo ok)"

summary
