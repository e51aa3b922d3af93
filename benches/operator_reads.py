#!/usr/bin/env python3
"""The operator's reads of a big running deployment, in daemon CPU per call.

Usage: benches/operator_reads.py BACKUP BIN [BIN ...] [--rounds N] [--calls N]

BACKUP is what `STOKER_BENCH_SNAPSHOT=FILE cargo bench --bench agents -- 10000 5000 rounds=1`
wrote: `stoker backup` of the daemon's database 40 s into a 10,000-node first deployment. Each
round restores it (`stoker restore`, the daemon stopped) into a new data directory, moves its
clock-bound columns to now (every agent last seen now, every running run started now: no agent
is silent and no run times out while the round runs, as in the deployment the copy was taken
from), sets admin's password (`stoker user passwd --offline`), starts `BIN serve` on loopback,
and makes CALLS calls of each read one after another:

- `GET /api/v1/deployments/{id}` (a page of up to 10,000 runs), and with `brief=1`;
- the environment's dashboard page (signed in through the form).

The binaries alternate round by round. What is reported is the daemon's CPU per call (utime +
stime from /proc/PID/stat over the calls, 10 ms ticks), median and min-max over the rounds:
what bounds it is the daemon's own work; one client asks one call at a time of an otherwise
idle daemon, so wall time is printed too but is not a rate. Also, per round, the CPU of the
silent-agent check's old and new SQL (Python's sqlite3 on the restored file: the SQL alone).
"""

import argparse
import http.cookiejar
import json
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

PASSWORD = "operator-reads-bench"

# The old check read every node of the deployment (id, last_seen_at, name) into a map; here the
# same rows are read and reduced in SQL, so the figure is SQLite's part alone, not Python's.
OLD_SQL = """SELECT COUNT(*), MIN(last_seen_at), MAX(length(name)) FROM nodes WHERE id IN
             (SELECT DISTINCT node_id FROM step_runs WHERE deployment = ?1)"""
NEW_SQL = """SELECT EXISTS (SELECT 1 FROM nodes n WHERE n.last_seen_at < ?2
               AND EXISTS (SELECT 1 FROM step_runs r
                           WHERE r.deployment = ?1 AND r.node_id = n.id))"""
ONLINE_WINDOW_S = 30


def cpu_s(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


def spread(values):
    v = sorted(values)
    return f"{v[len(v) // 2]:.1f} ({v[0]:.1f}-{v[-1]:.1f})"


def prepare(backup, binary, data):
    """Restore BACKUP into DATA, move its clock to now, set admin's password."""
    subprocess.run([binary, "restore", backup, "--data-dir", data], check=True,
                   stdout=subprocess.DEVNULL)
    db = sqlite3.connect(os.path.join(data, "stoker.db"))
    now = int(time.time())
    db.execute("UPDATE nodes SET last_seen_at = ?", (now,))
    db.execute("UPDATE step_runs SET started_at = ? WHERE status = 'running'", (now,))
    db.commit()
    db.close()
    subprocess.run([binary, "user", "passwd", "admin", "--offline", "--password-stdin",
                    "--data-dir", data], input=PASSWORD + "\n", text=True, check=True,
                   stdout=subprocess.DEVNULL)


def sql_cpu(path, calls):
    """CPU ms per call of the silent-agent check's old and new SQL, alternating."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    dep = db.execute("SELECT MAX(id) FROM deployments").fetchone()[0]
    now = db.execute("SELECT MAX(last_seen_at) FROM nodes").fetchone()[0]
    old, new = [], []
    for _ in range(calls):
        t = time.process_time()
        db.execute(OLD_SQL, (dep,)).fetchall()
        old.append((time.process_time() - t) * 1000)
        t = time.process_time()
        db.execute(NEW_SQL, (dep, now - ONLINE_WINDOW_S)).fetchall()
        new.append((time.process_time() - t) * 1000)
    db.close()
    return sorted(old)[len(old) // 2], sorted(new)[len(new) // 2]


def one_round(backup, binary, calls):
    data = tempfile.mkdtemp(prefix="operator-reads-")
    try:
        prepare(backup, binary, data)
        sql = sql_cpu(os.path.join(data, "stoker.db"), calls)
        daemon = subprocess.Popen(
            [binary, "serve", "--data-dir", data, "--http-listen", "127.0.0.1:0",
             "--log-level", "warn,stoker=info"],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        try:
            addr = None
            for line in daemon.stderr:
                m = re.search(r"listening on http://(\S+)", line)
                if m:
                    addr = m.group(1)
                    break
            base = f"http://{addr}"
            login = urllib.request.Request(
                base + "/api/v1/login",
                data=json.dumps({"username": "admin", "password": PASSWORD}).encode(),
                headers={"content-type": "application/json"})
            token = json.load(urllib.request.urlopen(login))["token"]

            def api(path):
                req = urllib.request.Request(base + path,
                                             headers={"authorization": f"Bearer {token}"})
                return urllib.request.urlopen(req).read()

            jar = http.cookiejar.CookieJar()
            browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
            html = browser.open(base + "/login").read().decode()
            csrf = html.split('name="csrf" value="')[1].split('"')[0]
            form = urllib.parse.urlencode({"username": "admin", "password": PASSWORD,
                                           "csrf": csrf, "next": "/"}).encode()
            browser.open(base + "/login", data=form).read()

            newest = json.loads(api("/api/v1/deployments/" + str(
                sqlite3.connect(os.path.join(data, "stoker.db"))
                .execute("SELECT MAX(id) FROM deployments").fetchone()[0])))
            dep, cluster = newest["id"], newest["cluster_id"]
            reads = {
                "GET /api/v1/deployments/{id}": lambda: api(f"/api/v1/deployments/{dep}"),
                "GET /api/v1/deployments/{id}?brief=1":
                    lambda: api(f"/api/v1/deployments/{dep}?brief=1"),
                "page /environments/{id}":
                    lambda: browser.open(f"{base}/environments/{cluster}").read(),
            }
            out = {"steps": newest.get("steps_total"), "waiting": len(newest.get("waiting", []))}
            for what, read in reads.items():
                size = len(read())  # once, unmeasured: statements prepared, pages cached
                c0, t0 = cpu_s(daemon.pid), time.monotonic()
                for _ in range(calls):
                    read()
                out[what] = ((cpu_s(daemon.pid) - c0) / calls * 1000,
                             (time.monotonic() - t0) / calls * 1000, size)
            out["sql"] = sql
            return out
        finally:
            daemon.terminate()
            daemon.wait()
    finally:
        shutil.rmtree(data, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("backup")
    ap.add_argument("bins", nargs="+")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10)
    a = ap.parse_args()
    if a.rounds < 5:
        print(f"{a.rounds} round(s): a look, not a figure (medians and spread need 5)")
    results = {b: [] for b in a.bins}
    for r in range(a.rounds):
        for b in a.bins:
            got = one_round(a.backup, b, a.calls)
            results[b].append(got)
            print(f"round {r + 1} {b}: {got['steps']} steps listed, {got['waiting']} waiting; "
                  + "; ".join(f"{k} {v[0]:.1f} ms CPU" for k, v in got.items()
                              if isinstance(v, tuple) and len(v) == 3), flush=True)
    print(f"\nDaemon CPU per call, ms, median (min-max) over {a.rounds} alternating round(s) of "
          f"{a.calls} calls; one client, one call at a time, an idle daemon otherwise "
          f"(wall ms beside it is not a rate)\n")
    print("| binary | read | answer bytes | daemon CPU ms | wall ms |")
    print("|---|---|---|---|---|")
    for b, rounds in results.items():
        for what in [k for k, v in rounds[0].items() if isinstance(v, tuple) and len(v) == 3]:
            print(f"| {os.path.basename(b)} | {what} | {rounds[0][what][2]:,} | "
                  f"{spread([x[what][0] for x in rounds])} | "
                  f"{spread([x[what][1] for x in rounds])} |")
    print("\nThe silent-agent check's SQL alone (Python's sqlite3 "
          f"{sqlite3.sqlite_version}, CPU ms per call, median of {a.calls} a round):")
    every = [x["sql"] for rounds in results.values() for x in rounds]
    print(f"  old (every node of the deployment): {spread([o for o, _ in every])}")
    print(f"  new (EXISTS over the silent ones):  {spread([n for _, n in every])}")


if __name__ == "__main__":
    main()
