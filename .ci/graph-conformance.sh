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
#  - stable-8.0 plans with its legacy string conditions;
#  - every plan above, a 200-node stable-newton plan and a redeploy of it with nodes added and
#    removed say what the direct, quadratic reference (`--reference`: a wait per group member,
#    each condition on each node) says: the same tasks, order, statuses, parameters and data,
#    each task waiting for the same tasks, and the same pairs of tasks ordered, directly or
#    through others (groups read as barrier vertices).
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

echo "the reference way: 10 nodes, plugins, stable-8.0, 200 nodes and a redeploy"
plan --release "$newton" --reference >"$work/newton.ref.json"
plan --release "$newton" "${with_plugins[@]}" --reference >"$work/plugins.ref.json"
plan --release "$eight" --reference >"$work/eight.ref.json"
# The fixture's settings and first node (with the network scheme anchor), then the rest: 3
# controllers, computes, every fifth a cinder node (as benches/graph.sh), from FIRST to LAST.
nodes() {
  python3 - "$cluster" "$1" "$2" "${3:-}" <<'PY'
import sys
text = open(sys.argv[1]).read()
first_uid, last, skip = int(sys.argv[2]), int(sys.argv[3]), set(sys.argv[4].split())
head, nodes = text.split("\nnodes:\n", 1)
print(head)
print("nodes:")
print(nodes.splitlines()[0])
for uid in range(2, last + 1):
    if str(uid) in skip or 3 < uid < first_uid:
        continue
    role = "controller" if uid <= 3 else ("cinder" if uid % 5 == 0 else "compute")
    print(f"  - {{uid: {uid}, roles: [{role}], data: {{network_scheme: *scheme}}}}")
PY
}
nodes 0 200 >"$work/c200.yaml"
nodes 0 210 "17 18 150" >"$work/c210.yaml"
"$bin" graph plan --release "$newton" --cluster "$work/c200.yaml" --format json \
  --record "$work/deployed.json" >"$work/n200.json"
"$bin" graph plan --release "$newton" --cluster "$work/c200.yaml" --format json --reference \
  >"$work/n200.ref.json"
for mode in "" --reference; do
  "$bin" graph plan --release "$newton" --cluster "$work/c210.yaml" --format json \
    --deployed "$work/deployed.json" $mode >"$work/n210${mode:+.ref}.json"
done

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

def same(name, fast, ref):
    """`fast` (barriers, shared conditions) says what `ref` (the direct way) says."""
    check(ref["groups"] == [], f"{name}: the reference has groups")
    groups = {g["id"]: g for g in fast["groups"]}
    def waits(p, t, by_id):
        w = [(r["task"], r["node"]) for r in t["requires"]]
        for g in t.get("requires_groups", []):
            w += [(by_id[g]["task"], node) for node in by_id[g]["nodes"]]
        return w
    def bare(t):
        return {k: v for k, v in t.items() if k not in ("requires", "requires_groups")}
    check([n["uid"] for n in fast["nodes"]] == [n["uid"] for n in ref["nodes"]],
          f"{name}: other nodes")
    for a, b in zip(fast["nodes"], ref["nodes"]):
        check({k: v for k, v in a.items() if k != "tasks"} == {k: v for k, v in b.items() if k != "tasks"},
              f"{name}: node {a['uid']} differs")
        check([t["id"] for t in a["tasks"]] == [t["id"] for t in b["tasks"]],
              f"{name}: node {a['uid']} runs other tasks")
        for x, y in zip(a["tasks"], b["tasks"]):
            check(bare(x) == bare(y), f"{name}: {x['id']}@{a['uid']} differs")
            got = waits(fast, x, groups)
            check(len(got) == len(set(got)), f"{name}: {x['id']}@{a['uid']} waits twice")
            check(sorted(got) == sorted(waits(ref, y, {})),
                  f"{name}: {x['id']}@{a['uid']} waits for other tasks")
    for k in fast:
        if k in ("groups", "nodes", "summary"):
            continue
        check(fast[k] == ref.get(k), f"{name}: {k} differs")
    strip = lambda s: {k: v for k, v in s.items() if k not in ("barriers", "yaql_steps")}
    check(strip(fast["summary"]) == strip(ref["summary"]), f"{name}: summaries differ")
    # Reachability, as bit sets of (task, node) in plan order; a group is a barrier vertex
    # between its members and the tasks that wait for it.
    def ancestors(p, by_id):
        steps = sorted(((t["order"], t["id"], n["uid"], t) for n in p["nodes"] for t in n["tasks"]),
                       key=lambda s: s[0])
        bit = {(i, u): k for k, (_, i, u, _) in enumerate(steps)}
        anc, through = {}, {}
        for _, i, u, t in steps:
            mine = 0
            for r in t["requires"]:
                key = (r["task"], r["node"])
                mine |= anc.get(key, 0) | (1 << bit[key])
            for g in t.get("requires_groups", []):
                if g not in through:
                    m = 0
                    for node in by_id[g]["nodes"]:
                        key = (by_id[g]["task"], node)
                        m |= anc.get(key, 0) | (1 << bit[key])
                    through[g] = m
                mine |= through[g]
            anc[(i, u)] = mine
        return {k: v for k, v in anc.items()}, bit
    fa, fbit = ancestors(fast, groups)
    ra, rbit = ancestors(ref, {})
    check(fbit == rbit, f"{name}: other order")
    check(fa == ra, f"{name}: other pairs of tasks ordered")
    return len(fast["groups"])

compared = []
for name, fast, ref in (("newton", "newton", "newton.ref"), ("plugins", "plugins", "plugins.ref"),
                        ("stable-8.0", "eight", "eight.ref"), ("200 nodes", "n200", "n200.ref"),
                        ("redeploy", "n210", "n210.ref")):
    g = same(name, json.load(open(f"{work}/{fast}.json")), json.load(open(f"{work}/{ref}.json")))
    compared.append(f"{name} ({g} groups)")
n210 = json.load(open(f"{work}/n210.json"))
check(0 < n210["summary"]["run"] < json.load(open(f"{work}/n200.json"))["summary"]["run"],
      "redeploy: runs everything or nothing")

summary = (f"newton {newton['summary']['run']} run / {newton['summary']['skipped']} skipped / "
           f"{newton['summary']['edges']} edges; plugins {len(gen)} legacy post_deployment tasks "
           f"in order {sorted(set(numbers))}; 8.0 {eight['summary']['run']} run, "
           f"{len(legacy)} skipped by string conditions; as the reference: {', '.join(compared)}")
if failures:
    print("\n".join(failures[:40]), file=sys.stderr)
    print(f"{len(failures)} check(s) failed", file=sys.stderr)
    sys.exit(1)
print("graph conformance ok:", summary)
EOF
