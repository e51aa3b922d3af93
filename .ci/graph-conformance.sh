#!/usr/bin/env bash
# Deployment graph engine on real data (issue 5, item 8): usage: graph-conformance.sh BIN SHARED
#  - fuel-library stable-newton plans without cycles for 3 controllers + 5 computes + 2 cinder
#    (tests/fixtures/graph/newton-cluster.yaml), and the plan is sane: exactly one primary
#    controller, every wait earlier in the order (same node and across, each member of a group
#    wait too, none said twice), controller tasks on
#    controllers only, compute and cinder tasks on theirs only, deterministic bytes;
#  - the corpus plugins merge in and their legacy post_deployment tasks interleave by number
#    (700 < 8000 < 8100 < 8101 ... < 8200), ties by plugin name then file order; contrail and
#    murano both define the task `murano`, which is refused as Fuel refused it;
#  - stable-8.0 plans with its legacy string conditions.
# Checks the JSON with python3's standard library only. Takes a few seconds.
set -euo pipefail
bin=$1
shared=$2
root="$(cd "$(dirname "$0")/.." && pwd)"
cluster="$root/tests/fixtures/graph/newton-cluster.yaml"
newton="$shared/corpus/fuel-library/stable-newton"
eight="$shared/corpus/fuel-library/stable-8.0"
plugins="$shared/corpus/plugins"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

plan() { "$bin" graph plan --cluster "$cluster" --format json "$@"; }

echo "stable-newton, 10 nodes"
plan --release "$newton" >"$work/newton.json"
plan --release "$newton" >"$work/newton2.json"
cmp -s "$work/newton.json" "$work/newton2.json" || { echo "plan is not deterministic" >&2; exit 1; }

echo "stable-newton with the corpus plugins"
with_plugins=()
for p in lma-collector external-zabbix glance-nfs cinder-netapp ldap detach-rabbitmq murano; do
  with_plugins+=(--plugin "$plugins/fuel-plugin-$p")
done
plan --release "$newton" "${with_plugins[@]}" >"$work/plugins.json"

echo "contrail and murano overlap"
if plan --release "$newton" --plugin "$plugins/fuel-plugin-contrail" \
  --plugin "$plugins/fuel-plugin-murano" >/dev/null 2>"$work/overlap.err"; then
  echo "contrail + murano should overlap on task murano" >&2; exit 1
fi
grep -q "is overlapping with plugin" "$work/overlap.err" || { cat "$work/overlap.err" >&2; exit 1; }

echo "stable-8.0, string conditions"
plan --release "$eight" >"$work/eight.json"

python3 - "$work" <<'EOF'
import json, re, sys

work = sys.argv[1]
failures = []

def check(ok, what):
    if not ok:
        failures.append(what)

def sane(name, p, controller_only=(), compute_only=(), cinder_only=()):
    nodes = {n["uid"]: n for n in p["nodes"]}
    cluster = [n for n in p["nodes"] if n["uid"] not in ("master", "null")]
    check(len(cluster) == 10, f"{name}: 10 cluster nodes, got {len(cluster)}")
    primaries = [n["uid"] for n in cluster if "primary-controller" in n["roles"]]
    check(len(primaries) == 1, f"{name}: exactly one primary-controller, got {primaries}")
    controllers = {n["uid"] for n in cluster
                   if {"controller", "primary-controller"} & set(n["roles"])}
    check(len(controllers) == 3, f"{name}: 3 controllers, got {sorted(controllers)}")
    # Every wait comes earlier: same-node requires in the node's list, and in the global order.
    order = {}
    for n in p["nodes"]:
        for t in n["tasks"]:
            order[(t["id"], n["uid"])] = t["order"]
    # A group wait (barrier) stands for a wait for each of its members.
    groups = {g["id"]: [(g["task"], node) for node in g["nodes"]] for g in p["groups"]}
    check(len(groups) == p["summary"]["barriers"],
          f"{name}: {len(groups)} groups, {p['summary']['barriers']} barriers")
    waits = 0
    for n in p["nodes"]:
        position = {t["id"]: i for i, t in enumerate(n["tasks"])}
        for i, t in enumerate(n["tasks"]):
            members = [m for g in t.get("requires_groups", []) for m in groups[g]]
            direct = [(r["task"], r["node"]) for r in t["requires"]]
            check(not set(direct) & set(members),
                  f"{name}: {t['id']}@{n['uid']} waits for a group member twice")
            for key in direct + members:
                waits += 1
                check(key in order, f"{name}: {t['id']}@{n['uid']} waits for unknown {key}")
                if key in order:
                    check(order[key] < t["order"],
                          f"{name}: {t['id']}@{n['uid']} runs before {key}")
                if key[1] == n["uid"]:
                    check(position.get(key[0], 10**9) < i,
                          f"{name}: {key[0]} not before {t['id']} on node {n['uid']}")
    check(waits == p["summary"]["edges"], f"{name}: {waits} waits, {p['summary']['edges']} edges")
    check(len(set(order.values())) == len(order), f"{name}: orders are not unique")
    def where(task):
        return {n["uid"] for n in cluster if any(t["id"] == task for t in n["tasks"])}
    for task in controller_only:
        on = where(task)
        check(on and on <= controllers, f"{name}: {task} on {sorted(on)}, not only controllers")
    for role, tasks in (("compute", compute_only), ("cinder", cinder_only)):
        for task in tasks:
            on = where(task)
            ok = {n["uid"] for n in cluster if role in n["roles"]}
            check(on and on <= ok, f"{name}: {task} on {sorted(on)}, not only {role} nodes")
    return nodes

newton = json.load(open(f"{work}/newton.json"))
sane("stable-newton", newton,
     controller_only=["openstack-controller", "primary-openstack-controller", "keystone",
                      "primary-database", "database", "openstack-haproxy", "primary-cluster",
                      "cluster", "primary-rabbitmq", "rabbitmq", "horizon", "heat"],
     compute_only=["top-role-compute", "openstack-network-compute-nova",
                   "enable_nova_compute_service"],
     cinder_only=["top-role-cinder"])
check(newton["warnings"] == [], f"stable-newton: warnings {newton['warnings'][:3]}")
run = newton["summary"]["run"]
check(run > 300, f"stable-newton: only {run} tasks run")

plugged = json.load(open(f"{work}/plugins.json"))
sane("stable-newton + plugins", plugged)
gen = [g for g in plugged["generated"] if g["stage"].startswith("post_deployment")]
def number(stage):
    return float(stage.split("/", 1)[1]) if "/" in stage else 0.0
keys = [(number(g["stage"]), g["plugin"]) for g in gen]
check(keys == sorted(keys), f"plugins: post_deployment order {keys}")
check([g["id"] for g in gen] == [f"post_deployment_{i}" for i in range(len(gen))],
      "plugins: generated ids are not post_deployment_0..N in order")
numbers = [k[0] for k in keys]
for a, b in ((700, 8000), (8000, 8100), (8100, 8101), (8103, 8200)):
    check(a in numbers and b in numbers and
          max(i for i, x in enumerate(numbers) if x == a) <
          min(i for i, x in enumerate(numbers) if x == b), f"plugins: {a} before {b}")
# In every node's list, legacy tasks keep the generated order.
for n in plugged["nodes"]:
    seq = [int(t["id"].rsplit("_", 1)[1]) for t in n["tasks"]
           if re.fullmatch(r"post_deployment_\d+", t["id"])]
    check(seq == sorted(seq), f"plugins: node {n['uid']} runs legacy tasks as {seq}")
ids = {t["id"] for n in plugged["nodes"] for t in n["tasks"]}
check(len(ids) > len({t["id"] for n in newton["nodes"] for t in n["tasks"]}),
      "plugins: no plugin task was merged in")

eight = json.load(open(f"{work}/eight.json"))
sane("stable-8.0", eight, controller_only=["openstack-controller", "keystone", "database"],
     compute_only=["top-role-compute"], cinder_only=["top-role-cinder"])
legacy = [t for n in eight["nodes"] for t in n["tasks"]
          if t.get("reason", "").startswith("condition is false: settings:")]
check(legacy, "stable-8.0: no string condition was false")

summary = (f"newton {newton['summary']['run']} run / {newton['summary']['skipped']} skipped / "
           f"{newton['summary']['edges']} edges; plugins {len(gen)} legacy post_deployment tasks "
           f"in order {sorted(set(numbers))}; 8.0 {eight['summary']['run']} run, "
           f"{len(legacy)} skipped by string conditions")
if failures:
    print("\n".join(failures[:40]), file=sys.stderr)
    print(f"{len(failures)} check(s) failed", file=sys.stderr)
    sys.exit(1)
print("graph conformance ok:", summary)
EOF
