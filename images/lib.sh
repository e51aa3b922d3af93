# shellcheck shell=bash
# Helpers shared by the image builders in images/ (build-bootstrap.sh, build-os-image.sh).
# Sourced, not run. The builder sets IMG_TOOL (its name in messages) before calling any of them,
# and CACHE (the .deb cache directory) before deb_fetch.

die() { echo "$IMG_TOOL: $*" >&2; exit 1; }

# need TOOL...: fail naming the first tool that is not on PATH.
need() {
  local t
  for t in "$@"; do command -v "$t" >/dev/null || die "$t not found"; done
}

# usage SCRIPT: print the comment block at the top of SCRIPT (everything before `set -euo`).
usage() { sed -n '2,/^set -euo/p' "$1" | sed 's/^# \{0,1\}//;/^set -euo/d'; }

# deb_fetch PACKAGE: print the path of PACKAGE's .deb in $CACHE, downloading it with
# `apt-get download` (the host's package lists: run `apt-get update` once first) when the cache
# has none. A cached .deb of any version is used as it is, so reruns need no network.
deb_fetch() {
  local f
  f=$(ls "$CACHE/$1"_*.deb 2>/dev/null | head -n1 || true)
  if [ -z "$f" ]; then
    (cd "$CACHE" && apt-get -q -o APT::Sandbox::User=root download "$1" >&2) || die "apt-get download $1 failed"
    f=$(ls "$CACHE/$1"_*.deb | head -n1)
  fi
  echo "$f"
}
