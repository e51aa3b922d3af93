#!/usr/bin/env bash
# PXE service benchmarks, stoker and dnsmasq in the same run, in a private lab network
# (../shared/tools/pxe-lab; root). Not part of CI: it takes 15-25 minutes.
#
# usage: benches/pxe.sh [STOKER_BIN] [SHARED_DIR]
#   DHCP: perfdhcp DORA, a new MAC per exchange, each a new lease kept durably (stoker: the
#         lease rows committed and the WAL flushed with fdatasync before any ACK of the group,
#         an OFFER's hold kept in memory and the OFFER sent at once; dnsmasq: its whole lease
#         file rewritten and fsync'd before each ACK, an OFFER's hold in memory). Each round looks
#         for each server's ceiling: from a start rate, the offered rate grows by
#         BENCH_DHCP_FACTOR (1.25) until a step drops >= 1% (DISCOVER->OFFER or REQUEST->ACK;
#         perfdhcp counts an answer later than 1 s as dropped) or completes < 97% of what was
#         offered, then BENCH_DHCP_REFINE (2) bisections between
#         the last good and the first bad rate. The ceiling is the DORA/s achieved at the best
#         good step. Every step starts its server afresh on an empty lease database. Rounds
#         (BENCH_DHCP_ROUNDS, 5) alternate the servers, and which goes first; a third server,
#         dhcp_echo (benches/dhcp_echo.rs: answers at once, keeps nothing), is searched the same
#         way: its ceiling is the bench's own (perfdhcp, the veth, the cores left). Each step also
#         records the CPU of the server and of perfdhcp and the machine's busy cores, so the
#         report says what bounds each ceiling. BENCH_DHCP_SECONDS (5) per step;
#         BENCH_PERFDHCP_THREADS=single|multi (single) is perfdhcp's -g.
#         Then stoker is filled with >= 65,536 leases, restarted, and its lease load timed.
#   TFTP: a 32 MB file, blksize 1468: curl (lock-step, windowsize 1) from both servers, and
#         windowsize 16 from stoker with two clients: atftp (Debian's; it spends a pselect and
#         a recvmsg per packet and is the limit, not the server) and tftp_get (benches/tftp_get.rs,
#         a plain RFC 7440 client with one blocking recv per packet). tftp_get also fetches from
#         dnsmasq, which has no RFC 7440 and so serves it lock-step: the same-client ratio.
#         The TFTP runs alternate between the servers over BENCH_TFTP_ROUNDS rounds (5);
#         each figure is the median. TFTP_GET=path and DHCP_ECHO=path skip building the bench
#         binaries (cargo build --release --bench tftp_get --bench dhcp_echo).
#   BENCH_PARTS="dhcp tftp" (the default) chooses the parts; BENCH_NS (pxebench) names the
#   lab's network namespaces (NAME and NAME-c), so that benches of two work trees do not meet.
# Prints one line per step, then a markdown table of the figures (the README's).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(readlink -f "${1:-$root/target/release/stoker}")
shared=${2:-$root/../shared}
lab=$shared/tools/pxe-lab
[ -d "$lab" ] || { echo "bench: $lab not found"; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench: needs root"; exit 2; }
[ -x "$bin" ] || { echo "bench: $bin is not an executable (cargo build --release)"; exit 2; }
for t in perfdhcp atftp dnsmasq curl; do
  command -v "$t" >/dev/null || { echo "bench: $t missing (apt-get install kea-admin atftp dnsmasq-base curl)"; exit 2; }
done
PARTS=${BENCH_PARTS:-dhcp tftp}
part() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
bench_bin() { # NAME ENV_VALUE -> path of the bench binary (built unless given)
  local path=$2
  if [ -z "$path" ]; then
    # The release profile, whose library `cargo build --release` already built (`cargo bench`
    # would build it again under the bench profile).
    path=$(cd "$root" && { cargo build --release --bench "$1" --message-format=json 2>/dev/null || true; } |
      grep -o '"executable":"[^"]*'"$1"'-[^"]*"' | sed 's/.*:"//; s/"$//' | tail -1)
  fi
  case $path in /*) ;; ?*) path=$root/$path ;; esac
  [ -x "$path" ] || { echo "bench: cannot build benches/$1.rs" >&2; exit 2; }
  echo "$path"
}
part tftp && tftp_get=$(bench_bin tftp_get "${TFTP_GET:-}")
part dhcp && dhcp_echo=$(bench_bin dhcp_echo "${DHCP_ECHO:-}")
# A /14 so that a step at 40,000 DORA/s for 5 s still has a new address for every client.
export PXELAB_NS=${BENCH_NS:-pxebench} PXELAB_SERVER_IP=10.76.0.1 PXELAB_PREFIX=14 \
  PXELAB_POOL_START=10.76.1.0 PXELAB_POOL_END=10.79.255.254 PXELAB_RA=0 PXELAB_HTTP_PORT=8081
POOL=262000
ROUNDS=${BENCH_DHCP_ROUNDS:-5}
SECS=${BENCH_DHCP_SECONDS:-5}
FACTOR=${BENCH_DHCP_FACTOR:-1.25}
REFINE=${BENCH_DHCP_REFINE:-2}
MAXDROP=${BENCH_DHCP_MAX_DROP:-1}
# perfdhcp's own threads: "single" spent 74 µs of CPU per DORA where "multi" spent 101 (against
# dhcp_echo at 3,000/s on the 2-core machine): one thread leaves more of the cores to the server.
PERFDHCP_MODE=${BENCH_PERFDHCP_THREADS:-single}
work=$(mktemp -d /tmp/stoker-bench.XXXXXX)
pid=
echo_pid=
cleanup() {
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  [ -n "$echo_pid" ] && kill -TERM "$echo_pid" 2>/dev/null && wait "$echo_pid" 2>/dev/null
  "$lab/serve-dnsmasq.sh" stop "$work/dnsmasq" >/dev/null 2>&1 || true
  "$lab/lab-down.sh" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/tftp" "$work/dnsmasq"
if part tftp; then
  head -c 32000000 /dev/urandom >"$work/tftp/big.bin"
  cp "$work/tftp/big.bin" "$work/dnsmasq/big.bin"
fi
: >"$work/dnsmasq/vmlinuz"; : >"$work/dnsmasq/initrd.img"
C=(ip netns exec "${PXELAB_NS}-c")
cip=10.76.0.2

n=0
last_log=
# stoker on a new data directory (or $1), DHCP rate limit lifted (the bench measures the
# server, not dhcp.max_rate's flood guard), lease and stop lines logged.
start_stoker() {
  local data=${1:-}
  if [ -z "$data" ]; then n=$((n + 1)); data=$work/data-$n; fi
  last_log=$data.log
  ip netns exec "$PXELAB_NS" "$bin" serve --data-dir "$data" --http-listen "$PXELAB_SERVER_IP:8081" --http-tls off \
    --dhcp-enabled true --dhcp-server-ip "$PXELAB_SERVER_IP" --dhcp-max-rate 1000000 \
    --dhcp-subnets "10.76.0.0/14 pool=$PXELAB_POOL_START-$PXELAB_POOL_END lease=3600" \
    --tftp-enabled true --tftp-root "$work/tftp" --log-level 'warn,stoker::dhcp=info' >>"$last_log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    ip netns exec "$PXELAB_NS" curl -fsS -o /dev/null "http://$PXELAB_SERVER_IP:8081/healthz" 2>/dev/null && return
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench: stoker did not start:" >&2
  tail -5 "$last_log" >&2
  kill -KILL "$pid" 2>/dev/null
  exit 1
}
stop_stoker() { kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=; ports_free; }
start_dnsmasq() { "$lab/serve-dnsmasq.sh" start "$work/dnsmasq" --quiet --dnsmasq-opt dhcp-lease-max=400000 >/dev/null; }
# serve-dnsmasq.sh stop does not wait for its processes: wait until DHCP, TFTP and HTTP are free.
stop_dnsmasq() { "$lab/serve-dnsmasq.sh" stop "$work/dnsmasq" >/dev/null; ports_free; }
dnsmasq_pid() { awk '$2 == "dnsmasq" {print $1; exit}' "$work/dnsmasq/.pxelab-pids"; }
start_echo() {
  ip netns exec "$PXELAB_NS" "$dhcp_echo" pxebr0 "$PXELAB_SERVER_IP" "$PXELAB_PREFIX" >"$work/echo.log" 2>&1 &
  echo_pid=$!
  for _ in $(seq 100); do
    ip netns exec "$PXELAB_NS" ss -Hlnu 2>/dev/null | grep -q ':67 ' && return
    sleep 0.05
  done
  echo "bench: dhcp_echo did not start: $(cat "$work/echo.log")" >&2
  kill -KILL "$echo_pid" 2>/dev/null
  exit 1
}
stop_echo() { kill -TERM "$echo_pid"; wait "$echo_pid" 2>/dev/null || true; echo_pid=; ports_free; }
ports_free() {
  for _ in $(seq 100); do
    { ip netns exec "$PXELAB_NS" ss -Hlnu; ip netns exec "$PXELAB_NS" ss -Hlnt; } 2>/dev/null |
      grep -qE ':(67|69|8081) ' || return 0
    sleep 0.1
  done
}
cpu_ticks() { # PID -> utime+stime in clock ticks (0 if gone)
  awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}
machine() { awk '/^cpu / {idle = $5 + $6; t = 0; for (i = 2; i <= NF; i++) t += $i; print t, idle}' /proc/stat; }
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }
minmax() { printf '%s\n' "$@" | sort -n | awk 'NR==1{lo=$1} {hi=$1} END{print lo "–" hi}'; }
thousands() { awk -v n="$1" 'BEGIN{ if (n !~ /^[0-9]+$/) { print n; exit } s = ""; while (length(n) > 3) { s = "," substr(n, length(n) - 2) s; n = substr(n, 1, length(n) - 3) } print n s }'; }

# One step: SERVER (stoker|dnsmasq|echo) at RATE DORA/s for SECS on a fresh server. Prints
# "achieved dropDO dropRA server_cores perfdhcp_cores busy_cores extra" (extra: stoker's
# flushes/s and DORAs per flush, from its stop line).
step() {
  local server=$1 rate=$2 spid clients out t0 t1 m0 m1 s0 s1 p0 p1 times extra=-
  local dir=$work/step-$BASHPID
  case $server in
    stoker) start_stoker "$dir"; spid=$pid ;;
    dnsmasq) start_dnsmasq; spid=$(dnsmasq_pid) ;;
    echo) start_echo; spid=$echo_pid ;;
  esac
  clients=$(awk -v r="$rate" -v s="$SECS" -v p="$POOL" 'BEGIN{c=int(r*s*1.05)+100; if (c>p) c=p; print c}')
  s0=$(cpu_ticks "$spid"); m0=$(machine); t0=$(date +%s.%N)
  out=$({ /usr/bin/time -f 'PERFDHCP_CPU %U %S' "${C[@]}" timeout $((SECS + 30)) \
    perfdhcp -4 -g "$PERFDHCP_MODE" -l c0 -r "$rate" -R "$clients" -p "$SECS" 2>&1; } 2>&1 || true)
  t1=$(date +%s.%N); m1=$(machine); s1=$(cpu_ticks "$spid")
  case $server in
    stoker)
      stop_stoker
      # "DHCP server stopped groups=N commit_ms_per_group=X sync_ms_per_group=Y"
      extra=$(grep 'DHCP server stopped' "$last_log" | tail -1 |
        sed -n 's/.*groups=\([0-9]*\) commit_ms_per_group="\{0,1\}\([0-9.]*\)"\{0,1\} sync_ms_per_group="\{0,1\}\([0-9.]*\).*/\1 \2 \3/p')
      extra=${extra:--}
      rm -rf "$dir" "$dir.log"
      ;;
    dnsmasq) stop_dnsmasq ;;
    echo) stop_echo ;;
  esac
  awk -v out="$out" -v s0="$s0" -v s1="$s1" -v t0="$t0" -v t1="$t1" -v m0="$m0" -v m1="$m1" \
      -v extra="$extra" -v secs="$SECS" 'BEGIN {
    n = split(out, lines, "\n"); ach = ""; nd = 0
    for (i = 1; i <= n; i++) {
      split(lines[i], f, " ")
      if (lines[i] ~ /^Rate:/) ach = f[2]
      if (lines[i] ~ /drops ratio/) { nd++; d[nd] = f[3] }
      if (lines[i] ~ /^PERFDHCP_CPU/) pc = f[2] + f[3]
    }
    if (ach == "") { print "0 100 100 0 0 0 -"; exit }
    el = t1 - t0; split(m0, a, " "); split(m1, b, " ")
    busy = ((b[1] - a[1]) - (b[2] - a[2])) / 100 / el
    # stoker: flushes per second and DORAs per flush over the step
    x = "-"; ne = split(extra, e, " ")
    if (ne == 3 && e[1] > 0) x = sprintf("%.0f/s,%.1f,%s,%s", e[1] / secs, ach * secs / e[1], e[2], e[3])
    printf "%.0f %s %s %.2f %.2f %.2f %s\n", ach, d[1] + 0, d[2] + 0, (s1 - s0) / 100 / el, pc / el, busy, x
  }'
}

# The ceiling of SERVER in one round, searched from START. Prints "ceiling why step-line"
# where step-line is the best good step's figures; details of every step on stderr.
search() {
  local server=$1 rate=$2 good=0 bad=0 goodline= badline= line ach d1 d2 i ok why=
  probe() { # rate -> sets line, ok
    line=$(step "$server" "$1")
    read -r ach d1 d2 _ <<<"$line"
    ok=$(awk -v a="$ach" -v r="$1" -v x="$d1" -v y="$d2" -v m="$MAXDROP" \
      'BEGIN{print (x < m && y < m && (a >= 0.97 * r || r - a <= 3)) ? 1 : 0}')
    printf '  %-8s offered %6s/s: %s DORA/s, drops D-O %s%% R-A %s%%, cores: server %s perfdhcp %s machine %s%s\n' \
      "$server" "$1" "$ach" "$d1" "$d2" "$(cut -d' ' -f4 <<<"$line")" "$(cut -d' ' -f5 <<<"$line")" \
      "$(cut -d' ' -f6 <<<"$line")" "$( [ "$server" = stoker ] && echo ", flushes/s,DORAs per flush,commit ms,flush ms: $(cut -d' ' -f7 <<<"$line")")" >&2
  }
  for i in $(seq 30); do
    probe "$rate"
    if [ "$ok" = 1 ]; then good=$rate goodline=$line; rate=$(awk -v r="$rate" -v f="$FACTOR" 'BEGIN{printf "%d", r*f}')
    else bad=$rate badline=$line; [ "$good" -gt 0 ] && break
      rate=$(awk -v r="$rate" -v f="$FACTOR" 'BEGIN{printf "%d", r/f/f}'); [ "$rate" -lt 10 ] && break
    fi
  done
  if [ "$good" -gt 0 ] && [ "$bad" -gt 0 ]; then
    for i in $(seq "$REFINE"); do
      local mid; mid=$(( (good + bad) / 2 ))
      [ $((bad - good)) -lt $((good / 50 + 1)) ] && break
      probe "$mid"
      if [ "$ok" = 1 ]; then good=$mid goodline=$line; else bad=$mid badline=$line; fi
    done
  fi
  [ "$bad" -gt 0 ] || why="(no step failed: raise the rates)"
  read -r ach d1 d2 _ <<<"${badline:-0 0 0}"
  [ -z "$why" ] && why=$(awk -v a="$ach" -v r="$bad" -v x="$d1" -v y="$d2" -v m="$MAXDROP" 'BEGIN{
    if (x >= m || y >= m) printf "at %d/s offered: drops %s%%/%s%%", r, x, y; else printf "at %d/s offered: only %d/s done", r, a }')
  [ -n "$goodline" ] || goodline="0 - - - - - -"
  echo "${goodline%% *} $good|$why|$goodline|$badline"
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
ip -n "${PXELAB_NS}-c" addr add "$cip/$PXELAB_PREFIX" dev c0 2>/dev/null || true

if part dhcp; then
  echo "== DHCP: perfdhcp ($PERFDHCP_MODE-threaded) DORA ceilings (<$MAXDROP% drops), $ROUNDS rounds alternating stoker, dnsmasq and dhcp_echo, ${SECS} s per step"
  declare -A start=([stoker]=${BENCH_DHCP_START_STOKER:-4000} [dnsmasq]=${BENCH_DHCP_START_DNSMASQ:-150} [echo]=${BENCH_DHCP_START_ECHO:-8000})
  declare -A ceil=() why=() at=() past=()
  for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then order="stoker dnsmasq echo"; else order="dnsmasq stoker echo"; fi
    for srv in $order; do
      res=$(search "$srv" "${start[$srv]}")
      c=${res%% *}
      ceil[$srv]+="$c "
      IFS='|' read -r _ w gl bl <<<"$res"
      why[$srv]+="$w;"
      at[$srv]+="$gl;"
      past[$srv]+="$bl;"
      echo "round $r: $srv ceiling $c DORA/s (then $w)"
      # next round starts below this one's ceiling
      start[$srv]=$(awk -v c="$c" -v s="${start[$srv]}" 'BEGIN{v=int(c*0.7); if (v<10) v=s; print v}')
    done
  done
  dhcp_med() { median ${ceil[$1]}; }
  dhcp_range() { minmax ${ceil[$1]}; }
  # What the machine did at each server's ceiling: medians over the rounds of the best good step.
  at_median() { # server field -> median of that field of the best good steps
    local f=$2
    median $(tr ';' '\n' <<<"${at[$1]}" | awk -v f="$f" 'NF {print $f}')
  }
  past_median() {
    local f=$2
    median $(tr ';' '\n' <<<"${past[$1]}" | awk -v f="$f" 'NF {print $f}')
  }

  # Restart with a full lease table: >= 65,536 leases, then the time to load them.
  fill_rate=$(awk -v c="$(dhcp_med stoker)" 'BEGIN{v=int(c*0.7); if (v<500) v=500; print v}')
  fill_secs=$(awk -v r="$fill_rate" 'BEGIN{printf "%d", 70000/r + 1}')
  start_stoker; fill_dir=$work/data-$n
  "${C[@]}" perfdhcp -4 -g "$PERFDHCP_MODE" -l c0 -r "$fill_rate" -R 70000 -p "$fill_secs" >/dev/null 2>&1 || true
  stop_stoker
  t0=$(date +%s.%N); start_stoker "$fill_dir"; t1=$(date +%s.%N)
  loaded=$(grep 'DHCP leases loaded' "$last_log" | tail -1)
  lease_count=$(sed -n 's/.*leases=\([0-9]*\).*/\1/p' <<<"$loaded")
  lease_ms=$(sed -n 's/.* ms=\([0-9]*\).*/\1/p' <<<"$loaded")
  restart_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
  stop_stoker
  echo "restart with ${lease_count:-?} leases: loaded in ${lease_ms:-?} ms, serving (healthz) after $restart_s s"
fi

# TFTP rounds alternate between the servers, so that load from elsewhere on the machine falls
# on both alike; each figure is the median over the rounds.
if part tftp; then
  TROUNDS=${BENCH_TFTP_ROUNDS:-5}
  echo "== TFTP, 32 MB, blksize 1468, $TROUNDS rounds alternating stoker and dnsmasq (MB/s)"
  s1=() s16a=() s16=() d1=() dg=()
  for r in $(seq "$TROUNDS"); do
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
fi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b>0) printf "%.1f", a/b; else print "n/a" }'; }
echo
echo "== summary ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "| measurement | stoker | dnsmasq | ratio |"
echo "|---|---|---|---|"
if part dhcp; then
  sm=$(dhcp_med stoker) dm=$(dhcp_med dnsmasq) em=$(dhcp_med echo)
  flush() { # component k of the stoker step's flush figures, median over the rounds
    median $(tr ';' '\n' <<<"${at[stoker]}" | awk -v k="$1" 'NF {split($7, f, ","); sub("/s", "", f[1]); if (f[k] != "") print f[k]}')
  }
  echo "| DHCP DORA/s, a new lease each, kept durably before its ACK (perfdhcp; ceiling at < $MAXDROP% drops; median (min–max) of $ROUNDS rounds) | $(thousands "$sm") ($(dhcp_range stoker)) | $(thousands "$dm") ($(dhcp_range dnsmasq)) | $(ratio "$sm" "$dm")× |"
  echo "| the bench's own ceiling: perfdhcp against dhcp_echo (answers at once, keeps nothing) | $(thousands "$em") ($(dhcp_range echo)) | | stoker at $(awk -v a="$sm" -v b="$em" 'BEGIN{printf "%.0f", (b > 0 ? 100 * a / b : 0)}')% of it |"
  echo "| cores busy at each ceiling (medians): the server / perfdhcp / the whole machine, of $(nproc) | $(at_median stoker 4) / $(at_median stoker 5) / $(at_median stoker 6) | $(at_median dnsmasq 4) / $(at_median dnsmasq 5) / $(at_median dnsmasq 6) | dhcp_echo: $(at_median echo 4) / $(at_median echo 5) / $(at_median echo 6) |"
  echo "| stoker at its ceiling: flushes (fdatasync) per second, DORAs per flush, ms per group committing / flushing (medians) | $(flush 1) /s, $(flush 2), $(flush 3) / $(flush 4) ms | one fsync of the whole lease file per ACK | |"
  echo "| stoker restarted with $(thousands "${lease_count:-0}") leases: load time, then serving | ${lease_ms:-?} ms, $restart_s s | | |"
fi
if part tftp; then
  echo "| TFTP 32 MB, blksize 1468, lock-step (curl) | $s_tftp1 MB/s | $d_tftp1 MB/s | $(ratio "$s_tftp1" "$d_tftp1")× |"
  echo "| TFTP 32 MB, blksize 1468, windowsize 16 (\`benches/tftp_get.rs\`; dnsmasq has no RFC 7440) | $s_tftp16 MB/s | $d_tftpg MB/s (same client, served lock-step) | $(ratio "$s_tftp16" "$d_tftp1")× dnsmasq's curl figure, $(ratio "$s_tftp16" "$d_tftpg")× same client |"
  echo "| TFTP 32 MB, blksize 1468, windowsize 16 (atftp) | $s_tftp16a MB/s | — | $(ratio "$s_tftp16a" "$d_tftp1")× dnsmasq's curl figure |"
fi
if part dhcp; then
  echo
  echo "What ended each round's search (the first step past the ceiling):"
  for srv in stoker dnsmasq echo; do
    echo "- $srv: $(tr ';' '\n' <<<"${why[$srv]}" | awk 'NF' | paste -sd';' | sed 's/;/; /g')"
    echo "  cores at that step (server / perfdhcp / machine, medians): $(past_median "$srv" 4) / $(past_median "$srv" 5) / $(past_median "$srv" 6)"
  done
fi
