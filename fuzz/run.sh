#!/usr/bin/env bash
# Fuzz one target with AFL++ (cargo-afl): build, run for SECONDS (default 600), then print the
# fuzzer's numbers and exit non-zero if it found a crash or a hang.
#
#   fuzz/run.sh TARGET [SECONDS]      TARGET: yaml package dhcp tftp yaql inventory
#
# Needs `cargo install cargo-afl` (it builds AFL++ on first use; `cargo afl config --build`).
# Findings land in fuzz/out/TARGET/default/{crashes,hangs}; replay one without AFL with
# `fuzz/target/release/TARGET < FILE`. Run one fuzzer at a time on a small machine.
set -euo pipefail

targets="yaml package dhcp tftp yaql inventory"
target=${1:-}
seconds=${2:-600}
if [[ -z $target || " $targets " != *" $target "* ]]; then
    echo "usage: $0 TARGET [SECONDS]   (TARGET: $targets)" >&2
    exit 2
fi
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1)); then
    echo "$0: SECONDS must be a positive whole number, got '$seconds'" >&2
    exit 2
fi
cd "$(dirname "$0")"

cargo afl build --release --bin "$target"

# What this container needs, and nothing that changes the host:
# - no CPU frequency governor can be read or set here: skip that check;
# - the kernel's core_pattern cannot be changed from the container: crashes are still found
#   (AFL sees the signal), only the core-dump handler's delay is not checked;
# - no CPU pinning: other builds share the cores, and a pinned fuzzer would fight them;
# - no terminal UI (the status is printed below instead).
export AFL_SKIP_CPUFREQ=1
export AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1
export AFL_NO_AFFINITY=1
export AFL_NO_UI=1

# A fresh run each time: an earlier run's queue is kept only until the next run of the target.
out="out/$target"
rm -rf "$out"
mkdir -p out
# -t: a hang is an input that takes over a second (AFL's default timeout tops out there too).
# -m: 2 GiB of address space; past it an allocation fails and the target aborts, so runaway
#     memory is a crash (every parser here is bounded far below that).
# -V: stop after SECONDS.
args=(-i "seeds/$target" -o "$out" -t 1000 -m 2048 -V "$seconds" "target/release/$target")
status=0
cargo afl fuzz "${args[@]}" >"out/$target.log" 2>&1 || status=$?

stats="$out/default/fuzzer_stats"
if [[ ! -f $stats ]]; then
    echo "$0: afl-fuzz ended ($status) without stats; its log:" >&2
    tail -n 40 "out/$target.log" >&2
    exit 1
fi
field() { awk -F' *: *' -v k="$1" '$1 == k { print $2 }' "$stats"; }
crashes=$(field saved_crashes)
hangs=$(field saved_hangs)
echo "target:        $target"
echo "command:       cargo afl fuzz ${args[*]}"
echo "duration:      $(field run_time) s"
echo "execs:         $(field execs_done)"
echo "execs/s:       $(field execs_per_sec)"
echo "corpus:        $(field corpus_count) (paths found: $(field corpus_found))"
echo "edges:         $(field edges_found) ($(field bitmap_cvg))"
echo "stability:     $(field stability)"
echo "crashes:       $crashes"
echo "hangs:         $hangs"
if ((crashes > 0 || hangs > 0)); then
    echo "findings in $out/default/crashes and $out/default/hangs" >&2
    exit 1
fi
