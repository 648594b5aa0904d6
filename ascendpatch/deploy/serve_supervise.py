"""``serve --foreground``: stay with the server as a container's entry point (PID 1) or a
systemd service must.

- TERM, INT and HUP are forwarded to the server's whole process group.
- Every child is reaped: as PID 1 of a container, orphans are re-parented to us; elsewhere we
  become a child subreaper (``PR_SET_CHILD_SUBREAPER``) so that they come to us instead of to
  the host's init.
- When the API server exits, whatever is left of its group (EngineCore, Workers: they outlive
  a killed API server and keep the NPU memory, pit 2) is stopped: TERM, then KILL.
- The exit code is the server's (128 + N when a signal N ended it, as a shell reports it).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from types import FrameType

from ascendpatch.deploy import procs, serve_start

PR_SET_CHILD_SUBREAPER = 36
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def become_subreaper() -> bool:
    """Orphans of our descendants are re-parented to us (PID 1 needs nothing: they already
    are). False where the kernel refuses (it is then the host init's job)."""
    if os.getpid() == 1:
        return True
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return False


class Reaper:
    """Reaps every exited child but the server: its exit code is kept for its Popen and it is
    left a zombie (reaped last, by ``serve_start.stop_group``), which keeps its group's id
    from being reused while the group is signalled."""

    def __init__(self, process: subprocess.Popen[bytes] | None = None) -> None:
        self.process = process

    def __call__(self) -> None:
        leader = self.process.pid if self.process is not None else None
        while True:  # peek (WNOWAIT) first: the leader is never reaped here
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None or info.si_pid == 0:
                return
            if self.process is not None and info.si_pid == leader:
                if self.process.returncode is None:
                    self.process.returncode = serve_start.waited_code(info)
                return
            with contextlib.suppress(ChildProcessError):
                os.waitpid(info.si_pid, os.WNOHANG)

    def drain(self, seconds: float) -> None:
        """Reap until no child is left or ``seconds`` have passed."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self()
            try:
                os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            time.sleep(0.05)


class Forwarder:
    """Signals received while the server runs go to its group; ``received``: the last one."""

    def __init__(self) -> None:
        self.group: int | None = None
        self.received: int | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        del frame
        self.received = signum
        if self.group is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.group, signum)

    @contextlib.contextmanager
    def installed(self) -> Iterator[Forwarder]:
        previous = {sig: signal.signal(sig, self) for sig in FORWARDED}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def supervise(process: subprocess.Popen[bytes], reaper: Reaper,
              grace: float = serve_start.STOP_GRACE) -> tuple[int, list[procs.Proc]]:
    """Wait for the server to exit (reaping everything meanwhile), stop what is left of its
    group, reap it; the server's exit code and the leftovers that were stopped."""
    while process.returncode is None:
        reaper()
        if process.returncode is None:
            _pause()
    left = serve_start.stop_group(process, grace, reaper)
    reaper.drain(5.0)
    return serve_start.shell_code(int(process.returncode)), left


def _pause() -> None:
    """Sleep until a child changes state or a signal arrives (at most 0.5 s)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
    except ChildProcessError:
        time.sleep(0.5)
    except OSError as exc:  # pragma: no cover - EINTR is retried by Python (PEP 475)
        if exc.errno != errno.EINTR:
            raise
