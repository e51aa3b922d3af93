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
# Needs root and ../shared/tools/pxe-lab; otherwise it says why it skipped and exits 0.
# Traffic stays inside the lab's namespaces; only processes started here are stopped, by PID.
# Prints seconds from VM power-on to discovered, provisioned and ready, and the redeploy's time.
set -euo pipefail
bin=$(readlink -f "$1"); shared=$2; agent_bin=$(readlink -f "${3:-$1}")
root=$(cd "$(dirname "$0")/.." && pwd)
lab=$shared/tools/pxe-lab
install=${AGENT_INSTALL:-inject}
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

work=$(mktemp -d /tmp/stoker-deploy.XXXXXX)
cache=${STOKER_DEB_CACHE:-/var/cache/stoker-ci/debs}
mkdir -p "$cache"
pid=; vm=
cleanup() {
  if [ -n "$vm" ] && kill -0 "$vm" 2>/dev/null; then kill -TERM "$vm"; wait "$vm" 2>/dev/null || true; fi
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; fi
  "$lab/lab-down.sh" >/dev/null 2>&1 || true
  if [ -n "${KEEP:-}" ]; then echo "pxe-deploy: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
fail() { echo "pxe-deploy: FAILED: $*"; exit 1; }

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
t0=$(date +%s.%N)
"$lab/boot-vm.sh" --log "$work/vm.log" --mac "$mac" --marker STOKER-AGENT --fail STOKER-AGENT-FAIL \
  --keep --timeout 900 -- -drive "file=$disk,format=raw,if=virtio" -action reboot=reset \
  -qmp "unix:$qmp,server=on,wait=off" >"$work/boot-vm.out" 2>&1 &
vm=$!

# Drive both deployments over the API while the VM runs; print the times.
if ! ip netns exec pxelab python3 - "$url" "$mac" "$t0" "$id" "$cacert" >"$work/drive.out" 2>&1 <<'EOF'
import json, os, ssl, sys, time, urllib.request, urllib.error
url, mac, t0, run_id = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
tls = ssl.create_default_context(cafile=sys.argv[5])
token = os.environ["STOKER_TOKEN"]

def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"content-type": "application/json",
                                          "authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=10, context=tls) as r:
            text = r.read().decode()
            return json.loads(text) if text.startswith(("{", "[")) else text
    except urllib.error.HTTPError as e:
        sys.exit(f"{method} {path}: HTTP {e.code}: {e.read().decode()}")

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

node = wait("the node's hello", 120,
            lambda: next((n for n in call("GET", "/api/v1/nodes") if n["mac"] == mac), None))
nid = node["id"]
print(f"discovered {since():.2f} node={nid}", flush=True)
inv = node.get("inventory") or {}
disks = [d["name"] for d in inv.get("disks", [])]
assert "vda" in disks, f"the inventory lacks the virtual disk: {disks}"
release = next(r["id"] for r in call("GET", "/api/v1/releases") if r["name"] == "stoker lab")
env = call("POST", "/api/v1/clusters", {"name": "pxe-lab", "release_id": release})
call("PUT", f"/api/v1/clusters/{env['id']}/nodes/{nid}", {"roles": ["lab"]})
dep = call("POST", f"/api/v1/clusters/{env['id']}/deploy")
t_dep = since()
print(f"deployment {dep['id']} started {t_dep:.2f}", flush=True)

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
  cat "$work/drive.out"; tail -40 "$work/vm.log" | tr -d '\r'; tail -20 "$work/stoker.log"
  fail "the deployment did not finish"
fi
sed 's/^/pxe-deploy: /' "$work/drive.out"
kill -0 "$vm" 2>/dev/null || fail "the VM is gone: $(tail -5 "$work/boot-vm.out")"

# Two boots on the serial console: power-on (the bootstrap) and reboot_to_disk's (the installed
# OS). SeaBIOS prints "Booting from ROM" at each; a third would be a reboot by the redeploy.
boots=$(grep -ac 'Booting from ROM' "$work/vm.log" || true)
[ "$boots" = 2 ] || fail "the serial console shows $boots boots, not 2 (bootstrap, installed OS)"
grep -aq 'STOKER-OS-BOOTED' "$work/vm.log" || fail "the installed OS did not say it booted"
grep -aq 'booting from local disk' "$work/vm.log" || fail "iPXE did not run the local disk script"

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
qmp_send system_powerdown || true
for _ in $(seq 600); do kill -0 "$vm" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$vm" 2>/dev/null; then
  echo "pxe-deploy: the OS did not power off within 60 s; stopping QEMU"
  qmp_send quit || true
  for _ in $(seq 100); do kill -0 "$vm" 2>/dev/null || break; sleep 0.1; done
fi
wait "$vm" || true; vm=
grep -E '^boot-vm: +[0-9.]+s ' "$work/boot-vm.out" | sed 's/^boot-vm:/pxe-deploy:   vm/' || true
kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=

# The disk, read on the host: the ext4 root filesystem of partition 1, found by the MBR.
start=$(sfdisk -J "$disk" | python3 -c 'import json,sys; print(json.load(sys.stdin)["partitiontable"]["partitions"][0]["start"])')
got=$(debugfs -R "cat $marker" "$disk?offset=$((start * 512))" 2>"$work/debugfs.err") \
  || fail "debugfs cannot read $marker: $(cat "$work/debugfs.err")"
echo "$got" | sed "s|^|pxe-deploy: disk: $marker: |"
node=$(sed -n 's/^discovered [0-9.]* node=\([0-9]*\)$/\1/p' "$work/drive.out")
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
echo "pxe-deploy: $install: VM power-on -> discovered ${disc}s, -> provisioned ${prov}s, -> ready ${ready}s; redeploy (one task, no reboot) ${redep}s"
