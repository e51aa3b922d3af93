#!/usr/bin/env bash
# Dashboard pages of a big deployment (issue 18): a finished deployment of NODES nodes × STEPS
# runs (3 nodes stopped by a failed run half-way) written into a fresh master's database, then
# each page an operator opens after it fetched ROUNDS times, one after another, by one client
# on loopback: the deployment page, its runs filtered to ok on its last page (the most runs a
# page shows: 25 nodes × STEPS), the environment page (its plan of 0 nodes aside, the latest
# deployment's counts and 40-lane timeline, the history), its deployment part alone, a node's
# page. Reports per page the median and min–max of the wall time and of the daemon's CPU time
# (utime+stime from /proc, so a busy machine inflates the wall time more than the CPU time),
# and the page's size. There is no peer to alternate with: no other master has these pages;
# what bounds each figure is one request at a time from one client (no concurrency), and the
# client's own time is in the wall time, not in the CPU time. Not part of CI.
#
# usage: benches/pages.sh [STOKER_BIN] [NODES] [STEPS] [ROUNDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(readlink -f "${1:-$root/target/release/stoker}")
nodes=${2:-1000}
steps=${3:-40}
rounds=${4:-7}
work=$(mktemp -d /tmp/stoker-pages-bench.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
"$bin" serve --data-dir "$work/data" --http-listen 127.0.0.1:0 --log-level warn,stoker=info \
  2>"$work/log" &
pid=$!
for _ in $(seq 200); do grep -q 'listening on http://' "$work/log" && break; sleep 0.1; done
base=$(grep -o 'listening on http://[0-9.:]*' "$work/log" | head -n1 | sed 's/listening on //')
[ -n "$base" ] || { cat "$work/log"; echo "bench: stoker did not start" >&2; exit 1; }
echo "$nodes nodes × $steps runs, $rounds rounds, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $("$bin" version 2>/dev/null | head -n1)"
python3 - "$base" "$work/data" "$pid" "$nodes" "$steps" "$rounds" <<'EOF'
import http.cookiejar, json, re, sqlite3, statistics, sys, time, urllib.request

base, data, pid, nodes, steps, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), *map(int, sys.argv[4:])
password = open(f"{data}/initial-admin-password").read().strip()
jar = http.cookiejar.CookieJar()
web = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

def get(path):
    with web.open(base + path) as r:
        return r.read()

# Sign in through the form, as a browser does; an API token for the set-up.
html = get("/login").decode()
csrf = re.search(r'name="csrf" value="([^"]+)"', html).group(1)
form = urllib.parse.urlencode({"username": "admin", "password": password, "csrf": csrf, "next": "/"}).encode()
web.open(urllib.request.Request(base + "/login", data=form)).read()
def api(method, path, body=None, token=None):
    req = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"content-type": "application/json", **({"authorization": f"Bearer {token}"} if token else {})})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read() or b"null")
token = api("POST", "/api/v1/login", {"username": "admin", "password": password})["token"]
release = api("GET", "/api/v1/releases", token=token)[0]["id"]
cluster = api("POST", "/api/v1/clusters", {"name": "bench", "release_id": release}, token)["id"]

# What the agents would have left: nodes, inventories, a finished deployment and its runs.
inventory = json.dumps({"interfaces": [{"name": "eno1", "mac": "00:00:00:00:00:00", "speed_mbps": 10000, "link": True}],
                        "cpu": {"count": 32}, "memory_bytes": 274877906944,
                        "disks": [{"name": "sda", "size_bytes": 480103981056}],
                        "system": {"vendor": "Dell Inc.", "product": "PowerEdge R650"}})
db = sqlite3.connect(f"{data}/stoker.db", timeout=30)
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

def cpu():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1000 / 100  # ms, at USER_HZ 100

pages = [
    ("deployment page", f"/deployments/{dep}"),
    ("runs filtered, 25 nodes x all ok", f"/deployments/{dep}?status=ok&page={(nodes + 24) // 25}"),
    ("environment page", f"/environments/{cluster}"),
    ("environment's deployment part", f"/environments/{cluster}/timeline"),
    ("node page", "/nodes/10001"),
]
for _, path in pages:  # warm up (the environment page plans its 1,000 nodes once, then keeps the plan)
    get(path)
results = {name: ([], [], 0) for name, _ in pages}
for _ in range(rounds):
    for name, path in pages:
        c0, t0 = cpu(), time.perf_counter()
        body = get(path)
        wall, used = (time.perf_counter() - t0) * 1000, cpu() - c0
        w, c, _ = results[name]
        w.append(wall); c.append(used)
        results[name] = (w, c, len(body))
for name, (w, c, size) in results.items():
    print(f"{name:34} wall median {statistics.median(w):7.1f} ms ({min(w):.1f}–{max(w):.1f})   "
          f"daemon CPU median {statistics.median(c):6.0f} ms ({min(c):.0f}–{max(c):.0f})   {size / 1024:7.0f} KiB")
# The README's table (benches/tables.sh takes the last one a bench prints).
print()
print(f"| page ({nodes:,} nodes × {steps} runs; one request at a time, one client on loopback) "
      f"| wall median (min–max) | daemon CPU median (min–max) | size |")
print("|---|---|---|---|")
for name, (w, c, size) in results.items():
    print(f"| {name} | {statistics.median(w):.1f} ms ({min(w):.1f}–{max(w):.1f}) "
          f"| {statistics.median(c):.0f} ms ({min(c):.0f}–{max(c):.0f}) | {size / 1024:.0f} KiB |")
EOF
