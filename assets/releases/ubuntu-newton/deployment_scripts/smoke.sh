#!/bin/bash
# Ask the APIs for their catalogues: fails when a core service does not answer.
set -euo pipefail
source /root/openrc
openstack token issue >/dev/null
openstack compute service list
openstack network agent list
openstack volume service list
