#!/usr/bin/env bash
# The power-state sweep over many emulated BMCs: one sushy-tools emulator (fake driver) plays
# N Redfish BMCs on loopback (one system each), stoker enrolls N nodes with a Redfish BMC each
# and its background sync reads every power state once per sweep with at most W requests in
# flight. Printed per sweep (from stoker's own "power states read" log line): BMCs read, time,
# peak requests in flight; then the CPU seconds stoker and the emulator spent per sweep.
#
# What bounds the figure: the emulator is one Python process (Werkzeug's threaded server); the
# script prints its CPU beside stoker's, so a sweep whose time the emulator sets says so.
#
# usage: benches/bmc_sweep.sh STOKER_BIN [N=1000] [WORKERS=32] [SWEEPS=5]
# SUSHY_EMULATOR: the sushy-emulator program (default: .ci/bmc-emulators.sh's venv).
# Loopback only; only processes started here are stopped, by PID.
set -euo pipefail
bin=$(readlink -f "$1"); n=${2:-1000}; workers=${3:-32}; sweeps=${4:-5}
emu=${SUSHY_EMULATOR:-/var/cache/stoker-ci/sushy/bin/sushy-emulator}
[ -x "$emu" ] || { echo "bmc_sweep: no sushy-emulator at $emu (run .ci/bmc-emulators.sh)"; exit 2; }
work=$(mktemp -d /tmp/stoker-bmc-sweep.XXXXXX)
spid=; epid=
cleanup() {
  for p in $spid $epid; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
  if [ -n "${KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
eport=$(free_port); hport=$(free_port)

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

STOKER_LOG_LEVEL=info "$bin" serve --data-dir "$work/data" --http-listen "127.0.0.1:$hport" \
  --http-tls off --bmc-sync-interval 10 --bmc-sync-workers "$workers" --bmc-timeout 10 \
  >"$work/stoker.log" 2>&1 &
spid=$!
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$hport/healthz" >/dev/null && break; sleep 0.2; done
pw=$(cat "$work/data/initial-admin-password")
token=$(curl -fs -X POST "http://127.0.0.1:$hport/api/v1/login" -H 'content-type: application/json' \
  -d "{\"username\":\"admin\",\"password\":\"$pw\"}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
python3 - "$n" "$hport" "$eport" "$token" <<'PY'
import json, sys, uuid, urllib.request
n, hport, eport, token = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
for i in range(n):
    body = {"mac": "52:54:%02x:%02x:%02x:%02x" % (0x10, (i >> 16) & 255, (i >> 8) & 255, i & 255),
            "bmc": {"driver": "redfish", "address": f"http://127.0.0.1:{eport}/redfish/v1/Systems/{uuid.UUID(int=i + 1)}",
                    "username": "admin", "password": "password"}}
    req = urllib.request.Request(f"http://127.0.0.1:{hport}/api/v1/nodes", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json", "authorization": f"Bearer {token}"})
    urllib.request.urlopen(req).read()
PY
echo "bmc_sweep: $n nodes enrolled, each with its own Redfish BMC (sushy-tools fake driver, one process); $workers requests in flight at most; interval 10 s"
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)
s0=$(cpu "$spid"); e0=$(cpu "$epid")
want=$((sweeps + 1))
for _ in $(seq 600); do
  [ "$(grep -c 'power states read' "$work/stoker.log" || true)" -ge "$want" ] && break; sleep 1
done
s1=$(cpu "$spid"); e1=$(cpu "$epid")
grep 'power states read' "$work/stoker.log" | sed 's/\x1b\[[0-9;]*m//g' | tail -n "$want" | head -n "$sweeps" \
  | sed -E 's/.*read=([0-9]+).*failed=([0-9]+).*ms=([0-9]+).*peak_in_flight=([0-9]+).*/sweep: read \1, failed \2, \3 ms, peak in flight \4/'
python3 - "$s0" "$s1" "$e0" "$e1" "$tck" "$want" <<'PY'
import sys
s0, s1, e0, e1, tck, k = map(float, sys.argv[1:])
print(f"CPU per sweep: stoker {(s1-s0)/tck/k:.2f} s, emulator {(e1-e0)/tck/k:.2f} s (over {int(k)} sweeps; the emulator is one Python process)")
PY
