#!/usr/bin/env bash
# What the ignored Redfish tests (tests/bmc_redfish.rs, `sushy_*`) need on a fresh Debian
# machine: libvirt with QEMU, and sushy-tools 2.2.0 (the Redfish emulator Ironic's CI uses) in
# a virtualenv over Debian's python3, whose site packages give it python3-libvirt. Starts
# libvirtd when it is not running. Installs only Debian and PyPI packages.
#
# usage (as root):
#   .ci/bmc-emulators.sh        install, then print the variables to export
#   . .ci/bmc-emulators.sh      the same, and export them into this shell
# then: cargo test --profile ci --test integration bmc_redfish -- --ignored
#
# STOKER_SUSHY_VENV: where the virtualenv goes (default /var/cache/stoker-ci/sushy).

_stoker_bmc_emulators() {
  local venv=${STOKER_SUSHY_VENV:-/var/cache/stoker-ci/sushy}
  local uri=qemu:///system
  local pkgs=(libvirt-daemon-system libvirt-daemon-driver-qemu libvirt-clients python3-libvirt
              python3-venv qemu-system-x86)
  local missing=() p i
  if [ "$(id -u)" != 0 ]; then
    echo "bmc-emulators: needs root (apt, libvirtd)" >&2
    return 1
  fi
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "bmc-emulators: installing ${missing[*]}" >&2
    apt-get update -qq || return 1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null || return 1
  fi

  if ! "$venv/bin/python3" -c \
      'import importlib.metadata as m, sys; sys.exit(m.version("sushy-tools") != "2.2.0")' \
      2>/dev/null; then
    echo "bmc-emulators: making $venv with sushy-tools 2.2.0" >&2
    mkdir -p "$(dirname "$venv")" || return 1
    /usr/bin/python3 -m venv --system-site-packages "$venv" || return 1
    "$venv/bin/pip" install -q --disable-pip-version-check 'sushy-tools==2.2.0' || return 1
  fi
  # The libvirt driver needs the bindings, Basic auth needs bcrypt.
  "$venv/bin/python3" -c 'import libvirt, bcrypt' || {
    echo "bmc-emulators: $venv cannot import libvirt and bcrypt" >&2
    return 1
  }

  if ! virsh -c "$uri" version >/dev/null 2>&1; then
    echo "bmc-emulators: starting libvirtd" >&2
    mkdir -p /var/log/libvirt /var/run/libvirt || return 1
    libvirtd -d || return 1
    for i in $(seq 1 50); do
      virsh -c "$uri" version >/dev/null 2>&1 && break
      sleep 0.2
    done
    virsh -c "$uri" version >/dev/null 2>&1 || {
      echo "bmc-emulators: libvirtd does not answer at $uri" >&2
      return 1
    }
  fi

  SUSHY_EMULATOR=$venv/bin/sushy-emulator
  SUSHY_LIBVIRT_URI=$uri
}

if _stoker_bmc_emulators; then
  export SUSHY_EMULATOR SUSHY_LIBVIRT_URI
  echo "export SUSHY_EMULATOR=$SUSHY_EMULATOR"
  echo "export SUSHY_LIBVIRT_URI=$SUSHY_LIBVIRT_URI"
  unset -f _stoker_bmc_emulators
else
  unset -f _stoker_bmc_emulators
  # Sourced: fail the `.` without ending the caller's shell; run: exit 1.
  (return 0 2>/dev/null) && return 1
  exit 1
fi
