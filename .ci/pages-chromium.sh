#!/usr/bin/env bash
# Render the dashboard in headless Chromium (Debian's package, driven by playwright-core over the
# DevTools protocol; it downloads no browser) against real `stoker serve` daemons on loopback,
# signed in through the login form as a person would. Three scripts, three daemons:
#   .ci/browser.mjs           every page shows what an operator expects (three nodes from hellos,
#                             no release); BMC form, power asking first, tokens, sign-out
#   .ci/browser-pages.mjs     the bundled release, three nodes whose agents the script plays: the
#                             deployment and node pages after a deployment with a failed run, at
#                             1280 and 900 px, the plan's zoom, the filter without JavaScript
#   .ci/browser-lifecycle.mjs the bundled release and `--demo-nodes 3`: every workflow clicked
#                             through (the newcomer's path: demo nodes appear, create, assign,
#                             deploy, read the results, change a setting, redeploy, delete; then
#                             the task graph's zoom, rack scale on 58 nodes, rename/roles/remove/
#                             delete, settings and network forms, a plugin built here by `stoker
#                             plugin build` installed and removed, silent agents and a deployment
#                             waiting on them, a link followed as a live page's reload comes,
#                             no sideways scroll at 900 px and labelled controls,
#                             one path without JavaScript), a screenshot per step
# Each counts its checks, prints a summary and exits non-zero on any failure, which fails this
# script. Screenshots go to $OUT (default target/pages) for a person to look at: login.png and
# one per page (browser.mjs), pages-*.png, life-*.png (life-900-*.png at 900 px, life-nojs-*.png).
set -euo pipefail
stoker=${1:?usage: pages-chromium.sh path/to/stoker}
OUT=${OUT:-target/pages}
mkdir -p "$OUT"
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is not installed and cannot be installed here" >&2; exit 1
  fi
fi
work=$(mktemp -d)
pid=
pid2=
pid3=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  [ -n "$pid2" ] && kill "$pid2" 2>/dev/null
  [ -n "$pid3" ] && kill "$pid3" 2>/dev/null
  wait 2>/dev/null; rm -rf "$work"
}
trap cleanup EXIT
"$stoker" serve --data-dir "$work/data" --http-listen 127.0.0.1:0 --plugins-bundled skip 2>"$work/log" &
pid=$!
for _ in $(seq 100); do grep -q 'listening on http://' "$work/log" && break; sleep 0.1; done
base=$(grep -o 'listening on http://[0-9.:]*' "$work/log" | head -n1 | sed 's/listening on //')
[ -n "$base" ] || { cat "$work/log"; echo "stoker did not start" >&2; exit 1; }
for i in 1 2 3; do
  curl -sf -o /dev/null -X POST "$base/api/v1/agent/hello" -H "content-type: application/json" -d "{\"interfaces\":[{\"name\":\"eno1\",\"mac\":\"52:54:00:00:10:0$i\",\"speed_mbps\":10000,\"link\":true}],\"cpu\":{\"count\":32},\"memory_bytes\":274877906944,\"disks\":[{\"name\":\"sda\",\"size_bytes\":480103981056}],\"system\":{\"vendor\":\"Dell Inc.\",\"product\":\"PowerEdge R650\"}}"
done
# playwright-core drives Debian's chromium (it downloads no browser) to click through the sign-in.
node_dir="$PWD/target/ci-node"
if [ ! -d "$node_dir/node_modules/playwright-core" ]; then
  mkdir -p "$node_dir"
  (cd "$node_dir" && npm init -y >/dev/null && npm install --no-audit --no-fund --silent playwright-core@1 >/dev/null)
fi
cp .ci/browser.mjs "$node_dir/browser.mjs"
password=$(cat "$work/data/initial-admin-password")
checks='[
 {"path": "/", "want": ["class=\"tile-value\">3<", "No release installed", "discovered 52:54:00:00:10:03"]},
 {"path": "/nodes", "want": ["52:54:00:00:10:01", "badge badge-info\">discover<", "256.0 GiB", "Dell Inc. PowerEdge R650"]},
 {"path": "/nodes/2", "want": ["eno1", "10000 Mb/s"]},
 {"path": "/environments", "want": ["No release installed"]},
 {"path": "/releases", "want": ["No plugin is installed"]},
 {"path": "/audit", "want": ["/login"]}
]'
node "$node_dir/browser.mjs" "$base" "$password" "$(cd "$OUT" && pwd)" "$checks" || {
  echo "the daemon's log (its last 40 lines):" >&2; tail -n 40 "$work/log" >&2; exit 1
}

# The deployment and node pages, on a daemon with the bundled release (its simulated nodes'
# agents are played by the script itself).
cp .ci/browser-pages.mjs "$node_dir/browser-pages.mjs"
"$stoker" serve --data-dir "$work/data2" --http-listen 127.0.0.1:0 2>"$work/log2" &
pid2=$!
for _ in $(seq 100); do grep -q 'listening on http://' "$work/log2" && break; sleep 0.1; done
base2=$(grep -o 'listening on http://[0-9.:]*' "$work/log2" | head -n1 | sed 's/listening on //')
[ -n "$base2" ] || { cat "$work/log2"; echo "the second stoker did not start" >&2; exit 1; }
node "$node_dir/browser-pages.mjs" "$base2" "$(cat "$work/data2/initial-admin-password")" "$(cd "$OUT" && pwd)" || {
  echo "the second daemon's log (its last 40 lines):" >&2; tail -n 40 "$work/log2" >&2; exit 1
}
kill "$pid2" 2>/dev/null; wait "$pid2" 2>/dev/null || true; pid2=

# The workflows, clicked through as a person would (.ci/browser-lifecycle.mjs), on a third
# daemon with the bundled release and three simulated nodes that boot over loopback
# (`--demo-nodes 3`); the plugin it uploads is built here by `stoker plugin build`. That daemon
# runs under the shipped unit's system-call filter (.ci/unit-seccomp.py): a call the installed
# service would be refused kills it (SIGSYS), and the workflows fail.
cp .ci/browser-lifecycle.mjs "$node_dir/browser-lifecycle.mjs"
"$stoker" plugin build .ci/browser-plugin --output "$work" >/dev/null
if ! /usr/bin/python3 -c 'import seccomp' 2>/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-seccomp >/dev/null
  else
    echo "python3-seccomp is not installed and cannot be installed here" >&2; exit 1
  fi
fi
# Run as root, the launcher becomes the unit's user (or nobody), as the service runs: its data
# directory and its copy of the binary are where that user reaches them.
unit_stoker=$stoker
if [ "$(id -u)" = 0 ]; then
  chmod 755 "$work"
  mkdir -p "$work/data3"
  chown "$(id -u stoker 2>/dev/null || id -u nobody)" "$work/data3"
  unit_stoker="$work/stoker"
  install -m 0755 "$stoker" "$unit_stoker"
fi
.ci/unit-seccomp.py systemd/stoker.service \
  "$unit_stoker" serve --data-dir "$work/data3" --http-listen 127.0.0.1:0 --demo-nodes 3 2>"$work/log3" &
pid3=$!
for _ in $(seq 100); do grep -q 'listening on http://' "$work/log3" && break; sleep 0.1; done
base3=$(grep -o 'listening on http://[0-9.:]*' "$work/log3" | head -n1 | sed 's/listening on //')
[ -n "$base3" ] || { cat "$work/log3"; echo "the third stoker did not start" >&2; exit 1; }
node "$node_dir/browser-lifecycle.mjs" "$base3" "$(cat "$work/data3/initial-admin-password")" "$(cd "$OUT" && pwd)" \
  "$work/browser-demo-1.0.0.fp" || {
  tail -n 40 "$work/log3"
  if ! kill -0 "$pid3" 2>/dev/null; then
    status=0; wait "$pid3" || status=$?; pid3=
    [ "$status" = 159 ] && echo "the daemon was killed by systemd/stoker.service's SystemCallFilter (SIGSYS)" >&2
  fi
  exit 1
}
kill -0 "$pid3" 2>/dev/null || { echo "the third stoker is gone after the workflows" >&2; exit 1; }
echo "screenshots in $OUT"
