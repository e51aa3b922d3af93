#!/usr/bin/env bash
# Deployment graph benchmark (issue 5, item 9): plan fuel-library stable-newton for 1,000 nodes
# (3 controllers, then computes with every fifth node a cinder node), generated from
# tests/fixtures/graph/newton-cluster.yaml, and report wall time and peak RSS per output format
# (/usr/bin/time -v). Goal: < 2 s and < 500 MB on the 2-core build machine. Not part of CI.
#
# usage: benches/graph.sh [STOKER_BIN] [SHARED_DIR] [NODES]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(readlink -f "${1:-$root/target/release/stoker}")
shared=${2:-$root/../shared}
count=${3:-1000}
release=$shared/corpus/fuel-library/stable-newton
[ -d "$release" ] || { echo "bench: $release not found"; exit 2; }
[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time missing (apt-get install time)"; exit 2; }
work=$(mktemp -d /tmp/stoker-graph-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The fixture's settings and first node (with the network scheme anchor), then the rest.
python3 - "$root/tests/fixtures/graph/newton-cluster.yaml" "$count" >"$work/cluster.yaml" <<'EOF'
import sys
text = open(sys.argv[1]).read()
count = int(sys.argv[2])
head, nodes = text.split("\nnodes:\n", 1)
first = nodes.splitlines()[0]
print(head)
print("nodes:")
print(first)
for uid in range(2, count + 1):
    role = "controller" if uid <= 3 else ("cinder" if uid % 5 == 0 else "compute")
    print(f"  - {{uid: {uid}, roles: [{role}], data: {{network_scheme: *scheme}}}}")
EOF

echo "stable-newton, $count nodes ($(grep -c 'roles: \[controller\]' "$work/cluster.yaml") controllers," \
  "$(grep -c 'roles: \[compute\]' "$work/cluster.yaml") computes," \
  "$(grep -c 'roles: \[cinder\]' "$work/cluster.yaml") cinder), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
for format in text json dot; do
  /usr/bin/time -v "$bin" graph plan --release "$release" --cluster "$work/cluster.yaml" \
    --format "$format" >"$work/plan.$format" 2>"$work/time.$format"
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/time.$format")
  user=$(sed -n 's/.*User time (seconds): //p' "$work/time.$format")
  sys=$(sed -n 's/.*System time (seconds): //p' "$work/time.$format")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time.$format")
  printf '%-5s wall %s  user %ss  sys %ss  peak RSS %d MB  output %d MB\n' "$format" "$wall" \
    "$user" "$sys" $((rss / 1024)) $(($(stat -c %s "$work/plan.$format") / 1048576))
done
python3 -c "
import json, sys
s = json.load(open(sys.argv[1]))['summary']
print(f\"plan: {s['run']} tasks to run, {s['skipped']} skipped, {s['edges']} edges \"
      f\"({s['cross_node_edges']} across nodes)\")" "$work/plan.json"
