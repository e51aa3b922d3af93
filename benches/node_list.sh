#!/usr/bin/env bash
# The Nodes page at rack scale (issue 5: "stays fast with 10,000 nodes; goal < 100 ms"), beside
# Ironic's API over the same nodes (issue 19 item 4: every bench alternates with its peer).
#
# stoker: a fresh master is filled with NODES nodes through the agents' own
# `POST /api/v1/agent/hello` (each from a loopback address of its own, 16 at a time, so the
# per-client limit never bites; the global limit of 200 hellos/s paces the fill), 200 of them
# then assigned to an environment with roles through the API (its management network is a /24).
#
# The peer: Ironic (the version pip installed; `ironic --version` is printed) serving its API
# under gunicorn with one worker process per core (as stoker's HTTP server runs one worker per
# core; Ironic's own `ironic-api` launcher binds only its first worker here), no authentication
# and SQLite (as Metal3's and Bifrost's standalone Ironic run), filled by
# `benches/ironic_nodes.py` through Ironic's own objects with the same nodes: the same MACs,
# CPUs and memory, every node `available`, the same 200 owned by "rack" with their role as
# resource class. Its Python is IRONIC_PYTHON (default /tmp/ironicvenv/bin/python:
# `python3 -m venv /tmp/ironicvenv && /tmp/ironicvenv/bin/pip install ironic gunicorn`);
# PEER=0, or no Ironic there, runs stoker alone.
#
# Each round asks every question below of both, one right after the other, the side going first
# alternating from round to round; ROUNDS rounds (>= 5). What the operator asks, and how each
# answers it:
#   - the first page of the node list: stoker's `/nodes` page (50 rows, HTML, with its filter
#     counts); Ironic's `GET /v1/nodes?detail=True&limit=50` (what a list view of 50 asks);
#   - a node by its MAC: stoker's search with the whole MAC (an index lookup); Ironic has no
#     search: the port by its exact address, then its node (two calls, as
#     `baremetal port list --address` then `baremetal node show`);
#   - nodes by part of a MAC (its last three octets, a match over every row): stoker only;
#   - nodes in a state: status=discover; `provision_state=available` (50 of them);
#   - an environment's nodes in a role: role + environment; `resource_class` + `owner`;
#   - sorted by memory: stoker only (Ironic sorts by its own columns; memory is in properties);
#   - the last page: page 200; Ironic's page after the 9,950th node (its `marker`);
#   - the overview `/`: stoker only;
#   - every node as JSON (what `fuel2 node list` and `baremetal node list --long` fetch):
#     `GET /api/v1/nodes`; `GET /v1/nodes?detail=True&limit=1000`, following `next` (10 calls);
#   - the environment's 200 nodes as JSON: `GET /api/v1/nodes?cluster_id=`;
#     `GET /v1/nodes?owner=rack&detail=True&limit=1000`.
# Reports for each side the median and min–max of the wall time and of the server's CPU time
# (utime+stime from /proc; Ironic's summed over gunicorn's processes), the answer's size, the
# ratio Ironic / stoker of each round's pair (median and min–max), and whether stoker's median
# is under the 100 ms goal. What bounds each figure: one request at a time from one Python
# client on loopback (no concurrency), whose own time is in the wall time, not in the CPU time;
# CPU at 10 ms granularity. Not part of CI.
#
# usage: benches/node_list.sh [STOKER_BIN] [NODES] [ROUNDS]
# Loopback only (127.0.0.0/8); only processes started here are stopped, by PID.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(readlink -f "${1:-$root/target/release/stoker}")
nodes=${2:-10000}
rounds=${3:-7}
assigned=200  # the release's management network is a /24
[ "$rounds" -ge 5 ] || { echo "bench: at least 5 rounds"; exit 2; }
ironic_python=${IRONIC_PYTHON:-/tmp/ironicvenv/bin/python}
peer=${PEER:-1}
if [ "$peer" != 0 ] && ! "$ironic_python" -c 'import ironic, gunicorn' 2>/dev/null; then
  echo "bench: no Ironic and gunicorn at $ironic_python: stoker alone (see the header)"
  peer=0
fi
work=$(mktemp -d /tmp/stoker-node-list-bench.XXXXXX)
pid= gpid= fpid=
cleanup() {
  for p in $pid $gpid $fpid; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null; rm -rf "$work"
}
trap cleanup EXIT
"$bin" serve --data-dir "$work/data" --http-listen 127.0.0.1:0 --log-level warn,stoker=info \
  --discovery-max-nodes $((nodes + 100)) 2>"$work/log" &
pid=$!
for _ in $(seq 200); do grep -q 'listening on http://' "$work/log" && break; sleep 0.1; done
base=$(grep -o 'listening on http://[0-9.:]*' "$work/log" | head -n1 | sed 's/listening on //')
[ -n "$base" ] || { cat "$work/log"; echo "bench: stoker did not start" >&2; exit 1; }
echo "$nodes nodes, $rounds rounds, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $("$bin" version 2>/dev/null | head -n1)"

# Ironic fills its database beside stoker's fill (neither is measured).
if [ "$peer" != 0 ]; then
  mkdir "$work/ironic"
  "$ironic_python" "$root/benches/ironic_nodes.py" "$work/ironic" "$nodes" "$assigned" \
    >"$work/ironic/fill.log" 2>&1 &
  fpid=$!
fi

python3 - "$base" "$work/data" "$nodes" "$assigned" >"$work/cluster" <<'EOF'
import concurrent.futures, http.client, json, sys, time, urllib.error, urllib.request

base, data, nodes, assigned = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
host, port = base.split("//")[1].split(":")
password = open(f"{data}/initial-admin-password").read().strip()
def api(method, path, body=None, token=None):
    req = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"content-type": "application/json", **({"authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raise SystemExit(f"{method} {path}: {e.code} {e.read()[:400]}")
token = api("POST", "/api/v1/login", {"username": "admin", "password": password})["token"]
release = api("GET", "/api/v1/releases", token=token)[0]["id"]
cluster = api("POST", "/api/v1/clusters", {"name": "rack", "release_id": release}, token)["id"]

# The fill: each node's hello as its agent sends it, from 127.a.b.c of its own.
vendors = [("Dell Inc.", "PowerEdge R650"), ("HPE", "ProLiant DL360 Gen10"), ("Supermicro", "SYS-1029P")]
def hello(n):
    mac = "52:54:01:%02x:%02x:%02x" % (n >> 16 & 255, n >> 8 & 255, n & 255)
    vendor, product = vendors[n % 3]
    inv = {"interfaces": [{"name": "eno1", "mac": mac, "speed_mbps": 10000, "link": True}],
           "cpu": {"count": 16 << (n % 3)}, "memory_bytes": (64 << (n % 4)) << 30,
           "disks": [{"name": "sda", "size_bytes": 480103981056, "serial": f"S{n:07d}"}],
           "system": {"vendor": vendor, "product": product, "serial": f"SN{n:07d}"}, "boot_mode": "uefi"}
    src = f"127.{1 + (n >> 16 & 255)}.{n >> 8 & 255}.{n & 255 or 1}"
    for attempt in range(50):
        c = http.client.HTTPConnection(host, int(port), timeout=60, source_address=(src, 0))
        c.request("POST", "/api/v1/agent/hello", json.dumps(inv), {"content-type": "application/json"})
        r = c.getresponse(); body = r.read(); c.close()
        if r.status in (200, 201):
            return json.loads(body)["node"]["id"]
        if r.status != 429:
            raise SystemExit(f"hello {n}: {r.status} {body[:200]}")
        time.sleep(float(r.getheader("retry-after") or 1))
    raise SystemExit(f"hello {n}: still refused")
t0 = time.perf_counter()
with concurrent.futures.ThreadPoolExecutor(16) as pool:
    ids = list(pool.map(hello, range(nodes)))
fill = time.perf_counter() - t0
roles = ["controller", "compute", "cinder"]
t0 = time.perf_counter()
api("POST", f"/api/v1/clusters/{cluster}/assignment",
    [{"id": nid, "roles": [roles[min(j, 2) if j < 3 else 1 + j % 2]]} for j, nid in enumerate(ids[:assigned])], token)
print(f"stoker: filled with {nodes} hellos in {fill:.0f} s, {assigned} assigned in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
print(cluster)
EOF

ironic=
if [ "$peer" != 0 ]; then
  wait "$fpid" || { cat "$work/ironic/fill.log"; echo "bench: Ironic's fill failed" >&2; exit 1; }
  fpid=
  grep '^ironic:' "$work/ironic/fill.log"
  gport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$ironic_python" -m gunicorn --workers "$(nproc)" --bind "127.0.0.1:$gport" --chdir "$work/ironic" \
    --timeout 300 ironic_wsgi:application >"$work/ironic/api.log" 2>&1 &
  gpid=$!
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$gport/v1/" >/dev/null 2>&1 && break
    kill -0 "$gpid" 2>/dev/null || { cat "$work/ironic/api.log"; gpid=; exit 1; }
    sleep 0.1
  done
  curl -sf "http://127.0.0.1:$gport/v1/" >/dev/null || { cat "$work/ironic/api.log"; echo "bench: Ironic's API did not start" >&2; exit 1; }
  ironic=http://127.0.0.1:$gport
  echo "ironic $("$ironic_python" -c 'from importlib.metadata import version as v; print(v("ironic"), "under gunicorn", v("gunicorn"))'), $(nproc) workers, at $ironic"
fi

python3 - "$base" "$work/data" "$pid" "$nodes" "$rounds" "$(cat "$work/cluster")" "$ironic" "$gpid" "$work/ironic/uuids" <<'EOF'
import http.cookiejar, json, re, statistics, sys, time, urllib.parse, urllib.request

base, data, pid, nodes, rounds, cluster, ironic, gpid, uuids = sys.argv[1:10]
pid, nodes, rounds = int(pid), int(nodes), int(rounds)
password = open(f"{data}/initial-admin-password").read().strip()
jar = http.cookiejar.CookieJar()
web = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
def get(path):
    with web.open(base + path) as r:
        return r.read()
html = get("/login").decode()
csrf = re.search(r'name="csrf" value="([^"]+)"', html).group(1)
form = urllib.parse.urlencode({"username": "admin", "password": password, "csrf": csrf, "next": "/"}).encode()
web.open(urllib.request.Request(base + "/login", data=form)).read()
req = urllib.request.Request(base + "/api/v1/login", data=json.dumps({"username": "admin", "password": password}).encode(),
                             headers={"content-type": "application/json"})
token = json.loads(urllib.request.urlopen(req).read())["token"]
def api(path):
    with urllib.request.urlopen(urllib.request.Request(base + path, headers={"authorization": f"Bearer {token}"})) as r:
        return r.read()

def ironic_get(path):
    with urllib.request.urlopen(urllib.request.Request(ironic + path, headers={"x-openstack-ironic-api-version": "latest"})) as r:
        return r.read()
def ironic_pages(path):  # every page, following `next` as the client does: (bytes, parsed)
    url = path
    while url:
        body = ironic_get(url)
        page = json.loads(body)
        yield body, page
        url = page.get("next", "").replace(ironic, "") if page["nodes"] else ""
def ironic_all(path):  # what is timed: the pages' bytes, nothing built from them
    return b"".join(body for body, _ in ironic_pages(path))
def ironic_nodes(path):
    return [n for _, page in ironic_pages(path) for n in page["nodes"]]
def ironic_by_mac(mac):
    ports = json.loads(ironic_get(f"/v1/ports?address={mac}&fields=node_uuid"))["ports"]
    return ironic_get(f"/v1/nodes/{ports[0]['node_uuid']}")

def ticks(p):
    f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])
def stoker_cpu():
    return ticks(pid) * 10  # ms, at USER_HZ 100
def ironic_cpu():  # gunicorn's master and its workers
    ps = [int(gpid)] + [int(c) for c in open(f"/proc/{gpid}/task/{gpid}/children").read().split()]
    return sum(ticks(p) for p in ps) * 10

last = (nodes + 49) // 50
probe = 1234 if nodes > 1234 else nodes // 2  # the node looked up by its MAC
tail = "%02x:%02x:%02x" % (probe >> 16 & 255, probe >> 8 & 255, probe & 255)
mac = "52:54:01:" + tail
marker = open(uuids).read().split()[(last - 1) * 50 - 1] if ironic else ""
questions = [  # (what is asked, stoker's call, how, Ironic's call, how)
    ("the first page (50 nodes)", "/nodes", lambda: get("/nodes"),
     "/v1/nodes?detail=True&limit=50", lambda: ironic_get("/v1/nodes?detail=True&limit=50")),
    ("a node by its MAC", "/nodes?q=52:54:01:…", lambda: get("/nodes?q=" + urllib.parse.quote(mac)),
     "/v1/ports?address=, then the node", lambda: ironic_by_mac(mac)),
    ("nodes by part of a MAC", f"/nodes?q={tail}", lambda: get("/nodes?q=" + urllib.parse.quote(tail)), None, None),
    ("nodes in a state", "/nodes?status=discover", lambda: get("/nodes?status=discover"),
     "provision_state=available, 50", lambda: ironic_get("/v1/nodes?provision_state=available&detail=True&limit=50")),
    ("an environment's nodes in a role", "/nodes?role=compute&env=", lambda: get(f"/nodes?role=compute&env={cluster}"),
     "resource_class=compute&owner=rack, 50", lambda: ironic_get("/v1/nodes?resource_class=compute&owner=rack&detail=True&limit=50")),
    ("sorted by memory, descending", "/nodes?sort=memory&dir=desc", lambda: get("/nodes?sort=memory&dir=desc"), None, None),
    (f"the last page ({last})", f"/nodes?page={last}", lambda: get(f"/nodes?page={last}"),
     f"marker=the {(last - 1) * 50:,}th, 50", lambda: ironic_get(f"/v1/nodes?detail=True&limit=50&marker={marker}")),
    ("the overview", "/", lambda: get("/"), None, None),
    (f"every node as JSON ({nodes:,})", "GET /api/v1/nodes", lambda: api("/api/v1/nodes"),
     "detail=True&limit=1000, every page", lambda: ironic_all("/v1/nodes?detail=True&limit=1000")),
    ("the environment's 200 nodes as JSON", "GET /api/v1/nodes?cluster_id=", lambda: api(f"/api/v1/nodes?cluster_id={cluster}"),
     "owner=rack&detail=True&limit=1000", lambda: ironic_all("/v1/nodes?owner=rack&detail=True&limit=1000")),
]
if not ironic:
    questions = [(q, sc, sf, None, None) for q, sc, sf, _, _ in questions]
# Warm up both, and check each answers what is asked.
for _, _, sf, _, pf in questions:
    sf()
    if pf:
        pf()
assert mac.encode() in get("/nodes?q=" + urllib.parse.quote(tail)), "stoker's search finds its node"
assert mac.encode() in get("/nodes?q=" + urllib.parse.quote(mac.upper())), "stoker finds its node by the whole MAC"
assert len(json.loads(api("/api/v1/nodes"))) == nodes, "stoker lists every node"
if ironic:
    assert json.loads(ironic_by_mac(mac))["name"] == f"node-{probe}", "Ironic finds the node by its MAC"
    assert len(ironic_nodes("/v1/nodes?detail=True&limit=1000")) == nodes, "Ironic lists every node"
    assert len(ironic_nodes("/v1/nodes?owner=rack&detail=True&limit=1000")) == 200, "Ironic's environment"
    assert len(json.loads(ironic_get(f"/v1/nodes?detail=True&limit=50&marker={marker}"))["nodes"]) == 50, "Ironic's last page"

def timed(f, cpu):
    c0, t0 = cpu(), time.perf_counter()
    body = f()
    return (time.perf_counter() - t0) * 1000, cpu() - c0, len(body)
stoker = {q: ([], [], 0) for q, *_ in questions}
peer = {q: ([], [], 0) for q, *_ in questions}
ratios = {q: [] for q, *_ in questions}
for r in range(rounds):
    for q, _, sf, _, pf in questions:
        sides = [("stoker", sf, stoker_cpu, stoker)] + ([("ironic", pf, ironic_cpu, peer)] if pf else [])
        if r % 2:
            sides.reverse()
        walls = {}
        for name, f, cpu, into in sides:
            wall, used, size = timed(f, cpu)
            w, c, _ = into[q]
            w.append(wall); c.append(used)
            into[q] = (w, c, size)
            walls[name] = wall
        if pf:
            ratios[q].append(walls["ironic"] / walls["stoker"])

def spread(xs, unit, fmt="{:.1f}"):
    return f"{fmt.format(statistics.median(xs))} {unit} ({fmt.format(min(xs))}–{fmt.format(max(xs))})"
print()
print(f"| what the operator asks ({nodes:,} nodes; {rounds} rounds, the side going first alternating) "
      "| stoker: call | wall median (min–max) | CPU | size | < 100 ms "
      "| Ironic: call | wall median (min–max) | CPU | size | Ironic / stoker, wall |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for q, sc, _, pc, pf in questions:
    w, c, size = stoker[q]
    row = (f"| {q} | `{sc}` | {spread(w, 'ms')} | {spread(c, 'ms', '{:.0f}')} | {size / 1024:,.0f} KiB "
           f"| {'yes' if statistics.median(w) < 100 else 'no'} ")
    if pf:
        pw, pcpu, psize = peer[q]
        row += (f"| `{pc}` | {spread(pw, 'ms')} | {spread(pcpu, 'ms', '{:.0f}')} | {psize / 1024:,.0f} KiB "
                f"| {spread(ratios[q], '×')} |")
    else:
        row += "| — | | | | |"
    print(row)
print()
print("bounded by: one request at a time from one Python client on loopback (its own time is in the wall "
      "time, not in the CPU); CPU at 10 ms granularity (USER_HZ); stoker's dashboard rows answer in HTML, "
      f"Ironic's in JSON; load {open('/proc/loadavg').read().split()[0]} at the end")
EOF
