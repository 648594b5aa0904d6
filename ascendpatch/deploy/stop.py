"""Stop a vLLM server safely (field note 003 pitfall 2; vllm-ascend #9888; vLLM #55510).

TERM the server's whole process group (or, when it is no group leader, each process of its
tree), wait, KILL what is left; then find leftover vLLM processes by title (EngineCore and
workers re-parented when their API server died) and stop them too. A zombie has ended: it holds
no memory, and only its parent can reap it, so the parent is named. Where `npu-smi` exists, the
per-NPU process table is shown afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ascendpatch.deploy import procs


@dataclass
class StopReport:
    events: list[tuple[str, str]] = field(default_factory=list)  # (level, text)
    survivors: list[procs.Proc] = field(default_factory=list)
    zombies: list[procs.Proc] = field(default_factory=list)
    npu_smi: str | None = None

    def say(self, level: str, text: str) -> None:
        self.events.append((level, text))


def _signal(pids: Iterable[int], sig: signal.Signals, protected: set[int]) -> None:
    for pid in pids:
        if pid in protected:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _wait(pids: Iterable[int], seconds: float, sleep: Callable[[float], None]) -> set[int]:
    """Wait until none of ``pids`` runs (zombies count as ended); returns those still running."""
    deadline = time.monotonic() + seconds
    left = {p for p in pids if procs.running(p)}
    while left and time.monotonic() < deadline:
        sleep(0.05)
        left = {p for p in left if procs.running(p)}
    return left


def _describe(proc: procs.Proc) -> str:
    return f"PID {proc.pid} ({proc.title})"


def _stop_tree(root: int, grace: float, report: StopReport, protected: set[int],
               sleep: Callable[[float], None]) -> set[int]:
    snapshot = procs.all_procs()
    tree = {root} | procs.descendants(root, snapshot)
    leader = procs.read(root)
    group = set()
    if leader is not None and leader.pgid == root and root != procs.own_group():
        group = {p.pid for p in snapshot if p.pgid == root}
        with contextlib.suppress(ProcessLookupError):
            os.killpg(root, signal.SIGTERM)
        report.say("OK", f"sent TERM to process group {root} ({len(group)} process(es))")
    members = tree | group
    _signal(members, signal.SIGTERM, protected)
    left = _wait(members, grace, sleep)
    for pid in sorted(left):
        proc = procs.read(pid)
        if proc is not None:
            report.say("WARN", f"{_describe(proc)} ignored TERM for {grace:g}s: sending KILL")
    if left:
        if group:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(root, signal.SIGKILL)
        _signal(left, signal.SIGKILL, protected)
        _wait(left, 2.0, sleep)
    return members


def _is_leftover(proc: procs.Proc, scope: set[int], everything: bool) -> bool:
    """A vLLM process left behind: of the stopped server's session or group, or re-parented to
    PID 1 because its API server died (vLLM #55510). Another live server's EngineCore has a
    live parent and is left alone, unless --all-vllm."""
    if everything:
        return True
    return proc.sid in scope or proc.pgid in scope or proc.ppid <= 1 or \
        procs.read(proc.ppid) is None


def _stop_leftovers(grace: float, report: StopReport, protected: set[int],
                    sleep: Callable[[float], None], scope: set[int],
                    everything: bool) -> set[int]:
    uid = os.getuid()
    leftovers = [p for p in procs.all_procs()
                 if p.is_vllm and not p.zombie and p.uid == uid and p.pid not in protected
                 and _is_leftover(p, scope, everything)]
    for proc in leftovers:
        report.say("WARN", f"leftover vLLM process {_describe(proc)}, parent PID {proc.ppid}: "
                           "stopping it")
    pids = {p.pid for p in leftovers}
    _signal(pids, signal.SIGTERM, protected)
    left = _wait(pids, grace, sleep)
    _signal(left, signal.SIGKILL, protected)
    _wait(left, 2.0, sleep)
    return pids


def stop(pid: int | None, grace: float = 5.0, sleep: Callable[[float], None] = time.sleep,
         everything: bool = False) -> StopReport:
    report = StopReport()
    protected = procs.ancestors(os.getpid())
    touched: set[int] = set()
    scope: set[int] = set()
    root = procs.read(pid) if pid is not None else None
    if root is not None:
        scope = {root.sid, root.pgid} - {procs.own_group(), 0}
    if pid is not None:
        if root is None:
            report.say("OK", f"PID {pid} is not running (already stopped)")
        elif pid in protected:
            report.say("FAIL", f"PID {pid} is this ascendpatch process or one of its parents: "
                               "refusing to stop it")
            return report
        else:
            touched |= _stop_tree(pid, grace, report, protected, sleep)
    touched |= _stop_leftovers(grace, report, protected, sleep, scope, everything)
    for p in sorted(touched):
        proc = procs.read(p)
        if proc is None:
            continue
        if proc.zombie:
            report.zombies.append(proc)
        else:
            report.survivors.append(proc)
    report.npu_smi = npu_smi()
    return report


def npu_smi() -> str | None:
    tool = shutil.which("npu-smi")
    if tool is None:
        return None
    try:
        out = subprocess.run([tool, "info"], capture_output=True, text=True, timeout=30,
                             check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    rows = [line for line in out.splitlines() if "Process" in line or "|" in line]
    return "\n".join(rows[-20:])
