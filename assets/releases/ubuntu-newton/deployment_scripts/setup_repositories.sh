#!/bin/bash
# Write the environment's APT repositories (settings: repo_setup.repos) and refresh the index.
set -euo pipefail
python3 - <<'PY' > /etc/apt/sources.list.d/stoker.list
import yaml
data = yaml.safe_load(open("/etc/astute.yaml"))
for r in data.get("repo_setup", {}).get("repos", []):
    print("{type} {uri} {suite} {section}".format(**r))
PY
: > /etc/apt/sources.list
apt-get update -q
