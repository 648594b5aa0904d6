"""Reading a serve log as vLLM writes it: streamed bytes, the logger prefixes each process puts
in front of a line, and the shape of a Python traceback.

A line reads ``(EngineCore_DP0 pid=415) ERROR 10-28 21:14:49 [core.py:708] <body>``, or
``[rank1]: <body>``, ``vllm-1  | <body>``, ``[Stage-0] <body>``, several of them stacked, or
none. :func:`split_line` returns the process that wrote it and the body; :class:`Traceback`
follows one process's traceback so that its frames are detail and its last line the cause.
Logs are untrusted input of any size: they are streamed, a line longer than ``MAX_LINE`` is
cut there, bytes that are not UTF-8 are replaced, and only regular files (or standard input,
named ``-``) are read: a FIFO or a device is refused before anything is read.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ascendpatch import progress
from ascendpatch.deploy.text import printable
from ascendpatch.errors import InvalidInputError
from ascendpatch.paths import NotRegularFileError, open_regular
from ascendpatch.results import Hint, Phrase

MAX_LINE = 64 * 1024
SPINNER_BYTES = 4 * 1024 * 1024  # a log this big gets a progress bar on a terminal
STDIN = Path("-")
_ADVANCE_EVERY = 1024 * 1024

_PREFIX = re.compile(
    r"\((?P<proc>[A-Za-z][\w.-]*)(?: [A-Za-z_]+=[\w.-]+)*\) ?"  # (EngineCore_DP0 pid=415)
    r"|\[(?P<rank>rank\d+)\]: ?"  # [rank0]:
    r"|(?P<svc>[a-z][\w.-]*-\d+) +\| "  # docker compose: vllm-1  |
    r"|\[Stage-\d+\] "  # vllm-omni stages
    r"|\[\d{4}-\d\d-\d\dT[\d:.]+Z?\] ")  # CI runners' timestamps
_HEADER = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d [\d:.]+ "
                     r"(?:\[[^\]]*\]|[\w.]+:\d+\]) ?")
_FRAME = re.compile(r'\s*File "[^"]*", line \d+|\s*[~^]+\s*$')
_CHAINED = ("The above exception was the direct cause", "During handling of the above exception")
_EXCEPTION = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)(?::|$)")
TRACEBACK_START = "Traceback (most recent call last)"


def split_line(line: str) -> tuple[str, str]:
    """The process a line names (its innermost prefix; "" when none) and the body after the
    prefixes and the vLLM logger's level / time / source header."""
    process, rest = "", line
    for _ in range(4):  # prefixes stack: (Worker pid=7) (Worker_DP0_TP5_EP5 pid=7) ERROR ...
        found = _PREFIX.match(rest)
        if not found:
            break
        process = found.group("proc") or found.group("rank") or found.group("svc") or process
        rest = rest[found.end():]
    header = _HEADER.match(rest)
    return process, rest[header.end():] if header else rest


def is_exception(body: str) -> bool:
    """A traceback's last line: ``KeyError: 'x'``, ``pydantic_core...ValidationError: ...``."""
    return _EXCEPTION.match(body) is not None


@dataclass
class Traceback:
    """One process's traceback, line by line: scaffolding (the header, frames, the code line
    after a frame, ``^^^^`` markers, chaining sentences) is detail, never a finding."""

    open: bool = False
    after_frame: bool = False

    def scaffolding(self, body: str) -> bool:
        if body.startswith(TRACEBACK_START):
            self.open, self.after_frame = True, False
            return True
        if _FRAME.match(body):
            self.after_frame = True
            return True
        if self.after_frame and body[:1].isspace():  # the source line a frame quotes
            self.after_frame = False
            return True
        self.after_frame = False
        return not body.strip() or body.startswith(_CHAINED)

    def close(self) -> None:
        self.open = self.after_frame = False


_FIX_NOT_REGULAR = Phrase("save the log to a file first (vllm serve ... > serve.log 2>&1) and "
                          "triage that file, or pipe it: ... | ", Hint(("logs", "-")))


def _open(path: Path) -> tuple[BinaryIO, int]:
    shown = printable(str(path))  # file names are anyone's choice on a shared host
    try:
        handle, info = open_regular(path)
    except NotRegularFileError as exc:
        raise InvalidInputError(f"log {shown} is {exc.what}, not a regular file: refusing to "
                                "read it", fix=_FIX_NOT_REGULAR) from None
    except OSError as exc:
        raise InvalidInputError(f"log {shown} cannot be read ({exc.strerror})") from None
    return handle, info.st_size


def _cut_lines(handle: BinaryIO, left: int | None) -> Iterator[bytes]:
    """Lines of at most MAX_LINE bytes (the rest of a longer line is skipped), up to ``left``
    bytes (None: to the end)."""
    while left is None or left > 0:
        chunk = handle.readline(MAX_LINE if left is None else min(MAX_LINE, left))
        if not chunk:
            return
        if left is not None:
            left -= len(chunk)
        if len(chunk) == MAX_LINE and not chunk.endswith(b"\n"):
            left = _skip_rest(handle, left)
        yield chunk


def _skip_rest(handle: BinaryIO, left: int | None) -> int | None:
    while left is None or left > 0:
        rest = handle.readline(MAX_LINE if left is None else min(MAX_LINE, left))
        if left is not None:
            left -= len(rest)
        if not rest or rest.endswith(b"\n"):
            break
    return left


def stream_lines(path: Path) -> Iterator[str]:
    """The lines of a regular file, streamed, up to the size it had when opened (a log that is
    still being written, faster than it is read, would never end); ``-`` is standard input,
    read to its end. A big file reports its progress (a bar on a terminal)."""
    if path == STDIN:
        yield from (c.decode("utf-8", errors="replace") for c in _cut_lines(sys.stdin.buffer,
                                                                              None))
        return
    handle, size = _open(path)
    with handle:
        if size < SPINNER_BYTES:
            yield from (c.decode("utf-8", errors="replace") for c in _cut_lines(handle, size))
            return
        with progress.task(f"reading {printable(path.name)}", total=size) as advance:
            pending = 0
            for chunk in _cut_lines(handle, size):
                pending += len(chunk)
                if pending >= _ADVANCE_EVERY:
                    advance(pending)
                    pending = 0
                yield chunk.decode("utf-8", errors="replace")
            advance(pending)
