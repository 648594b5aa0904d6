"""The standard output when it cannot be written: a reader that has gone, or a failure.

A reader that has gone (``ascendpatch status | head -1``: a closed pipe) is not a failure: the
run goes on quietly, as it always has. Any other failure to write stdout (a full disk, an I/O
error: ``ascendpatch audit --json > report.json`` on a full volume) leaves the output
incomplete: the run goes on (a command is never stopped half-way by its own output: for one
run of main, stdout is :func:`guarded`), writes nothing more there, and ends saying so on
stderr with an exit code of at least 1 (shell/cli.py). Before, such a run ended as an
unexpected error (exit 3, a crash log on the same full disk), or, for ``--version``, silently
with 0. stderr is guarded too: a remark it cannot take is dropped (there is nowhere left to
say so; the result is stdout's), never a crash.

A short write (a full disk takes part of a line) with ``PYTHONUNBUFFERED`` was no error at
all, and a pipe another process made non-blocking was one when full: :func:`whole_writes`
puts a writer under both text layers that writes all (waiting for room) or raises.

Imported by the parser's path too: nothing heavier than io (and errors' constants).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO

from ascendpatch.errors import EXIT_PROBLEMS
from ascendpatch.fdwrite import write_now, write_some


class _Run:
    """What this run's stdout has met (one run of main: :func:`guarded` starts it afresh)."""

    failed: OSError | None = None  # the first failure to write it (not a closed pipe)
    gone = False  # pointed at /dev/null: what is still written goes nowhere
    waiting = True  # False after a Ctrl-C: a full output is no longer waited on
    began = False  # something was written to it


_run = _Run()


def silence_stdout() -> None:
    """Point stdout at /dev/null so that later writes and the final flush cannot fail again."""
    _to_devnull(sys.stdout)


def _to_devnull(stream: TextIO) -> None:
    """``stream``'s descriptor onto /dev/null; nothing where that cannot be (no /dev/null in a
    chroot, no descriptor left, not a real file: captured in tests)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)


def stdout_failed(exc: OSError) -> None:
    """stdout could not take what was written: remembered (the first failure) for the end of
    the run, and stdout pointed at /dev/null, where what its buffer still holds goes at the
    next flush. ``exc`` a BrokenPipeError: only silenced."""
    if not isinstance(exc, BrokenPipeError) and _run.failed is None:
        _run.failed = exc
    _run.gone = True
    silence_stdout()


def began() -> bool:
    """Whether this run has written anything to stdout."""
    return _run.began


def gone() -> bool:
    """Whether stdout was pointed at /dev/null this run (what is still written goes nowhere)."""
    return _run.gone


def failure() -> OSError | None:
    """The failure to write stdout since the last call, if any (forgotten once told)."""
    exc, _run.failed = _run.failed, None
    return exc


def said(code: int, color: str = "auto") -> int:
    """The exit code once a failure to write stdout is said: one [FAIL] line on stderr
    (never stdout, even with --json), and at least 1, since what was asked for was not all
    shown."""
    exc = failure()
    if exc is None:
        return code
    from ascendpatch.results import Level
    from ascendpatch.shell import output

    fix = ("free space where standard output goes, or send it to another file"
           if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else
           "send standard output to a file or a pipe that takes it")
    with contextlib.suppress(Exception):  # (stderr on the same full disk: the code says it)
        output.line(Level.FAIL, f"cannot write to standard output ({exc.strerror or exc}): "
                                f"what the command printed is incomplete; fix: {fix}, and run "
                                "the command again", color=color, stream=sys.stderr)
        sys.stderr.flush()
    return code or EXIT_PROBLEMS


def run(main: Callable[[], int]) -> int:
    """A helper's entry point (``python -m ascendpatch.shell.remember``, ``.completion``) run
    as shell/cli.py runs a command: whole writes, both streams guarded, a stdout that failed
    said at the end (before, its OSError was taken by the helper for its own: remember said
    "config not written" of a config it had written)."""
    whole_writes()
    with guarded():
        code = main()
        sys.stdout.flush()
    return said(code)


class _Guarded:
    """sys.stdout (or sys.stderr) for the length of one run: a write or flush that fails is
    handed to ``failed`` and not raised, so no command ever meets its own output's failure (an
    OSError rising through a command could be taken for one of its target's). Everything else
    is the stream's own."""

    def __init__(self, stream: TextIO, failed: Callable[[OSError], None], *,
                 stdout: bool = False) -> None:
        self.stream = stream
        self.failed = failed
        self.stdout = stdout  # (what is written to it tells began())
        self.dropped = False  # (after a failure: even where /dev/null cannot stand in)

    def write(self, text: str) -> int:
        if self.dropped:
            return len(text)
        if text and self.stdout:
            _run.began = True
        try:
            return self.stream.write(text)
        except OSError as exc:
            self._failed(exc)
            return len(text)

    def _failed(self, exc: OSError) -> None:
        self.dropped = True
        self.failed(exc)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.dropped:
            return
        try:
            self.stream.flush()
        except OSError as exc:
            self._failed(exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _stderr_failed(exc: OSError) -> None:
    """stderr could not take a remark (a full disk): there is nowhere left to say so, and the
    result is stdout's; stderr goes to /dev/null for the rest of the run."""
    del exc
    _to_devnull(sys.stderr)


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """stdout and stderr guarded (:class:`_Guarded`) for the block: one run of main."""
    global _run
    _run = _Run()  # (an earlier run's in this process is not this one's)
    streams = {name: getattr(sys, name) for name in ("stdout", "stderr")}
    guards = {name: _Guarded(stream, stdout_failed, stdout=True) if name == "stdout" else
              _Guarded(stream, _stderr_failed) for name, stream in streams.items()
              if stream is not None}
    for name, guard in guards.items():
        setattr(sys, name, guard)
    try:
        yield
    finally:
        for name, guard in guards.items():
            if getattr(sys, name) is guard:
                setattr(sys, name, streams[name])


def stop_waiting() -> None:
    """After a Ctrl-C, for the rest of this run: what stdout or stderr cannot take at once is
    dropped, never waited for. A reader that stopped reading (a paused pager, a full pipe no
    one reads) held the run after the interrupt until a second one (or for ever, unbuffered);
    now the one ends it, 130, and what could not be shown is dropped."""
    _run.waiting = False


class _Whole(io.RawIOBase):
    """A descriptor written whole, unbuffered: each write is ``os.write`` again until all of it
    is written (a short write is no error), and a non-blocking descriptor that is full is
    waited on until it takes more; after a Ctrl-C (:func:`stop_waiting`), what it cannot take
    at once is dropped. The descriptor is not closed with it."""

    def __init__(self, fd: int, name: object, *, buffered: bool = False) -> None:
        super().__init__()
        self.fd = fd
        self.name = name  # (as the interpreter's own: "<stdout>")
        self.mode = "wb"
        self.buffered = buffered  # under a buffer, which writes again what met an interrupt
        # the bytes of the write a Ctrl-C stopped, and how many of them it had written
        self.interrupted: tuple[bytes, int] = (b"", 0)

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return os.isatty(self.fd)

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        done = self._written_before(view)
        try:
            while done < len(view) and _run.waiting:
                done += write_some(self.fd, view[done:])
        except KeyboardInterrupt:  # (a Ctrl-C while it waits for room)
            stop_waiting()
            if self.buffered:
                self.interrupted = (bytes(view), done)
            raise
        if done < len(view):  # (after a Ctrl-C: the rest as far as it goes)
            write_now(self.fd, view[done:])
        return len(view)

    def _written_before(self, view: memoryview) -> int:
        """How much of ``view`` a write the interrupt stopped had written: the buffer above
        met the interrupt and hands all of that write's bytes again (a line shown twice), so
        that much is skipped; anything else is new."""
        (handed, written), self.interrupted = self.interrupted, (b"", 0)
        return written if handed and view[:len(handed)] == handed else 0

    def close(self) -> None:  # (the process's descriptor: never closed here)
        if not self.closed:
            super().close()


def whole_writes() -> None:
    """stdout's and stderr's writers, made to write all or raise (:class:`_Whole`).

    - With ``PYTHONUNBUFFERED`` (or ``-u``), the text layers write straight to the file, and
      CPython's does not write again after a short write: on a full disk or a non-blocking
      pipe, the rest of a line was dropped without an error (exit 0, the output cut). They
      stay unbuffered: lines keep their order with a child's output on the same descriptor.
    - Buffered (the default), a descriptor another process has made non-blocking (CI runners
      and process managers share one pipe and set O_NONBLOCK on it, at any time) made a full
      pipe an error: ``BlockingIOError: write could not complete without blocking``, the
      output cut at the pipe's size. Their buffer now sits on a writer that waits for room.
    """
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        layer = getattr(stream, "buffer", None)
        unbuffered = isinstance(layer, io.RawIOBase)
        if not (unbuffered or isinstance(getattr(layer, "raw", None), io.FileIO)):
            continue  # (not the interpreter's own stream: captured, or replaced already)
        try:
            stream.flush()
            fd = stream.fileno()
            # (Any: typeshed's TextIOWrapper wants a buffer type with a name, as _Whole has)
            whole: Any = _Whole(fd, getattr(layer, "name", fd), buffered=not unbuffered)
            if not unbuffered:  # (the interpreter's buffer size: io.open's)
                size = os.fstat(fd).st_blksize
                whole = io.BufferedWriter(whole, size if size > 1 else io.DEFAULT_BUFFER_SIZE)
            text = io.TextIOWrapper(whole, encoding=stream.encoding, errors=stream.errors,
                                    line_buffering=stream.line_buffering,
                                    write_through=unbuffered)
            text.mode = stream.mode  # type: ignore[misc]  # (as io.open sets it: "w")
            setattr(sys, name, text)
        except (OSError, ValueError):
            continue
