"""The progress seam: core code reports long steps, command lines, notices and finished items.

Core code never prints. It calls :func:`task` around a long step (a download, a pip run, the
hashing of an audit), :func:`command` / :func:`output` / :func:`detail` for what ``-v`` shows,
:func:`notice` for a warning that is no result (a cache folder not used this run), and
:func:`item` (or :func:`stream`, over an iterator of final results) when a result is final, so
that it can be shown at once instead of at the end (the command's result then says
``streamed``). The CLI installs a reporter from ``ascendpatch/shell/output.py`` with
:func:`reporting`; without one (tests, library use) every call does nothing. Where the reporter
shows no spinner (off a terminal), a task still running says so every
:func:`heartbeat_interval` seconds (:class:`Heartbeat`).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import TracebackType
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar

if TYPE_CHECKING:
    from ascendpatch.results import ArtifactResult, CheckResult, Item

    Final = TypeVar("Final", ArtifactResult, CheckResult)

Advance = Callable[[int], None]  # advance(n): n more units of the task's total are done

HEARTBEAT_SECONDS = 10.0  # off a terminal, a long step says it is alive this often
HEARTBEAT_ENV = "ASCENDPATCH_HEARTBEAT"  # seconds between those lines; 0 turns them off


class Reporter(Protocol):
    def task(self, label: str, total: int | None) -> AbstractContextManager[Advance]: ...

    def command(self, argv: Sequence[str]) -> None: ...

    def output(self, text: str) -> None: ...

    def item(self, item: Item, show_diff: bool) -> None: ...

    def notice(self, text: str) -> None: ...

    def detail(self, text: str) -> None: ...


_reporter: Reporter | None = None


def _ignore(count: int) -> None:
    del count


@contextmanager
def reporting(reporter: Reporter) -> Iterator[Reporter]:
    """Route this process's progress to ``reporter`` for the duration of the block."""
    global _reporter
    previous, _reporter = _reporter, reporter
    try:
        yield reporter
    finally:
        _reporter = previous


def task(label: str, total: int | None = None) -> AbstractContextManager[Advance]:
    """``with task("downloading X") as advance:``; a spinner (or a bar when total is known)."""
    if _reporter is None:
        return nullcontext(_ignore)
    return _reporter.task(label, total)


def command(argv: Sequence[str]) -> None:
    """A subprocess about to run (pip, pip-compile): shown with -v."""
    if _reporter is not None:
        _reporter.command(argv)


def output(text: str) -> None:
    """A subprocess's output: shown with -v."""
    if _reporter is not None and text.strip():
        _reporter.output(text)


def notice(text: str) -> None:
    """A side remark the user must see (a cache not used this run): one [WARN] line on stderr,
    each text once per run."""
    if _reporter is not None:
        _reporter.notice(text)


def detail(text: str) -> None:
    """A fact about this run that ``-v`` shows (which target and manifest, and from where)."""
    if _reporter is not None:
        _reporter.detail(text)


def item(result: Item, *, show_diff: bool = False) -> None:
    """A final result, shown as it happens (the end-of-command rendering skips the items of
    a ``streamed`` result); ``show_diff``: what the command's result will say (apply --diff)."""
    if _reporter is not None:
        _reporter.item(result, show_diff)


def stream(results: Iterable[Final], *, show_diff: bool = False) -> list[Final]:
    """Each result of ``results`` (final ones only) shown as it comes; all of them, in the
    order they came."""
    seen = []
    for result in results:
        item(result, show_diff=show_diff)
        seen.append(result)
    return seen


def heartbeat_interval(environ: Mapping[str, str] | None = None) -> float:
    """Seconds between "still running" lines: $ASCENDPATCH_HEARTBEAT when it is a finite number
    >= 0 (0: none), else HEARTBEAT_SECONDS."""
    text = (os.environ if environ is None else environ).get(HEARTBEAT_ENV, "")
    try:
        value = float(text)
    except ValueError:
        return HEARTBEAT_SECONDS
    return value if math.isfinite(value) and value >= 0 else HEARTBEAT_SECONDS


class Heartbeat:
    """``with Heartbeat(say, 10, "pip install six"):`` says ``... pip install six: still running
    (40 s)`` every 10 seconds from a daemon thread until the block ends: what a step that
    reports no progress of its own (pip resolving, for 25 to 94 s) shows off a terminal, where
    no spinner runs. Of nested steps, only the innermost speaks."""

    _running: ClassVar[list[Heartbeat]] = []  # innermost last

    def __init__(self, say: Callable[[str], None], interval: float, label: str) -> None:
        self._say = say
        self._interval = interval
        self._label = label
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self._start = 0.0

    def __enter__(self) -> Advance:
        self._start = time.monotonic()
        Heartbeat._running.append(self)
        self._thread.start()
        return _ignore

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        Heartbeat._running.remove(self)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            if Heartbeat._running and Heartbeat._running[-1] is self:
                elapsed = time.monotonic() - self._start
                self._say(f"... {self._label}: still running ({elapsed:.0f} s)")
