"""Stop a vLLM server safely (leftover workers keep NPU memory: vllm-ascend #9888; vLLM #55510).

What belongs to the server: its descendants, its session when it leads one, its process group
when it leads one. Never PID 1, never this process or its ancestors, never another user's
process unless ``force_user``. Each member is TERMed, then KILLed after the grace period.

Leftovers are vLLM processes (VLLM::EngineCore / VLLM::Worker titles) of the stopped server's
session or group, or orphans: processes with no live ``vllm serve`` ancestor, re-parented to the
init process because their API server died. A process with a live server ancestor belongs to
that server, even when the server is PID 1 (a container running ``vllm serve`` as its entry
point): it is left alone unless ``everything`` (``--all-vllm``).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ascendpatch.deploy import procs
from ascendpatch.results import Level

PID_MAX_LIMIT = 1 << 22  # the kernel's ceiling for /proc/sys/kernel/pid_max
STALE_SLACK = 1.0  # seconds: the clock-tick start time against the pid file's mtime
REAP_WAIT = 3.0  # seconds a parent gets to reap a process that just exited


@dataclass
class StopReport:
    events: list[tuple[Level, str]] = field(default_factory=list)
    survivors: list[procs.Proc] = field(default_factory=list)
    zombies: list[procs.Proc] = field(default_factory=list)  # persisting ones
    remaining: list[procs.Proc] = field(default_factory=list)  # not signalled, running
    denied: set[int] = field(default_factory=set)  # a signal failed with EPERM
    seen: dict[int, procs.Proc] = field(default_factory=dict)  # as found: pid -> identity
    npu_smi: str | None = None
    refused: bool = False

    def say(self, level: Level, text: str) -> None:
        self.events.append((level, text))


@dataclass(frozen=True)
class Policy:
    """Who may be signalled."""

    protected: frozenset[int]  # this process and its ancestors
    uid: int
    force_user: bool

    def allows(self, proc: procs.Proc) -> bool:
        return (proc.pid > 1 and proc.pid not in self.protected
                and (self.force_user or proc.uid == self.uid))


def _send(proc: procs.Proc, sig: signal.Signals) -> None:
    """Signal ``proc`` only while its PID still names it. A pidfd pins the process between the
    identity check and the signal, so a PID recycled after discovery is never signalled."""
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return
    except OSError as exc:  # pragma: no cover - kernels before 5.3 have no pidfd
        if exc.errno != errno.ENOSYS:
            raise
        if procs.same(proc) is not None:
            os.kill(proc.pid, sig)
        return
    try:
        if procs.same(proc) is not None:
            signal.pidfd_send_signal(fd, sig)
    finally:
        os.close(fd)


def _signal(pids: Iterable[int], sig: signal.Signals, policy: Policy,
            report: StopReport) -> None:
    for pid in pids:
        seen = report.seen.get(pid)
        proc = procs.same(seen) if seen is not None else None  # checked again right before
        if proc is None or not policy.allows(proc):
            continue
        try:
            _send(proc, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            report.denied.add(pid)
        except OSError as exc:  # pragma: no cover - kill(2) has no other documented errno
            if exc.errno != errno.ESRCH:
                raise


def _wait(pids: Iterable[int], seconds: float, sleep: Callable[[float], None],
          report: StopReport) -> set[int]:
    """Wait until none of ``pids`` runs (zombies and recycled PIDs count as ended); returns
    those still running."""
    def running(pid: int) -> bool:
        seen = report.seen.get(pid)
        now = procs.same(seen) if seen is not None else None
        return now is not None and not now.zombie

    deadline = time.monotonic() + seconds
    left = {p for p in pids if running(p)}
    while left and time.monotonic() < deadline:
        sleep(0.05)
        left = {p for p in left if running(p)}
    return left


def _describe(proc: procs.Proc) -> str:
    return f"PID {proc.pid} ({proc.title})"


def members(root: procs.Proc, table: Iterable[procs.Proc]) -> set[int]:
    """The server's processes: descendants, plus its session and group when it leads them."""
    snapshot = list(table)
    out = {root.pid} | procs.descendants(root.pid, snapshot)
    for proc in snapshot:
        if (root.sid == root.pid and proc.sid == root.pid) or \
                (root.pgid == root.pid and proc.pgid == root.pid):
            out.add(proc.pid)
    return out


def _allowed(found: Iterable[procs.Proc], policy: Policy, report: StopReport) -> set[int]:
    out = set()
    for proc in found:
        if proc.zombie:
            continue
        if policy.allows(proc):
            out.add(proc.pid)
            report.seen[proc.pid] = proc
        elif proc.pid > 1 and proc.pid not in policy.protected:
            report.say(Level.WARN, f"{_describe(proc)} belongs to uid {proc.uid}, not to you: "
                               "left alone (--force-user to stop it too)")
    return out


def _tree(root: procs.Proc, exclude: set[int]) -> list[procs.Proc]:
    """The server's processes as they are now (none when the server's PID is gone or
    recycled)."""
    snapshot = procs.all_procs()
    table = {p.pid: p for p in snapshot}
    now = table.get(root.pid)
    if now is None or now.start != root.start:
        return []
    return [table[p] for p in sorted(members(now, snapshot) - exclude) if p in table]


def _stop_tree(root: procs.Proc, grace: float, report: StopReport, policy: Policy,
               sleep: Callable[[float], None]) -> set[int]:
    report.seen[root.pid] = root
    targets = _allowed(_tree(root, set()), policy, report)
    report.say(Level.OK, f"sent TERM to {_describe(root)} and {max(len(targets) - 1, 0)} "
                     "process(es) of its tree, session and group")
    _signal(targets, signal.SIGTERM, policy, report)
    left = _wait(targets, grace, sleep, report)
    # children forked while it shut down belong to it as well
    late = _allowed(_tree(root, targets), policy, report)
    for pid in sorted(left):
        proc = procs.same(report.seen[pid])
        if proc is not None:
            report.say(Level.WARN, f"{_describe(proc)} ignored TERM for {grace:g}s: sending KILL")
    left |= late
    if left:
        _signal(left, signal.SIGKILL, policy, report)
        _wait(left, 2.0, sleep, report)
    return targets | late


def is_leftover(proc: procs.Proc, table: dict[int, procs.Proc], server: int | None,
                everything: bool) -> bool:
    """A vLLM process left behind: of the stopped server's session or group, or an orphan with
    no live server above it. Never decided by PID 1 being its parent."""
    if everything:
        return True
    if server is not None and server in (proc.sid, proc.pgid):
        return True
    if procs.has_live_server_ancestor(proc, table) or in_init_session(proc, table):
        return False
    parent = table.get(proc.ppid)
    return parent is None or parent.pid == 1  # re-parented to init (or a parent outside)


def in_init_session(proc: procs.Proc, table: dict[int, procs.Proc]) -> bool:
    """A child of PID 1 in PID 1's own session or group: in a container whose entry point
    serves (a custom ``python serve.py``, not recognisable as ``vllm serve``), that is the
    live server's EngineCore, not an orphan. An orphan re-parented to PID 1 keeps the session of
    the server that started it (``docker exec`` starts a new one)."""
    init = table.get(1)
    return (proc.ppid == 1 and init is not None and not init.zombie
            and 1 in (proc.sid, proc.pgid))


def _orphan_trees(snapshot: list[procs.Proc], table: dict[int, procs.Proc],
                  policy: Policy, server: int | None, everything: bool) -> list[procs.Proc]:
    """The leftover vLLM processes and everything below them, parents first: an orphaned
    EngineCore's Worker is part of the orphan's tree, not of a live server, although its
    parent is a live VLLM:: process (the one this run stops)."""
    roots = [p for p in snapshot if p.is_vllm and not p.zombie and p.pid > 1
             and p.pid not in policy.protected and is_leftover(p, table, server, everything)]
    tree = {p.pid for p in roots}
    for root in roots:
        tree |= procs.descendants(root.pid, snapshot)
    return [table[p] for p in sorted(tree) if not table[p].zombie and p > 1
            and p not in policy.protected]


def _spared(snapshot: list[procs.Proc], table: dict[int, procs.Proc], tree: set[int],
            policy: Policy, report: StopReport) -> None:
    """Say why each other vLLM process is left alone."""
    for proc in snapshot:
        if not proc.is_vllm or proc.zombie or proc.pid <= 1 or proc.pid in tree \
                or proc.pid in policy.protected:
            continue
        report.say(Level.SKIP, f"{_describe(proc)} {_owner(proc, table)}: left alone (--all-vllm "
                               "to stop it too)")


def _owner(proc: procs.Proc, table: dict[int, procs.Proc]) -> str:
    """Whose live process ``proc`` is (it is no leftover)."""
    if procs.has_live_server_ancestor(proc, table):
        return f"belongs to a live server (parent PID {proc.ppid})"
    if in_init_session(proc, table):
        return f"is in the session of PID 1 ({table[1].title}), which runs"
    parent = table.get(proc.ppid)
    return (f"has a live parent, PID {proc.ppid} ({parent.title if parent else 'unknown'}): an "
            "offline engine, or a server not started as vllm serve")


def _stop_leftovers(grace: float, report: StopReport, policy: Policy,
                    sleep: Callable[[float], None], server: int | None,
                    everything: bool) -> set[int]:
    snapshot = procs.all_procs()
    table = {p.pid: p for p in snapshot}
    tree = _orphan_trees(snapshot, table, policy, server, everything)
    _spared(snapshot, table, {p.pid for p in tree}, policy, report)
    leftovers = []
    for proc in tree:
        if not policy.allows(proc):
            report.say(Level.WARN, f"leftover {_describe(proc)} belongs to uid {proc.uid}, not to "
                                   "you: left alone (--force-user to stop it too)")
        else:
            leftovers.append(proc)
    for proc in leftovers:
        what = "vLLM process" if proc.is_vllm else "process"
        report.say(Level.WARN, f"leftover {what} {_describe(proc)}, parent PID {proc.ppid}: "
                               "stopping it")
        report.seen[proc.pid] = proc
    pids = {p.pid for p in leftovers}
    _signal(pids, signal.SIGTERM, policy, report)
    left = _wait(pids, grace, sleep, report)
    _signal(left, signal.SIGKILL, policy, report)
    _wait(left, 2.0, sleep, report)
    return pids


def _await_reaping(pids: Iterable[int], report: StopReport,
                   sleep: Callable[[float], None]) -> None:
    """Give the parents of processes that just exited a moment to reap them: right after an
    exit a process is a zombie until its parent (often PID 1) calls wait()."""
    def zombie(pid: int) -> bool:
        seen = report.seen.get(pid)
        now = procs.same(seen) if seen is not None else None
        return now is not None and now.zombie

    deadline = time.monotonic() + REAP_WAIT
    left = {p for p in pids if zombie(p)}
    while left and time.monotonic() < deadline:
        sleep(0.05)
        left = {p for p in left if zombie(p)}


def _final_check(report: StopReport, touched: set[int], policy: Policy, server: int | None,
                 everything: bool, sleep: Callable[[float], None]) -> None:
    """Every vLLM process of the server or orphaned as it is now, not only those this run
    signalled: survivors (signalled, still running), zombies that persist, and the rest that
    still runs (another user's, or started meanwhile)."""
    _await_reaping(touched, report, sleep)
    snapshot = procs.all_procs()
    table = {p.pid: p for p in snapshot}
    for proc in snapshot:
        seen = report.seen.get(proc.pid)
        ours = proc.pid in touched and seen is not None and seen.start == proc.start
        if not ours and not (proc.is_vllm and proc.pid > 1 and proc.pid not in policy.protected
                             and is_leftover(proc, table, server, everything)):
            continue
        if proc.zombie:
            report.zombies.append(proc)
        elif ours:
            report.survivors.append(proc)
        else:
            report.remaining.append(proc)


def policy_for_self(force_user: bool = False) -> Policy:
    return Policy(frozenset(procs.ancestors(os.getpid())), os.getuid(), force_user)


def _stale(root: procs.Proc, written: float) -> bool:
    """Whether ``root`` started after its pid file was last written: then the server that
    wrote it is gone and its PID was recycled for another process."""
    return procs.started_at(root) > written + STALE_SLACK


def _refuse(report: StopReport, text: str) -> StopReport:
    report.say(Level.FAIL, text)
    report.refused = True
    return report


def server_on_port(port: int, report: StopReport) -> int | None:
    """The PID of the server listening on TCP ``port`` (the topmost process holding the
    listening socket: forked children inherit it), or None: nothing listens there, or the
    listener may not be stopped (``report.refused``)."""
    inodes = procs.listening_inodes(port)
    if not inodes:
        report.say(Level.OK, f"nothing listens on port {port}: no server to stop there")
        return None
    holders = {p.pid: p for p in map(procs.read, procs.socket_holders(inodes)) if p is not None}
    roots = sorted((p for p in holders.values() if p.ppid not in holders),
                   key=lambda p: p.pid)
    if not roots:
        _refuse(report, f"a socket listens on port {port}, but no process whose files you may "
                        "read holds it (another user's server?): nothing was signalled; run "
                        "stop as that user or as root")
        return None
    if len(roots) > 1:
        names = ", ".join(_describe(p) for p in roots)
        _refuse(report, f"several unrelated processes listen on port {port} ({names}): nothing "
                        "was signalled; stop the one you mean with --pid")
        return None
    root = roots[0]
    if root.pid == 1:
        _refuse(report, f"{_describe(root)} listening on port {port} is PID 1, the init process "
                        "(in a container, the container itself): refusing to stop it; stop or "
                        "restart the container instead")
    elif not root.is_vllm_server:
        _refuse(report, f"{_describe(root)} listens on port {port} and is no vLLM server: "
                        f"refusing to stop it; if it really serves the model, use --pid "
                        f"{root.pid}")
    else:
        report.say(Level.OK, f"{_describe(root)} listens on port {port}")
        return root.pid
    return None


def _check_root(pid: int, policy: Policy, written: float | None,
                report: StopReport) -> procs.Proc | None:
    """The server process ``pid`` as found (None: not running), or a refusal in ``report``."""
    if pid <= 1 or pid >= PID_MAX_LIMIT:
        raise ValueError(f"not a stoppable process id: {pid}")  # the command checks first
    root = procs.read(pid)
    if pid in policy.protected:
        _refuse(report, f"PID {pid} is this ascendpatch process or one of its parents: "
                        "refusing to stop it")
    elif root is None:
        report.say(Level.OK, f"PID {pid} is not running (already stopped)")
    elif root.zombie:
        pass
    elif written is not None and _stale(root, written):
        _refuse(report, f"{_describe(root)} started after the pid file was written: the server "
                        "it names is gone and its PID now belongs to another process: refusing "
                        "to stop it; remove the stale pid file")
    elif not policy.allows(root):
        _refuse(report, f"{_describe(root)} belongs to uid {root.uid}, not to you (uid "
                        f"{policy.uid}): refusing to stop it; if it really is the server, rerun "
                        "with --force-user")
    return root


def stop(pid: int | None, grace: float = 5.0, sleep: Callable[[float], None] = time.sleep,
         everything: bool = False, force_user: bool = False,
         written: float | None = None, port: int | None = None) -> StopReport:
    """Stop server ``pid`` (or the one listening on ``port``) and leftovers; ``written``: when
    the pid file naming it was written (a process started later cannot be the one it
    names)."""
    report = StopReport()
    problem = procs.namespace_problem()
    if problem is not None:
        return _refuse(report, f"/proc belongs to another PID namespace ({problem}): its PID "
                               "numbers are not the ones signals reach, so nothing was "
                               "signalled; run stop inside the server's PID namespace (nsenter "
                               "--pid --mount, or in the container)")
    if port is not None:
        pid = server_on_port(port, report)
        if report.refused:
            return report
    policy = policy_for_self(force_user)
    touched: set[int] = set()
    server: int | None = None
    if pid is not None:
        root = _check_root(pid, policy, written, report)
        if report.refused:
            return report
        if root is not None and root.zombie:  # reported if it persists: its parent may
            report.seen[root.pid] = root      # reap it any moment
            touched.add(root.pid)
        elif root is not None:
            server = pid if pid in (root.sid, root.pgid) else None
            touched |= _stop_tree(root, grace, report, policy, sleep)
    touched |= _stop_leftovers(grace, report, policy, sleep, server, everything)
    _final_check(report, touched, policy, server, everything, sleep)
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
