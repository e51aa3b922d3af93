#!/usr/bin/env python3
"""A farm of N emulated Redfish BMCs in one Python process (stdlib only), for benches/bmc_sweep.sh.

Each BMC listens on a loopback address of its own, on one port shared by all of them, so each is
a distinct host as on a real BMC network: BMC i (from 0) is 127.NET.(i // 250).(i % 250 + 1)
(127.77.0.1 ... 127.77.3.250 for 1,000; Linux answers on all of 127.0.0.0/8 without any
configuration). Each manages one system and serves what stoker's Redfish driver reads and sends
for a power-state read and the power actions (src/bmc/redfish/http.rs, mod.rs, system.rs):

  GET    /redfish/v1/                        the service root, no credentials (Systems,
                                             SessionService and Links.Sessions)
  GET    /redfish/v1/SessionService          the session service
  POST   /redfish/v1/SessionService/Sessions {"UserName", "Password"}: 201, X-Auth-Token, Location
  GET    /redfish/v1/SessionService/Sessions the open sessions
  GET|DELETE /redfish/v1/SessionService/Sessions/ID
  GET    /redfish/v1/Systems                 one member, /redfish/v1/Systems/1
  GET    /redfish/v1/Systems/1               PowerState, Boot (override, allowed values), the
                                             reset action and its allowed ResetTypes; an ETag
  PATCH  /redfish/v1/Systems/1               {"Boot": {BootSourceOverrideTarget, ...Enabled}},
                                             If-Match checked (412)
  POST   /redfish/v1/Systems/1/Actions/ComputerSystem.Reset
                                             {"ResetType": On|ForceOff|GracefulShutdown|
                                             ForceRestart}: 204, the power changes at once

Everything but the service root and making a session needs the credentials (--username,
--password): HTTP Basic or a session's X-Auth-Token; else 401. HTTP/1.1 with keep-alive (HTTP/1.0
and "Connection: close" close), Content-Length bodies only (chunked bodies are refused), JSON
answers. A malformed request gets 400 and its connection is closed; an oversized head 431, an
oversized body 413. At most --max-connections connections are open at once (more are closed as
they arrive, and counted); idle ones are closed after --idle seconds; at most --max-sessions
sessions per BMC (then 503, on which stoker falls back to Basic, as sushy does).

BMC i starts On when i is odd, Off when even (--power), so a sweep's readings can be checked.

--list FILE writes the BMCs' addresses (http://ADDR:PORT, one per line, in index order) once all
are listening; then "redfish_farm: ready ..." is printed. On SIGTERM or SIGINT the farm prints
its CPU time (getrusage: user, system), its requests by kind, connections (accepted, peak open,
refused, requests per connection) and sessions (made, deleted, left open), and exits 0; SIGUSR1
prints the same without exiting.

usage: benches/redfish_farm.py [--count N] [--port PORT] [--net 77] [--list FILE] ...
"""

import argparse
import asyncio
import base64
import binascii
import json
import os
import resource
import secrets
import signal
import socket
import sys
import time
import uuid

PER_BLOCK = 250
MAX_HEAD = 16 * 1024
MAX_BODY = 64 * 1024
RESET_TYPES = ["On", "ForceOff", "GracefulShutdown", "ForceRestart"]
BOOT_TARGETS = ["None", "Pxe", "Hdd", "Cd", "BiosSetup"]
BOOT_MODES = ["Disabled", "Once", "Continuous"]
REASONS = {
    200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 401: "Unauthorized",
    404: "Not Found", 405: "Method Not Allowed", 411: "Length Required", 412: "Precondition Failed",
    413: "Payload Too Large", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 501: "Not Implemented", 503: "Service Unavailable",
}
SYSTEM = "/redfish/v1/Systems/1"
RESET = SYSTEM + "/Actions/ComputerSystem.Reset"
SESSIONS = "/redfish/v1/SessionService/Sessions"


def address(net, i):
    return "127.%d.%d.%d" % (net, i // PER_BLOCK, i % PER_BLOCK + 1)


class Bad(Exception):
    """A request that cannot be read: answered with its status, then the connection closed."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class Bmc:
    __slots__ = ("index", "power", "sessions", "next_session", "boot_target", "boot_enabled",
                 "version", "uuid")

    def __init__(self, index, power):
        self.index = index
        self.power = power
        self.sessions = {}  # token -> [session id, last used (monotonic)]
        self.next_session = 1
        self.boot_target = "None"
        self.boot_enabled = "Disabled"
        self.version = 1
        self.uuid = str(uuid.UUID(int=0x5700_0000 + index))

    def etag(self):
        return 'W/"%d"' % self.version


class Farm:
    def __init__(self, args):
        self.args = args
        self.basic = "%s:%s" % (args.username, args.password)
        self.open = set()
        self.stats = {}
        self.accepted = 0
        self.peak_open = 0
        self.refused = 0
        self.requests = 0
        self.sessions_made = 0
        self.sessions_deleted = 0
        self.sessions_expired = 0
        self.started = time.monotonic()

    def count(self, key):
        self.stats[key] = self.stats.get(key, 0) + 1

    def report(self, why):
        ru = resource.getrusage(resource.RUSAGE_SELF)
        left = sum(len(b.sessions) for b in self.bmcs)
        kinds = ", ".join("%s %d" % kv for kv in sorted(self.stats.items()))
        per_conn = self.requests / self.accepted if self.accepted else 0.0
        print("redfish_farm: %s after %.1f s: cpu user %.2f s, system %.2f s, total %.2f s; "
              "%d requests (%s); connections: %d accepted (%.1f requests each), peak %d open, "
              "%d refused over the cap, %d open now; sessions: %d made, %d deleted, %d expired, "
              "%d open" % (why, time.monotonic() - self.started, ru.ru_utime, ru.ru_stime,
                           ru.ru_utime + ru.ru_stime, self.requests, kinds or "none",
                           self.accepted, per_conn, self.peak_open, self.refused, len(self.open),
                           self.sessions_made, self.sessions_deleted, self.sessions_expired,
                           left), flush=True)

    def sweep_idle(self):
        """Close connections idle past --idle; forget sessions idle past --session-timeout."""
        now = time.monotonic()
        for c in list(self.open):
            if now - c.last > self.args.idle:
                c.transport.close()
        limit = self.args.session_timeout
        for b in self.bmcs:
            for token, (_, used) in list(b.sessions.items()):
                if now - used > limit:
                    del b.sessions[token]
                    self.sessions_expired += 1
        asyncio.get_running_loop().call_later(max(1.0, min(10.0, self.args.idle / 2)),
                                              self.sweep_idle)


class Conn(asyncio.Protocol):
    """One HTTP/1.1 connection to one BMC."""

    def __init__(self, farm, bmc):
        self.farm = farm
        self.bmc = bmc
        self.buf = bytearray()
        self.transport = None
        self.closing = False
        self.continued = False
        self.last = time.monotonic()

    def connection_made(self, transport):
        self.transport = transport
        farm = self.farm
        if len(farm.open) >= farm.args.max_connections:
            farm.refused += 1
            self.closing = True
            transport.abort()
            return
        farm.open.add(self)
        farm.accepted += 1
        if len(farm.open) > farm.peak_open:
            farm.peak_open = len(farm.open)

    def connection_lost(self, exc):
        self.farm.open.discard(self)

    def data_received(self, data):
        if self.closing:
            return
        self.last = time.monotonic()
        self.buf += data
        try:
            while not self.closing and self.buf:
                if not self.one():
                    break
        except Bad as e:
            self.farm.count("%d malformed" % e.status)
            self.reply(e.status, error(str(e)), close=True)
        except Exception as e:  # never let one request take the farm down
            self.farm.count("500 internal")
            print("redfish_farm: internal error on BMC %d: %r" % (self.bmc.index, e),
                  file=sys.stderr, flush=True)
            self.reply(500, error("internal error"), close=True)

    def one(self):
        """Serve the first request in the buffer; False when it is not all here yet."""
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > MAX_HEAD:
                raise Bad(431, "the request head is larger than %d bytes" % MAX_HEAD)
            return False
        if end > MAX_HEAD:
            raise Bad(431, "the request head is larger than %d bytes" % MAX_HEAD)
        try:
            head = self.buf[:end].decode("latin-1")
        except Exception:
            raise Bad(400, "unreadable request head")
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[0].isalpha() or not parts[1].startswith("/") \
                or parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
            raise Bad(400, "not an HTTP/1.x request line")
        method, target, version = parts
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip() or any(c in name for c in " \t"):
                raise Bad(400, "a malformed header line")
            headers[name.lower()] = value.strip()
        if "transfer-encoding" in headers:
            raise Bad(501, "chunked request bodies are not supported; send Content-Length")
        length = headers.get("content-length", "0")
        if not length.isdigit():
            raise Bad(400, "a malformed Content-Length")
        length = int(length)
        if length > MAX_BODY:
            raise Bad(413, "the request body is larger than %d bytes" % MAX_BODY)
        start = end + 4
        if len(self.buf) < start + length:
            if length and not self.continued and \
                    headers.get("expect", "").lower() == "100-continue":
                self.continued = True
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return False
        body = bytes(self.buf[start:start + length])
        del self.buf[:start + length]
        self.continued = False
        conn = headers.get("connection", "").lower()
        close = "close" in conn or (version == "HTTP/1.0" and "keep-alive" not in conn)
        self.farm.requests += 1
        status, doc, extra = self.route(method, target, headers, body)
        self.reply(status, doc, extra, close)
        return True

    def reply(self, status, doc, extra=None, close=False):
        if self.transport is None or self.transport.is_closing():
            return
        out = ["HTTP/1.1 %d %s" % (status, REASONS.get(status, "Status")), "OData-Version: 4.0"]
        payload = b""
        if status != 204 and doc is not None:
            payload = json.dumps(doc, separators=(",", ":")).encode()
            out.append("Content-Type: application/json; charset=utf-8")
        if status != 204:
            out.append("Content-Length: %d" % len(payload))
        for k, v in (extra or {}).items():
            out.append("%s: %s" % (k, v))
        out.append("Connection: close" if close else "Connection: keep-alive")
        self.transport.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + payload)
        if close:
            self.closing = True
            self.transport.close()

    # --- Redfish -----------------------------------------------------------------------------

    def authorized(self, headers):
        token = headers.get("x-auth-token")
        bmc = self.bmc
        if token is not None:
            s = bmc.sessions.get(token)
            if s is None:
                return False
            now = time.monotonic()
            if now - s[1] > self.farm.args.session_timeout:
                del bmc.sessions[token]
                self.farm.sessions_expired += 1
                return False
            s[1] = now
            return True
        auth = headers.get("authorization", "")
        if auth[:6].lower() != "basic ":
            return False
        try:
            pair = base64.b64decode(auth[6:].strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return False
        return secrets.compare_digest(pair, self.farm.basic)

    def route(self, method, target, headers, body):
        path = target.split("?", 1)[0].split("#", 1)[0]
        if len(path) > 1:
            path = path.rstrip("/") or "/"
        farm = self.farm
        if path in ("/redfish/v1", "/redfish"):
            if method != "GET":
                return not_allowed(farm, "GET")
            farm.count("GET root")
            return 200, (self.root() if path == "/redfish/v1" else {"v1": "/redfish/v1/"}), None
        if path == SESSIONS and method == "POST":
            return self.login(body)
        known = path in ("/redfish/v1/SessionService", SESSIONS, "/redfish/v1/Systems", SYSTEM,
                         RESET) or path.startswith(SESSIONS + "/")
        if not known:
            farm.count("404")
            return 404, error("no resource at %s" % path[:200]), None
        if not self.authorized(headers):
            farm.count("401")
            return 401, error("the credentials or session token were refused"), \
                {"WWW-Authenticate": 'Basic realm="redfish_farm"'}
        if path == SYSTEM:
            if method == "GET":
                farm.count("GET system")
                return 200, self.system(), {"ETag": self.bmc.etag()}
            if method == "PATCH":
                return self.patch(headers, body)
            return not_allowed(farm, "GET, PATCH")
        if path == RESET:
            if method != "POST":
                return not_allowed(farm, "POST")
            return self.reset(body)
        if path == "/redfish/v1/Systems":
            if method != "GET":
                return not_allowed(farm, "GET")
            farm.count("GET systems")
            return 200, {"@odata.id": "/redfish/v1/Systems",
                         "@odata.type": "#ComputerSystemCollection.ComputerSystemCollection",
                         "Name": "Computer System Collection", "Members@odata.count": 1,
                         "Members": [{"@odata.id": SYSTEM}]}, None
        if path == "/redfish/v1/SessionService":
            if method != "GET":
                return not_allowed(farm, "GET")
            farm.count("GET session service")
            return 200, {"@odata.id": "/redfish/v1/SessionService",
                         "@odata.type": "#SessionService.v1_1_8.SessionService",
                         "Id": "SessionService", "Name": "Session Service",
                         "ServiceEnabled": True,
                         "SessionTimeout": int(farm.args.session_timeout),
                         "Sessions": {"@odata.id": SESSIONS}}, None
        if path == SESSIONS:
            if method != "GET":
                return not_allowed(farm, "GET, POST")
            farm.count("GET sessions")
            members = [{"@odata.id": "%s/%d" % (SESSIONS, s[0])}
                       for s in self.bmc.sessions.values()]
            return 200, {"@odata.id": SESSIONS, "Name": "Session Collection",
                         "Members@odata.count": len(members), "Members": members}, None
        # One session.
        sid = path[len(SESSIONS) + 1:]
        token = next((t for t, s in self.bmc.sessions.items() if str(s[0]) == sid), None)
        if token is None:
            farm.count("404")
            return 404, error("no session %s" % sid[:40]), None
        if method == "GET":
            farm.count("GET session")
            return 200, self.session_doc(sid), None
        if method == "DELETE":
            del self.bmc.sessions[token]
            farm.sessions_deleted += 1
            farm.count("DELETE session")
            return 204, None, None
        return not_allowed(farm, "GET, DELETE")

    def root(self):
        doc = {"@odata.id": "/redfish/v1/", "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot",
               "Id": "RootService", "Name": "redfish_farm BMC %d" % self.bmc.index,
               "RedfishVersion": "1.11.0", "UUID": self.bmc.uuid,
               "Systems": {"@odata.id": "/redfish/v1/Systems"}}
        if self.farm.args.sessions:
            doc["SessionService"] = {"@odata.id": "/redfish/v1/SessionService"}
            doc["Links"] = {"Sessions": {"@odata.id": SESSIONS}}
        return doc

    def session_doc(self, sid):
        return {"@odata.id": "%s/%s" % (SESSIONS, sid), "@odata.type": "#Session.v1_3_0.Session",
                "Id": sid, "Name": "User Session", "UserName": self.farm.args.username}

    def login(self, body):
        farm = self.farm
        farm.count("POST session")
        if not farm.args.sessions:
            return 405, error("this BMC has no sessions"), {"Allow": "GET"}
        try:
            creds = json.loads(body or b"null")
        except ValueError:
            farm.count("400 body")
            return 400, error("the body is not JSON"), None
        if not isinstance(creds, dict) or not isinstance(creds.get("UserName"), str) \
                or not isinstance(creds.get("Password"), str):
            farm.count("400 body")
            return 400, error("expected {\"UserName\": ..., \"Password\": ...}"), None
        if not (secrets.compare_digest(creds["UserName"], farm.args.username)
                and secrets.compare_digest(creds["Password"], farm.args.password)):
            farm.count("401")
            return 401, error("the credentials were refused"), None
        bmc = self.bmc
        if len(bmc.sessions) >= farm.args.max_sessions:
            farm.count("503 sessions full")
            return 503, error("too many sessions (%d)" % farm.args.max_sessions), None
        sid = str(bmc.next_session)
        bmc.next_session += 1
        token = secrets.token_hex(16)
        bmc.sessions[token] = [int(sid), time.monotonic()]
        farm.sessions_made += 1
        where = "%s/%s" % (SESSIONS, sid)
        return 201, self.session_doc(sid), {"X-Auth-Token": token, "Location": where}

    def system(self):
        b = self.bmc
        return {
            "@odata.id": SYSTEM, "@odata.type": "#ComputerSystem.v1_10_0.ComputerSystem",
            "@odata.etag": b.etag(), "Id": "1", "Name": "bmc-%d" % b.index, "UUID": b.uuid,
            "SystemType": "Physical", "Manufacturer": "redfish_farm",
            "PowerState": b.power, "Status": {"State": "Enabled", "Health": "OK"},
            "Boot": {"BootSourceOverrideEnabled": b.boot_enabled,
                     "BootSourceOverrideTarget": b.boot_target,
                     "BootSourceOverrideTarget@Redfish.AllowableValues": BOOT_TARGETS,
                     "BootSourceOverrideEnabled@Redfish.AllowableValues": BOOT_MODES},
            "Actions": {"#ComputerSystem.Reset": {
                "target": RESET, "ResetType@Redfish.AllowableValues": RESET_TYPES}},
        }

    def patch(self, headers, body):
        farm, b = self.farm, self.bmc
        farm.count("PATCH system")
        want = headers.get("if-match")
        if want is not None and want not in ("*", b.etag(), b.etag()[2:]):
            return 412, error("the ETag does not match"), {"ETag": b.etag()}
        try:
            doc = json.loads(body or b"null")
        except ValueError:
            return 400, error("the body is not JSON"), None
        boot = doc.get("Boot") if isinstance(doc, dict) else None
        if not isinstance(boot, dict) or set(doc) != {"Boot"} or not boot or \
                not set(boot) <= {"BootSourceOverrideTarget", "BootSourceOverrideEnabled"}:
            return 400, error("only Boot's BootSourceOverrideTarget and "
                              "BootSourceOverrideEnabled can be changed"), None
        target = boot.get("BootSourceOverrideTarget", b.boot_target)
        enabled = boot.get("BootSourceOverrideEnabled", b.boot_enabled)
        if target not in BOOT_TARGETS or enabled not in BOOT_MODES:
            return 400, error("a value not in the allowed values"), None
        if "BootSourceOverrideTarget" in boot and "BootSourceOverrideEnabled" not in boot \
                and b.boot_enabled == "Disabled":
            enabled = "Once"
        b.boot_target, b.boot_enabled = target, enabled
        b.version += 1
        return 204, None, {"ETag": b.etag()}

    def reset(self, body):
        farm, b = self.farm, self.bmc
        try:
            doc = json.loads(body or b"null")
        except ValueError:
            doc = None
        kind = doc.get("ResetType") if isinstance(doc, dict) else None
        if kind not in RESET_TYPES:
            farm.count("400 reset")
            return 400, error("ResetType must be one of %s" % ", ".join(RESET_TYPES)), None
        farm.count("POST reset %s" % kind)
        if kind in ("ForceOff", "GracefulShutdown"):
            b.power = "Off"
        else:
            was = b.power
            b.power = "On"
            if (kind == "ForceRestart" or was == "Off") and b.boot_enabled == "Once":
                b.boot_enabled, b.boot_target = "Disabled", "None"
        b.version += 1
        return 204, None, None


def not_allowed(farm, allow):
    farm.count("405")
    return 405, error("method not allowed; this resource takes %s" % allow), {"Allow": allow}


def error(message):
    return {"error": {"code": "Base.1.8.GeneralError", "message": message,
                      "@Message.ExtendedInfo": [{"MessageId": "Base.1.8.GeneralError",
                                                 "Message": message}]}}


async def serve(farm):
    args = farm.args
    loop = asyncio.get_running_loop()
    power = {"alternate": lambda i: "On" if i % 2 else "Off",
             "on": lambda i: "On", "off": lambda i: "Off"}[args.power]
    farm.bmcs = [Bmc(i, power(i)) for i in range(args.count)]
    servers = []
    for b in farm.bmcs:
        addr = address(args.net, b.index)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((addr, args.port))
        except OSError as e:
            sock.close()
            for s in servers:
                s.close()
            print("redfish_farm: cannot listen on %s:%d: %s" % (addr, args.port, e.strerror),
                  file=sys.stderr, flush=True)
            return 2
        sock.listen(args.backlog)
        sock.setblocking(False)
        servers.append(await loop.create_server(lambda b=b: Conn(farm, b), sock=sock))
    if args.list:
        tmp = args.list + ".tmp"
        with open(tmp, "w") as f:
            for b in farm.bmcs:
                f.write("http://%s:%d\n" % (address(args.net, b.index), args.port))
        os.replace(tmp, args.list)
    loop.call_later(1.0, farm.sweep_idle)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, farm.report, "running")
    print("redfish_farm: ready: %d BMCs on %s ... %s, port %d, pid %d, sessions %s" % (
        args.count, address(args.net, 0), address(args.net, args.count - 1), args.port,
        os.getpid(), "on" if args.sessions else "off"), flush=True)
    await stop.wait()
    for s in servers:
        s.close()
    farm.report("stopped")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=1000, help="BMCs (default 1000)")
    p.add_argument("--port", type=int, default=8000, help="the port of every BMC (default 8000)")
    p.add_argument("--net", type=int, default=77, help="BMC i is 127.NET.(i//250).(i%%250+1)")
    p.add_argument("--username", default="admin")
    p.add_argument("--password", default="password")
    p.add_argument("--no-sessions", dest="sessions", action="store_false",
                   help="no SessionService: Basic auth only (as sushy-tools)")
    p.add_argument("--power", choices=["alternate", "on", "off"], default="alternate",
                   help="initial power: alternate (odd On, even Off), on, off")
    p.add_argument("--max-connections", type=int, default=2048)
    p.add_argument("--max-sessions", type=int, default=64, help="per BMC")
    p.add_argument("--session-timeout", type=float, default=1800.0, help="idle seconds")
    p.add_argument("--idle", type=float, default=60.0, help="idle seconds before a close")
    p.add_argument("--backlog", type=int, default=64)
    p.add_argument("--list", help="write the BMCs' addresses here once all listen")
    args = p.parse_args()
    if not 1 <= args.count <= 256 * PER_BLOCK or not 0 <= args.net <= 255 \
            or not 1 <= args.port <= 65535:
        p.error("--count 1..%d, --net 0..255, --port 1..65535" % (256 * PER_BLOCK))
    # One descriptor per listener and per connection, and a few for the interpreter.
    want = args.count + args.max_connections + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        if new < want:
            args.max_connections = max(16, new - args.count - 64)
            print("redfish_farm: only %d file descriptors; at most %d connections" % (
                new, args.max_connections), file=sys.stderr, flush=True)
    farm = Farm(args)
    farm.bmcs = []
    try:
        sys.exit(asyncio.run(serve(farm)))
    except KeyboardInterrupt:
        farm.report("interrupted")


if __name__ == "__main__":
    main()
