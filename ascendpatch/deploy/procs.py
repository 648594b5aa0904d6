"""Processes from /proc: state (a zombie, state Z, has ended whatever `kill -0` says), parent,
group, session, owner, title. vLLM titles its processes VLLM::EngineCore / VLLM::Worker...
(setproctitle); the kernel truncates comm to 15 characters ("VLLM::EngineCor"), so both comm
and cmdline count. The API server itself is ``vllm serve`` (a python running the ``vllm``
console script, or ``-m vllm.entrypoints...``)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ascendpatch.deploy.text import printable

PROC = Path("/proc")
VLLM_TITLES = ("VLLM::",)
_SERVER_MODULES = ("vllm.entrypoints", "vllm_omni.entrypoints")


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    comm: str
    cmdline: str  # NUL-separated argv
    uid: int
    start: int = 0  # start time in clock ticks after boot: with the pid, the process's identity

    @property
    def zombie(self) -> bool:
        return self.state == "Z"

    @property
    def argv(self) -> list[str]:
        return self.cmdline.split("\0") if self.cmdline else []

    @property
    def title(self) -> str:
        """What ps shows: the vLLM title where there is one (cmdline or the 15-char comm),
        with control characters escaped (any process can set its title)."""
        first = self.cmdline.split("\0")[0]
        if first.startswith(VLLM_TITLES) or not self.comm.startswith(VLLM_TITLES):
            return printable(first or self.comm)
        return printable(self.comm)

    @property
    def is_vllm(self) -> bool:
        """An engine or worker process (VLLM::... title)."""
        return self.comm.startswith(VLLM_TITLES) or self.cmdline.startswith(VLLM_TITLES)

    @property
    def is_vllm_server(self) -> bool:
        """``vllm serve`` / the OpenAI API server module, or any VLLM:: titled process."""
        if self.is_vllm:
            return True
        argv = self.argv
        for index, arg in enumerate(argv[:4]):
            if Path(arg).name == "vllm" and argv[index + 1:index + 2] == ["serve"]:
                return True
        return any(arg.startswith(_SERVER_MODULES) for arg in argv[:4])


def _parse(pid: int, stat: str, cmdline: bytes, uid: int) -> Proc | None:
    try:
        comm = stat[stat.index("(") + 1: stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        return Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]), fields[0], comm,
                    cmdline.decode(errors="replace").rstrip("\0"), uid, int(fields[19]))
    except (ValueError, IndexError):
        return None


def namespace_problem() -> str | None:
    """Why /proc is not this process's own PID namespace, or None when it is. A shell that
    joined only a container's mount namespace sees the container's /proc, whose PID numbers
    are not the ones ``kill`` reaches: every signal would hit another process."""
    try:
        seen = int(str((PROC / "self").readlink()))
    except (OSError, ValueError):
        return "/proc/self does not resolve"
    if seen != os.getpid():
        return f"/proc/self is PID {seen}, this process is PID {os.getpid()}"
    return None


def read(pid: int) -> Proc | None:
    if pid <= 0:
        return None
    base = PROC / str(pid)
    try:
        stat = (base / "stat").read_text()
        cmdline = (base / "cmdline").read_bytes()
        uid = base.stat().st_uid
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return _parse(pid, stat, cmdline, uid)


def all_procs() -> list[Proc]:
    found = []
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            proc = read(int(entry.name))
            if proc is not None:
                found.append(proc)
    return found


def same(proc: Proc) -> Proc | None:
    """``proc`` as it is now, or None when it has ended or its PID now names another process
    (a recycled PID has another start time)."""
    now = read(proc.pid)
    return now if now is not None and now.start == proc.start else None


def started_at(proc: Proc) -> float:
    """When ``proc`` started, in seconds since the epoch (never later than the truth: the boot
    time in /proc/stat is whole seconds, rounded down)."""
    boot = next(int(line.split()[1]) for line in (PROC / "stat").read_text().splitlines()
                if line.startswith("btime "))
    return boot + proc.start / os.sysconf("SC_CLK_TCK")


def descendants(root: int, procs: Iterable[Proc]) -> set[int]:
    children: dict[int, list[int]] = {}
    for proc in procs:
        children.setdefault(proc.ppid, []).append(proc.pid)
    out: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def ancestors(pid: int) -> set[int]:
    """This process and its ancestors: never signalled."""
    out = set()
    proc = read(pid)
    while proc is not None and proc.pid not in out and proc.pid > 0:
        out.add(proc.pid)
        proc = read(proc.ppid)
    return out


def has_live_server_ancestor(proc: Proc, table: Mapping[int, Proc]) -> bool:
    """Whether a live (not zombie) ``vllm serve`` or VLLM:: process is an ancestor of ``proc``:
    then ``proc`` belongs to a running server, whatever the parent's PID (in a container the
    server itself is often PID 1)."""
    seen = {proc.pid}
    parent = table.get(proc.ppid)
    while parent is not None and parent.pid not in seen:
        if parent.is_vllm_server and not parent.zombie:
            return True
        seen.add(parent.pid)
        parent = table.get(parent.ppid)
    return False


def reaps_children(proc: Proc) -> bool:
    """Whether ``proc`` handles SIGCHLD (a handler, blocked for signalfd / sigtimedwait as
    systemd and tini do, or ignored so that the kernel reaps): an init that does reaps the
    processes re-parented to it. ``tail -f /dev/null`` or ``sleep infinity`` as a container's
    PID 1 does not, and every zombie left to it stays until the container ends."""
    try:
        status = (PROC / str(proc.pid) / "status").read_text()
    except OSError:
        return False
    masks = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("SigBlk", "SigIgn", "SigCgt"):
            masks[key] = int(value.strip() or "0", 16)
    chld = 1 << (signal.SIGCHLD - 1)
    return any(mask & chld for mask in masks.values())


# ---------------------------------------------------------------------------- sockets
# What ``ss -ltnp`` does: the kernel's TCP tables name each listening socket's inode, and a
# process holds the socket when one of its /proc/PID/fd links reads ``socket:[INODE]``.

TCP_LISTEN = "0A"


def listener(line: str) -> tuple[int, int] | None:
    """(port, inode) of a LISTEN line of /proc/net/tcp or tcp6, else None. Fields: sl,
    local_address (hex ADDR:PORT), rem_address, st, tx:rx queue, tr:when, retrnsmt, uid,
    timeout, inode."""
    fields = line.split()
    if len(fields) < 10 or fields[3] != TCP_LISTEN or ":" not in fields[1]:
        return None
    try:
        return int(fields[1].rsplit(":", 1)[1], 16), int(fields[9])
    except ValueError:
        return None


def listening_inodes(port: int) -> set[int]:
    """The inodes of the TCP sockets listening on ``port``, IPv4 and IPv6."""
    found = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:  # no IPv6 in this kernel or namespace
            continue
        for line in lines:
            entry = listener(line)
            if entry is not None and entry[0] == port and entry[1] > 0:
                found.add(entry[1])
    return found


def socket_holders(inodes: set[int]) -> set[int]:
    """The PIDs holding any of the sockets ``inodes`` (only processes whose fd folder we may
    read: our own, or every one as root)."""
    wanted = {f"socket:[{inode}]" for inode in inodes}
    holders = set()
    for entry in PROC.iterdir():
        if entry.name.isdigit() and wanted & _fd_links(entry / "fd"):
            holders.add(int(entry.name))
    return holders


def _fd_links(folder: Path) -> set[str]:
    try:
        fds = list(folder.iterdir())
    except OSError:  # another user's process, or it ended
        return set()
    links = set()
    for fd in fds:
        try:
            links.add(str(fd.readlink()))
        except OSError:
            continue
    return links
