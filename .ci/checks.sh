# shellcheck shell=bash
# Sourced by the .ci conformance scripts for their checks, the same way as stoker-daemon.sh:
#   . "$(dirname "$0")/checks.sh"
# Each check prints "PASS NAME" or "FAIL NAME ..." (with what went wrong, indented) and counts
# itself in $passed or $failed; the script ends with `summary` (its last command, so that it
# is the exit status). `check` and `refused` run CMD in $work (which the script sets, or
# stoker-daemon.sh's start_stoker does), stdin from /dev/null (no command waits on a terminal),
# and keep its output, stdout and stderr, in $OUT for the script to read on; with VERBOSE set,
# a PASS shows the last 3 lines of it too.
#   check NAME REGEX -- CMD...     CMD exits 0 and its output matches REGEX (grep -E; "" matches
#                                  anything). An empty NAME names the check by CMD.
#   refused NAME REGEX -- CMD...   CMD exits non-zero and its output matches REGEX.
#   expect NAME VERDICT            a check computed elsewhere: VERDICT is "ok" or why not. With
#                                  expect_shows_out set, a VERBOSE PASS shows $OUT's tail too.
#   judge FILE PYTHON-EXPR         prints "ok" when EXPR over `d` holds, else why not: `d` is FILE
#                                  (JSON when it ends in .json, else YAML) or, FILE being -, the
#                                  JSON on stdin. Runs $py (a python with PyYAML), else python3.
#   ok NAME / bad NAME DETAIL...   a PASS / a FAIL with each DETAIL on a line of its own.
#   skip NAME WHY                  a check that could not be made here: "SKIP NAME: WHY", counted
#                                  apart (never as passed).
#   summary [NAME]                 prints "[NAME: ]P passed, F failed[, S skipped]"; non-zero when
#                                  F > 0.

passed=0
failed=0
skipped=0
OUT=

ok() { passed=$((passed + 1)); echo "PASS $1"; }
skip() { skipped=$((skipped + 1)); echo "SKIP $1: $2"; }
bad() {
  failed=$((failed + 1)); echo "FAIL $1"; shift
  printf '    %s\n' "$@"
}

# run_check WANT NAME REGEX -- CMD...: check (WANT 0) or refused (WANT refusal).
run_check() {
  local want=$1 name=$2 regex=$3 rc=0 how
  shift 4
  OUT=$(cd "${work:?}" && "$@" 2>&1 </dev/null) || rc=$?
  if { [ "$want" = 0 ] && [ "$rc" -eq 0 ]; } || { [ "$want" = refusal ] && [ "$rc" -ne 0 ]; }; then
    if grep -qE -- "$regex" <<<"$OUT"; then
      ok "${name:-$*}"; [ -z "${VERBOSE:-}" ] || tail -3 <<<"$OUT" | sed "s/^/    /"
      return
    fi
  fi
  how="exit $rc"
  [ "$want" = 0 ] || [ "$rc" -ne 0 ] || how="$how, wanted a refusal"
  failed=$((failed + 1))
  if [ -n "$name" ]; then echo "FAIL $name ($how): $*"; else echo "FAIL $* ($how)"; fi
  tail -15 <<<"$OUT" | sed 's/^/    /'
}
check() { run_check 0 "$@"; }
refused() { run_check refusal "$@"; }

expect() {
  local name=$1 verdict=$2
  if [ "$verdict" = ok ]; then
    ok "$name"; [ -z "${VERBOSE:-}" ] || [ -z "${expect_shows_out:-}" ] || tail -3 <<<"$OUT" | sed "s/^/    /"
  else
    failed=$((failed + 1)); echo "FAIL $name: $verdict"
  fi
}

judge() {
  "${py:-python3}" -c '
import json, sys
path, expr = sys.argv[1], sys.argv[2]
try:
    if path == "-":
        d = json.load(sys.stdin)
    else:
        with open(path) as f:
            if path.endswith(".json"):
                d = json.load(f)
            else:
                import yaml
                d = yaml.safe_load(f)
    print("ok" if eval(expr) else "not true: " + expr)
except Exception as e:
    print("%s %s: %s" % (type(e).__name__, e, expr))
' "$1" "$2"
}

# shellcheck disable=SC2120  # NAME is optional
summary() {
  echo "${*:+$*: }$passed passed, $failed failed${skipped:+$([ "$skipped" -gt 0 ] && echo ", $skipped skipped")}"
  [ "$failed" -eq 0 ]
}
