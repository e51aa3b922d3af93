#!/usr/bin/env bash
# Deployment graph benchmark (issue 5 item 9, issue 19 item 2): plan fuel-library stable-newton
# for 1,000, 3,000 and 10,000 nodes (3 controllers, then computes with every fifth node a cinder
# node), generated from tests/fixtures/graph/newton-cluster.yaml, with `stoker graph plan`.
#
# Each round plans every size in every format, the sizes alternating (each round starts at the
# next size, so no size always runs first or right after the biggest); ROUNDS rounds (>= 5).
# With BASE=BIN (a stoker built from an earlier commit) each plan of BASE_SIZES (default 1000
# 3000: its plans are quadratic, 10,000 nodes would take minutes and write gigabytes) is made
# by both binaries, one right after the other, so both see the same machine.
# For each binary, size and format: CPU (user + sys), wall time and peak RSS (/usr/bin/time),
# as median and min-max; the output's size; the cost exponent fitted over the sizes (least
# squares of log CPU on log nodes, and each step's); and what bounds the figures: cores used
# (CPU / wall), what writing the output costs (json and dot beside text), the machine's load.
# Goal (issue 19): 10,000 nodes in < 20 s CPU and < 2 GB, cost growing at most as n^1.2. A
# markdown table for the README comes last. There is no other peer: Nailgun's LCM serializer
# (Python 2, PostgreSQL, the whole of fuel-web) cannot run here.
#
# With API=1 it then plans through the daemon too (benches/plan_api.rs, `cargo bench --bench
# plan_api`: `stoker serve`, an environment of API_NODES nodes, GET /api/v1/clusters/{id}/plan
# timed while another client's GETs are timed beside it).
#
# usage: benches/graph.sh [STOKER_BIN] [SHARED_DIR] [ROUNDS]
#        SIZES="1000 3000 10000" FORMATS="text json dot" BASE=BIN BASE_SIZES="1000 3000"
#        API=1 API_NODES=10000
# Not part of CI.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(readlink -f "${1:-$root/target/release/stoker}")
shared=$(readlink -f "${2:-$root/../shared}")
rounds=${3:-5}
sizes=(${SIZES:-1000 3000 10000})
formats=(${FORMATS:-text json dot})
base=${BASE:+$(readlink -f "$BASE")}
base_sizes=" ${BASE_SIZES:-1000 3000} "
release=$shared/corpus/fuel-library/stable-newton
[ -d "$release" ] || { echo "bench: $release not found"; exit 2; }
[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time missing (apt-get install time)"; exit 2; }
[ "$rounds" -ge 5 ] || { echo "bench: at least 5 rounds"; exit 2; }
work=$(mktemp -d /tmp/stoker-graph-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The fixture's settings and first node (with the network scheme anchor), then the rest.
for n in "${sizes[@]}"; do
  python3 - "$root/tests/fixtures/graph/newton-cluster.yaml" "$n" >"$work/cluster-$n.yaml" <<'EOF'
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
done

echo "stoker graph plan, fuel-library stable-newton: sizes ${sizes[*]}, formats ${formats[*]}," \
  "$rounds rounds; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "binary: $bin ($("$bin" version 2>/dev/null | head -1))"
if [ -n "$base" ]; then
  echo "base:   $base ($("$base" version 2>/dev/null | head -1)), at sizes$base_sizes, alternating"
else
  echo "no base binary (BASE=): nothing to alternate with"
fi
load_start=$(cut -d' ' -f1 /proc/loadavg)
: >"$work/runs.tsv"
one() { # label binary nodes format
  local out="$work/plan-$1-$3.$4" wall user sys rss
  /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$2" graph plan --release "$release" \
    --cluster "$work/cluster-$3.yaml" --format "$4" >"$out"
  read -r wall user sys rss <"$work/time"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$r" "$3" "$4" "$wall" "$user" "$sys" \
    "$rss" "$(stat -c %s "$out")" >>"$work/runs.tsv"
  printf 'round %d: %-4s %6d nodes %-4s  cpu %6.2f s  wall %6.2f s  rss %5d MB\n' "$((r + 1))" \
    "$1" "$3" "$4" "$(awk "BEGIN{print $user + $sys}")" "$wall" $((rss / 1024))
  # Only the last JSON is read (the summary); the rest would fill the disk.
  if [ "$4" != json ] || [ "$1" != new ]; then rm -f "$out"; fi
}
for ((r = 0; r < rounds; r++)); do
  for ((k = 0; k < ${#sizes[@]}; k++)); do
    n=${sizes[$(((r + k) % ${#sizes[@]}))]}
    for format in "${formats[@]}"; do
      # Which binary goes first alternates by round.
      if [ -n "$base" ] && [[ $base_sizes == *" $n "* ]]; then
        if ((r % 2)); then one base "$base" "$n" "$format"; one new "$bin" "$n" "$format"
        else one new "$bin" "$n" "$format"; one base "$base" "$n" "$format"; fi
      else
        one new "$bin" "$n" "$format"
      fi
    done
  done
done
# What the plans say, from the last JSON.
for n in "${sizes[@]}"; do
  if [ -f "$work/plan-new-$n.json" ]; then
    python3 -c "
import json, sys
s = json.load(open(sys.argv[1]))['summary']
print(f'{sys.argv[2]:>6} nodes: {s[\"run\"]} tasks to run, {s[\"skipped\"]} skipped, '
      f'{s[\"edges\"]} waits ({s[\"cross_node_edges\"]} across nodes) as '
      f'{s[\"barriers\"]} group waits and the rest direct, {s[\"yaql_steps\"]} YAQL steps')" \
      "$work/plan-new-$n.json" "$n"
  fi
done

python3 - "$work/runs.tsv" "$(nproc)" "$load_start" "$(cut -d' ' -f1 /proc/loadavg)" <<'EOF'
import math, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
cores, load0, load1 = int(sys.argv[2]), sys.argv[3], sys.argv[4]
runs = {}
for label, r, n, fmt, wall, user, sys_, rss, size in rows:
    runs.setdefault((label, int(n), fmt), []).append(
        (float(user) + float(sys_), float(wall), int(rss) / 1024, int(size) / 1e6))
labels = list(dict.fromkeys(l for l, _, _ in runs))
formats = list(dict.fromkeys(f for _, _, f in runs))

def sizes_of(label):
    return sorted({n for l, n, _ in runs if l == label})

def stat(v):
    return statistics.median(v), min(v), max(v)

def med(label, n, f, i):
    return statistics.median(x[i] for x in runs[(label, n, f)])

def fit(points):
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(max(v, 1e-9)) for _, v in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else float("nan")

print()
print(f"{'binary':<5} {'nodes':>6} {'format':<6} {'CPU s median (min-max)':<24} "
      f"{'wall s median (min-max)':<25} {'peak RSS MB median (min-max)':<29} {'output MB':>9} "
      f"{'cores used':>10}")
for label in labels:
    for n in sizes_of(label):
        for f in formats:
            v = runs[(label, n, f)]
            c, w, m = stat([x[0] for x in v]), stat([x[1] for x in v]), stat([x[2] for x in v])
            print(f"{label:<5} {n:>6} {f:<6} {c[0]:7.2f} ({c[1]:.2f}-{c[2]:.2f}){'':<5} "
                  f"{w[0]:7.2f} ({w[1]:.2f}-{w[2]:.2f}){'':<6} {m[0]:7.0f} ({m[1]:.0f}-{m[2]:.0f})"
                  f"{'':<12} {statistics.median(x[3] for x in v):9.1f} "
                  f"{c[0] / w[0] if w[0] else 0:10.2f}")
print()
goal = []
for label in labels:
    sizes = sizes_of(label)
    if len(sizes) < 2:
        continue
    for f in formats:
        cpu = [(n, med(label, n, f, 0)) for n in sizes]
        rss = [(n, med(label, n, f, 2)) for n in sizes]
        steps = ", ".join(f"{a[0]}->{b[0]} n^{fit([a, b]):.2f}" for a, b in zip(cpu, cpu[1:]))
        print(f"{label} {f}: CPU grows as n^{fit(cpu):.2f} (least squares over {len(cpu)} sizes; "
              f"{steps}); peak RSS as n^{fit(rss):.2f}")
        if label == "new" and f == formats[0]:
            big = sizes[-1]
            goal.append(f"CPU at {big} nodes {cpu[-1][1]:.1f} s (goal < 20 s): "
                        f"{'met' if cpu[-1][1] < 20 else 'NOT met'}")
            goal.append(f"peak RSS at {big} nodes {rss[-1][1]:.0f} MB (goal < 2048 MB): "
                        f"{'met' if rss[-1][1] < 2048 else 'NOT met'}")
            goal.append(f"exponent n^{fit(cpu):.2f} (goal <= 1.2): "
                        f"{'met' if fit(cpu) <= 1.2 else 'NOT met'}")
if "base" in labels:
    print()
    for n in sizes_of("base"):
        for f in formats:
            if ("new", n, f) in runs:
                print(f"{n} nodes {f}: base/new CPU {med('base', n, f, 0) / med('new', n, f, 0):.1f}x, "
                      f"peak RSS {med('base', n, f, 2) / med('new', n, f, 2):.1f}x, output "
                      f"{med('base', n, f, 3) / max(med('new', n, f, 3), 1e-9):.1f}x")
print()
for g in goal:
    print("goal:", g)
print()
print("what bounds the figures:")
first = formats[0]
for n in sizes_of("new"):
    c, w = med("new", n, first, 0), med("new", n, first, 1)
    print(f"  {n} nodes, {first}: {c / w:.2f} of {cores} cores busy (per-node evaluation runs on two "
          f"threads; merging, edges, ordering and output on one)")
    for f in formats[1:]:
        fc, mb = med("new", n, f, 0), med("new", n, f, 3)
        print(f"    {f}: {fc - c:+.2f} s CPU beside {first} for {mb:.0f} MB of output: the cost of "
              f"writing it")
print(f"  the machine: load {load0} at start, {load1} at the end on {cores} cores; CPU time is "
      f"the process's own (other builds share the cores and their caches), wall time also "
      f"counts waiting for a core")
print()
print("| binary | nodes | format | CPU (user + sys) | wall | peak RSS | output |")
print("|---|---|---|---|---|---|---|")
for label in labels:
    for n in sizes_of(label):
        for f in formats:
            v = runs[(label, n, f)]
            c, w, m = stat([x[0] for x in v]), stat([x[1] for x in v]), stat([x[2] for x in v])
            print(f"| {label} | {n:,} | {f} | {c[0]:.2f} s ({c[1]:.2f}-{c[2]:.2f}) | {w[0]:.2f} s "
                  f"({w[1]:.2f}-{w[2]:.2f}) | {m[0]:.0f} MB ({m[1]:.0f}-{m[2]:.0f}) | "
                  f"{statistics.median(x[3] for x in v):.0f} MB |")
EOF

if [ "${API:-0}" = 1 ]; then
  echo
  (cd "$root" && STOKER_BENCH_BIN="$bin" STOKER_BENCH_SHARED="$shared" \
    cargo bench --bench plan_api -- "${API_NODES:-10000}" "$rounds")
fi
