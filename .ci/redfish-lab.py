#!/usr/bin/env python3
"""Power a lab VM on and off for sushy-tools' fake Redfish driver.

sushy-emulator's fake driver (SUSHY_EMULATOR_FAKE_DRIVER = True) keeps a system's power state
in a table and, for a system with `external_notifier: True`, PUTs the whole system (a JSON
object: uuid, name, power_state, pending_power, boot_device, nics, ...) to
EXTERNAL_NOTIFICATION_URL at every change. This adapter is that URL: it turns the power the
emulator was asked for into a VM started or stopped with COMMAND, so a Redfish client (stoker)
powers a QEMU VM that libvirt could not manage (the PXE lab's tap lives in a network namespace).

usage: redfish-lab.py --port PORT [--system UUID] [--state FILE] [--stop-timeout S] -- COMMAND...

Mapping (the fake driver sends `pending_power` at once, and applies it to power_state only on a
later GET after 1-11 s, so the adapter acts on pending_power as soon as it arrives):
  pending_power.power_state On                 -> start COMMAND unless the VM runs
  pending_power.power_state Off (ForceOff,
    GracefulShutdown)                           -> stop the VM
  pending_power.power_state *Restart* (the
    driver also sets power_state Off)           -> stop the VM if it runs, then start it
  no pending_power, power_state changed to On  -> start COMMAND unless the VM runs
  no pending_power, power_state changed to Off -> stop the VM
A notification that repeats what was already acted on (the same pending request, or the
applied state of a pending request handled before, or a boot device change) does nothing; so
a VM that powered itself off is not started again behind the client's back.

Start: COMMAND in a new session (its own process group), PID recorded. Stop: SIGTERM to that
PID, SIGKILL to its process group after --stop-timeout s (default 5) or to what is left of the
group once the PID exited (e.g. a qemu the wrapper script started). Only processes it started.
Every action is logged with a timestamp to stderr; --state FILE holds a JSON summary (pid,
running, starts, stops, started_at, stopped_at, last exit) rewritten at each change, and
GET / answers the same JSON. SIGTERM/SIGINT: stops the VM it started, then exits 0.
Listens on 127.0.0.1 only. Standard library only.
"""

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def log(msg):
    t = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"
    sys.stderr.write(f"{stamp} redfish-lab: {msg}\n")
    sys.stderr.flush()


class Vm:
    """The one VM this adapter runs: COMMAND's process (group)."""

    def __init__(self, command, stop_timeout, state_file):
        self.command = command
        self.stop_timeout = stop_timeout
        self.state_file = state_file
        self.proc = None
        self.lock = threading.RLock()
        self.info = {"pid": None, "running": False, "starts": 0, "stops": 0,
                     "started_at": None, "stopped_at": None, "last_exit": None,
                     "last_action": None, "exited_by_itself": 0}
        self.write_state()

    def write_state(self):
        if not self.state_file:
            return
        tmp = self.state_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.info, f)
        os.replace(tmp, self.state_file)

    def _exited(self):
        """The exit status if the process exited (not reaped yet), else None."""
        try:
            r = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return self.proc.returncode if self.proc.returncode is not None else -1
        if r is None:
            return None
        return r.si_status if r.si_code == os.CLD_EXITED else -r.si_status

    def running(self):
        with self.lock:
            return self.proc is not None and self._exited() is None

    def _reap(self, why):
        """The process exited: kill what is left of its group (its PID is still ours: not reaped
        yet), reap it, record."""
        pid = self.proc.pid
        try:
            os.killpg(pid, signal.SIGKILL)
            log(f"process group {pid}: SIGKILL to whatever was left of it")
        except ProcessLookupError:
            pass
        rc = self.proc.wait()
        self.proc = None
        self.info.update(running=False, stopped_at=time.time(), last_exit=rc)
        log(f"VM PID {pid} ended ({why}), exit status {rc}")
        self.write_state()

    def start(self, why):
        with self.lock:
            if self.running():
                log(f"{why}: VM already running (PID {self.proc.pid}), nothing to do")
                return
            if self.proc is not None:
                self.info["exited_by_itself"] += 1
                self._reap("had exited by itself")
            self.proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
            self.info.update(pid=self.proc.pid, running=True, started_at=time.time(),
                             starts=self.info["starts"] + 1, last_action=why)
            log(f"{why}: started VM, PID {self.proc.pid}: {' '.join(self.command)}")
            self.write_state()

    def stop(self, why):
        with self.lock:
            if self.proc is None:
                log(f"{why}: no VM running, nothing to do")
                return
            pid = self.proc.pid
            if self._exited() is not None:
                self.info["exited_by_itself"] += 1
                self._reap(f"{why}: it had already exited by itself")
                self.info["last_action"] = why
                self.write_state()
                return
            log(f"{why}: stopping VM PID {pid} (SIGTERM)")
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.time() + self.stop_timeout
            while time.time() < deadline and self._exited() is None:
                time.sleep(0.05)
            if self._exited() is None:
                log(f"VM PID {pid} still running after {self.stop_timeout:g} s: SIGKILL to its process group")
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.info["stops"] += 1
            self.info["last_action"] = why
            self._reap(why)

    def watch(self):
        """Log a VM that ends by itself (guest power-off, crash), without waiting for a request."""
        while True:
            time.sleep(0.5)
            with self.lock:
                if self.proc is not None and self._exited() is not None:
                    self.info["exited_by_itself"] += 1
                    self._reap("exited by itself")


class Adapter:
    def __init__(self, vm, system):
        self.vm = vm
        self.system = system
        self.last = None  # what was last acted on: ("pending", state, apply_time) or ("state", s)
        self.events = queue.Queue()
        self.stopping = False

    def notify(self, body):
        self.events.put(body)

    def run(self):
        while True:
            body = self.events.get()
            if body is None:
                return
            if self.stopping:
                log("shutting down: notification ignored")
                continue
            try:
                self.handle(body)
            except Exception as e:  # an adapter that dies would leave the VM unpowered silently
                log(f"error handling a notification: {e!r}")

    def handle(self, s):
        uuid, name = s.get("uuid"), s.get("name")
        if self.system and self.system not in (uuid, name):
            log(f"notification for another system ({name} {uuid}), ignored")
            return
        power, pending = s.get("power_state"), s.get("pending_power")
        log(f"notification: system {name} power_state={power} pending_power="
            f"{json.dumps(pending) if pending else None} boot_device={s.get('boot_device')}")
        if pending:
            want = pending.get("power_state") or ""
            key = ("pending", want, pending.get("apply_time"))
            if key == self.last:
                return
            self.last = key
            if "Restart" in want:
                self.vm.stop(f"pending {want}")
                self.vm.start(f"pending {want}")
            elif want == "On":
                self.vm.start("pending On")
            elif want == "Off":
                self.vm.stop("pending Off")
            else:
                log(f"pending power state {want!r} not understood, nothing done")
            return
        key = ("state", power)
        prev, self.last = self.last, key
        if key == prev:
            return
        if prev and prev[0] == "pending":
            applied = "On" if "Restart" in prev[1] else prev[1]
            if applied == power:
                log(f"power {power} applied, as already acted on")
                return
        if power == "On":
            self.vm.start("power On")
        elif power == "Off":
            self.vm.stop("power Off")
        else:
            log(f"power state {power!r} not understood, nothing done")


def serve(adapter, vm, port):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            pass

        def _reply(self, code, body=b""):
            self.send_response(code)
            if body:
                self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            if body:
                self.wfile.write(body)

        def do_PUT(self):
            n = int(self.headers.get("content-length") or 0)
            try:
                body = json.loads(self.rfile.read(n) or b"null")
                if not isinstance(body, dict):
                    raise ValueError("not a JSON object")
            except ValueError as e:
                log(f"bad notification from {self.client_address[0]}: {e}")
                self._reply(400, json.dumps({"error": str(e)}).encode())
                return
            adapter.notify(body)  # acted on by the worker: the emulator is not kept waiting
            self._reply(204)

        do_POST = do_PUT

        def do_GET(self):
            with vm.lock:
                vm.info["running"] = vm.running()
                body = json.dumps(vm.info).encode()
            self._reply(200, body)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True, help="listen on 127.0.0.1:PORT")
    p.add_argument("--system", help="act only on this system (uuid or name)")
    p.add_argument("--state", help="JSON state file, rewritten at each change")
    p.add_argument("--stop-timeout", type=float, default=5.0,
                   help="seconds between SIGTERM and SIGKILL (default 5)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND... that runs the VM")
    a = p.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        p.error("a COMMAND after -- is needed")

    vm = Vm(cmd, a.stop_timeout, a.state)
    adapter = Adapter(vm, a.system)
    try:
        server = serve(adapter, vm, a.port)
    except OSError as e:
        log(f"cannot listen on 127.0.0.1:{a.port}: {e}")
        return 1
    worker = threading.Thread(target=adapter.run, daemon=True)
    worker.start()
    threading.Thread(target=vm.watch, daemon=True).start()

    stopping = threading.Event()

    def on_signal(signum, _frame):
        if not stopping.is_set():
            stopping.set()
            adapter.stopping = True
            log(f"{signal.Signals(signum).name}: shutting down")
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log(f"listening on 127.0.0.1:{a.port} (PID {os.getpid()}), VM command: {' '.join(cmd)}")
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    adapter.events.put(None)
    worker.join(timeout=a.stop_timeout + 5)
    vm.stop("adapter exiting")
    log("exited")
    return 0


if __name__ == "__main__":
    sys.exit(main())
