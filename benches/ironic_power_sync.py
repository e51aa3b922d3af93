#!/usr/bin/env python3
"""The peer of stoker's power sync in benches/bmc_sweep.sh: Ironic's way of reading power states.

Ironic's conductor reads every node's power state in its periodic `_sync_power_states`
(ironic/conductor/manager.py), on `[conductor] sync_power_state_workers` threads (default 8).
For a Redfish node the reading is `RedfishPower.get_power_state`: `redfish_utils.get_system`
takes the node's `sushy.Sushy` connection from `SessionCache` (kept between sweeps, keyed by
address and credentials; made with `SessionOrBasicAuth`, so the first use logs in) and calls
`conn.get_system(system_id)`, one GET of the system, whose `power_state` is the answer. This
program does that part, with the same library (sushy, from PyPI), the same cache and the same
pool; what it leaves out (the database query and the lock Ironic takes per node, the task
manager, the comparison with the stored state) only adds to Ironic's cost, so its figures are
a lower bound of Ironic's.

usage: ironic_power_sync.py LISTING [WORKERS=8] [USERNAME=admin] [PASSWORD=password]
  LISTING: the BMCs' base addresses, one per line (redfish_farm.py --list); every system is
  /redfish/v1/Systems/1 (Ironic's `redfish_system_id`).
On stdin, one command per line: `sweep` reads every BMC once and prints
`swept MS READ FAILED USER_S SYSTEM_S` (this process's CPU during the sweep); `states` prints
each BMC's last reading, one per line. EOF ends it.
"""

import concurrent.futures
import os
import sys
import time

import sushy
from sushy import auth

SYSTEM_ID = "/redfish/v1/Systems/1"


def main():
    listing = sys.argv[1]
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    user = sys.argv[3] if len(sys.argv) > 3 else "admin"
    password = sys.argv[4] if len(sys.argv) > 4 else "password"
    addresses = open(listing).read().split()
    cache = {}  # SessionCache: one connection per BMC, kept between sweeps
    states = [None] * len(addresses)

    def reading(i):
        address = addresses[i]
        conn = cache.get(address)
        if conn is None:
            conn = sushy.Sushy(address, auth=auth.SessionOrBasicAuth(username=user, password=password))
            cache[address] = conn
        states[i] = conn.get_system(SYSTEM_ID).power_state
        return states[i]

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
    for command in sys.stdin:
        command = command.strip()
        if command == "sweep":
            t0, c0 = time.perf_counter(), os.times()
            failed = 0
            for f in [pool.submit(reading, i) for i in range(len(addresses))]:
                try:
                    f.result()
                except Exception as e:  # noqa: BLE001 - a failed reading is counted, as Ironic logs it
                    failed += 1
                    if failed <= 3:
                        print(f"reading failed: {e}", file=sys.stderr)
            t1, c1 = time.perf_counter(), os.times()
            print(f"swept {(t1 - t0) * 1000:.0f} {len(addresses) - failed} {failed} "
                  f"{c1.user - c0.user:.2f} {c1.system - c0.system:.2f}", flush=True)
        elif command == "states":
            for s in states:  # sushy's PowerState enum, or None before a reading
                print(getattr(s, "value", s), flush=False)
            sys.stdout.flush()
    pool.shutdown()


if __name__ == "__main__":
    main()
