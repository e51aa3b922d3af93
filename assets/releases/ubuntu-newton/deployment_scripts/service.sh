#!/bin/bash
# Install and start one component of the environment: service.sh COMPONENT
set -euo pipefail
component=$1
declare -A packages=(
  [ntp]="ntp"
  [database]="mariadb-server python-pymysql"
  [rabbitmq]="rabbitmq-server"
  [keystone]="keystone apache2 libapache2-mod-wsgi"
  [glance]="glance"
  [nova-controller]="nova-api nova-conductor nova-consoleauth nova-novncproxy nova-scheduler"
  [neutron-server]="neutron-server neutron-plugin-ml2 neutron-openvswitch-agent neutron-l3-agent neutron-dhcp-agent neutron-metadata-agent"
  [cinder-controller]="cinder-api cinder-scheduler"
  [horizon]="openstack-dashboard"
  [nova-compute]="nova-compute"
  [neutron-agent]="neutron-openvswitch-agent"
  [cinder-volume]="cinder-volume lvm2 tgt"
)
list=${packages[$component]:?unknown component $component}
DEBIAN_FRONTEND=noninteractive apt-get install -y -q $list
configure=/etc/fuel/plugins/ubuntu-newton/configure/$component.sh
if [ -x "$configure" ]; then "$configure"; fi
