#!/bin/bash
# Check that each configured address answers from its peers' side of the wire.
set -euo pipefail
python3 - <<'PY'
import subprocess, yaml
data = yaml.safe_load(open("/etc/astute.yaml"))
bad = 0
for name, node in sorted(data.get("network_metadata", {}).get("nodes", {}).items()):
    for role, addr in sorted(node.get("network_roles", {}).items()):
        if addr and subprocess.call(["ping", "-c1", "-W2", addr], stdout=subprocess.DEVNULL):
            print("unreachable:", name, role, addr)
            bad += 1
raise SystemExit(1 if bad else 0)
PY
