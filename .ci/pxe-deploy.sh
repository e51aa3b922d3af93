#!/usr/bin/env bash
# A real OS deployed onto a VM, end to end: a QEMU VM with a 512 MiB virtual disk PXE-boots from
# `stoker serve` in the PXE lab's network namespace, its bootstrap agent says hello (node
# discovered), the script creates an environment over the API from a one-role test release and
# deploys it. Provisioning runs in the ramdisk: deploy.write_image writes the Debian image
# images/build-os-image.sh built (served by stoker at /boot/images/, sha256 from
# deploy.image_checksum), deploy.configure installs the service agent into it (AGENT_INSTALL:
# `inject` into its root filesystem, the default, for the image without cloud-init; `config-2`, a
# config drive for the image built with --cloud-init), power.reboot_to_disk reboots the VM for real
# (QEMU's reboot is a reset here, not an exit), the boot script now says "local disk" and the VM
# boots the installed OS from its disk. There systemd starts the service agent, which says hello
# with its node's credential and runs the release's one shell task: it appends a line with this
# run's id and the OS's boot_id to /var/lib/stoker-lab/marker. The node reaches `ready`.
# Then the script changes the setting the task's changed() condition watches and deploys again:
# only that task runs, on the running OS, without a reboot (the second line has the same boot_id,
# and the serial console shows two boots only: the bootstrap and the OS). Finally the VM is
# powered off and the script reads the marker file from the ext4 root filesystem on the disk file
# (debugfs), not from the API.
#
# usage: .ci/pxe-deploy.sh STOKER_BIN SHARED_DIR [BOOTSTRAP_BIN]
#   BOOTSTRAP_BIN: the binary packed into the bootstrap image (default STOKER_BIN); with
#   `inject` it is also the service agent on the installed OS (configure copies its own binary)
# Environment: AGENT_INSTALL=inject|config-2 (default inject); STOKER_OS_IMAGE=FILE deploys that
# image instead of building one (it must be the variant AGENT_INSTALL needs); KEEP=1 keeps the
# work directory (logs, disk).
# POWER=redfish: nobody starts the VM by hand. A Redfish BMC stands in front of it: sushy-tools'
# fake driver (sushy-emulator from $SUSHY_EMULATOR, the program or its venv, else a venv made in
# /var/cache/stoker-ci/sushy-fake with sushy-tools 2.2.0) with its external notifier, whose
# notifications .ci/redfish-lab.py turns into the VM started (the same boot-vm.sh command as
# without POWER) or stopped; both run in the lab's netns on 127.0.0.1, where stoker reaches them.
# The script enrolls the node with that BMC over the API before it ever booted, assigns it and
# deploys: the deployment's power.boot_network powers the VM on. At the end the VM is powered off
# through the API (action off) and the adapter must have stopped QEMU.
# Needs root and ../shared/tools/pxe-lab; otherwise it says why it skipped and exits 0.
# Traffic stays inside the lab's namespaces; only processes started here are stopped, by PID.
# Prints seconds from VM power-on to discovered, provisioned and ready, and the redeploy's time.
set -euo pipefail
bin=$(readlink -f "$1"); shared=$2; agent_bin=$(readlink -f "${3:-$1}")
root=$(cd "$(dirname "$0")/.." && pwd)
lab=$shared/tools/pxe-lab
install=${AGENT_INSTALL:-inject}
power=${POWER:-}
skip() { echo "pxe-deploy: skipped: $*"; exit 0; }
[ -d "$lab" ] || skip "$lab not found"
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, a tap, building the OS image)"
for t in qemu-system-x86_64 cpio python3 sha256sum debugfs mmdebstrap sfdisk; do
  command -v "$t" >/dev/null || skip "$t not installed (.ci/pxe-vm.sh installs QEMU, .ci/os-image.sh mmdebstrap)"
done
case $install in
  inject) variant=base; flag=() ;;
  config-2|nocloud) variant=cloud-init; flag=(--cloud-init) ;;
  *) echo "pxe-deploy: AGENT_INSTALL must be inject, config-2 or nocloud, not $install" >&2; exit 2 ;;
esac
case $power in
  ''|redfish) ;;
  *) echo "pxe-deploy: POWER must be redfish or unset, not $power" >&2; exit 2 ;;
esac

work=$(mktemp -d /tmp/stoker-deploy.XXXXXX)
cache=${STOKER_DEB_CACHE:-/var/cache/stoker-ci/debs}
mkdir -p "$cache"
pid=; vm=; adapter=; sushy=
cleanup() {
  # The adapter first: on SIGTERM it stops the VM it started.
  if [ -n "$adapter" ] && kill -0 "$adapter" 2>/dev/null; then kill -TERM "$adapter"; wait "$adapter" 2>/dev/null || true; fi
  if [ -n "$sushy" ] && kill -0 "$sushy" 2>/dev/null; then kill -TERM "$sushy"; wait "$sushy" 2>/dev/null || true; fi
  if [ -n "$vm" ] && kill -0 "$vm" 2>/dev/null; then kill -TERM "$vm"; wait "$vm" 2>/dev/null || true; fi
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; fi
  "$lab/lab-down.sh" >/dev/null 2>&1 || true
  if [ -n "${KEEP:-}" ]; then echo "pxe-deploy: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
fail() { echo "pxe-deploy: FAILED: $*"; exit 1; }

# POWER=redfish: sushy-emulator (and bcrypt, for its htpasswd file) from a venv.
if [ "$power" = redfish ]; then
  if [ -n "${SUSHY_EMULATOR:-}" ]; then
    if [ -d "$SUSHY_EMULATOR" ]; then sushy_bin=$SUSHY_EMULATOR/bin/sushy-emulator; else sushy_bin=$SUSHY_EMULATOR; fi
  else
    venv=/var/cache/stoker-ci/sushy-fake
    sushy_bin=$venv/bin/sushy-emulator
    if [ ! -x "$sushy_bin" ]; then
      echo "pxe-deploy: installing sushy-tools 2.2.0 into $venv"
      { python3 -m venv "$venv" && "$venv/bin/pip" install --disable-pip-version-check -q sushy-tools==2.2.0; } \
        >"$work/sushy-install.log" 2>&1 || { tail -5 "$work/sushy-install.log"; rm -rf "$venv"; skip "cannot install sushy-tools into $venv"; }
    fi
  fi
  [ -x "$sushy_bin" ] || skip "no sushy-emulator at $sushy_bin"
  sushy_py=$(dirname "$sushy_bin")/python3
  [ -x "$sushy_py" ] || sushy_py=python3
  if ! "$sushy_py" -c 'import bcrypt' 2>/dev/null; then
    "$sushy_py" -m pip install --disable-pip-version-check -q bcrypt >"$work/bcrypt-install.log" 2>&1 \
      || { tail -5 "$work/bcrypt-install.log"; skip "no bcrypt for $sushy_py"; }
  fi
  echo "pxe-deploy: power over Redfish: $sushy_bin ($("$sushy_py" -c 'import importlib.metadata as m; print("sushy-tools", m.version("sushy-tools"))' 2>/dev/null || echo "sushy-tools ?"))"
fi

echo "pxe-deploy: building the bootstrap image"
STOKER_DEB_CACHE=$cache "$root/images/build-bootstrap.sh" --stoker "$agent_bin" \
  --out "$work/data/images" --tftp "$work/data/tftp" >"$work/build.log" 2>&1 \
  || { tail -20 "$work/build.log"; fail "image build"; }

# The operating system image: Debian from build-os-image.sh (MBR, GRUB, ext4 labelled stoker-root).
img=$work/data/images/lab-os.img
if [ -n "${STOKER_OS_IMAGE:-}" ]; then
  cp --sparse=always "$STOKER_OS_IMAGE" "$img"
  echo "pxe-deploy: OS image $STOKER_OS_IMAGE ($install)"
else
  t=$(date +%s)
  STOKER_DEB_CACHE=$cache "$root/images/build-os-image.sh" --out "$work/os" "${flag[@]}" \
    >"$work/os-build.log" 2>&1 || { tail -30 "$work/os-build.log"; fail "building the OS image"; }
  mv "$work/os/stoker-os-$variant.img" "$img"
  echo "pxe-deploy: built the $variant OS image in $(( $(date +%s) - t )) s ($(stat -c %s "$img") bytes)"
fi
sum=$(sha256sum <"$img" | cut -d' ' -f1)
disk=$work/disk.raw
truncate -s 512M "$disk"
id=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
marker=/var/lib/stoker-lab/marker

# A one-role release whose deployment graph is one shell task: the VM must not try to run a real
# release's hundreds of puppet tasks. The task runs on the installed OS (it refuses to run
# anywhere without /etc/debian_version, which the bootstrap ramdisk lacks) and appends a line to
# the marker file; its condition watches the setting lab_marker, so a redeploy runs it again only
# when that setting changed.
rel=$work/lab-release
mkdir -p "$rel/deployment_scripts" "$rel/repositories/ubuntu" "$rel/graphs"
touch "$rel/deployment_scripts/.keep" "$rel/repositories/ubuntu/.keep"
cat >"$rel/metadata.yaml" <<EOF
name: stoker-lab
title: stoker PXE lab release
version: '1.0.0'
description: One role whose deployment is one shell task, for the PXE lab's deploy test
package_version: '5.0.0'
releases:
  - is_release: true
    name: stoker lab
    description: One role, one shell task
    os: ubuntu
    version: lab-1.0
    attributes_path: attributes.yaml
    roles_path: roles.yaml
    network_roles_path: network_roles.yaml
    volumes_path: volumes.yaml
    networks_path: networks.json
    deployment_scripts_path: deployment_scripts/
    repository_path: repositories/ubuntu
    graphs:
      - type: default
        name: deployment
        tasks_path: graphs/deployment.yaml
EOF
cat >"$rel/attributes.yaml" <<'EOF'
editable:
  common:
    debug: {value: false, label: Debug, type: checkbox, weight: 10}
    lab_marker: {value: first, label: Lab marker, type: text, weight: 20}
EOF
cat >"$rel/roles.yaml" <<'EOF'
lab:
  name: Lab node
  description: A PXE lab VM
EOF
cat >"$rel/network_roles.yaml" <<'EOF'
- id: management
  default_mapping: management
  properties: {subnet: true, gateway: false, vip: []}
EOF
cat >"$rel/volumes.yaml" <<'EOF'
volumes: []
volumes_roles_mapping:
  lab:
    - {allocate_size: all, id: os}
EOF
echo '{"neutron": {"networks": [{"name": "management"}]}}' >"$rel/networks.json"
cat >"$rel/graphs/deployment.yaml" <<EOF
- {id: deploy_start, type: stage}
- {id: deploy_end, type: stage, requires: [deploy_start]}
- id: lab-marker
  type: shell
  version: 2.1.0
  roles: [lab]
  requires: [deploy_start]
  required_for: [deploy_end]
  condition:
    yaql_exp: 'changed(\$.lab_marker)'
  parameters:
    cmd: >-
      test -f /etc/debian_version || { echo "not on the installed OS"; exit 1; };
      mkdir -p $(dirname $marker) &&
      n=\$(( \$(cat $marker 2>/dev/null | wc -l) + 1 )) &&
      echo "STOKER-LAB-TASK run=\$n id=$id host=\$(hostname) boot_id=\$(cat /proc/sys/kernel/random/boot_id)" >>$marker &&
      sync && echo "wrote: \$(tail -n1 $marker)"
    timeout: 60
EOF
"$bin" plugin validate "$rel" >"$work/validate.log" 2>&1 || { cat "$work/validate.log"; fail "the test release is invalid"; }

# The service agent a config drive's user data fetches from the master: the bootstrap's binary,
# stripped as build-bootstrap.sh packs it (a release build with its line tables is ~130 MB, more
# than the image's free space), the same binary `inject` copies into the OS.
if command -v strip >/dev/null; then strip -o "$work/agent.bin" "$agent_bin"; else cp "$agent_bin" "$work/agent.bin"; fi

"$lab/lab-down.sh" >/dev/null 2>&1 || true
"$lab/lab-up.sh" >"$work/lab.log" 2>&1 || { cat "$work/lab.log"; exit 1; }
# Not loopback, so HTTPS (a self-signed certificate) on 8443, and iPXE's files in clear on 8080.
url=https://10.77.0.1:8443
boot_url=http://10.77.0.1:8080
# `ip netns exec` execs stoker itself, so $! is stoker's PID.
ip netns exec pxelab "$bin" serve --data-dir "$work/data" --http-listen 10.77.0.1:8443 \
  --http-boot-listen 10.77.0.1:8080 \
  --dhcp-enabled true --dhcp-server-ip 10.77.0.1 \
  --dhcp-subnets '10.77.0.0/24 pool=10.77.0.100-10.77.0.199 router=10.77.0.1 lease=600' \
  --tftp-enabled true --plugins-bundled skip \
  --deploy-image-url "$boot_url/boot/images/lab-os.img" --deploy-image-checksum "sha256:$sum" \
  --deploy-agent-install "$install" --deploy-agent-binary "$work/agent.bin" \
  >"$work/stoker.log" 2>&1 &
pid=$!
for _ in $(seq 50); do
  [ -s "$work/data/tls/master.crt" ] && ip netns exec pxelab curl -fsS -o /dev/null \
    --cacert "$work/data/tls/master.crt" "$url/healthz" 2>/dev/null && break
  sleep 0.1
done
# The API needs a token: sign in as the first-start admin (its password is in the data dir).
cacert=$work/data/tls/master.crt
STOKER_TOKEN=$(ip netns exec pxelab curl -fsS --cacert "$cacert" -X POST "$url/api/v1/login" -H 'content-type: application/json' \
  -d "{\"username\":\"admin\",\"password\":\"$(cat "$work/data/initial-admin-password")\"}" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])') \
  || { tail -20 "$work/stoker.log"; fail "cannot sign in as admin"; }
export STOKER_TOKEN
# The CLI, like any client off the master, trusts it by the fingerprint it logged.
STOKER_FINGERPRINT=$(grep -o 'fingerprint=sha256:[0-9a-f]*' "$work/stoker.log" | head -1 | cut -d= -f2)
export STOKER_FINGERPRINT
echo "pxe-deploy: stoker serves HTTPS with $STOKER_FINGERPRINT; iPXE's files in clear on $boot_url"
ip netns exec pxelab "$bin" plugin install "$rel" --url "$url" >"$work/install.log" 2>&1 \
  || { cat "$work/install.log"; fail "installing the test release"; }

# The VM: QEMU's reboot is a reset (boot-vm.sh's -no-reboot would make it QEMU's exit), and a QMP
# socket lets the script power it off at the end as a power button would.
mac=52:54:00:77:03:01
qmp=$work/qmp.sock
vm_cmd=("$lab/boot-vm.sh" --log "$work/vm.log" --mac "$mac" --marker STOKER-AGENT --fail STOKER-AGENT-FAIL
  --keep --timeout 900 -- -drive "file=$disk,format=raw,if=virtio" -action reboot=reset
  -qmp "unix:$qmp,server=on,wait=off")
bmc_address=; bmc_password=
if [ "$power" != redfish ]; then
  t0=$(date +%s.%N)
  "${vm_cmd[@]}" >"$work/boot-vm.out" 2>&1 &
  vm=$!
else
  # The same VM, started and stopped by the adapter through this wrapper. boot-vm.sh empties its
  # serial log at each start: the wrapper keeps the earlier power-ons' in vm.earlier.log.
  {
    echo '#!/usr/bin/env bash'
    echo '# The lab VM'"'"'s power-on: run by .ci/redfish-lab.py, stopped by it with SIGTERM (boot-vm.sh then stops QEMU).'
    printf 'if [ -s %q ]; then cat %q >>%q; fi\n' "$work/vm.log" "$work/vm.log" "$work/vm.earlier.log"
    printf 'echo "pxe-deploy: power-on at $(date +%%T.%%N)" >>%q\n' "$work/boot-vm.out"
    printf 'exec'; printf ' %q' "${vm_cmd[@]}"; printf ' >>%q 2>&1\n' "$work/boot-vm.out"
  } >"$work/vm-power.sh"
  chmod +x "$work/vm-power.sh"
  : >"$work/boot-vm.out"
  # Free ports on the lab netns' loopback, each checked with ss.
  free_port() {
    local p
    for p in $(seq "$1" $(($1 + 99))); do
      [ "$p" != "${2:-}" ] || continue
      ip netns exec pxelab ss -ltnH "( sport = :$p )" | grep -q . || { echo "$p"; return; }
    done
  }
  sport=$(free_port 8000); [ -n "$sport" ] || fail "no free port in 8000-8099 in the lab's netns"
  aport=$(free_port 9100 "$sport"); [ -n "$aport" ] || fail "no free port in 9100-9199 in the lab's netns"
  uuid=$(python3 -c 'import uuid; print(uuid.uuid4())')
  bmc_password=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
  bmc_address=http://127.0.0.1:$sport/redfish/v1/Systems/$uuid
  # sushy-emulator's auth file: Apache htpasswd lines, bcrypt digests only ($2b$).
  printf '%s' "$bmc_password" | "$sushy_py" -c 'import bcrypt, sys
print("admin:" + bcrypt.hashpw(sys.stdin.read().encode(), bcrypt.gensalt()).decode())' >"$work/sushy.htpasswd" \
    || fail "cannot write the emulator's htpasswd file with bcrypt"
  printf 'user = "admin:%s"\n' "$bmc_password" >"$work/sushy.curlrc"; chmod 600 "$work/sushy.curlrc"
  cat >"$work/sushy.conf" <<EOF
SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'
SUSHY_EMULATOR_LISTEN_PORT = $sport
SUSHY_EMULATOR_FAKE_DRIVER = True
SUSHY_EMULATOR_STATE_DIR = '$work/sushy-state'
SUSHY_EMULATOR_AUTH_FILE = '$work/sushy.htpasswd'
EXTERNAL_NOTIFICATION_URL = 'http://127.0.0.1:$aport'
SUSHY_EMULATOR_FAKE_SYSTEMS = [{
    'uuid': '$uuid',
    'name': 'lab-vm',
    'power_state': 'Off',
    'external_notifier': True,
    'nics': [{'mac': '$mac'}],
}]
EOF
  # `ip netns exec` execs each program, so $! is its PID.
  ip netns exec pxelab python3 "$root/.ci/redfish-lab.py" --port "$aport" --system "$uuid" \
    --state "$work/adapter.json" -- "$work/vm-power.sh" 2>"$work/adapter.log" &
  adapter=$!
  for _ in $(seq 100); do
    ip netns exec pxelab curl -fsS -o /dev/null "http://127.0.0.1:$aport/" 2>/dev/null && break
    kill -0 "$adapter" 2>/dev/null || { cat "$work/adapter.log"; fail "the Redfish adapter exited"; }
    sleep 0.1
  done
  ip netns exec pxelab env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u all_proxy \
    -u ALL_PROXY NO_PROXY=127.0.0.1 no_proxy=127.0.0.1 \
    "$sushy_bin" --config "$work/sushy.conf" >"$work/sushy.log" 2>&1 &
  sushy=$!
  for _ in $(seq 200); do
    ip netns exec pxelab curl -fsS -K "$work/sushy.curlrc" -o "$work/sushy-system.json" "$bmc_address" 2>/dev/null && break
    kill -0 "$sushy" 2>/dev/null || { tail -20 "$work/sushy.log"; fail "sushy-emulator exited"; }
    sleep 0.1
  done
  [ -s "$work/sushy-system.json" ] || { tail -20 "$work/sushy.log"; fail "sushy-emulator does not answer on 127.0.0.1:$sport"; }
  echo "pxe-deploy: Redfish BMC (sushy-tools fake driver) at $bmc_address, PowerState" \
    "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["PowerState"])' "$work/sushy-system.json");" \
    "adapter .ci/redfish-lab.py on 127.0.0.1:$aport (lab netns)"
  t0=$(date +%s.%N)
fi

# Drive both deployments over the API while the VM runs; print the times.
if ! POWER=$power BMC_ADDRESS=$bmc_address BMC_PASSWORD=$bmc_password ADAPTER_STATE=$work/adapter.json \
  ip netns exec pxelab python3 - "$url" "$mac" "$t0" "$id" "$cacert" >"$work/drive.out" 2>&1 <<'EOF'
import json, os, ssl, sys, time, urllib.request, urllib.error
url, mac, t0, run_id = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
tls = ssl.create_default_context(cafile=sys.argv[5])
token = os.environ["STOKER_TOKEN"]
redfish = os.environ.get("POWER") == "redfish"

def request(method, path, body=None):
    """(HTTP status, the answer: JSON when it is JSON, else text)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"content-type": "application/json",
                                          "authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=30, context=tls) as r:
            code, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        code, text = e.code, e.read().decode()
    try:
        return code, json.loads(text) if text.startswith(("{", "[")) else text
    except ValueError:
        return code, text

def call(method, path, body=None):
    code, answer = request(method, path, body)
    if code >= 400:
        sys.exit(f"{method} {path}: HTTP {code}: {json.dumps(answer) if not isinstance(answer, str) else answer}")
    return answer

def since():
    return time.time() - t0

def wait(what, limit, check):
    while True:
        found = check()
        if found:
            return found
        if since() > limit:
            sys.exit(f"timed out after {since():.1f} s waiting for {what}")
        time.sleep(0.1)

def show_steps(dep):
    done = call("GET", f"/api/v1/deployments/{dep}")
    for s in done["steps"]:
        took = (s["finished_at"] - s["started_at"]) if s.get("finished_at") and s.get("started_at") else "-"
        print(f"  run {s['interface']}.{s['step']} {s.get('task') or ''}: {s['status']} ({took} s) {s.get('error') or ''}".rstrip())
    return done

def vm_state():
    with open(os.environ["ADAPTER_STATE"]) as f:
        return json.load(f)

def powered_on(asked, what, dep_id=None, limit=60):
    """Waits for the adapter's first VM start (`asked`: the time.time() of the request that
    should power it on; `dep_id`: the deployment that should, given up on when it ended); from
    then on, times count from that power-on."""
    global t0
    def check():
        st = vm_state()
        if st["starts"] > 0:
            return st
        if dep_id is not None:
            d = call("GET", f"/api/v1/deployments/{dep_id}")
            if d["status"] not in ("pending", "running"):
                show_steps(dep_id)
                sys.exit(f"deployment {dep_id} is {d['status']} and the VM was never powered on")
        return None
    st = wait("the adapter to start the VM", since() + limit, check)
    print(f"powered on {st['started_at'] - t0:.2f} ({st['started_at'] - asked:.2f} s after the {what}"
          f" request; VM PID {st['pid']}, started by the adapter)", flush=True)
    t0 = st["started_at"]

def discovered(nid):
    """The node's inventory from its agent's hello (an enrolled node has none before)."""
    n = call("GET", f"/api/v1/nodes/{nid}")
    disks = [d.get("name") for d in (n.get("inventory") or {}).get("disks") or []]
    return n if disks else None

if not redfish:
    node = wait("the node's hello", 120,
                lambda: next((n for n in call("GET", "/api/v1/nodes") if n["mac"] == mac), None))
    nid = node["id"]
else:
    # Enrolled before it ever booted: a MAC and a BMC, no inventory.
    address, password = os.environ["BMC_ADDRESS"], os.environ["BMC_PASSWORD"]
    code, node = request("POST", "/api/v1/nodes", {"mac": mac, "name": "lab-vm", "bmc": {
        "driver": "redfish", "address": address, "username": "admin", "password": password}})
    if code != 201 or not isinstance(node, dict) or "id" not in node:
        sys.exit(f"POST /api/v1/nodes (enrollment): HTTP {code}: {json.dumps(node) if not isinstance(node, str) else node}")
    nid = node["id"]
    print(f"enrolled {since():.2f} node={nid} status={node.get('status')} (HTTP {code})", flush=True)
    assert node.get("status") == "discover", f"an enrolled node's status should be discover: {node}"
    bmc = call("GET", f"/api/v1/nodes/{nid}/bmc")
    assert password not in json.dumps(bmc) and "password" not in bmc, f"GET bmc shows the password: {bmc}"
    assert (bmc.get("driver"), bmc.get("address"), bmc.get("username")) == ("redfish", address, "admin"), bmc
    print("bmc: " + json.dumps({k: bmc.get(k) for k in
          ("driver", "address", "username", "verify_tls", "source", "power_state", "power_error")}), flush=True)
    assert vm_state()["starts"] == 0, "the VM was powered on by the enrollment"
release = next(r["id"] for r in call("GET", "/api/v1/releases") if r["name"] == "stoker lab")
env = call("POST", "/api/v1/clusters", {"name": "pxe-lab", "release_id": release})
assign = f"/api/v1/clusters/{env['id']}/nodes/{nid}"
code, answer = request("PUT", assign, {"roles": ["lab"]})
fallback = False
if code >= 400 and redfish:
    # A node that never booted could not be assigned: boot it once from the network through its
    # BMC, wait for its agent's hello, then assign it.
    fallback = True
    print(f"fallback: assignment of the enrolled node refused: PUT {assign} {{\"roles\": [\"lab\"]}}"
          f" -> HTTP {code}: {json.dumps(answer) if not isinstance(answer, str) else answer}", flush=True)
    asked = time.time()
    code, r = request("POST", f"/api/v1/nodes/{nid}/power", {"action": "pxe"})
    print(f"power pxe: HTTP {code}: {json.dumps(r) if not isinstance(r, str) else r}", flush=True)
    if code != 200 or not isinstance(r, dict) or r.get("ok") is not True:
        sys.exit(f"POST /api/v1/nodes/{nid}/power pxe failed")
    powered_on(asked, "power pxe")
    node = wait("the node's hello", since() + 120, lambda: discovered(nid))
    call("PUT", assign, {"roles": ["lab"]})
elif code >= 400:
    sys.exit(f"PUT {assign}: HTTP {code}: {json.dumps(answer) if not isinstance(answer, str) else answer}")
if not redfish or fallback:
    print(f"discovered {since():.2f} node={nid}", flush=True)
    inv = node.get("inventory") or {}
    disks = [d["name"] for d in inv.get("disks", [])]
    assert "vda" in disks, f"the inventory lacks the virtual disk: {disks}"
asked = time.time()
dep = call("POST", f"/api/v1/clusters/{env['id']}/deploy")
t_dep = since()
print(f"deployment {dep['id']} started {t_dep:.2f}", flush=True)
if redfish and not fallback:
    # The deployment's power.boot_network powers the VM on through the BMC.
    powered_on(asked, "deploy", dep["id"])
    node = wait("the node's hello", since() + 120, lambda: discovered(nid))
    print(f"discovered {since():.2f} node={nid}", flush=True)
    disks = [d["name"] for d in node["inventory"].get("disks", [])]
    assert "vda" in disks, f"the inventory lacks the virtual disk: {disks}"

# Provisioned: the first time the node is seen past provisioning (reboot_to_disk reported).
seen = {}
def status():
    s = call("GET", f"/api/v1/nodes/{nid}")["status"]
    if s in ("provisioned", "deploying", "ready") and "provisioned" not in seen:
        seen["provisioned"] = since()
        print(f"provisioned {seen['provisioned']:.2f} (status {s})", flush=True)
    return s if s in ("ready", "error") else None
final = wait("the node to be ready", 600, status)
t_ready = since()
done = show_steps(dep["id"])
if final != "ready":
    print(json.dumps(call("GET", f"/api/v1/nodes/{nid}"), indent=1))
    sys.exit(f"node {nid} is {final}")
print(f"ready {t_ready:.2f} deployment={done['status']}", flush=True)
ran = [f"{s['interface']}.{s['step']}" for s in done["steps"] if s["status"] == "ok"]
for want in ("deploy.write_image", "deploy.configure", "power.reboot_to_disk", "deploy.run_tasks"):
    assert want in ran, f"{want} did not run: {ran}"
if redfish:
    boot = [s for s in done["steps"] if (s["interface"], s["step"]) == ("power", "boot_network")]
    assert boot, f"the deployment has no power.boot_network step: {[(s['interface'], s['step']) for s in done['steps']]}"
    out = " | ".join(l for l in (boot[0].get("output_tail") or "").splitlines() if l.strip())
    print(f"power.boot_network: {boot[0]['status']}: {out}", flush=True)
    # Without the fallback it is what powered the VM on; with it, the agent may already answer.
    assert fallback or boot[0]["status"] == "ok", boot[0]
task = next(s for s in done["steps"] if s.get("task") == "lab-marker")
assert f"run=1 id={run_id}" in task["output_tail"], task
script = call("GET", f"/boot/{mac}.ipxe")
assert "booting from local disk" in script, script
print("boot script now: local disk")

# Redeploy after changing the setting the task's condition watches: only that task runs, on the
# running OS.
settings = call("GET", f"/api/v1/clusters/{env['id']}/settings")
settings["lab_marker"] = "second"
call("PUT", f"/api/v1/clusters/{env['id']}/settings", settings)
r0 = since()
dep2 = call("POST", f"/api/v1/clusters/{env['id']}/deploy")
def finished():
    d = call("GET", f"/api/v1/deployments/{dep2['id']}")
    return d["status"] if d["status"] not in ("pending", "running") else None
final = wait("the redeployment", 900, finished)
took = since() - r0
done = show_steps(dep2["id"])
n = call("GET", f"/api/v1/nodes/{nid}")
if final != "done" or n["status"] != "ready":
    sys.exit(f"redeployment {dep2['id']} is {final}, node {nid} is {n['status']}")
ran = [(s["interface"], s["step"], s.get("task")) for s in done["steps"]
       if s["status"] == "ok" and s["step"] != "stage"]
assert ran == [("deploy", "run_tasks", "lab-marker")], f"the redeploy ran more than the changed task: {ran}"
task = next(s for s in done["steps"] if s.get("task") == "lab-marker")
assert f"run=2 id={run_id}" in task["output_tail"], task
print(f"redeployed {took:.2f} deployment={final}", flush=True)
EOF
then
  cat "$work/drive.out"; { tail -40 "$work/vm.log" 2>/dev/null || true; } | tr -d '\r'; tail -20 "$work/stoker.log"
  if [ "$power" = redfish ]; then
    echo "--- adapter:"; tail -20 "$work/adapter.log"; echo "--- sushy-emulator:"; tail -20 "$work/sushy.log"
  fi
  fail "the deployment did not finish"
fi
sed 's/^/pxe-deploy: /' "$work/drive.out"
state() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$work/adapter.json" "$1"; }
serial=$work/vm.log
if [ "$power" = redfish ]; then
  [ "$(state running)" = True ] || fail "the VM is gone: $(tail -5 "$work/boot-vm.out"; tail -5 "$work/adapter.log")"
  # The serial logs of every power-on the adapter made, in order.
  cat "$work/vm.earlier.log" "$work/vm.log" >"$work/vm.all.log" 2>/dev/null || true
  serial=$work/vm.all.log
else
  kill -0 "$vm" 2>/dev/null || fail "the VM is gone: $(tail -5 "$work/boot-vm.out")"
fi

# Two boots on the serial console: power-on (the bootstrap) and reboot_to_disk's (the installed
# OS). SeaBIOS prints "Booting from ROM" at each; a third would be a reboot by the redeploy.
# (POWER=redfish when an enrolled node could not be assigned: a first bootstrap boot for
# discovery, which the deployment's power.boot_network may power-cycle into a second one.)
boots=$(grep -ac 'Booting from ROM' "$serial" || true)
if grep -q '^fallback:' "$work/drive.out"; then
  [ "$boots" = 2 ] || [ "$boots" = 3 ] || fail "the serial console shows $boots boots, not 2 or 3 (bootstrap(s), installed OS)"
else
  [ "$boots" = 2 ] || fail "the serial console shows $boots boots, not 2 (bootstrap, installed OS)"
fi
grep -aq 'STOKER-OS-BOOTED' "$serial" || fail "the installed OS did not say it booted"
grep -aq 'booting from local disk' "$serial" || fail "iPXE did not run the local disk script"
node=$(sed -n 's/^discovered [0-9.]* node=\([0-9]*\)$/\1/p' "$work/drive.out")

# Power off as the power button would (ACPI); the OS shuts down, QEMU exits, so does boot-vm.sh.
qmp_send() {
  python3 - "$qmp" "$1" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rw")
f.readline()
for cmd in ("qmp_capabilities", sys.argv[2]):
    f.write(json.dumps({"execute": cmd}) + "\n"); f.flush()
    while "return" not in (r := json.loads(f.readline())) and "error" not in r:
        pass
EOF
}
if [ "$power" != redfish ]; then
  qmp_send system_powerdown || true
  for _ in $(seq 600); do kill -0 "$vm" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$vm" 2>/dev/null; then
    echo "pxe-deploy: the OS did not power off within 60 s; stopping QEMU"
    qmp_send quit || true
    for _ in $(seq 100); do kill -0 "$vm" 2>/dev/null || break; sleep 0.1; done
  fi
  wait "$vm" || true; vm=
else
  # Power off through stoker's API: its Redfish driver asks the BMC, the fake driver notifies the
  # adapter, which stops the VM (SIGTERM to boot-vm.sh, which stops QEMU; SIGKILL after 5 s).
  vmpid=$(state pid)
  qemu=$(sed -n 's/^boot-vm: qemu PID \([0-9]*\) .*/\1/p' "$work/boot-vm.out" | tail -1)
  [ -n "$qemu" ] && kill -0 "$qemu" 2>/dev/null || fail "no running QEMU found in $work/boot-vm.out"
  api() {
    ip netns exec pxelab curl -sS --cacert "$cacert" -H "authorization: Bearer $STOKER_TOKEN" \
      -H 'content-type: application/json' -o "$work/api.out" -w '%{http_code}' "$@"
  }
  t=$(date +%s.%N)
  code=$(api -X POST "$url/api/v1/nodes/$node/power" -d '{"action":"off"}') || code=000
  echo "pxe-deploy: POST /api/v1/nodes/$node/power {\"action\":\"off\"} -> HTTP $code $(cat "$work/api.out")"
  [ "$code" = 200 ] && python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1])).get("ok") is not True)' "$work/api.out" \
    || fail "powering the node off through the API failed"
  for _ in $(seq 300); do
    { kill -0 "$qemu" 2>/dev/null || kill -0 "$vmpid" 2>/dev/null; } || break
    sleep 0.1
  done
  if kill -0 "$qemu" 2>/dev/null || kill -0 "$vmpid" 2>/dev/null; then
    tail -10 "$work/adapter.log"; fail "30 s after power off, QEMU (PID $qemu) or boot-vm.sh (PID $vmpid) still runs"
  fi
  for _ in $(seq 20); do [ "$(state running)" = False ] && break; sleep 0.1; done
  [ "$(state running)" = False ] || fail "the adapter still counts the VM as running"
  echo "pxe-deploy: powered off over Redfish: the adapter stopped boot-vm.sh (PID $vmpid) and QEMU (PID $qemu)" \
    "$(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}') s after the request"
  # The BMC's power state as stoker reports it: the fake driver applies it 1-11 s later, and a
  # sweep that reads the old state meanwhile must not undo the action's powering_off.
  for _ in $(seq 30); do
    code=$(api "$url/api/v1/nodes/$node/bmc") || code=000
    bmc_power=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("power_state"))' "$work/api.out" 2>/dev/null || echo "?")
    [ "$bmc_power" = off ] && break
    sleep 1
  done
  echo "pxe-deploy: GET /api/v1/nodes/$node/bmc -> HTTP $code power_state=$bmc_power"
  [ "$bmc_power" = off ] || fail "stoker does not report the node's power as off 30 s later: $(cat "$work/api.out")"
  sed -n 's/^\([0-9-]* [0-9:.]*\) redfish-lab: \(.*\(started VM\|stopping VM\|ended\).*\)/pxe-deploy:   adapter \1 \2/p' "$work/adapter.log"
  kill -TERM "$adapter"; wait "$adapter" 2>/dev/null || true; adapter=
  kill -TERM "$sushy"; wait "$sushy" 2>/dev/null || true; sushy=
fi
grep -E '^(boot-vm: +[0-9.]+s |pxe-deploy: power-on at )' "$work/boot-vm.out" \
  | sed 's/^boot-vm:/pxe-deploy:   vm/;s/^pxe-deploy: power-on/pxe-deploy:   vm: power-on/' || true
kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=

# The disk, read on the host: the ext4 root filesystem of partition 1, found by the MBR.
start=$(sfdisk -J "$disk" | python3 -c 'import json,sys; print(json.load(sys.stdin)["partitiontable"]["partitions"][0]["start"])')
got=$(debugfs -R "cat $marker" "$disk?offset=$((start * 512))" 2>"$work/debugfs.err") \
  || fail "debugfs cannot read $marker: $(cat "$work/debugfs.err")"
echo "$got" | sed "s|^|pxe-deploy: disk: $marker: |"
[ "$(echo "$got" | wc -l)" = 2 ] || fail "$marker should have 2 lines (deploy, redeploy)"
l1=$(echo "$got" | sed -n 1p); l2=$(echo "$got" | sed -n 2p)
case $l1 in "STOKER-LAB-TASK run=1 id=$id host=node-$node boot_id="*) ;; *) fail "first line: $l1" ;; esac
case $l2 in "STOKER-LAB-TASK run=2 id=$id host=node-$node boot_id="*) ;; *) fail "second line: $l2" ;; esac
[ "${l1##*boot_id=}" = "${l2##*boot_id=}" ] || fail "the boot_id changed between the deployments: the VM rebooted"
echo "pxe-deploy: disk: both runs on the installed OS, one boot (boot_id ${l1##*boot_id=})"

disc=$(sed -n 's/^discovered \([0-9.]*\).*/\1/p' "$work/drive.out")
prov=$(sed -n 's/^provisioned \([0-9.]*\).*/\1/p' "$work/drive.out")
ready=$(sed -n 's/^ready \([0-9.]*\).*/\1/p' "$work/drive.out")
redep=$(sed -n 's/^redeployed \([0-9.]*\).*/\1/p' "$work/drive.out")
if [ "$power" = redfish ]; then
  on=$(sed -n 's/^powered on [0-9.]* (\([0-9.]*\) s after the \([a-z ]*\) request.*/\1 s after the \2 request/p' "$work/drive.out")
  how=enrolled
  grep -q '^fallback:' "$work/drive.out" && how="enrolled (assignment refused: powered on with action pxe first)"
  echo "pxe-deploy: $how, powered on over Redfish (sushy-tools fake driver + .ci/redfish-lab.py adapter) $on"
fi
echo "pxe-deploy: $install: VM power-on -> discovered ${disc}s, -> provisioned ${prov}s, -> ready ${ready}s; redeploy (one task, no reboot) ${redep}s"
