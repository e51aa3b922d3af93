#!/bin/bash
# Bring up the interfaces, bonds, VLANs and bridges of network_scheme (ifupdown + Open vSwitch).
set -euo pipefail
DEBIAN_FRONTEND=noninteractive apt-get install -y -q vlan ifenslave bridge-utils openvswitch-switch
python3 /etc/fuel/plugins/ubuntu-newton/netconfig.py /etc/astute.yaml > /etc/network/interfaces.d/stoker
ifup -a
