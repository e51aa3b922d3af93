#!/usr/bin/env bash
# The real python-fuelclient 11.0.0 against stoker's chains of graphs and deployment sequences
# (issue 16): a fresh daemon of BIN in a temp dir, two fake nodes whose agent this script plays
# (stoker's agent protocol, in Python, in the background: every step succeeds but graph tasks
# named fail_*, and tasks named slow_* take 5 s), an environment deployed to the end, graphs
# uploaded, then `fuel2 graph execute -t A B ...` (in order, a failing graph, a dry run, a
# noop run, stopped with `fuel2 env stop-deployment`) and `fuel2 sequence create | upload |
# list | show | update | download | execute | delete`, each checked by exit code and output,
# and what ran read back from the API (each graph's transaction, their order, the parent's
# status and message).
# usage: fuelclient-sequences.sh BIN   (FCVENV: the client's venv, /tmp/fcvenv by default)
# Ends with "N passed, M failed"; exits non-zero on a failure.
set -euo pipefail
bin=$(realpath "$1")

. "$(dirname "$0")/stoker-daemon.sh"
. "$(dirname "$0")/checks.sh"
fuel_client_venv "${FCVENV:-/tmp/fcvenv}"
agent_pid=
stop_all() {
  if [ -n "$agent_pid" ]; then kill "$agent_pid" 2>/dev/null || true; wait "$agent_pid" 2>/dev/null || true; fi
  stop_stoker
}
trap stop_all EXIT
start_stoker "$bin" 19300 fuelclient-sequences
fuel_client_config
base="http://127.0.0.1:$port"

# The id in "... task with id N ..." of the last command's output.
task_id() { sed -n 's/.*task with id \([0-9][0-9]*\).*/\1/p' <<<"$OUT" | head -1; }

# ---- the nodes' agent: stoker's protocol (hello, next, result; the installed OS's service
# hello with the credential deploy.configure handed out), played for two nodes until killed.
cat >"$work/agent.py" <<'PY'
import json, sys, time, requests
base, out = sys.argv[1], sys.argv[2]
macs = sys.argv[3:]
version = requests.get(base + "/api/v1/version", timeout=10).json()["version"]
def inventory(mac):
    return {"interfaces": [{"name": "eno1", "mac": mac, "speed_mbps": 10000, "link": True}],
            "cpu": {"count": 8, "model": "QEMU"}, "memory_bytes": 17179869184,
            "disks": [{"name": "sda", "size_bytes": 107374182400, "model": "QEMU", "serial": mac}],
            "system": {"vendor": "QEMU", "product": "Standard PC", "serial": mac},
            "boot_mode": "uefi"}
nodes = []
for mac in macs:
    r = requests.post(base + "/api/v1/agent/hello", json=inventory(mac), timeout=10)
    r.raise_for_status()
    body = r.json()
    nodes.append({"id": body["node"]["id"], "mac": mac, "token": body["agent_token"],
                  "credential": None})
with open(out + ".tmp", "w") as f:
    f.write(" ".join(str(n["id"]) for n in nodes) + "\n")
import os
os.rename(out + ".tmp", out)
def call(node, path, body):
    r = requests.post(base + path, json=body, timeout=30,
                      headers={"Authorization": "Bearer " + node["token"]})
    return r
while True:
    busy = False
    for n in nodes:
        try:
            r = call(n, "/api/v1/agent/next", {"node_id": n["id"]})
            if r.status_code != 200:
                continue
            v = r.json()
            if v.get("agent_token"):
                n["token"] = v["agent_token"]
            if v.get("action") != "run":
                continue
            busy = True
            run = v["run"]
            step = run["step"]
            name = (run.get("task") or {}).get("id") or step["interface"] + "." + step["name"]
            if name == "deploy.configure":
                n["credential"] = step["args"]["os_agent"]["config"]["credential"]
            if name.startswith("slow_"):
                time.sleep(5)
            ok = not name.startswith("fail_")
            call(n, "/api/v1/agent/runs/%d/result" % run["id"],
                 {"attempt": run["attempt"], "ok": ok, "exit_code": 0 if ok else 1,
                  "output_tail": "ran " + name, "error": None if ok else "exit 1"})
            if ok and name == "power.reboot_to_disk":
                h = requests.post(base + "/api/v1/agent/service/hello", timeout=10,
                                  json={"node_id": n["id"], "credential": n["credential"],
                                        "version": version, "macs": [n["mac"]]})
                h.raise_for_status()
                n["token"] = h.json()["agent_token"]
        except requests.RequestException as e:
            print("agent:", e, file=sys.stderr)
    if not busy:
        time.sleep(0.2)
PY
"$py" "$work/agent.py" "$base" "$work/nodes" 52:54:00:5e:00:01 52:54:00:5e:00:02 \
  >"$work/agent.log" 2>&1 &
agent_pid=$!
for _ in $(seq 100); do [ -s "$work/nodes" ] && break; sleep 0.1; done
read -r node1 node2 <"$work/nodes"
echo "# nodes $node1 $node2"

# ---- reading back through the API (the admin's token from Keystone, as fuel2 gets it)
cat >"$work/api.py" <<'PY'
import json, sys, time, requests
base, password, cmd = sys.argv[1], sys.argv[2], sys.argv[3]
args = sys.argv[4:]
tok = requests.post(base + "/keystone/v2.0/tokens", timeout=10, json={"auth": {
    "tenantName": "admin", "passwordCredentials": {"username": "admin", "password": password}}})
headers = {"X-Auth-Token": tok.json()["access"]["token"]["id"]}
def get(path):
    r = requests.get(base + "/api/v1/" + path, headers=headers, timeout=10)
    r.raise_for_status()
    return r.json()
def children(parent):
    t = get("transactions/%s" % parent)
    kids = [k for k in get("transactions?cluster_id=%s" % t["cluster"]) if k["parent_id"] == int(parent)]
    return sorted(kids, key=lambda k: k["id"])
if cmd == "wait":
    # wait ID STATUS: until transaction ID is no longer running; "ok" when it ended STATUS.
    tid, want = args
    deadline = time.time() + 120
    while True:
        t = get("transactions/%s" % tid)
        if t["status"] not in ("running", "pending") or time.time() > deadline:
            break
        time.sleep(0.3)
    print("ok" if t["status"] == want else "transaction %s is %s (%s), not %s" % (tid, t["status"], t["message"], want))
elif cmd == "running":
    # running ID: until transaction ID's first graph has a step running.
    tid = args[0]
    deadline = time.time() + 30
    while time.time() < deadline:
        kids = children(tid)
        if kids and any(s["status"] == "running" for s in get("deployments/%d" % kids[-1]["id"])["steps"]):
            print("ok"); break
        time.sleep(0.2)
    else:
        print("no step of transaction %s started" % tid)
elif cmd == "children":
    # children ID TYPE:STATUS...: its graphs' transactions, in order, are these.
    got = ["%s:%s" % (k["graph_type"], k["status"]) for k in children(args[0])]
    print("ok" if got == args[1:] else "graphs of %s: %s, not %s" % (args[0], got, args[1:]))
elif cmd == "field":
    # field ID KEY REGEX: transaction ID's KEY matches REGEX.
    import re
    t = get("transactions/%s" % args[0])
    v = json.dumps(t[args[1]]) if not isinstance(t[args[1]], str) else t[args[1]]
    print("ok" if re.search(args[2], v) else "%s of %s is %r" % (args[1], args[0], v))
elif cmd == "ordered":
    # ordered ID: each node ran every task of its first graph before any of its second.
    kids = children(args[0])
    ends = [max((s["finished_at"] or 0) for s in get("deployments/%d" % k["id"])["steps"]) for k in kids]
    starts = [min((s["started_at"] or 1 << 62) for s in get("deployments/%d" % k["id"])["steps"] if s["node_id"]) for k in kids]
    ids = [k["id"] for k in kids]
    ok = ids == sorted(ids) and all(starts[i + 1] >= ends[i] for i in range(len(kids) - 1))
    print("ok" if ok else "graphs overlap: ids %s, starts %s, ends %s" % (ids, starts, ends))
PY
api() { "$py" "$work/api.py" "$base" "$password" "$@"; }

# ---- an environment of two nodes, deployed to the end
check "release list" "[Uu]buntu" -- "$fuel2" release list -f json
rel=$("$py" -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])' <<<"$OUT")
check "env create" "seqenv" -- "$fuel2" env create -r "$rel" -nst vlan seqenv -f json
env=$("$py" -c 'import json,sys; print(json.load(sys.stdin)["id"])' <<<"$OUT")
check "env add nodes (controller)" "." -- "$fuel2" env add nodes -e "$env" -n "$node1" -r controller
check "env add nodes (compute)" "." -- "$fuel2" env add nodes -e "$env" -n "$node2" -r compute
check "env deploy" "Deployment task with id [0-9]+ for the environment $env" -- "$fuel2" env deploy "$env"
expect "env deploy ends ready" "$(api wait "$(task_id)" ready)"

graph() {  # graph TYPE TASK: a graph of one shell task on every node, uploaded for the env
  printf -- "- id: %s\n  type: shell\n  version: 2.1.0\n  roles: ['/.*/']\n  parameters: {cmd: echo %s, timeout: 60}\n" "$2" "$2" >"$work/$1.yaml"
  check "graph upload $1" "." -- "$fuel2" graph upload -e "$env" -t "$1" -f "$work/$1.yaml"
}
graph seq_a seq_a_task
graph seq_b seq_b_task
graph fail_c fail_task
graph slow_d slow_task

# ---- fuel2 graph execute with several graphs: one after another, as one transaction
check "graph execute -t seq_a seq_b" "Deployment task with id [0-9]+ for the environment $env has been started" -- \
  "$fuel2" graph execute -e "$env" -t seq_a seq_b
tid=$(task_id)
expect "the two graphs end ready" "$(api wait "$tid" ready)"
expect "each graph is a transaction of its own, in order" "$(api children "$tid" seq_a:ready seq_b:ready)"
expect "the second graph started after the first ended" "$(api ordered "$tid")"
check "task show of the parent" "deploy" -- "$fuel2" task show "$tid"
check "task list shows both graphs" "seq_b" -- "$fuel2" task list -e "$env"
kid=$("$py" -c 'import json,sys; print(max(t["id"] for t in json.load(sys.stdin) if t["graph_type"] == "seq_b"))' \
  <<<"$("$fuel2" task list -e "$env" -f json)")
check "task history of the second graph" "seq_b_task" -- "$fuel2" task history show "$kid"

check "graph execute -t seq_a fail_c seq_b" "Deployment task with id [0-9]+" -- \
  "$fuel2" graph execute -e "$env" -t seq_a fail_c seq_b
tid=$(task_id)
expect "a failing graph fails the whole" "$(api wait "$tid" error)"
expect "the parent names the failed graph" "$(api field "$tid" message 'graph 2 of 3 \(fail_c\) failed')"
expect "the graph after it never ran" "$(api children "$tid" seq_a:ready fail_c:error)"
check "task show names the failed graph" "fail_c" -- "$fuel2" task show "$tid"

check "graph execute --dry-run" "Deployment task with id [0-9]+" -- \
  "$fuel2" graph execute -e "$env" -t seq_a seq_b --dry-run
tid=$(task_id)
expect "a dry run is over at once" "$(api wait "$tid" ready)"
expect "a dry run records each graph" "$(api children "$tid" seq_a:ready seq_b:ready)"
expect "a dry run says so" "$(api field "$tid" dry_run true)"
check "graph execute --noop --format json" '"dry_run": true' -- \
  "$fuel2" graph execute -e "$env" -t seq_b seq_a --noop --format json

check "graph execute -t slow_d seq_b" "Deployment task with id [0-9]+" -- \
  "$fuel2" graph execute -e "$env" -t slow_d seq_b
tid=$(task_id)
expect "the slow graph runs" "$(api running "$tid")"
refused "env deploy refused while graphs run" "409|being deployed|one after another" -- "$fuel2" env deploy "$env"
check "env stop-deployment" "Stop deployment task with id $tid" -- "$fuel2" env stop-deployment "$env"
expect "a stopped chain ends" "$(api wait "$tid" error)"
expect "the parent says where it was stopped" "$(api field "$tid" message 'stopped by the operator at graph 1 of 2 \(slow_d')"
sleep 2
expect "nothing after the stopped graph starts" "$(api children "$tid" slow_d:error)"
refused "graph execute -T (a subset of tasks)" "graphs\[0\]\.tasks" -- \
  "$fuel2" graph execute -e "$env" -t seq_a seq_b -T seq_a_task
refused "graph execute of a type nothing defines" "graphs\[1\]\.type" -- \
  "$fuel2" graph execute -e "$env" -t seq_a nope

# ---- fuel2 sequence
check "sequence create" "Sequence was successfully created" -- \
  "$fuel2" sequence create -r "$rel" -n both -t seq_a seq_b -f json
seq=$("$py" -c 'import json,sys; t=sys.stdin.read(); print(json.loads(t[t.index("{"):])["id"])' <<<"$OUT")
refused "sequence create of a name taken" "already exist" -- \
  "$fuel2" sequence create -r "$rel" -n both -t seq_a
check "sequence list -r" "both" -- "$fuel2" sequence list -r "$rel"
check "sequence list -e" "both" -- "$fuel2" sequence list -e "$env"
check "sequence show" "seq_a, seq_b" -- "$fuel2" sequence show "$seq"
check "sequence update" "successfully updated" -- "$fuel2" sequence update "$seq" -n both2 -t seq_b seq_a
check "sequence show after update: name" '"name": "both2"' -- "$fuel2" sequence show "$seq" -f json
check "sequence show after update: graphs" '"graphs": "seq_b, seq_a"' -- "$fuel2" sequence show "$seq" -f json
check "sequence download" "^" -- "$fuel2" sequence download "$seq" --file "$work/seq.yaml"
check "sequence download wrote it" "seq_b" -- cat "$work/seq.yaml"
printf 'name: uploaded\ngraphs:\n  - type: seq_a\n' >"$work/up.yaml"
check "sequence upload" "Sequence was successfully created" -- "$fuel2" sequence upload -r "$rel" --file "$work/up.yaml"
printf 'name: bad\ngraphs:\n  - type: seq_a\n    when: later\n' >"$work/bad.yaml"
refused "sequence upload with an unknown key" "when" -- "$fuel2" sequence upload -r "$rel" --file "$work/bad.yaml"
check "sequence list shows both" "uploaded" -- "$fuel2" sequence list -r "$rel"
check "sequence execute" "Deployment task with id [0-9]+ for the environment $env has been started" -- \
  "$fuel2" sequence execute "$seq" -e "$env"
tid=$(task_id)
expect "the sequence ends ready" "$(api wait "$tid" ready)"
expect "the sequence ran its graphs in its order" "$(api children "$tid" seq_b:ready seq_a:ready)"
expect "the sequence's second graph started after its first ended" "$(api ordered "$tid")"
check "sequence execute --dry-run --force" "Deployment task with id [0-9]+" -- \
  "$fuel2" sequence execute "$seq" -e "$env" --dry-run --force
expect "a sequence's dry run is over at once" "$(api wait "$(task_id)" ready)"
refused "sequence execute on no environment" "404|not found" -- "$fuel2" sequence execute "$seq" -e 999
check "sequence delete" "Sequence with id $seq was deleted" -- "$fuel2" sequence delete "$seq"
refused "sequence show after delete" "404|not found" -- "$fuel2" sequence show "$seq"

summary
