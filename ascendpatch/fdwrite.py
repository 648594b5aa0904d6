"""Writing all of some bytes to a descriptor, whatever kind it is.

``os.write`` may take only part of what it is given (a disk that fills, a pipe with less
room), and a descriptor another process made non-blocking (CI runners and process managers
share one pipe for a child's stdout and stderr and set O_NONBLOCK on it, at any time) refuses
a write outright when full (``BlockingIOError``). Both drop output without a word unless the
writer writes again; this module is the one place that does (shell/streams.py for ascendpatch's
own output, deploy/serve_start.py for a foreground server's).
"""

from __future__ import annotations

import os
import select
import time


def wait_for_room(fd: int, seconds: float | None = None) -> bool:
    """Whether ``fd`` can take a write (poll: any descriptor number), waiting at most
    ``seconds`` (None: as long as it takes)."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return bool(poller.poll(None if seconds is None else int(seconds * 1000)))


def write_some(fd: int, view: memoryview) -> int:
    """One write of ``view`` (not empty) to ``fd``, after waiting for room where the
    descriptor is non-blocking and full: how many bytes it took. A write that fails raises
    its OSError."""
    while True:
        try:
            return os.write(fd, view)
        except BlockingIOError:
            wait_for_room(fd)


def write_all(fd: int, data: bytes | memoryview) -> None:
    """All of ``data`` written to ``fd``: again after a short write, and after waiting for
    room where the descriptor is non-blocking and full. A write that fails raises its
    OSError."""
    view = memoryview(data).cast("B")
    done = 0
    while done < len(view):
        done += write_some(fd, view[done:])


def write_now(fd: int, data: bytes | memoryview) -> int:
    """As much of ``data`` as ``fd`` takes at once, a pipe's atomic size at a time (a
    blocking pipe with room for one never blocks; a terminal may, for the room it lacks):
    how many bytes it took. For what is shown after a Ctrl-C, or at the end, to a reader
    that may have stopped reading; an error is as good as no room."""
    view = memoryview(data).cast("B")
    done = 0
    while done < len(view):
        chunk = view[done:done + select.PIPE_BUF]
        try:
            if not wait_for_room(fd, 0):
                break
            wrote = os.write(fd, chunk)
        except OSError:  # (after a Ctrl-C, or at the end: an error is as good as no room)
            break
        done += wrote
        if wrote < len(chunk):  # (no more room)
            break
    return done


def write_within(fd: int, data: bytes | memoryview, seconds: float) -> int:
    """As much of ``data`` as ``fd`` takes within ``seconds`` (as :func:`write_now`, again
    each time it has room: another writer may take the room first): how many bytes."""
    view = memoryview(data).cast("B")
    done = 0
    deadline = time.monotonic() + seconds
    while done < len(view):
        left = deadline - time.monotonic()
        if left <= 0 or not wait_for_room(fd, left):
            break
        done += write_now(fd, view[done:])
    return done
