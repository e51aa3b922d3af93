#!/bin/bash
# /etc/hosts with every node of the environment (from /etc/astute.yaml's network_metadata).
set -euo pipefail
python3 - <<'PY' > /etc/hosts.stoker
import yaml
data = yaml.safe_load(open("/etc/astute.yaml"))
print("127.0.0.1 localhost")
for name, node in sorted(data.get("network_metadata", {}).get("nodes", {}).items()):
    addr = node.get("network_roles", {}).get("management")
    if addr:
        print(addr, node.get("fqdn", name), name)
PY
mv /etc/hosts.stoker /etc/hosts
