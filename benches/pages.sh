#!/usr/bin/env bash
# Dashboard pages of a big deployment (issue 18): a finished deployment of NODES nodes × STEPS
# runs (3 nodes stopped by a failed run half-way) written into a fresh master's database, then
# each page an operator opens after it fetched ROUNDS times (>= 5), one after another, by one
# client on loopback: the deployment page, its runs filtered to ok on its last page (the most
# runs a page shows: 25 nodes × STEPS), the environment page (its plan of 0 nodes aside, the
# latest deployment's counts and 40-lane timeline, the history), its deployment part alone, a
# node's page. Reports per page the median and min–max of the wall time and of the daemon's CPU
# time (utime+stime from /proc, so a busy machine inflates the wall time more than the CPU
# time), and the page's size.
#
# No other master has these pages, so there is no peer; with BASE=BIN (a stoker built from an
# earlier commit, recent enough to have the tables the fill writes) a second master of that
# build gets the same deployment, and each page is fetched from both, one right after the
# other, the build going first alternating from round to round; the table then has both builds'
# rows and the ratio baseline / this build of each round's pair. What bounds each figure is one
# request at a time from one client (no concurrency), and the client's own time is in the wall
# time, not in the CPU time. Not part of CI.
#
# usage: [BASE=BIN] benches/pages.sh [STOKER_BIN] [NODES] [STEPS] [ROUNDS]
# Loopback only; only the daemons started here are stopped, by PID.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(readlink -f "${1:-$root/target/release/stoker}")
nodes=${2:-1000}
steps=${3:-40}
rounds=${4:-7}
[ "$rounds" -ge 5 ] || { echo "bench: at least 5 rounds"; exit 2; }
work=$(mktemp -d /tmp/stoker-pages-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
masters=()  # label,url,data dir,pid
start() {  # label binary
  local dir=$work/$1 url=
  mkdir -p "$dir"
  "$2" serve --data-dir "$dir/data" --http-listen 127.0.0.1:0 --log-level warn,stoker=info 2>"$dir/log" &
  pids+=($!)
  for _ in $(seq 200); do grep -q 'listening on http://' "$dir/log" && break; sleep 0.1; done
  url=$(grep -o 'listening on http://[0-9.:]*' "$dir/log" | head -n1 | sed 's/listening on //')
  [ -n "$url" ] || { cat "$dir/log"; echo "bench: $1 ($2) did not start" >&2; exit 1; }
  masters+=("$1,$url,$dir/data,${pids[-1]}")
  echo "$1: $2 ($("$2" version 2>/dev/null | head -n1)) at $url"
}
[ -n "${BASE:-}" ] && start baseline "$(readlink -f "$BASE")"
start stoker "$bin"
echo "$nodes nodes × $steps runs, $rounds rounds, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
python3 - "$nodes" "$steps" "$rounds" "${masters[@]}" <<'EOF'
import http.cookiejar, json, re, sqlite3, statistics, sys, time, urllib.parse, urllib.request

nodes, steps, rounds = map(int, sys.argv[1:4])

class Master:
    """One daemon: signed in through the form, as a browser is, with the deployment written."""
    def __init__(self, spec):
        self.label, self.base, data, pid = spec.split(",")
        self.pid = int(pid)
        password = open(f"{data}/initial-admin-password").read().strip()
        self.web = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        html = self.get("/login").decode()
        csrf = re.search(r'name="csrf" value="([^"]+)"', html).group(1)
        form = urllib.parse.urlencode({"username": "admin", "password": password, "csrf": csrf, "next": "/"}).encode()
        self.web.open(urllib.request.Request(self.base + "/login", data=form)).read()
        token = self.api("POST", "/api/v1/login", {"username": "admin", "password": password})["token"]
        release = self.api("GET", "/api/v1/releases", token=token)[0]["id"]
        self.cluster = self.api("POST", "/api/v1/clusters", {"name": "bench", "release_id": release}, token)["id"]
        self.dep = fill(f"{data}/stoker.db", self.cluster)

    def get(self, path):
        with self.web.open(self.base + path) as r:
            return r.read()

    def api(self, method, path, body=None, token=None):
        req = urllib.request.Request(self.base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={"content-type": "application/json", **({"authorization": f"Bearer {token}"} if token else {})})
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read() or b"null")

    def cpu(self):
        f = open(f"/proc/{self.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) * 1000 / 100  # ms, at USER_HZ 100

    def pages(self):
        return [
            ("deployment page", f"/deployments/{self.dep}"),
            ("runs filtered, 25 nodes x all ok", f"/deployments/{self.dep}?status=ok&page={(nodes + 24) // 25}"),
            ("environment page", f"/environments/{self.cluster}"),
            ("environment's deployment part", f"/environments/{self.cluster}/timeline"),
            ("node page", "/nodes/10001"),
        ]

def fill(path, cluster):
    """What the agents would have left: nodes, inventories, a finished deployment and its runs."""
    inventory = json.dumps({"interfaces": [{"name": "eno1", "mac": "00:00:00:00:00:00", "speed_mbps": 10000, "link": True}],
                            "cpu": {"count": 32}, "memory_bytes": 274877906944,
                            "disks": [{"name": "sda", "size_bytes": 480103981056}],
                            "system": {"vendor": "Dell Inc.", "product": "PowerEdge R650"}})
    db = sqlite3.connect(path, timeout=30)
    dep = db.execute("SELECT COALESCE(MAX(id), 0) + 100 FROM deployments").fetchone()[0]
    with db:
        db.execute("INSERT INTO deployments (id, cluster_id, status, created_at, finished_at, name, graph_type) "
                   "VALUES (?, ?, 'error', 1000, 9000, 'deployment', 'default')", (dep, cluster))
        for n in range(nodes):
            nid, mac = 10000 + n, "52:54:01:%02x:%02x:%02x" % (n >> 16 & 255, n >> 8 & 255, n & 255)
            bad = n < 3
            db.execute("INSERT INTO nodes (id, mac, name, status, created_at, last_seen_at, cluster_id, roles) "
                       "VALUES (?, ?, ?, ?, 1, 1, ?, '[\"compute\"]')", (nid, mac, f"node-{nid}", "error" if bad else "ready", cluster))
            db.execute("INSERT INTO node_inventories (node_id, inventory) VALUES (?, ?)", (nid, inventory.replace("00:00:00:00:00:00", mac)))
            db.execute("INSERT INTO node_macs (mac, node_id) VALUES (?, ?)", (mac, nid))
            rows = []
            for seq in range(steps):
                own = seq < 3
                status = "ok" if not bad or seq < steps // 2 else ("failed" if seq == steps // 2 else "pending")
                done = status != "pending"
                rows.append((dep, nid, seq, "configure" if own else "run_tasks", None if own else f"task-{seq}", status,
                             int(done), 1000 + seq * 20 if done else None, 1007 + seq * 20 if done else None,
                             int(status == "failed") if done else None,
                             ("Notice: applied\n" * 40 + "done") if done else "", "exit 1" if status == "failed" else None,
                             "ramdisk" if own else "os"))
            db.executemany("INSERT INTO step_runs (deployment, node_id, seq, interface, step, task, args, deps, timeout_s, "
                           "status, attempt, started_at, finished_at, exit_code, output_tail, error, runs_on) "
                           "VALUES (?, ?, ?, 'deploy', ?, ?, '{}', '[]', 600, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.close()
    return dep

masters = [Master(spec) for spec in sys.argv[4:]]
names = [name for name, _ in masters[0].pages()]
for m in masters:  # warm up (the environment page plans its nodes once, then keeps the plan)
    for _, path in m.pages():
        m.get(path)
results = {(m.label, name): ([], [], 0) for m in masters for name in names}
for r in range(rounds):
    for i, name in enumerate(names):
        order = masters if r % 2 == 0 else masters[::-1]
        for m in order:
            path = m.pages()[i][1]
            c0, t0 = m.cpu(), time.perf_counter()
            body = m.get(path)
            wall, used = (time.perf_counter() - t0) * 1000, m.cpu() - c0
            w, c, _ = results[(m.label, name)]
            w.append(wall); c.append(used)
            results[(m.label, name)] = (w, c, len(body))
for (label, name), (w, c, size) in results.items():
    print(f"{label:8} {name:34} wall median {statistics.median(w):7.1f} ms ({min(w):.1f}–{max(w):.1f})   "
          f"daemon CPU median {statistics.median(c):6.0f} ms ({min(c):.0f}–{max(c):.0f})   {size / 1024:7.0f} KiB")
# The README's table (benches/tables.sh takes the last one a bench prints).
paired = len(masters) == 2
print()
print(f"| build | page ({nodes:,} nodes × {steps} runs; {rounds} rounds, one request at a time, one client on loopback"
      f"{'; the build going first alternating' if paired else ''}) | wall median (min–max) | daemon CPU median (min–max) | size"
      f"{' | baseline / this build, wall (per round)' if paired else ''} |")
print("|---|---|---|---|---|" + ("---|" if paired else ""))
for m in masters:
    for name in names:
        w, c, size = results[(m.label, name)]
        row = (f"| {m.label} | {name} | {statistics.median(w):.1f} ms ({min(w):.1f}–{max(w):.1f}) "
               f"| {statistics.median(c):.0f} ms ({min(c):.0f}–{max(c):.0f}) | {size / 1024:.0f} KiB |")
        if paired:
            if m.label == "stoker":
                bw = results[("baseline", name)][0]
                q = [b / s for b, s in zip(bw, w)]
                row += f" {statistics.median(q):.2f}× ({min(q):.2f}–{max(q):.2f}) |"
            else:
                row += " |"
        print(row)
print()
print(f"bounded by: one request at a time from one Python client on loopback (its own time in the wall time, "
      f"not in the CPU time); CPU at 10 ms granularity; load {open('/proc/loadavg').read().split()[0]} at the end")
EOF
