#!/usr/bin/env bash
# Network verification for real (issue 16): two network namespaces made here are two nodes,
# joined by two veth pairs (eth0: the admin network, with addresses; eth1: the others). The
# daemon runs in the first, each node's real agent (`stoker agent --deploy`, its inventory
# from the namespace's own /sys) in its own, and the real fuel2 starts `env network verify`:
# each agent takes its `network.verify` run and sends and hears 802.1Q frames on every VLAN
# of its interfaces. Then eth1 of the second node goes down, and the verdict must name the
# VLANs absent on eth1. Needs root (ip netns); traffic stays inside the namespaces. Every
# namespace (and the veth pairs in it) and every process started here is removed at exit.
# usage: net-verify.sh BIN   (FCVENV: the client's venv, /tmp/fcvenv by default)
set -euo pipefail
bin=$(realpath "$1")
venv=${FCVENV:-/tmp/fcvenv}
[ -x "$venv/bin/fuel2" ] || { echo "net-verify: no client at $venv/bin/fuel2" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "net-verify: needs root for ip netns; skipped"; exit 0; }

tag=$$
a=stk-nv-$tag-a
b=stk-nv-$tag-b
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
[ -z "${KEEP:-}" ] || trap "cat $work/*.log; cleanup" EXIT

ip netns add "$a"
ip netns add "$b"
for i in 0 1; do
  ip link add "nv$tag-a$i" type veth peer name "nv$tag-b$i"
  ip link set "nv$tag-a$i" netns "$a"
  ip link set "nv$tag-b$i" netns "$b"
  ip -n "$a" link set "nv$tag-a$i" name "eth$i"
  ip -n "$b" link set "nv$tag-b$i" name "eth$i"
done
for ns in "$a" "$b"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set eth1 up
done
ip -n "$a" addr add 10.251.0.1/24 dev eth0
ip -n "$b" addr add 10.251.0.2/24 dev eth0

# The daemon in the first namespace (a fresh namespace has every port free).
mkdir -p "$work/master"
(cd "$work/master" && exec ip netns exec "$a" "$bin" serve --http-listen 10.251.0.1:8000 --http-tls off \
  >"$work/daemon.log" 2>&1) &
pids+=($!)
for _ in $(seq 100); do
  [ -s "$work/master/stoker-data/initial-admin-password" ] && grep -q "listening on" "$work/daemon.log" && break
  sleep 0.2
done
password=$(cat "$work/master/stoker-data/initial-admin-password")
master=http://10.251.0.1:8000

# One agent per node, each in its namespace (its inventory: that namespace's interfaces).
for ns in "$a" "$b"; do
  mkdir -p "$work/$ns"
  (cd "$work/$ns" && exec ip netns exec "$ns" "$bin" agent --master "$master" --deploy \
    --state "$work/$ns/state" >"$work/$ns.log" 2>&1) &
  pids+=($!)
done

export XDG_CONFIG_HOME="$work/xdg" PYTHONWARNINGS=ignore
mkdir -p "$XDG_CONFIG_HOME/fuel"
cat >"$XDG_CONFIG_HOME/fuel/fuel_client.yaml" <<CONF
SERVER_ADDRESS: "10.251.0.1"
SERVER_PORT: "8000"
OS_USERNAME: "admin"
OS_PASSWORD: "$password"
OS_TENANT_NAME: "admin"
HTTP_PROXY: null
HTTP_TIMEOUT: 30
CONF
unset SERVER_ADDRESS SERVER_PORT LISTEN_PORT KEYSTONE_USER KEYSTONE_PASS \
  FUELCLIENT_CUSTOM_SETTINGS HTTP_PROXY http_proxy https_proxy no_proxy HTTPS_PROXY NO_PROXY
fuel2() { (cd "$work" && ip netns exec "$a" "$venv/bin/fuel2" "$@"); }

. "$(dirname "$0")/checks.sh"

# Both nodes register.
nodes=
for _ in $(seq 100); do
  nodes=$(fuel2 node list -f value -c id 2>/dev/null | sort -n | tr '\n' ' ' || true)
  [ "$(wc -w <<<"$nodes")" = 2 ] && break
  sleep 0.2
done
if [ "$(wc -w <<<"$nodes")" = 2 ]; then ok "both agents registered ($nodes)"; else
  bad "both agents registered" "nodes: $nodes" "$(tail -5 "$work/$a.log")"
  summary; exit 1
fi
read -r n1 n2 <<<"$nodes"
release=$(fuel2 release list -f value -c id | head -1)
env=$(fuel2 env create -r "$release" -f value -c id nv)
fuel2 env add nodes -e "$env" -n "$n1" -r controller >/dev/null
fuel2 env add nodes -e "$env" -n "$n2" -r compute >/dev/null

# verify: wait for the task; KEY=VALUE lines of its status, message and result.
verify() {
  local out id status=
  out=$(fuel2 env network verify "$env" 2>&1)
  id=$(grep -oE 'task with id [0-9]+' <<<"$out" | grep -oE '[0-9]+$' || true)
  [ -n "$id" ] || { echo "status=none"; echo "out=$out"; return; }
  for _ in $(seq 150); do
    status=$(fuel2 task show "$id" -f value -c status)
    [ "$status" = running ] || break
    sleep 0.2
  done
  echo "status=$status"
  echo "id=$id"
}
token() {
  ip netns exec "$a" curl -s --noproxy '*' -H 'Content-Type: application/json' \
    -d "{\"auth\":{\"passwordCredentials\":{\"username\":\"admin\",\"password\":\"$password\"}}}" \
    "$master/keystone/v2.0/tokens" | python3 -c 'import json,sys; print(json.load(sys.stdin)["access"]["token"]["id"])'
}
task_json() {
  ip netns exec "$a" curl -s --noproxy '*' -H "X-Auth-Token: $(token)" "$master/api/v1/transactions/$1"
}

res=$(verify)
id=$(sed -n 's/^id=//p' <<<"$res")
if grep -q '^status=ready$' <<<"$res"; then ok "every VLAN heard between the two nodes (task $id ready)"; else
  bad "every VLAN heard between the two nodes" "$res" "$( [ -n "$id" ] && task_json "$id")" "$(tail -5 "$work/$b.log")"
fi
spec_vlans=$(task_json "$id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])')
[ "$spec_vlans" = verify_networks ] && ok "the task is verify_networks" || bad "the task is verify_networks" "$spec_vlans"

# The storage network moves to eth1 on both nodes (as `fuel2 node interfaces upload` would);
# then the second node's eth1 goes down: VLAN 102 is not heard there, on either side.
api() { ip netns exec "$a" curl -s --noproxy '*' -H "X-Auth-Token: $(token)" "$@"; }
for n in $n1 $n2; do
  api "$master/api/v1/nodes/$n/interfaces" | python3 -c '
import json, sys
ifaces = json.load(sys.stdin)
by = {i["name"]: i for i in ifaces}
storage = [a for a in by["eth0"]["assigned_networks"] if a["name"] == "storage"]
by["eth0"]["assigned_networks"] = [a for a in by["eth0"]["assigned_networks"] if a["name"] != "storage"]
by["eth1"]["assigned_networks"] = by["eth1"]["assigned_networks"] + storage
print(json.dumps(ifaces))' >"$work/ifaces.json"
  code=$(api -o "$work/put.out" -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
    --data @"$work/ifaces.json" "$master/api/v1/nodes/$n/interfaces")
  [ "$code" = 200 ] || bad "storage moved to eth1 on node $n" "HTTP $code" "$(cat "$work/put.out")"
done
ip -n "$b" link set eth1 down
res=$(verify)
id=$(sed -n 's/^id=//p' <<<"$res")
verdict=$(task_json "$id" | python3 -c '
import json, sys
t = json.load(sys.stdin)
ifaces = sorted({r["interface"] for r in t["result"]})
vlans = sorted({v for r in t["result"] for v in r["absent_vlans"]})
print(t["status"], ",".join(ifaces), vlans == [102])')
if [ "$verdict" = "error eth1 True" ]; then ok "a link down: the VLANs absent on eth1 are named ($verdict)"; else
  bad "a link down: the VLANs absent on eth1 are named" "verdict: $verdict" "$(task_json "$id")"
fi
states=$(fuel2 node list -f value -c status | sort -u | tr '\n' ' ')
[ "$states" = "discover " ] && ok "no node state moved" || bad "no node state moved" "$states"

summary
