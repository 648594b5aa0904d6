"""A fault-injection seam for the crash-safety tests.

``ASCENDPATCH_CRASH_AT=N`` makes the process SIGKILL itself at the N-th crash point of a write,
so tests can stop a real run at every instant of a transaction. Unset, it does nothing.
"""

from __future__ import annotations

import os
import signal

_ENV = "ASCENDPATCH_CRASH_AT"
_counter = 0


def point() -> None:
    global _counter
    wanted = os.environ.get(_ENV)
    if not wanted:
        return
    _counter += 1
    if _counter == int(wanted):
        os.kill(os.getpid(), signal.SIGKILL)
