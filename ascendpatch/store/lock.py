"""One lock per target: a second run waits (and says so) or gives up after --lock-timeout.

flock locks die with their process, so a SIGKILLed run never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ascendpatch.errors import LockTimeoutError

_POLL = 0.05


def _holder(path: Path) -> str:
    try:
        pid = path.read_text(encoding="ascii").strip()
    except OSError:
        return "another process"
    return f"process {pid}" if pid else "another process"


@contextmanager
def target_lock(path: Path, timeout: float,
                on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _acquire(fd, path, timeout, on_wait)
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode("ascii"))
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _acquire(fd: int, path: Path, timeout: float,
             on_wait: Callable[[str], None] | None) -> None:
    deadline = time.monotonic() + timeout
    announced = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockTimeoutError(
                    f"the target is locked by {_holder(path)} ({path})",
                    fix="wait for the other ascendpatch run to finish, or raise --lock-timeout",
                ) from None
            if not announced and on_wait is not None:
                on_wait(f"waiting for the target lock held by {_holder(path)} ({path})")
                announced = True
            time.sleep(_POLL)
