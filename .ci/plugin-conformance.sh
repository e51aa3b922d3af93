#!/usr/bin/env bash
# Plugin conformance: every real package in ../shared/corpus/plugins/, the builder's examples and
# stoker's own fixture plugins are loaded and validated by `stoker plugin validate`, and the
# verdicts (valid / invalid) are compared with fuel-plugin-builder 4.2.0's `fpb --check` run under
# Python 2.7. Each disagreement must be listed, with its reason, in
# tests/fixtures/plugins/fpb-disagreements.tsv; an unlisted one fails the run. Prints the
# agreement figure. Usage: plugin-conformance.sh STOKER_BINARY SHARED_DIR
set -uo pipefail
stoker=${1:?usage: plugin-conformance.sh STOKER_BINARY SHARED_DIR}
shared=${2:?usage: plugin-conformance.sh STOKER_BINARY SHARED_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
reasons="$root/tests/fixtures/plugins/fpb-disagreements.tsv"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Python 2.7: the pyenv build if there is one, else whatever python2.7 runs.
py27=""
for cand in "$HOME"/.pyenv/versions/2.7*/bin/python2.7 python2.7; do
  if "$cand" -c 'import sys; assert sys.version_info[:2] == (2, 7)' >/dev/null 2>&1; then
    py27=$cand; break
  fi
done
fpb_dir="$root/target/fpb-4.2.0"
have_fpb=0
if [ -n "$py27" ]; then
  if [ ! -x "$fpb_dir/bin/fpb" ]; then
    "$py27" -m pip install -q --disable-pip-version-check --target "$fpb_dir" fuel-plugin-builder==4.2.0 >"$work/pip.log" 2>&1 \
      || { echo "pip could not install fuel-plugin-builder 4.2.0:"; tail -5 "$work/pip.log"; }
  fi
  [ -x "$fpb_dir/bin/fpb" ] && have_fpb=1
fi
[ "$have_fpb" = 1 ] || echo "python2.7 or fuel-plugin-builder 4.2.0 unavailable: verdicts are not compared"

# The corpus keeps only YAML files: make the folders metadata.yaml names, as the real
# repositories have them (FPB and stoker both require them).
prepare() { # src dest
  cp -r "$1" "$2"
  sed -n -E 's/^[[:space:]-]*(deployment_scripts_path|repository_path):[[:space:]]*["'"'"']?([^"'"'"' #]+).*/\2/p' "$2/metadata.yaml" 2>/dev/null |
    while read -r d; do mkdir -p "$2/$d"; done
}

total=0 agree=0 fail=0 loaded=0
report() { printf '%-44s stoker=%-7s fpb=%-7s %s\n' "$@"; }
for src in "$shared"/corpus/plugins/*/ "$shared"/corpus/fpb/fuel-plugins-4.2.0/examples/*/ "$root"/tests/fixtures/plugins/*/; do
  [ -f "$src/metadata.yaml" ] || continue
  name=$(basename "$src")
  case "$src" in "$root"/tests/*) label="fixture/$name";; "$shared"/corpus/plugins/*) label="corpus/$name";; *) label="fpb-example/$name";; esac
  dest="$work/$name"; rm -rf "$dest"
  if [ "${src#"$root"/tests/}" != "$src" ]; then cp -r "$src" "$dest"; else prepare "$src" "$dest"; fi
  out=$("$stoker" plugin validate --format json "$dest" 2>&1); rc=$?
  if [ $rc -gt 1 ] || ! grep -q '"valid"' <<<"$out"; then
    echo "FAIL $label: stoker could not load it (exit $rc): $out" | head -5; fail=$((fail+1)); continue
  fi
  loaded=$((loaded+1))
  ours=$([ $rc = 0 ] && echo valid || echo invalid)
  [ "$have_fpb" = 1 ] || { report "$label" "$ours" "-" ""; continue; }
  fpb_out=$(cd "$work" && PYTHONPATH="$fpb_dir" timeout 60 "$py27" "$fpb_dir/bin/fpb" --check "$dest" 2>&1); frc=$?
  theirs=$([ $frc = 0 ] && echo valid || echo invalid)
  total=$((total+1))
  if [ "$ours" = "$theirs" ]; then
    agree=$((agree+1)); report "$label" "$ours" "$theirs" "agree"
  else
    why=$(awk -F'\t' -v k="$label" '$1 == k { print $2 }' "$reasons" 2>/dev/null)
    if [ -n "$why" ]; then
      report "$label" "$ours" "$theirs" "DISAGREE (listed): $why"
    else
      report "$label" "$ours" "$theirs" "DISAGREE (NOT LISTED)"
      echo "  fpb said: $(tail -1 <<<"$fpb_out")"
      grep -o '"message": "[^"]*"' <<<"$out" | head -3 | sed 's/^/  stoker: /'
      fail=$((fail+1))
    fi
  fi
done
# The unmerged FPB v5 release-as-plugin template: stoker only (FPB 4.2.0 does not know it).
tpl="$shared/corpus/fpb/fpb-v5-change-365418/fuel_plugin_builder/templates/v5/plugin_data"
if [ -d "$tpl" ]; then
  dest="$work/fpb-v5-template"; mkdir -p "$dest"
  (cd "$tpl" && find . -type f) | while read -r f; do
    mkdir -p "$dest/$(dirname "$f")"; sed 's/\${plugin_name}/fpb_v5_template/g' "$tpl/$f" >"$dest/${f%.mako}"
  done
  mkdir -p "$dest/deployment_scripts" "$dest/repositories/ubuntu"
  "$stoker" plugin validate "$dest" | tail -4 | sed 's/^/fpb-v5-template (stoker only): /'
fi

# Fuel's own newton library as a release plugin: 202 real tasks (anchors, folded scalars,
# misspelt keys, YAQL) through a `**` glob, plus the provision/deletion/verification graphs.
lib="$shared/corpus/fuel-library/stable-newton"
if [ -d "$lib" ]; then
  dest="$work/newton-library"; mkdir -p "$dest/deployment_scripts" "$dest/repositories/ubuntu"
  cp -r "$lib/deployment" "$lib/graphs" "$dest/"
  cat >"$dest/metadata.yaml" <<'META'
name: newton-library
title: fuel-library stable/newton as a release
version: '10.0.0'
description: every fuel-library newton task file as the graphs of one release
package_version: '5.0.0'
releases:
  - is_release: true
    name: Newton Library
    description: fuel-library stable/newton
    operating_system: ubuntu
    version: newton-10.0
    deployment_scripts_path: deployment_scripts/
    repository_path: repositories/ubuntu
    graphs:
      - {type: default, tasks_path: deployment/**/tasks.yaml}
      - {type: provisioning, tasks_path: graphs/experimental-provision/tasks.yaml}
      - {type: deletion, tasks_path: graphs/experimental-deletion/tasks.yaml}
      - {type: network_verification, tasks_path: graphs/experimental-net-verification/tasks.yaml}
META
  if "$stoker" plugin validate "$dest" >"$work/lib.txt"; then
    echo "fuel-library newton as a release (stoker only): $(tail -1 "$work/lib.txt" | sed 's/.*: valid/valid/')"
    loaded=$((loaded+1))
  else
    cat "$work/lib.txt"; echo "FAIL fuel-library newton did not load as a release"; fail=$((fail+1))
  fi
fi

echo "packages loaded by stoker: $loaded"
if [ "$have_fpb" = 1 ]; then
  pct=$(( total > 0 ? agree * 100 / total : 0 ))
  echo "fpb 4.2.0 agreement: $agree/$total packages ($pct%)"
fi
if [ $fail -gt 0 ]; then echo "plugin conformance: $fail failure(s)"; exit 1; fi
echo "plugin conformance: ok"
