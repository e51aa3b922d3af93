"""Ironic's API with N nodes, the peer of benches/node_list.sh.

Run with the Python of a venv that has Ironic and gunicorn (`python3 -m venv /tmp/ironicvenv &&
/tmp/ironicvenv/bin/pip install ironic gunicorn`, both from PyPI):

    IRONIC_PYTHON benches/ironic_nodes.py WORK NODES ASSIGNED

writes WORK/ironic.conf (no authentication, as Bifrost's and Metal3's standalone Ironic run; its
database SQLite in WORK, as Metal3's ironic-image keeps it), creates the schema with
ironic-dbsync, fills NODES nodes through Ironic's own objects (each with a port of the MAC that
node_list.sh's node of the same number has, properties with the same CPUs and memory, every
node `available`, the first ASSIGNED owned by "rack" with the role node_list.sh gives it as
resource class), and writes WORK/ironic_wsgi.py, the WSGI entry point gunicorn serves (Ironic's
own `ironic.wsgi`, told its configuration file the way uWSGI's `pyargv` tells it). Prints the
nodes' UUIDs, in creation order (which is Ironic's default `id` order), one per line, to
WORK/uuids. Only loopback: the API is bound by gunicorn on 127.0.0.1.
"""

import os
import subprocess
import sys
import time
import uuid

work, nodes, assigned = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
conf = os.path.join(work, "ironic.conf")
with open(conf, "w") as f:
    f.write(f"""[DEFAULT]
auth_strategy = noauth
rpc_transport = json-rpc
enabled_hardware_types = fake-hardware
enabled_boot_interfaces = fake
enabled_deploy_interfaces = fake
enabled_management_interfaces = fake
enabled_power_interfaces = fake
enabled_inspect_interfaces = no-inspect
enabled_network_interfaces = noop
enabled_console_interfaces = no-console
enabled_raid_interfaces = no-raid
enabled_vendor_interfaces = no-vendor
default_log_levels = ironic=WARNING,oslo_db=WARNING,oslo_policy=WARNING,stevedore=WARNING
[json_rpc]
auth_strategy = noauth
host_ip = 127.0.0.1
[database]
connection = sqlite:///{work}/ironic.db
""")
bindir = os.path.dirname(sys.executable)
subprocess.run([os.path.join(bindir, "ironic-dbsync"), "--config-file", conf, "create_schema"],
               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

from ironic.conf import CONF  # noqa: E402  (after the schema: the config is parsed once)

CONF(["--config-file", conf], project="ironic")
from ironic import objects  # noqa: E402
from ironic.common import context  # noqa: E402

objects.register_all()
admin = context.get_admin_context()
roles = ["controller", "compute", "cinder"]
t0 = time.perf_counter()
uuids = []
for n in range(nodes):
    role = None
    if n < assigned:
        role = roles[min(n, 2) if n < 3 else 1 + n % 2]
    node = objects.Node(
        admin, uuid=str(uuid.uuid4()), name=f"node-{n}", driver="fake-hardware",
        provision_state="available", power_state="power on",
        resource_class=role, owner="rack" if role else None,
        properties={"memory_mb": (64 << (n % 4)) * 1024, "cpus": 16 << (n % 3),
                    "local_gb": 447, "cpu_arch": "x86_64"},
        extra={"serial": f"SN{n:07d}"})
    node.create()
    mac = "52:54:01:%02x:%02x:%02x" % (n >> 16 & 255, n >> 8 & 255, n & 255)
    objects.Port(admin, uuid=str(uuid.uuid4()), address=mac, node_id=node.id).create()
    uuids.append(node.uuid)
with open(os.path.join(work, "uuids"), "w") as f:
    f.write("\n".join(uuids) + "\n")
with open(os.path.join(work, "ironic_wsgi.py"), "w") as f:
    f.write(f"import sys\nsys.argv = ['ironic-api', '--config-file', {conf!r}]\n"
            "from ironic.wsgi import application  # noqa: E402,F401\n")
print(f"ironic: {nodes} nodes and their ports in {time.perf_counter() - t0:.0f} s")
