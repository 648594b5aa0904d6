"""Processes from /proc: state (a zombie, state Z, has ended whatever `kill -0` says), parent,
group, title. vLLM titles its processes VLLM::EngineCore / VLLM::Worker... (setproctitle); the
kernel truncates comm to 15 characters ("VLLM::EngineCor"), so both comm and cmdline count."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
VLLM_TITLES = ("VLLM::",)


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    comm: str
    cmdline: str
    uid: int

    @property
    def zombie(self) -> bool:
        return self.state == "Z"

    @property
    def title(self) -> str:
        """What ps shows: the vLLM title where there is one (cmdline or the 15-char comm)."""
        first = self.cmdline.split("\0")[0]
        if first.startswith(VLLM_TITLES) or not self.comm.startswith(VLLM_TITLES):
            return first or self.comm
        return self.comm

    @property
    def is_vllm(self) -> bool:
        return self.comm.startswith(VLLM_TITLES) or self.cmdline.startswith(VLLM_TITLES)


def read(pid: int) -> Proc | None:
    base = PROC / str(pid)
    try:
        stat = (base / "stat").read_text()
        cmdline = (base / "cmdline").read_bytes().decode(errors="replace")
        uid = base.stat().st_uid
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    comm = stat[stat.index("(") + 1: stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2:].split()
    return Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]), fields[0], comm,
                cmdline.rstrip("\0"), uid)


def all_procs() -> list[Proc]:
    found = []
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            proc = read(int(entry.name))
            if proc is not None:
                found.append(proc)
    return found


def running(pid: int) -> bool:
    proc = read(pid)
    return proc is not None and not proc.zombie


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
    while proc is not None and proc.pid not in out and proc.pid > 1:
        out.add(proc.pid)
        proc = read(proc.ppid)
    return out


def own_group() -> int:
    return os.getpgid(0)
