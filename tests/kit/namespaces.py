"""Private PID namespaces for tests that signal real processes (``unshare --pid --fork
--mount-proc``: PID 1 is a process of the test, and nothing outside the namespace can be
signalled by mistake), and a PID 1 for them that reaps like a container's init does."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def problem() -> str | None:
    """Why a PID namespace cannot be made here (None: it can)."""
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        return "unshare/nsenter (util-linux) are not installed"
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"cannot create a PID namespace here: {probe.stderr.strip()}"
    return None


def as_pid_1(code: str, args: Sequence[str] = (), env: Mapping[str, str] | None = None,
             timeout: float = 300, context: str = "") -> dict[str, Any]:
    """Run ``code`` (with ``args``) as PID 1 of a fresh PID namespace, which ends with it
    (--kill-child); it prints one JSON object as its last line. ``context``: more to show if
    it fails (the logs of what it ran)."""
    why = problem()
    if why is not None:
        pytest.skip(why)
    run = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
                          sys.executable, "-c", code, *args], capture_output=True, text=True,
                         env=None if env is None else dict(env), cwd=REPO, timeout=timeout,
                         check=False)
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-5000:] + context
    doc = json.loads(run.stdout.splitlines()[-1])
    assert isinstance(doc, dict)
    return doc


# The start of a PID 1 script (the scenario follows it): an init that reaps the processes left
# to it, but every 0.5 s (a poll, not on SIGCHLD), so the gap between a process's exit and its
# reaping is wide open. It waits itself for what it starts with start(..., waited=True) (the
# ascendpatch runs, whose exit codes it needs).
REAPER = r"""
import json, os, socket, subprocess, sys, threading, time
from pathlib import Path
lock, mine = threading.Lock(), set()
def reap():
    while True:
        time.sleep(0.5)
        with lock:
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit() or int(entry.name) in mine:
                    continue
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if fields[0] == "Z" and fields[1] == "1":
                    try:  # (reaped meanwhile by a Popen of the driver's: nothing to do)
                        os.waitpid(int(entry.name), 0)
                    except ChildProcessError:
                        pass
threading.Thread(target=reap, daemon=True).start()
def start(argv, waited=False, **kw):  # waited: the driver waits for it (the init does not)
    with lock:
        proc = subprocess.Popen(argv, **kw)
        if waited:
            mine.add(proc.pid)
    return proc
def alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
def wait_for(predicate):
    for _ in range(400):
        if predicate():
            return
        time.sleep(0.05)
    raise SystemExit("timed out")
def free_port():
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return probe.getsockname()[1]
def ap(*args):
    run = start([sys.executable, "-m", "ascendpatch", *args], waited=True,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = run.communicate()[0]
    return {"code": run.returncode, "out": out}
"""
