"""The standard output when it cannot be written: a reader that has gone, or a failure.

A reader that has gone (``ascendpatch status | head -1``: a closed pipe) is not a failure: the
run goes on quietly, as it always has. Any other failure to write stdout (a full disk, an I/O
error: ``ascendpatch audit --json > report.json`` on a full volume) leaves the output
incomplete: the run goes on (a command is never stopped half-way by its own output), writes
nothing more there, and ends saying so on stderr with an exit code of at least 1
(shell/cli.py). Before, such a run ended as an unexpected error (exit 3, a crash log on the
same full disk), or, for ``--version``, silently with 0.

Imported by the parser's path too: os and sys only.
"""

from __future__ import annotations

import contextlib
import os
import sys

_FAILED: list[OSError] = []  # this run's first failure to write stdout


def silence_stdout() -> None:
    """Point stdout at /dev/null so that later writes and the final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (captured in tests)
        pass
    finally:
        os.close(devnull)


def stdout_failed(exc: OSError) -> None:
    """stdout could not take what was written: remembered (the first failure) for the end of
    the run, and stdout pointed at /dev/null. ``exc`` a BrokenPipeError: only silenced."""
    if not isinstance(exc, BrokenPipeError) and not _FAILED:
        _FAILED.append(exc)
    with contextlib.suppress(Exception):
        sys.stdout.flush()  # (a failed flush drops what it held: nothing is written twice)
    silence_stdout()


def failure() -> OSError | None:
    """The failure to write stdout since the last call, if any (forgotten once told)."""
    return _FAILED.pop() if _FAILED else None
