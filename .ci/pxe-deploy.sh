#!/usr/bin/env bash
# A real deployment onto a VM's disk: a QEMU VM with a 96 MiB virtual disk PXE-boots from
# `stoker serve` in the PXE lab's network namespace, its agent says hello (node discovered), the
# script creates an environment over the API from a one-role test release, assigns the node and
# deploys it with the built-in steps: deploy.write_image (a 32 MiB raw image made here, served by
# stoker at /boot/images/, sha256 from deploy.image_checksum), deploy.configure, the release's one
# shell task (deploy.run_tasks) and power.reboot_to_disk. When the node is `ready` the guest
# reboots, which QEMU's -no-reboot turns into QEMU's exit; the script then reads the disk file on
# the host and finds (a) the whole image at its start (sha256 of the first 32 MiB) and (b) the
# line the shell task wrote with dd 48 MiB into the disk, past the image.
#
# usage: .ci/pxe-deploy.sh STOKER_BIN SHARED_DIR [BOOTSTRAP_BIN]
#   BOOTSTRAP_BIN: the binary packed into the bootstrap image (default STOKER_BIN)
# Needs root and ../shared/tools/pxe-lab; otherwise it says why it skipped and exits 0.
# Traffic stays inside the lab's namespaces; only processes started here are stopped, by PID.
# Prints seconds from VM start to node discovered and to node ready.
set -euo pipefail
bin=$(readlink -f "$1"); shared=$2; agent_bin=$(readlink -f "${3:-$1}")
root=$(cd "$(dirname "$0")/.." && pwd)
lab=$shared/tools/pxe-lab
skip() { echo "pxe-deploy: skipped: $*"; exit 0; }
[ -d "$lab" ] || skip "$lab not found"
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces and a tap)"
for t in qemu-system-x86_64 cpio python3 sha256sum; do
  command -v "$t" >/dev/null || skip "$t not installed (.ci/pxe-vm.sh installs QEMU)"
done

work=$(mktemp -d /tmp/stoker-deploy.XXXXXX)
cache=${STOKER_DEB_CACHE:-/var/cache/stoker-ci/debs}
mkdir -p "$cache"
pid=; vm=
cleanup() {
  if [ -n "$vm" ] && kill -0 "$vm" 2>/dev/null; then kill -TERM "$vm"; wait "$vm" 2>/dev/null || true; fi
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; fi
  "$lab/lab-down.sh" >/dev/null 2>&1 || true
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "pxe-deploy: FAILED: $*"; exit 1; }

echo "pxe-deploy: building the bootstrap image"
STOKER_DEB_CACHE=$cache "$root/images/build-bootstrap.sh" --stoker "$agent_bin" \
  --out "$work/data/images" --tftp "$work/data/tftp" >"$work/build.log" 2>&1 \
  || { tail -20 "$work/build.log"; fail "image build"; }

# The operating system image: 32 MiB of raw disk, a marker line at byte 0 and a pattern with this
# run's id after it, so the disk can only match if this run wrote it whole.
id=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
img=$work/data/images/lab-os.img
python3 - "$img" "$id" <<'EOF'
import sys
path, run_id = sys.argv[1], sys.argv[2]
size = 32 << 20
head = f"STOKER-LAB-IMAGE id={run_id}\n".encode()
line = f"stoker lab image {run_id}\n".encode()
data = (head + line * (size // len(line) + 1))[:size]
open(path, "wb").write(data)
EOF
sum=$(sha256sum <"$img" | cut -d' ' -f1)
disk=$work/disk.raw
truncate -s 96M "$disk"
task_offset=$((48 << 20))

# A one-role release whose deployment graph is one shell task: the VM must not try to run a real
# release's hundreds of puppet tasks. It writes a line 48 MiB into the node's disk, past the image.
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
- id: lab-disk-note
  type: shell
  version: 2.1.0
  roles: [lab]
  requires: [deploy_start]
  required_for: [deploy_end]
  parameters:
    cmd: >-
      line="STOKER-LAB-TASK host=\$(hostname) id=$id";
      echo "\$line" | dd of=/dev/vda bs=512 seek=$((task_offset / 512)) conv=notrunc,fsync 2>/dev/null &&
      sync && echo "wrote: \$line"
    timeout: 60
EOF
"$bin" plugin validate "$rel" >"$work/validate.log" 2>&1 || { cat "$work/validate.log"; fail "the test release is invalid"; }

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

mac=52:54:00:77:03:01
t0=$(date +%s.%N)
"$lab/boot-vm.sh" --log "$work/vm.log" --mac "$mac" --marker STOKER-AGENT --fail STOKER-AGENT-FAIL \
  --keep --timeout 300 -- -drive "file=$disk,format=raw,if=virtio" >"$work/boot-vm.out" 2>&1 &
vm=$!

# Drive the deployment over the API while the VM runs; print the two times.
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

node = wait("the node's hello", 120,
            lambda: next((n for n in call("GET", "/api/v1/nodes") if n["mac"] == mac), None))
t_disc = since()
print(f"discovered {t_disc:.2f} node={node['id']}", flush=True)
inv = node.get("inventory") or {}
disks = [d["name"] for d in inv.get("disks", [])]
assert "vda" in disks, f"the inventory lacks the virtual disk: {disks}"
release = next(r["id"] for r in call("GET", "/api/v1/releases") if r["name"] == "stoker lab")
env = call("POST", "/api/v1/clusters", {"name": "pxe-lab", "release_id": release})
call("PUT", f"/api/v1/clusters/{env['id']}/nodes/{node['id']}", {"roles": ["lab"]})
dep = call("POST", f"/api/v1/clusters/{env['id']}/deploy")
print(f"deployment {dep['id']} started {since():.2f}", flush=True)
status = wait("the node to be ready", 300, lambda: (
    s if (s := call("GET", f"/api/v1/nodes/{node['id']}")["status"]) in ("ready", "error") else None))
t_ready = since()
done = call("GET", f"/api/v1/deployments/{dep['id']}")
for s in done["steps"]:
    took = (s["finished_at"] - s["started_at"]) if s.get("finished_at") and s.get("started_at") else "-"
    print(f"  run {s['interface']}.{s['step']} {s.get('task') or ''}: {s['status']} ({took} s) {s.get('error') or ''}".rstrip())
if status != "ready":
    print(json.dumps(call("GET", f"/api/v1/nodes/{node['id']}"), indent=1))
    sys.exit(f"node {node['id']} is {status}")
print(f"ready {t_ready:.2f} deployment={done['status']}", flush=True)
task = next(s for s in done["steps"] if s.get("task") == "lab-disk-note")
assert f"id={run_id}" in task["output_tail"], task
script = call("GET", f"/boot/{mac}.ipxe")
assert "booting from local disk" in script, script
print("boot script now: local disk")
EOF
then
  cat "$work/drive.out"; tail -25 "$work/vm.log" | tr -d '\r'; tail -20 "$work/stoker.log"
  fail "the deployment did not finish"
fi
cat "$work/drive.out" | sed 's/^/pxe-deploy: /'
# The guest reboots after reporting reboot_to_disk; boot-vm.sh's -no-reboot turns that into
# QEMU's exit (and boot-vm.sh's, with --keep).
for _ in $(seq 600); do kill -0 "$vm" 2>/dev/null || break; sleep 0.1; done
kill -0 "$vm" 2>/dev/null && fail "the node is ready but its VM did not reboot within 60 s"
rc=0; wait "$vm" || rc=$?; vm=
grep -aq 'reboot: Restarting system' "$work/vm.log" || fail "the VM ended without rebooting: $(tail -3 "$work/vm.log")"
grep -E '^boot-vm: +[0-9.]+s ' "$work/boot-vm.out" | sed 's/^boot-vm:/pxe-deploy:   vm/' || true
[ "$rc" = 0 ] || { tail -15 "$work/boot-vm.out"; fail "boot-vm.sh exited $rc"; }
grep -aq 'STOKER-AGENT-FAIL' "$work/vm.log" && fail "the agent failed: $(grep -a STOKER-AGENT-FAIL "$work/vm.log")"
kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=

# The disk, read on the host.
got=$(head -c $((32 << 20)) "$disk" | sha256sum | cut -d' ' -f1)
[ "$got" = "$sum" ] || fail "the disk's first 32 MiB are not the image (sha256 $got, want $sum)"
first=$(head -n1 "$disk" | tr -d '\0')
[ "$first" = "STOKER-LAB-IMAGE id=$id" ] || fail "no image marker at the start of the disk: $first"
note=$(dd if="$disk" bs=512 skip=$((task_offset / 512)) count=1 2>/dev/null | head -n1 | tr -d '\0')
node=$(sed -n 's/^discovered [0-9.]* node=\([0-9]*\)$/\1/p' "$work/drive.out")
[ "$note" = "STOKER-LAB-TASK host=node-$node id=$id" ] || fail "the shell task's line is not on the disk: ${note:-nothing}"
echo "pxe-deploy: disk: image at 0 (sha256 $sum), task line at $task_offset: $note"
disc=$(sed -n 's/^discovered \([0-9.]*\).*/\1/p' "$work/drive.out")
ready=$(sed -n 's/^ready \([0-9.]*\).*/\1/p' "$work/drive.out")
echo "pxe-deploy: VM start -> node discovered ${disc}s, -> ready ${ready}s (write_image 32 MiB, configure, 1 shell task, reboot_to_disk)"
