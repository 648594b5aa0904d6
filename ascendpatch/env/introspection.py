"""The target interpreter's introspection, started as early as a run can start it.

Its report comes from the cache (env/introcache) while nothing it depends on has changed, else
from the bundled script (env/_introspect.py), run in the target interpreter (env/inscript):
started now, waited for later. env/target.py makes the report a Target.

The parser starts it as soon as it knows the target (``--python`` before the command, or
``$ASCENDPATCH_PYTHON`` when nothing on the line overrides it: shell/cliargs._prefetch), so
this module and what it imports stay light: no dataclasses, no store. On a cold cache, every
millisecond of import before the start is one the run later waits for the target interpreter
(tests/test_prefetch.py checks that nothing of the sort is loaded when it starts).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from ascendpatch.env import inscript
from ascendpatch.errors import AscendpatchError, TargetError

INTROSPECT_TIMEOUT = 60.0
# The variable naming the target interpreter (env/discover.ENV_VAR): here, so that the parser
# reads it without loading discovery (shell/cliargs._prefetch).
ENV_VAR = "ASCENDPATCH_PYTHON"
Report = dict[str, Any]
_T = TypeVar("_T")


def named(python: str) -> Path:
    """The interpreter a user names (``--python``, ``$ASCENDPATCH_PYTHON``, a manifest's
    candidate): a bare name (``python3``) is the program of that name on ``$PATH``, as a shell
    would run it, made an absolute path for every check, cache key and run; never a file of
    the current folder, which root may be standing in (/tmp, another user's folder). ``./name``
    (which pathlib spells as the bare name) means the current folder, and says so."""
    path = Path(python)
    if os.sep in str(path):
        return path
    if os.sep in python:
        return Path.cwd() / path  # (not resolve(): a venv's python is a link to keep)
    import shutil  # (only for a bare name: 2 ms)

    found = shutil.which(python)
    return Path(found) if found else path


def from_env(env: Mapping[str, str]) -> Path | None:
    """The interpreter ``$ASCENDPATCH_PYTHON`` names in ``env`` (:func:`named`), or None."""
    value = env.get(ENV_VAR)
    return named(value) if value else None


class Started:
    """An introspection under way: the cached report, or the target interpreter running."""

    def __init__(self, python: Path, script: str, cached: Report | None = None,
                 running: inscript.Running | None = None, since: int = 0) -> None:
        self.python = python
        self.script = script
        self.cached = cached
        self.running = running
        self.since = since  # time.time_ns() before the interpreter started (introcache.save)
        self.made: Any = None  # what the report was made into (env/target.py: the Target)

    def make(self, maker: Callable[[Report], _T]) -> _T:
        """What ``maker`` makes of the report, made once: the report waited for (the target
        interpreter's answer, or TargetError, worded), and cached for the next run once
        ``maker`` took it. Once made, it is returned whatever ``maker`` is passed later: one
        kind of thing is made of a report (env/target.py's Target, its one caller)."""
        if self.made is None:
            fresh = self.cached is None
            report = self._answer() if fresh else self.cached
            assert report is not None
            made = maker(report)
            if fresh:
                from ascendpatch.env import introcache

                introcache.save(self.python, self.script, report, self.since)
            self.cached, self.made = report, made
        return cast("_T", self.made)

    def _answer(self) -> Report:
        running = self.running
        assert running is not None
        try:
            report: Report = running.json(timeout=INTROSPECT_TIMEOUT)
        except inscript.ScriptError as exc:
            raise _failed(self.python, exc) from None
        finally:
            with contextlib.suppress(ValueError):
                _unfinished.remove(running)  # (json reaps it, however it ends)
        return report


# Introspections the parser started (prefetch), until start takes them; and every one started
# and not yet waited for (whoever started it), for stop_unfinished.
_prefetched: dict[Path, Started] = {}
_unfinished: list[inscript.Running] = []


def script() -> str:
    return inscript.bundled("_introspect.py")


def start(python: Path) -> Started:
    """Start introspecting ``python`` (or take what the parser started) and return at once:
    nothing runs in the target when the cached report still holds."""
    started = _prefetched.pop(python, None)
    if started is not None:
        return started
    if os.sep not in str(python):  # (a bare name :func:`named` found nowhere on $PATH)
        raise TargetError(f"target interpreter {inscript.brief(python)} is not on PATH",
                          fix="pass --python with the path of the image's python")
    try:
        found = python.exists()
    except OSError as exc:  # (a name too long for the file system, a folder not searchable)
        raise TargetError(f"target interpreter {inscript.brief(python)} cannot be looked up: "
                          f"{exc.strerror}",
                          fix="pass --python with the path of the image's python") from None
    if not found:
        raise TargetError(f"target interpreter {inscript.brief(python)} does not exist",
                          fix="pass --python with the path of the image's python")
    from ascendpatch.env import introcache

    text = script()
    cached = introcache.load(python, text)  # nothing runs in the target when nothing changed
    if cached is not None:
        return Started(python, text, cached=cached)
    since = time.time_ns()
    try:
        running = inscript.Running(python, text)
    except inscript.ScriptError as exc:
        raise _failed(python, exc) from None
    _unfinished.append(running)
    return Started(python, text, running=running, since=since)


def prefetch(python: Path) -> None:
    """Start introspecting ``python`` now, for the next :func:`start` of the same path. Any
    failure is left for that call to raise, worded as always (an OSError here: a name too
    long for the file system)."""
    if python not in _prefetched:
        with contextlib.suppress(AscendpatchError, OSError, ValueError):
            _prefetched[python] = start(python)


def answered(python: Path) -> Started | None:
    """What the parser's :func:`prefetch` of ``python`` already has, without waiting: its
    cached report still held. None while the target interpreter runs."""
    started = _prefetched.get(python)
    return started if started is not None and started.cached is not None else None


def stop_unfinished() -> None:
    """The end of a run (cli's error boundary): every introspection still unanswered (one
    the parser started that no command took, or one a Ctrl-C left between its start and its
    wait) is stopped, and reaped; what was prefetched is forgotten."""
    _prefetched.clear()
    inscript.stop_all(_unfinished)


def _failed(python: Path, exc: inscript.ScriptError) -> TargetError:
    if not isinstance(exc, inscript.ScriptTimeout) and not _is_python(python):
        return TargetError(f"{inscript.brief(python)} is not a Python interpreter",
                           fix="pass --python with the path of the image's python, e.g. "
                               "/usr/local/python3.12.13/bin/python3")
    shown = inscript.brief(python)
    reason = str(exc).removeprefix(f"{shown} ")  # (inscript's message names it too)
    return TargetError(f"target interpreter {shown} failed to report its environment: "
                       f"{reason[:300]}", fix="it must be Python 3.8 or newer")


def _is_python(python: Path) -> bool:
    """After a failed introspection: does it run a one-line Python program at all?"""
    try:
        inscript.run_json(python, "import json\nprint(json.dumps({'python': 1}))", timeout=30)
    except inscript.ScriptError:
        return False
    return True
