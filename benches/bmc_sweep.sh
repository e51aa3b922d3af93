#!/usr/bin/env bash
# The background power-state sweep over N emulated Redfish BMCs (issue: "a power-state sweep over
# 1,000 emulated BMCs: time per sweep, requests in flight, CPU; goal <= 10 s per sweep with <= 32
# requests in flight, and no effect on the agents' p99"). stoker enrolls N nodes, each with a
# Redfish BMC of its own, and its background sync reads every BMC's power once per sweep with at
# most WORKERS requests in flight.
#
# EMULATOR=farm (default): benches/redfish_farm.py, one Python process (stdlib asyncio) serving
# N BMCs, each on a loopback address of its own (127.77.0.1 ... 127.77.3.250 for 1,000) on one
# port, with sessions: stoker keeps each BMC's session from one sweep to the next
# (src/bmc/sessions.rs), so a reading is one GET of the system on a new connection; the first
# also reads the service root and Systems and logs in. The farm's counts below say it.
# EMULATOR=sushy: sushy-tools' fake driver (one process, every system on 127.0.0.1, no auth: 2
# requests per reading), the tests' reference for correctness; it breaks at 32 requests in
# flight ("unable to open database file", "Too many open files") and its CPU per reading grows
# with N (13 ms at 20 systems, ~0.5 s at 100), so it only carries small N. The farm's answers
# are checked against stoker here (every node's power state, a power off and on), not against
# sushy-tools.
#
# Each BMC i (from 0) starts On when i is odd, Off when even. The nodes are enrolled, stoker is
# restarted once every BMC is due again (enrolling spans sweeps, and the sweeps would otherwise
# stay split into groups), then the first sweep is a warm-up and the next SWEEPS are measured,
# each awaited by its "power states read" log line (read, failed, ms, peak_in_flight). Printed
# per sweep: its time, peak requests in flight, failures; CPU seconds of stoker and of the
# emulator from one sweep's log line to the next (/proc/PID/stat utime+stime); the machine's
# busy cores during the sweep, split into stoker, emulator and other processes. Then medians
# and spread, what bounds the figure (offered load N / INTERVAL, the emulator's one core, the
# machine's cores shared by stoker, the emulator and everything else), a check that every node's
# recorded power state is its BMC's, a power off/on through the API against the farm, and the
# emulator's own report (requests, connections, sessions made and deleted).
#
# The peer: Ironic's reading of power states (benches/ironic_power_sync.py: sushy, Ironic's
# Redfish library, one connection per BMC kept between sweeps as Ironic's SessionCache keeps it,
# on a pool of WORKERS threads as `sync_power_state_workers`), against the same farm, a sweep of
# it right after each of stoker's (while stoker waits for its next): time per sweep, its CPU,
# the farm's CPU for each side (the peer's requests taken out of stoker's figure), and every
# BMC's state as the peer read it checked. Its Python is IRONIC_PYTHON (default
# /tmp/sushyvenv/bin/python: `python3 -m venv /tmp/sushyvenv && /tmp/sushyvenv/bin/pip install
# sushy`); PEER=0, or no sushy there, runs stoker alone. Ironic's own database work per node is
# not in the peer, so its figures are a lower bound of Ironic's.
#
# AGENTS=200 adds the agents' p99 with and without the sweeps: the agents bench (benches/agents.rs,
# built with `cargo bench --bench agents --no-run` unless AGENTS_BIN names it; its daemon is
# STOKER_BIN, through STOKER_BENCH_BIN) is run AGENTS_ROUNDS (3) times each way, alternating:
# with the same N nodes enrolled without BMCs (no power sync), and with their BMCs on the farm,
# the daemon sweeping every AGENTS_INTERVAL (1) s, i.e. back to back, with WORKERS in flight.
#
# usage: benches/bmc_sweep.sh STOKER_BIN [N=1000] [WORKERS=32] [SWEEPS=5]
#   EMULATOR=farm|sushy  INTERVAL=10 (bmc.sync_interval; the daemon looks every min(it, 5) s)
#   FARM_PORT (default: a free one)  FARM_SESSIONS=0 (BMCs without SessionService: Basic auth)
#   FARM_NICE=19 runs the farm niced, so the master and the agents get the cores before it does
#   SUSHY_EMULATOR (default: .ci/bmc-emulators.sh's venv)  SWEEP_TIMEOUT=600 (s, per sweep)
#   AGENTS=N  AGENTS_STEP_MS=250  AGENTS_ROUNDS=3  AGENTS_INTERVAL=1  AGENTS_ARGS (e.g. day2)
#   KEEP=1 keeps the work directory (logs, database). Not part of CI.
# Loopback only (127.0.0.0/8); only processes started here are stopped, by PID.
#
# Figures (README, Benchmarks): 1,000 BMCs on the 2-core machine, 1.0-1.9 s per sweep at 8 or 32
# in flight, stoker 1.0-1.4 s of CPU per sweep; the machine's CPU bounds it.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '/^# usage/,/^# Loopback/p' "$0"; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
src_bin=$(readlink -f "$1"); n=${2:-1000}; workers=${3:-32}; sweeps=${4:-5}
emulator=${EMULATOR:-farm}; interval=${INTERVAL:-10}
[ -x "$src_bin" ] || { echo "bmc_sweep: $1 is not an executable"; exit 2; }
case $emulator in farm|sushy) ;; *) echo "bmc_sweep: EMULATOR is farm or sushy"; exit 2 ;; esac
if [ "$emulator" = sushy ]; then
  emu=${SUSHY_EMULATOR:-/var/cache/stoker-ci/sushy/bin/sushy-emulator}
  [ -x "$emu" ] || { echo "bmc_sweep: no sushy-emulator at $emu (run .ci/bmc-emulators.sh)"; exit 2; }
fi
work=$(mktemp -d /tmp/stoker-bmc-sweep.XXXXXX)
spid=; epid=; apid=
stop_pid() {  # stop one process started here, by its PID, and reap it
  [ -n "$1" ] || return 0
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
cleanup() {
  if [ -n "$apid" ]; then
    # The agents bench's daemon is its child; the bench stops it when it ends normally.
    for c in $(pgrep -P "$apid" || true); do kill -TERM "$c" 2>/dev/null || true; done
    stop_pid "$apid"
  fi
  stop_pid "$spid"; stop_pid "$epid"
  if [ -n "${KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# Listening TCP sockets on PORT, any address, from /proc (no ss needed): 0 when free.
port_busy() {
  python3 - "$1" <<'PY'
import sys
port = int(sys.argv[1])
for f in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        rows = open(f).read().splitlines()[1:]
    except OSError:
        continue
    for r in rows:
        p = r.split()
        if p[3] == "0A" and int(p[1].rsplit(":", 1)[1], 16) == port:
            sys.exit(0)
sys.exit(1)
PY
}
free_port() {  # a port the kernel hands out on $1, checked free on every address
  local p
  for _ in 1 2 3 4 5; do
    p=$(python3 -c 'import socket,sys; s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1])' "$1")
    port_busy "$p" || { echo "$p"; return; }
  done
  echo "bmc_sweep: no free port" >&2; exit 2
}
hport=$(free_port 127.0.0.1)
cp "$src_bin" "$work/stoker"  # a rebuild of STOKER_BIN during the run changes nothing here
bin=$work/stoker

# The emulator, and the BMCs' addresses (one per line, BMC i on line i+1).
if [ "$emulator" = farm ]; then
  eport=${FARM_PORT:-$(free_port 127.77.0.1)}
  if port_busy "$eport"; then echo "bmc_sweep: port $eport is in use"; exit 2; fi
  farm_args=(--count "$n" --port "$eport" --list "$work/bmcs.txt")
  [ "${FARM_SESSIONS:-1}" = 0 ] && farm_args+=(--no-sessions)
  nice -n "${FARM_NICE:-0}" python3 "$root/benches/redfish_farm.py" "${farm_args[@]}" >"$work/emu.log" 2>&1 &
  epid=$!
  for _ in $(seq 300); do
    grep -q 'redfish_farm: ready' "$work/emu.log" 2>/dev/null && break
    kill -0 "$epid" 2>/dev/null || { cat "$work/emu.log"; epid=; exit 1; }
    sleep 0.1
  done
  grep -q 'redfish_farm: ready' "$work/emu.log" || { echo "bmc_sweep: the farm did not start"; cat "$work/emu.log"; exit 1; }
  emu_what="benches/redfish_farm.py (one Python process$([ "${FARM_NICE:-0}" = 0 ] || echo ", nice ${FARM_NICE}"); BMC i on 127.77.(i/250).(i%250+1):$eport, $([ "${FARM_SESSIONS:-1}" = 0 ] && echo 'Basic auth' || echo 'sessions'))"
else
  eport=$(free_port 127.0.0.1)
  python3 - "$n" >"$work/emu.conf" <<'PY'
import sys, uuid
n = int(sys.argv[1])
systems = [{"uuid": str(uuid.UUID(int=i + 1)), "name": f"bmc-{i}", "power_state": "On" if i % 2 else "Off",
            "nics": [{"mac": "52:54:%02x:%02x:%02x:%02x" % (0x10, (i >> 16) & 255, (i >> 8) & 255, i & 255), "ip": "10.0.0.1"}]}
           for i in range(n)]
print("SUSHY_EMULATOR_FAKE_DRIVER = True")
print("SUSHY_EMULATOR_FAKE_SYSTEMS = %r" % systems)
PY
  "$emu" --config "$work/emu.conf" --interface 127.0.0.1 --port "$eport" >"$work/emu.log" 2>&1 &
  epid=$!
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:$eport/redfish/v1/" >/dev/null && break; sleep 0.2; done
  python3 -c 'import sys, uuid; [print(f"http://127.0.0.1:{sys.argv[2]}/redfish/v1/Systems/{uuid.UUID(int=i + 1)}") for i in range(int(sys.argv[1]))]' \
    "$n" "$eport" >"$work/bmcs.txt"
  emu_what="sushy-tools fake driver (one process, 127.0.0.1:$eport, a system path per BMC)"
fi

start_stoker() {  # $1: log file
  STOKER_LOG_LEVEL=info "$bin" serve --data-dir "$work/data" --http-listen "127.0.0.1:$hport" \
    --http-tls off --bmc-sync-interval "$interval" --bmc-sync-workers "$workers" --bmc-timeout 10 \
    >"$1" 2>&1 &
  spid=$!
  for _ in $(seq 150); do
    curl -fs "http://127.0.0.1:$hport/healthz" >/dev/null && return 0
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.2
  done
  echo "bmc_sweep: stoker did not start"; cat "$1"; exit 1
}
if port_busy "$hport"; then echo "bmc_sweep: port $hport is in use"; exit 2; fi
start_stoker "$work/stoker-enroll.log"
pw=$(cat "$work/data/initial-admin-password")
token=$(curl -fs -X POST "http://127.0.0.1:$hport/api/v1/login" -H 'content-type: application/json' \
  -d "{\"username\":\"admin\",\"password\":\"$pw\"}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
t0=$(date +%s.%N)
python3 - "$hport" "$token" "$work/bmcs.txt" "$work/nodes.txt" <<'PY'
import json, sys, threading, urllib.request
hport, token, listing, out = sys.argv[1:5]
addresses = open(listing).read().split()
ids = [None] * len(addresses)
nxt = iter(range(len(addresses)))
lock = threading.Lock()
def enroll():
    while True:
        with lock:
            i = next(nxt, None)
        if i is None:
            return
        body = {"mac": "52:54:%02x:%02x:%02x:%02x" % (0x10, (i >> 16) & 255, (i >> 8) & 255, i & 255),
                "bmc": {"driver": "redfish", "address": addresses[i], "username": "admin", "password": "password"}}
        req = urllib.request.Request(f"http://127.0.0.1:{hport}/api/v1/nodes", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json", "authorization": f"Bearer {token}"})
        ids[i] = json.load(urllib.request.urlopen(req))["id"]
threads = [threading.Thread(target=enroll) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
with open(out, "w") as f:
    for i, node in enumerate(ids):
        f.write(f"{node} {i}\n")
PY
enrolled=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
# Enrolling spanned the daemon's 5-second looks, so the BMCs are due at different moments; a
# restart once all are due again gives one sweep of all N from then on.
stop_pid "$spid"; spid=
sleep $((interval + 1))
start_stoker "$work/stoker.log"

echo "bmc_sweep: $n nodes enrolled in $enrolled s, each with its own Redfish BMC: $emu_what"
echo "bmc_sweep: $("$bin" version 2>/dev/null | head -1) ($src_bin), --bmc-sync-interval $interval --bmc-sync-workers $workers; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
peer_py=${IRONIC_PYTHON:-/tmp/sushyvenv/bin/python}
peer=
if [ "${PEER:-1}" != 0 ] && [ "$emulator" = farm ] && "$peer_py" -c 'import sushy' 2>/dev/null; then
  peer="$peer_py $root/benches/ironic_power_sync.py $work/bmcs.txt $workers"
  echo "bmc_sweep: the peer: Ironic's power reading (sushy $("$peer_py" -c 'import importlib.metadata as m; print(m.version("sushy"))'), $workers threads), a sweep after each of stoker's"
elif [ "${PEER:-1}" != 0 ]; then
  echo "bmc_sweep: no peer: $peer_py cannot import sushy (python3 -m venv /tmp/sushyvenv && /tmp/sushyvenv/bin/pip install sushy), or the emulator is not the farm"
fi
python3 - "$work/stoker.log" "$spid" "$epid" "$n" "$sweeps" "$interval" "$workers" "${SWEEP_TIMEOUT:-600}" \
  "$emulator" "$peer" >"$work/sweeps.txt" <<'PY' || { cat "$work/sweeps.txt"; echo "bmc_sweep: the sweeps did not complete"; tail -5 "$work/stoker.log"; exit 1; }
import datetime, os, re, statistics, subprocess, sys, time
log, spid, epid, n, sweeps, interval, workers, timeout, emulator, peer_cmd = sys.argv[1:11]
n, sweeps, interval, workers, timeout = int(n), int(sweeps), int(interval), int(workers), float(timeout)
tck = os.sysconf("SC_CLK_TCK")
cores = os.cpu_count()
emu_name = "farm" if emulator == "farm" else "sushy"

def cpu(pid):
    """(user, system) CPU seconds of a process."""
    with open(f"/proc/{pid}/stat") as f:
        p = f.read().rsplit(")", 1)[1].split()
    return int(p[11]) / tck, int(p[12]) / tck

def machine():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / tck  # busy seconds, all cores (not idle, not iowait)

line_re = re.compile(r"^(\S+)\s.*power states read.*?read=(\d+).*?failed=(\d+).*?ms=(\d+).*?peak_in_flight=(\d+)")
ansi = re.compile(r"\x1b\[[0-9;]*m")
samples = []  # (time, stoker cpu, emulator cpu, machine busy, stoker (user, system))
found = []    # per sweep: dict
pos = 0
deadline = time.time() + timeout
full = 0
# The peer, driven one sweep at a time right after each of stoker's full sweeps.
peer = subprocess.Popen(peer_cmd.split(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) if peer_cmd else None
peer_sweeps = []  # per peer sweep: dict
peer_em_total = 0.0  # the farm's CPU spent on the peer's sweeps so far
while full < sweeps + 1:
    now = time.time()
    su, ss = cpu(spid)
    samples.append((now, su + ss, sum(cpu(epid)), machine(), (su, ss)))
    with open(log, errors="replace") as f:
        f.seek(pos)
        chunk = f.read()
    if chunk.endswith("\n"):
        pos += len(chunk.encode())
        for line in chunk.splitlines():
            m = line_re.search(ansi.sub("", line))
            if not m:
                continue
            end = datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
            read, failed, ms, peak = map(int, m.group(2, 3, 4, 5))
            found.append(dict(end=end, read=read, failed=failed, ms=ms, peak=peak, seen=len(samples) - 1,
                              peer_em=peer_em_total))
            if read == n:
                full += 1
                if peer:
                    e0, c0 = sum(cpu(epid)), time.time()
                    peer.stdin.write("sweep\n"); peer.stdin.flush()
                    got = peer.stdout.readline().split()
                    e1 = sum(cpu(epid))
                    if not got or got[0] != "swept":
                        print(f"the peer failed: {got}"); sys.exit(1)
                    pms, pread, pfailed = map(int, got[1:4])
                    peer_sweeps.append(dict(ms=pms, read=pread, failed=pfailed,
                                            cpu=float(got[4]) + float(got[5]), em=e1 - e0))
                    peer_em_total += e1 - e0
                    print(f"peer sweep {len(peer_sweeps) - 1}: read {pread}, failed {pfailed}, {pms} ms; "
                          f"CPU: peer {float(got[4]) + float(got[5]):.2f} s, {emu_name} {e1 - e0:.2f} s"
                          + (" (warm-up: not counted)" if len(peer_sweeps) == 1 else ""))
            deadline = time.time() + timeout
    if time.time() > deadline:
        print(f"no sweep line for {timeout:.0f} s")
        sys.exit(1)
    time.sleep(0.1)

def at(t, before):
    """The sample just before (or just after) time t."""
    if before:
        c = [s for s in samples if s[0] <= t]
        return c[-1] if c else samples[0]
    c = [s for s in samples if s[0] >= t]
    return c[0] if c else samples[-1]

rows = []
prev = None
for k, s in enumerate(found):
    line_sample = samples[s["seen"]]
    a, b = at(s["end"] - s["ms"] / 1000, True), at(s["end"], False)
    span = max(b[0] - a[0], 1e-3)
    st, em, busy = (b[1] - a[1]) / span, (b[2] - a[2]) / span, (b[3] - a[3]) / span
    # The farm's CPU since the last sweep, without what it spent on the peer's sweep between.
    per = None if prev is None else (line_sample[1] - prev[0][1],
                                     line_sample[2] - prev[0][2] - (s["peer_em"] - prev[1]),
                                     line_sample[4][0] - prev[0][4][0], line_sample[4][1] - prev[0][4][1])
    prev = (line_sample, s["peer_em"])
    warm = k == 0
    partial = s["read"] != n
    tag = " (warm-up: not counted)" if warm else (" (partial: not counted)" if partial else "")
    cpu_txt = "" if per is None else f"; CPU since the last sweep: stoker {per[0]:.2f} s, {emu_name} {per[1]:.2f} s"
    split = (f"; busy cores during it {busy:.2f} of {cores} (stoker {st:.2f}, {emu_name} {em:.2f}, other "
             f"{max(busy - st - em, 0):.2f})") if s["ms"] >= 500 else ""
    print(f"sweep {k}: read {s['read']}, failed {s['failed']}, {s['ms']} ms, peak in flight {s['peak']}{cpu_txt}{split}{tag}")
    if not warm and not partial and per is not None:
        rows.append(dict(ms=s["ms"], peak=s["peak"], failed=s["failed"], st=per[0], em=per[1], busy=busy,
                         stc=st, emc=em, su=per[2], ss=per[3]))

def med(key, fmt):
    v = [r[key] for r in rows]
    return f"median {fmt(statistics.median(v))} ({fmt(min(v))}–{fmt(max(v))})"

if not rows:
    print("no full sweep measured"); sys.exit(1)
sec = lambda x: f"{x / 1000:.2f} s"
print(f"summary over {len(rows)} sweeps of {n} BMCs, at most {workers} in flight:")
print(f"  time per sweep: {med('ms', sec)}; peak in flight {max(r['peak'] for r in rows)}; "
      f"failed {sum(r['failed'] for r in rows)} of {n * len(rows)} readings")
print(f"  CPU per sweep: stoker {med('st', lambda x: f'{x:.2f} s')} (user {statistics.median(r['su'] for r in rows):.2f}, "
      f"system {statistics.median(r['ss'] for r in rows):.2f}), {emu_name} {med('em', lambda x: f'{x:.2f} s')}; "
      f"per reading: stoker {statistics.median(r['st'] for r in rows) / n * 1e3:.2f} ms, "
      f"{emu_name} {statistics.median(r['em'] for r in rows) / n * 1e3:.2f} ms")
t = statistics.median(r["ms"] for r in rows) / 1000
busy = statistics.median(r["busy"] for r in rows)
stc = statistics.median(r["stc"] for r in rows)
emc = statistics.median(r["emc"] for r in rows)
timed = min(r["ms"] for r in rows) >= 500  # the samples are 0.1 s apart: shorter sweeps are not split
if timed:
    print(f"  during a sweep (medians): {busy:.2f} of {cores} cores busy: stoker {stc:.2f}, {emu_name} {emc:.2f}, "
          f"other processes {max(busy - stc - emc, 0):.2f}")
print("what bounds it:")
print(f"  offered load: {n} BMCs per {interval} s interval = {n / interval:.0f} readings/s needed; a sweep reads "
      f"{n / t:.0f}/s, so it takes {100 * t / interval:.0f}% of the interval")
print(f"  one reading holds a worker {workers * t / n * 1000:.1f} ms on average ({workers} workers × {t:.2f} s / {n}), "
      "one GET of the system with the session kept since the last sweep (the first reading of a BMC also "
      "reads the root and Systems and logs in)")
if not timed:
    why = "nothing measurable here: sweeps under 0.5 s are too short to split the machine's CPU among processes"
elif emc >= 0.85:
    why = (f"the emulator: one Python process at {emc:.2f} of a core answers every request, so the sweep "
           f"measures it more than stoker (stoker used {stc:.2f} of a core)")
elif busy >= 0.85 * cores:
    why = (f"the machine's CPU: {busy:.2f} of {cores} cores busy (stoker {stc:.2f}, {emu_name} {emc:.2f}, other "
           f"processes {max(busy - stc - emc, 0):.2f}); on a real network the BMCs' answers cost the master nothing")
else:
    why = (f"latency, neither CPU: stoker {stc:.2f} and the {emu_name} {emc:.2f} of a core, {busy:.2f} of {cores} "
           f"busy; more workers would overlap more round trips")
print(f"  {why}")
prows = peer_sweeps[1:]
if peer:
    states = []
    peer.stdin.write("states\n"); peer.stdin.flush()
    states = [peer.stdout.readline().strip() for _ in range(n)]
    peer.stdin.close(); peer.wait()
    right = sum(1 for i, st in enumerate(states) if st.lower() == ("on" if i % 2 else "off"))
    print(f"peer: {len(prows)} sweeps counted (after a warm-up that logged in); time per sweep "
          f"median {statistics.median(r['ms'] for r in prows) / 1000:.2f} s; its CPU per sweep "
          f"{statistics.median(r['cpu'] for r in prows):.2f} s, the farm's {statistics.median(r['em'] for r in prows):.2f} s; "
          f"check: {right} of {n} BMCs' states read right")
    print("  the peer is sushy's reading alone, on CPython threads (the GIL: one core at most), without "
          "Ironic's database query and lock per node: a lower bound of Ironic's cost")
def spread(v, fmt):
    return f"{fmt(statistics.median(v))} ({fmt(min(v))}–{fmt(max(v))})"
def ratio(a, b):
    r = [y / x for x, y in zip(a, b) if x > 0]
    return f"{statistics.median(r):.1f}× ({min(r):.1f}–{max(r):.1f}×)" if r else "—"
# The README's table (benches/tables.sh takes the last one a bench prints).
print()
secs = lambda x: f"{x:.2f} s"
if prows:
    k = min(len(rows), len(prows))
    sr, pr = rows[:k], prows[:k]
    print(f"| power sync, {n:,} BMCs ({emu_name}), at most {workers} in flight; {k} sweeps of each side, "
          f"alternating | stoker | Ironic's reading (sushy, {workers} threads) | peer / stoker |")
    print("|---|---|---|---|")
    print(f"| time per sweep (goal <= 10 s) | {spread([r['ms'] / 1000 for r in sr], secs)} | "
          f"{spread([r['ms'] / 1000 for r in pr], secs)} | {ratio([r['ms'] for r in sr], [r['ms'] for r in pr])} |")
    print(f"| its CPU per sweep | {spread([r['st'] for r in sr], secs)} | {spread([r['cpu'] for r in pr], secs)} | "
          f"{ratio([r['st'] for r in sr], [r['cpu'] for r in pr])} |")
    print(f"| the emulator's CPU per sweep | {spread([r['em'] for r in sr], secs)} | "
          f"{spread([r['em'] for r in pr], secs)} | |")
    print(f"| failed readings | {sum(r['failed'] for r in sr)} of {n * k} | {sum(r['failed'] for r in pr)} of {n * k} | |")
    print(f"| what bounds it | {why} | one CPython process (its GIL) and the farm's one core | |")
else:
    print(f"| power sync, {n:,} BMCs ({emu_name}), at most {workers} in flight, every {interval} s "
          f"| median (min–max) over {len(rows)} sweeps |")
    print("|---|---|")
    print(f"| time per sweep (goal <= 10 s) | {med('ms', sec).removeprefix('median ')} |")
    print(f"| stoker's CPU per sweep | {med('st', lambda x: f'{x:.2f} s').removeprefix('median ')} |")
    print(f"| the emulator's CPU per sweep | {med('em', lambda x: f'{x:.2f} s').removeprefix('median ')} |")
    print(f"| failed readings | {sum(r['failed'] for r in rows)} of {n * len(rows)} |")
    print(f"| what bounds it | {why} |")
PY
cat "$work/sweeps.txt"
# The emulator's counts at this moment (between two sweeps), for requests per reading.
reads=$(cat "$work/stoker-enroll.log" "$work/stoker.log" | sed 's/\x1b\[[0-9;]*m//g' \
  | sed -n 's/.*power states read.* read=\([0-9]*\) .*/\1/p' | awk '{s += $1} END {print s + 0}')
if [ "$emulator" = farm ]; then
  kill -USR1 "$epid"
  for _ in $(seq 50); do grep -q 'redfish_farm: running' "$work/emu.log" && break; sleep 0.1; done
  python3 - "$work/emu.log" "$reads" "$peer" <<'PY'
import re, sys
text = [l for l in open(sys.argv[1]) if "redfish_farm: running" in l][-1]
m = re.search(r"; (\d+) requests \((.*?)\); connections: (\d+) accepted.*?peak (\d+) open.*?sessions: (\d+) made, (\d+) deleted, (\d+) expired, (\d+) open", text)
reads = int(sys.argv[2])
if sys.argv[3]:
    print(f"farm so far: {m.group(1) if m else '?'} requests ({m.group(2) if m else '?'}), stoker's and the "
          "peer's together (per reading, run with PEER=0)")
elif m and reads:
    print(f"farm so far: {int(m.group(1)) / reads:.2f} requests and {int(m.group(3)) / reads:.2f} connections per "
          f"power reading over {reads} readings ({m.group(2)}); peak {m.group(4)} connections open; "
          f"sessions {m.group(5)} made, {m.group(6)} deleted, {m.group(8)} open")
PY
fi

# Every node's recorded power state against its BMC's (odd index On, even Off).
python3 - "$hport" "$token" "$work/nodes.txt" <<'PY'
import json, sys, urllib.request
hport, token, nodes = sys.argv[1:4]
def get(path):
    req = urllib.request.Request(f"http://127.0.0.1:{hport}{path}", headers={"authorization": f"Bearer {token}"})
    return json.load(urllib.request.urlopen(req))
rows = [l.split() for l in open(nodes)]
ok, bad = 0, []
for node, i in rows:
    want = "on" if int(i) % 2 else "off"
    got = get(f"/api/v1/nodes/{node}/bmc")
    if got["power_state"] == want and not got["power_error"]:
        ok += 1
    else:
        bad.append((node, i, want, got["power_state"], got["power_error"]))
print(f"check: {ok} of {len(rows)} nodes have their BMC's power state (odd BMCs On, even Off)"
      + ("" if not bad else f"; wrong: {bad[:5]}"))
PY
if [ "$emulator" = farm ] && [ "$n" -ge 2 ]; then
  # A power action through the API, as an operator would, read back from the farm itself.
  read -r node1 _ < <(sed -n 2p "$work/nodes.txt")
  addr1=$(sed -n 2p "$work/bmcs.txt")
  farm_power() { curl -fs -u admin:password "$addr1/redfish/v1/Systems/1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["PowerState"])'; }
  api_power() {
    curl -fs -X POST "http://127.0.0.1:$hport/api/v1/nodes/$node1/power" -H "authorization: Bearer $token" \
      -H 'content-type: application/json' -d "{\"action\":\"$1\"}" >/dev/null
  }
  b=$(farm_power); api_power off; o=$(farm_power); api_power on; a=$(farm_power)
  echo "check: node $node1 (BMC 1 at $addr1) was $b; power off through the API: $o; power on: $a"
fi
stop_pid "$spid"; spid=

if [ -n "${AGENTS:-}" ]; then
  [ "$emulator" = farm ] || { echo "bmc_sweep: AGENTS needs EMULATOR=farm"; exit 2; }
  abin=${AGENTS_BIN:-}
  if [ -z "$abin" ]; then
    abin=$(cd "$root" && cargo bench --bench agents --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*agents-[0-9a-f]*\)).*/\1/p' | tail -1)
    [ -n "$abin" ] && abin=$root/$abin
  fi
  [ -x "$abin" ] || { echo "bmc_sweep: no agents bench binary (cargo bench --bench agents --no-run)"; exit 1; }
  rounds=${AGENTS_ROUNDS:-3}; step=${AGENTS_STEP_MS:-250}; ainterval=${AGENTS_INTERVAL:-1}
  echo
  echo "agents: $abin -- $AGENTS $step${AGENTS_ARGS:+ $AGENTS_ARGS}; $rounds rounds alternating: $n nodes enrolled without BMCs (no sweeps), then with their BMCs on the farm (sync interval $ainterval s, $workers workers)"
  for r in $(seq "$rounds"); do
    for mode in off on; do
      out=$work/agents-$r-$mode.txt
      if [ "$mode" = off ]; then
        env STOKER_BENCH_BIN="$bin" STOKER_BENCH_BMCS="$work/bmcs.txt" STOKER_BENCH_BMC_OFF=1 "$abin" "$AGENTS" "$step" rounds=1 ${AGENTS_ARGS:-} >"$out" 2>&1 &
      else
        env STOKER_BENCH_BIN="$bin" STOKER_BENCH_BMCS="$work/bmcs.txt" STOKER_BMC_SYNC_INTERVAL="$ainterval" \
          STOKER_BMC_SYNC_WORKERS="$workers" "$abin" "$AGENTS" "$step" rounds=1 ${AGENTS_ARGS:-} >"$out" 2>&1 &
      fi
      apid=$!
      wait "$apid" || { apid=; echo "agents run $r ($mode) failed:"; tail -20 "$out"; exit 1; }
      apid=
      echo "-- round $r, $([ "$mode" = off ] && echo 'without sweeps' || echo 'with sweeps'):"
      grep -E '^(== |latency, all calls|BMC sweeps overlapping|  calls (during|outside)|daemon CPU|BMC nodes)' "$out" | sed 's/^/   /'
    done
  done
  python3 - "$work" "$rounds" <<'PY'
import re, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def p99s(mode):
    out = []
    for r in range(1, rounds + 1):
        text = open(f"{work}/agents-{r}-{mode}.txt").read()
        out.append([float(x) for x in re.findall(r"^latency, all calls: .*?p99 ([0-9.]+) ms", text, re.M)])
    return out
off, on = p99s("off"), p99s("on")
for k in range(len(off[0]) if off and off[0] else 0):
    a = [x[k] for x in off if len(x) > k]; b = [x[k] for x in on if len(x) > k]
    print(f"agents p99, phase {k + 1}: without sweeps {', '.join(f'{v:.1f}' for v in a)} ms (median {statistics.median(a):.1f}); "
          f"with sweeps {', '.join(f'{v:.1f}' for v in b)} ms (median {statistics.median(b):.1f})")
PY
fi

# The emulator's own report when it stops (the farm: CPU, requests by kind, connections, sessions).
stop_pid "$epid"; epid=
[ "$emulator" = farm ] && { echo; tail -n 1 "$work/emu.log"; }
exit 0
