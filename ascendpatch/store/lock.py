"""One lock per target: a second run waits (and says so) or gives up after --lock-timeout.

The lock is an flock on the target folder itself: it needs no file (a run that changes nothing
writes nothing, not even a lock file), works on read-only targets, and dies with its process,
so a SIGKILLed run never leaves a stale lock behind.

Writers (apply, revert) hold it exclusively for their whole run; readers (status, verify,
audit) hold it shared, so they never see a half-written transaction and never block each other.
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
    # The holder is named through /proc/locks where the kernel offers it.
    try:
        inode = path.stat().st_ino
        with open("/proc/locks", encoding="ascii") as locks:
            for row in locks:
                fields = row.split()
                if len(fields) > 5 and fields[5].endswith(f":{inode}"):
                    return f"process {fields[4]}"
    except OSError:
        pass
    return "another ascendpatch run"


@contextmanager
def target_lock(path: Path, timeout: float,
                on_wait: Callable[[str], None] | None = None, *,
                shared: bool = False) -> Iterator[None]:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _acquire(fd, path, timeout, on_wait, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _acquire(fd: int, path: Path, timeout: float,
             on_wait: Callable[[str], None] | None, mode: int) -> None:
    deadline = time.monotonic() + timeout
    announced = False
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
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
