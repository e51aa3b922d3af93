"""Render /etc/network/interfaces stanzas from astute.yaml's network_scheme endpoints."""
import sys

import yaml

data = yaml.safe_load(open(sys.argv[1]))
scheme = data.get("network_scheme", {})
for name, ep in sorted(scheme.get("endpoints", {}).items()):
    addrs = ep.get("IP") or []
    if addrs == "none" or not addrs:
        print("auto {0}\niface {0} inet manual\n".format(name))
        continue
    for addr in addrs:
        print("auto {0}\niface {0} inet static\n    address {1}".format(name, addr))
        if ep.get("gateway"):
            print("    gateway {0}".format(ep["gateway"]))
        print()
