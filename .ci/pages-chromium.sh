#!/usr/bin/env bash
# Render the dashboard in headless Chromium (Debian's package) against a real `stoker serve` on
# loopback: every page must load its stylesheet and show what an operator expects. Screenshots go
# to $OUT (default target/pages) for a person to look at.
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
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
"$stoker" serve --data-dir "$work/data" --http-listen 127.0.0.1:0 --plugins-bundled skip 2>"$work/log" &
pid=$!
for _ in $(seq 100); do grep -q 'listening on http://' "$work/log" && break; sleep 0.1; done
base=$(grep -o 'listening on http://[0-9.:]*' "$work/log" | head -n1 | sed 's/listening on //')
[ -n "$base" ] || { cat "$work/log"; echo "stoker did not start" >&2; exit 1; }
for i in 1 2 3; do
  curl -sf -o /dev/null -X POST "$base/api/v1/agent/hello" -d "{\"interfaces\":[{\"name\":\"eno1\",\"mac\":\"52:54:00:00:10:0$i\",\"speed_mbps\":10000,\"link\":true}],\"cpu\":{\"count\":32},\"memory_bytes\":274877906944,\"disks\":[{\"name\":\"sda\",\"size_bytes\":480103981056}],\"system\":{\"vendor\":\"Dell Inc.\",\"product\":\"PowerEdge R650\"}}"
done
chrome() {
  timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$work/profile" --hide-scrollbars --window-size=1280,900 "$@" 2>/dev/null
}
fail=0; pass=0
check() { # path, expected text...
  local path=$1; shift
  local name; name=$(echo "${path#/}" | tr '/' '_'); name=${name:-overview}
  chrome --dump-dom "$base$path" > "$work/$name.html" || true
  chrome --screenshot="$OUT/$name.png" "$base$path" >/dev/null || true
  for want in "$@"; do
    if grep -qF -- "$want" "$work/$name.html"; then pass=$((pass+1)); else
      echo "FAIL $path: rendered page lacks: $want"; fail=$((fail+1)); fi
  done
}
check / 'class="tile-value">3<' 'No release installed' 'discovered 52:54:00:00:10:03'
check /nodes '52:54:00:00:10:01' 'badge badge-info">discover<' '256.0 GiB' 'Dell Inc. PowerEdge R650'
check /nodes/2 'eno1' '10000 Mb/s'
check /environments 'No release installed'
check /releases 'No plugin is installed'
echo "screenshots in $OUT"
echo "pages: $pass passed, $fail failed"
[ "$fail" = 0 ]
