#!/usr/bin/env bash
# PXE service benchmarks, stoker and dnsmasq side by side in one run, in a private /16 lab
# (../shared/tools/pxe-lab; root). Not part of CI: it takes a few minutes.
#
# usage: benches/pxe.sh [STOKER_BIN] [SHARED_DIR]
#   DHCP: perfdhcp DORA with distinct MACs, each a new lease written durably (stoker: SQLite
#         WAL commit per batch before the replies; dnsmasq: its lease file), at several rates.
#   TFTP: a 32 MB file, blksize 1468: curl (lock-step, windowsize 1) from both servers, and
#         windowsize 16 from stoker with two clients: atftp (Debian's; it spends a pselect and
#         a recvmsg per packet and is the limit, not the server) and tftp_get (benches/tftp_get.rs,
#         a plain RFC 7440 client with one blocking recv per packet). tftp_get also fetches from
#         dnsmasq, which has no RFC 7440 and so serves it lock-step: the same-client ratio.
#         The TFTP runs alternate between the servers over BENCH_TFTP_ROUNDS rounds (5);
#         each figure is the median. TFTP_GET=path skips building tftp_get
#         (cargo bench --bench tftp_get --no-run).
#   BENCH_DHCP_RATES / BENCH_DHCP_SECONDS shorten the DHCP part.
# Prints one line per measurement and the ratios at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(readlink -f "${1:-$root/target/release/stoker}")
shared=${2:-$root/../shared}
lab=$shared/tools/pxe-lab
[ -d "$lab" ] || { echo "bench: $lab not found"; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench: needs root"; exit 2; }
for t in perfdhcp atftp dnsmasq curl; do
  command -v "$t" >/dev/null || { echo "bench: $t missing (apt-get install kea-admin atftp dnsmasq-base curl)"; exit 2; }
done
tftp_get=${TFTP_GET:-}
if [ -z "$tftp_get" ]; then
  tftp_get=$(cd "$root" && { cargo bench --bench tftp_get --no-run 2>&1 || true; } |
    sed -n 's/.*Executable .*(\(.*\))$/\1/p')
fi
case $tftp_get in /*) ;; ?*) tftp_get=$root/$tftp_get ;; esac
[ -x "$tftp_get" ] || { echo "bench: cannot build benches/tftp_get.rs (set TFTP_GET)"; exit 2; }
export PXELAB_NS=pxebench PXELAB_SERVER_IP=10.79.0.1 PXELAB_PREFIX=16 \
  PXELAB_POOL_START=10.79.1.0 PXELAB_POOL_END=10.79.255.254 PXELAB_RA=0 PXELAB_HTTP_PORT=8081
RATES=${BENCH_DHCP_RATES:-"500 1000 2000 4000 8000"}
SECS=${BENCH_DHCP_SECONDS:-10}
work=$(mktemp -d /tmp/stoker-bench.XXXXXX)
pid=
cleanup() {
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  "$lab/serve-dnsmasq.sh" stop "$work/dnsmasq" >/dev/null 2>&1 || true
  "$lab/lab-down.sh" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/tftp" "$work/dnsmasq"
head -c 32000000 /dev/urandom >"$work/tftp/big.bin"
cp "$work/tftp/big.bin" "$work/dnsmasq/big.bin"
: >"$work/dnsmasq/vmlinuz"; : >"$work/dnsmasq/initrd.img"
C=(ip netns exec "${PXELAB_NS}-c")
cip=10.79.0.2

# Each rate starts from an empty lease database, for both servers (dnsmasq rewrites its whole
# lease file per change, so a full file would slow it down and make the comparison unfair).
dhcp_runs() { # label start-fn stop-fn -> best achieved DORA/s on stdout, details on stderr
  local r out a best=0
  for r in $RATES; do
    "$2"
    out=$("$lab/bench-dhcp.sh" --rate "$r" --seconds "$SECS" --clients 60000 2>&1 | grep '^bench-dhcp' || true)
    "$3"
    echo "$1 $out" >&2
    a=$(sed -n 's/.*: \([0-9]*\) DORA\/s achieved.*/\1/p' <<<"$out")
    [ -n "$a" ] && [ "$a" -gt "$best" ] && best=$a
  done
  echo "$best"
}
n=0
start_stoker() {
  n=$((n + 1))
  ip netns exec "$PXELAB_NS" "$bin" serve --data-dir "$work/data-$n" --http-listen 10.79.0.1:8081 \
    --dhcp-enabled true --dhcp-server-ip 10.79.0.1 \
    --dhcp-subnets '10.79.0.0/16 pool=10.79.1.0-10.79.255.254 lease=3600' \
    --tftp-enabled true --tftp-root "$work/tftp" --log-level warn >"$work/stoker-$n.log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do
    ip netns exec "$PXELAB_NS" curl -fsS -o /dev/null http://10.79.0.1:8081/healthz 2>/dev/null && return
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench: stoker did not start:" >&2
  tail -5 "$work/stoker-$n.log" >&2
  exit 1
}
stop_stoker() { kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=; ports_free; }
start_dnsmasq() { "$lab/serve-dnsmasq.sh" start "$work/dnsmasq" --quiet --dnsmasq-opt dhcp-lease-max=400000 >/dev/null; }
# serve-dnsmasq.sh stop does not wait for its processes: wait until DHCP, TFTP and HTTP are free.
stop_dnsmasq() { "$lab/serve-dnsmasq.sh" stop "$work/dnsmasq" >/dev/null; ports_free; }
ports_free() {
  for _ in $(seq 100); do
    { ip netns exec "$PXELAB_NS" ss -Hlnu; ip netns exec "$PXELAB_NS" ss -Hlnt; } 2>/dev/null |
      grep -qE ':(67|69|8081) ' || return 0
    sleep 0.1
  done
}
tftp_once() { # tool blksize window -> MB/s of one checked download (0 if it differs)
  local tool=$1 blk=$2 win=$3 t0 dt
  rm -f "$work/out"
  t0=$(date +%s.%N)
  case $tool in
    curl) "${C[@]}" curl -s --tftp-blksize "$blk" -o "$work/out" "tftp://$PXELAB_SERVER_IP/big.bin" ;;
    atftp) "${C[@]}" atftp --option "blksize $blk" --option "windowsize $win" --get -r big.bin -l "$work/out" "$PXELAB_SERVER_IP" >/dev/null 2>&1 ;;
    tftp_get) "${C[@]}" "$tftp_get" "$PXELAB_SERVER_IP" big.bin "$work/out" --blksize "$blk" --windowsize "$win" >/dev/null ;;
  esac
  dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')
  cmp -s "$work/out" "$work/tftp/big.bin" || { echo "bench: $tool download differs" >&2; echo 0; return; }
  awk -v t="$dt" 'BEGIN{printf "%.1f", 32/t}'
}
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }

"$lab/lab-down.sh" >/dev/null 2>&1 || true
"$lab/lab-up.sh" >/dev/null
ip -n "${PXELAB_NS}-c" addr add "$cip/16" dev c0 2>/dev/null || true

echo "== DHCP"
s_dhcp=$(dhcp_runs stoker start_stoker stop_stoker)
d_dhcp=$(dhcp_runs dnsmasq start_dnsmasq stop_dnsmasq)

# TFTP rounds alternate between the servers, so that load from elsewhere on the machine falls
# on both alike; each figure is the median over the rounds.
ROUNDS=${BENCH_TFTP_ROUNDS:-5}
echo "== TFTP, 32 MB, blksize 1468, $ROUNDS rounds alternating stoker and dnsmasq (MB/s)"
s1=() s16a=() s16=() d1=() dg=()
for r in $(seq "$ROUNDS"); do
  start_stoker
  s1+=("$(tftp_once curl 1468 1)") s16a+=("$(tftp_once atftp 1468 16)") s16+=("$(tftp_once tftp_get 1468 16)")
  stop_stoker
  start_dnsmasq
  d1+=("$(tftp_once curl 1468 1)") dg+=("$(tftp_once tftp_get 1468 16)")
  stop_dnsmasq
  echo "round $r: stoker curl ${s1[-1]}, atftp ws16 ${s16a[-1]}, tftp_get ws16 ${s16[-1]}; dnsmasq curl ${d1[-1]}, tftp_get (lock-step) ${dg[-1]}"
done
s_tftp1=$(median "${s1[@]}") s_tftp16a=$(median "${s16a[@]}") s_tftp16=$(median "${s16[@]}")
d_tftp1=$(median "${d1[@]}") d_tftpg=$(median "${dg[@]}")
echo "stoker TFTP 32 MB blksize 1468: windowsize 1 (curl) $s_tftp1 MB/s; windowsize 16: atftp $s_tftp16a MB/s, tftp_get $s_tftp16 MB/s"
echo "dnsmasq TFTP 32 MB blksize 1468: windowsize 1 (curl) $d_tftp1 MB/s; tftp_get asking windowsize 16 (served lock-step) $d_tftpg MB/s"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b>0) printf "%.1f", a/b; else print "n/a" }'; }
echo "== summary"
echo "DHCP best DORA/s with durable leases: stoker $s_dhcp, dnsmasq $d_dhcp: $(ratio "$s_dhcp" "$d_dhcp")x"
echo "TFTP 32 MB, blksize 1468: stoker $s_tftp1 MB/s vs dnsmasq $d_tftp1 MB/s at windowsize 1 (curl): $(ratio "$s_tftp1" "$d_tftp1")x"
echo "TFTP windowsize 16 (tftp_get): stoker $s_tftp16 MB/s = $(ratio "$s_tftp16" "$d_tftp1")x dnsmasq's curl figure, $(ratio "$s_tftp16" "$d_tftpg")x dnsmasq with the same client ($d_tftpg MB/s lock-step)"
echo "TFTP windowsize 16 (atftp, the client is the limit): stoker $s_tftp16a MB/s = $(ratio "$s_tftp16a" "$d_tftp1")x dnsmasq's curl figure"
