"""`ascendpatch stop` against real process trees spawned by the test."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ascendpatch.deploy import procs
from tests.kit import run_process

GRANDCHILD = r"""
import ctypes, time
# what setproctitle("VLLM::EngineCore") leaves in comm: the kernel keeps 15 characters
ctypes.CDLL(None).prctl(15, b"VLLM::EngineCore", 0, 0, 0)
time.sleep(300)
"""
LAUNCHER = r"""
import subprocess, sys
g = subprocess.Popen([sys.executable, "-c", sys.argv[1]], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(g.pid, flush=True)
"""  # exits at once: the grandchild is re-parented (its own session, out of the group)
ROOT = r"""
import json, subprocess, sys, time
ignore = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
zombie = subprocess.Popen([sys.executable, "-c", "pass"])  # never waited for: a zombie
out = subprocess.run([sys.executable, "-c", sys.argv[2], sys.argv[3]], capture_output=True,
                     text=True, check=True).stdout
json.dump({"ignore": ignore.pid, "zombie": zombie.pid, "grandchild": int(out)},
          open(sys.argv[1], "w"))
time.sleep(300)
"""


def _wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def _ended(pid: int) -> bool:
    """Exited: a zombie waiting for its parent, or already reaped."""
    proc = procs.read(pid)
    return proc is None or proc.zombie


@pytest.mark.parametrize("how", ["pid", "pidfile"])
def test_stop_leaves_nothing_running(tmp_path: Path, how: str) -> None:
    info = tmp_path / "pids.json"
    root = subprocess.Popen([sys.executable, "-c", ROOT, str(info), LAUNCHER, GRANDCHILD],
                            start_new_session=True)
    try:
        _wait_for(info.exists)
        _wait_for(lambda: info.stat().st_size > 0)
        pids = json.loads(info.read_text())
        _wait_for(lambda: _ended(pids["zombie"]))
        _wait_for(lambda: getattr(procs.read(pids["grandchild"]), "comm", "") ==
                  "VLLM::EngineCor")
        grandchild = procs.read(pids["grandchild"])
        assert grandchild is not None
        assert grandchild.sid != root.pid  # escaped the group: only the title finds it

        if how == "pid":
            result = run_process("stop", "--pid", str(root.pid), "--grace", "1")
        else:
            pidfile = tmp_path / "server.pid"
            pidfile.write_text(f"{root.pid}\n")
            result = run_process("stop", "--pidfile", pidfile, "--grace", "1")
        assert result.code == 0, result.out + result.err
        out = result.out
        assert f"sent TERM to process group {root.pid}" in out
        assert f"PID {pids['ignore']}" in out and "ignored TERM for 1s: sending KILL" in out
        assert f"leftover vLLM process PID {pids['grandchild']} (VLLM::EngineCor)" in out
        assert "[OK] no process of the server and no vLLM process is running" in out
        for name in ("ignore", "grandchild"):
            assert not procs.running(pids[name]), name
        assert not procs.running(root.pid)
        zombie = procs.read(pids["zombie"])
        assert zombie is None or zombie.zombie
    finally:
        with contextlib.suppress(ProcessLookupError):
            root.kill()
        root.wait(timeout=10)


def test_zombie_is_reported_with_its_parent(tmp_path: Path) -> None:
    """A zombie counts as ended; only its parent can reap it, so the parent is named."""
    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys, time\n"
                               "z = subprocess.Popen([sys.executable, '-c', "
                               "'import ctypes; ctypes.CDLL(None).prctl(15, b\"VLLM::Worker_TP0\","
                               " 0, 0, 0)'])\n"
                               "print(z.pid, flush=True)\n"
                               "time.sleep(300)"], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        assert parent.stdout is not None
        zombie_pid = int(parent.stdout.readline())
        _wait_for(lambda: _ended(zombie_pid))
        result = run_process("stop", "--pid", str(zombie_pid), "--grace", "0.5")
        assert result.code == 0, result.out
        assert (f"PID {zombie_pid} (VLLM::Worker_TP) is a zombie (state Z): it has ended and "
                f"holds no memory; only its parent PID {parent.pid}") in result.out
    finally:
        parent.kill()
        parent.wait(timeout=10)


def test_refuses_to_stop_itself() -> None:
    import os

    result = run_process("stop", "--pid", str(os.getpid()))
    assert result.code == 1 and "refusing to stop it" in result.out


def test_npu_smi_table_is_shown_afterwards(tmp_path: Path) -> None:
    """Where npu-smi exists its process table follows (STAND-IN npu-smi printing the real
    table layout recorded in vllm-ascend #12980: no NPU here)."""
    fake = tmp_path / "bin" / "npu-smi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\ncat <<'TABLE'\n"
                    "| NPU     Chip | Process id | Process name | Process memory(MB) |\n"
                    "| No running processes found in NPU 0 |\n"
                    "TABLE\n")
    fake.chmod(0o755)
    import os

    result = run_process("stop", "--pid", "999999", "--grace", "0",
                         env={"PATH": f"{fake.parent}:{os.environ['PATH']}"})
    assert result.code == 0, result.out
    assert "npu-smi info afterwards:" in result.out
    assert "No running processes found in NPU 0" in result.out


def test_another_live_server_is_left_alone(tmp_path: Path) -> None:
    """Stopping one server must not kill a second server's EngineCore (its parent is alive)."""
    other = subprocess.Popen([sys.executable, "-c",
                              "import subprocess, sys, time\n"
                              "c = subprocess.Popen([sys.executable, '-c', " + repr(GRANDCHILD) +
                              "])\nprint(c.pid, flush=True)\ntime.sleep(300)"],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    first = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                             start_new_session=True)
    try:
        assert other.stdout is not None
        engine = int(other.stdout.readline())
        _wait_for(lambda: getattr(procs.read(engine), "comm", "") == "VLLM::EngineCor")
        result = run_process("stop", "--pid", str(first.pid), "--grace", "1")
        assert result.code == 0, result.out
        assert procs.running(engine), "the other server's EngineCore was stopped"
        assert not procs.running(first.pid)
        swept = run_process("stop", "--all-vllm", "--grace", "1")
        assert swept.code == 0 and not procs.running(engine)
    finally:
        for proc in (other, first):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(timeout=10)
