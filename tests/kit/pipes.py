"""A small pipe made non-blocking, as CI runners and process managers leave a child's stdout
and stderr, and a reader that takes from it slowly."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator

F_SETPIPE_SZ = 1031  # (fcntl has no name for it before Python 3.10 on every platform)


def non_blocking_pipe(size: int = 4096) -> tuple[int, int]:
    """A pipe of ``size`` bytes whose write end is non-blocking: (read end, write end)."""
    read, write = os.pipe()
    fcntl.fcntl(write, F_SETPIPE_SZ, size)
    os.set_blocking(write, False)
    return read, write


@contextlib.contextmanager
def read_slowly(size: int = 4096, *, blocking: bool = False, piece: int = 1024,
                pause: float = 0.005) -> Iterator[tuple[int, bytearray]]:
    """The write end of a :func:`non_blocking_pipe` (made ``blocking`` when asked) and what a
    reader taking ``piece`` bytes each ``pause`` seconds has got (all of it once the block
    ends: the write end is closed, the reader joined)."""
    read, write = non_blocking_pipe(size)
    os.set_blocking(write, blocking)
    got = bytearray()

    def slowly() -> None:
        while chunk := os.read(read, piece):
            got.extend(chunk)
            time.sleep(pause)

    reader = threading.Thread(target=slowly)
    reader.start()
    try:
        yield write, got
    finally:
        os.close(write)
        reader.join()
        os.close(read)
