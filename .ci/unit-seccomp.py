#!/usr/bin/python3
"""Run a command under the system-call filter of a systemd unit, as systemd would run it.

usage: unit-seccomp.py UNIT COMMAND [ARGS...]

Started as root, it first becomes the unit's `User=` (or `nobody` where that user does not
exist), as the service runs: some calls depend on who makes them (SQLite gives a new journal file
its database's owner with `fchown` only when run by root, and `@chown` is denied). COMMAND, and
the files it writes, must be that user's to reach.

The unit's `SystemCallFilter=` lines are read in order as systemd reads them (the first, an allow
list, sets what is allowed; each later `~` line removes, each later plain line adds back) and
every `@group` is expanded by this machine's systemd (`systemd-analyze syscall-filter`), then the
filter is loaded through libseccomp (Debian's python3-seccomp) and COMMAND is executed under it.
A call outside the unit's set kills the process with SIGSYS, whatever `SystemCallErrorNumber=`
says, so a test run under it fails where the installed service would have been refused a call:
the daemon is checked against the unit it ships with, not against a list kept by hand. CI runs
the dashboard's workflows (.ci/pages-chromium.sh) on a daemon started through this.
"""
import os
import pwd
import subprocess
import sys

import seccomp


def members(token, seen):
    """The system calls `token` names: itself, or a group's members, groups expanded."""
    if not token.startswith("@"):
        return {token}
    if token in seen:
        return set()
    seen.add(token)
    out = subprocess.run(
        ["systemd-analyze", "syscall-filter", "--no-pager", token],
        capture_output=True, text=True, check=True,
    ).stdout
    names = set()
    for line in out.splitlines():
        entry = line.strip()
        if line.startswith("    ") and entry and not entry.startswith("#"):
            names |= members(entry, seen)
    return names


def allowed(unit):
    """The set of system calls the unit's filter allows, or None when it has no filter."""
    allow = None
    with open(unit, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("SystemCallFilter="):
                continue
            value = line.split("=", 1)[1].strip()
            if not value:
                allow = None
                continue
            deny = value.startswith("~")
            names = set()
            for token in value.lstrip("~").split():
                names |= members(token, set())
            if allow is None:
                if deny:
                    sys.exit(f"{unit}: a filter that starts with a deny list is not modelled here")
                allow = names
            elif deny:
                allow -= names
            else:
                allow |= names
    return allow


def user_of(unit):
    """The unit's `User=`, or None."""
    with open(unit, encoding="utf-8") as f:
        for line in f:
            if line.startswith("User="):
                return line.split("=", 1)[1].strip()
    return None


def become(name):
    """Drop root for `name`, or for `nobody` when there is no such user."""
    try:
        user = pwd.getpwnam(name)
    except KeyError:
        user = pwd.getpwnam("nobody")
    os.setgroups([])
    os.setgid(user.pw_gid)
    os.setuid(user.pw_uid)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    unit, command = sys.argv[1], sys.argv[2:]
    allow = allowed(unit)
    if allow is None:
        sys.exit(f"{unit}: no SystemCallFilter= to run under")
    if os.geteuid() == 0:
        become(user_of(unit) or "nobody")
    f = seccomp.SyscallFilter(defaction=seccomp.KILL_PROCESS)
    for name in sorted(allow):
        try:
            f.add_rule(seccomp.ALLOW, name)
        except (RuntimeError, ValueError):
            pass  # not a system call of this architecture: systemd skips it too
    f.load()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
