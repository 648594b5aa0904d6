"""Parse a unified diff (with unidiff) into :class:`FilePatch` objects: paths, hunks, modes.

Every problem is a PatchFormatError naming where the patch came from; what the parser cannot
support (binary changes, renames, mode-only changes) is refused here, before any file is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from io import StringIO
from typing import Any

from ascendpatch.errors import PatchFormatError
from ascendpatch.paths import check_relative

DEV_NULL = "/dev/null"


@dataclass(frozen=True)
class Hunk:
    index: int  # 1-based, as people count hunks
    header: str
    old_start: int
    new_start: int
    ops: tuple[tuple[str, str, str], ...]  # (" " | "-" | "+", text, line ending or "")
    pre_keys: tuple[str, ...]  # what the file holds before, as compared
    post_keys: tuple[str, ...]  # ... and after

    @property
    def zero_context(self) -> bool:
        return all(kind != " " for kind, _, _ in self.ops)

    @property
    def trailing(self) -> int:
        count = 0
        for kind, _, _ in reversed(self.ops):
            if kind != " ":
                break
            count += 1
        return count


@dataclass(frozen=True)
class FilePatch:
    path: str  # relative path of the file the patch changes
    is_new: bool
    is_deleted: bool
    hunks: tuple[Hunk, ...]
    mode: int | None = None  # permission bits git names (new file mode / new mode)
    exact_eol: bool = False  # the patch's lines carry \r\n: compare line endings too


# --------------------------------------------------------------------------- parsing


def parse_patch(text: str | bytes, *, origin: str) -> tuple[FilePatch, ...]:
    """Parse a unified diff; every problem is a PatchFormatError naming ``origin``.

    Lines end at ``\\n`` only: a lone ``\\r`` inside a line is content, ``\\r\\n`` an ending.
    """
    from unidiff.errors import UnidiffParseError  # here: commands that parse no patch skip it
    from unidiff.patch import PatchSet

    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="surrogateescape")
    try:
        patch_set = PatchSet(StringIO(text, newline="\n"))
    except (UnidiffParseError, ValueError, IndexError) as exc:
        raise PatchFormatError(f"{origin}: not a valid unified diff ({_one_line(exc)})") \
            from None
    if len(patch_set) == 0:
        raise PatchFormatError(f"{origin}: contains no file changes (empty or not a diff)")
    files = tuple(_file_patch(patched, origin) for patched in patch_set)
    paths = [f.path for f in files]
    if len(set(paths)) != len(paths):
        raise PatchFormatError(f"{origin}: changes the same file more than once")
    return files


def _one_line(exc: Exception) -> str:
    """unidiff's message quotes the offending line, its newline and all: one line of at most
    120 characters (a patch is anyone's text)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 120 else text[:117] + "..."


def _strip_prefix(name: str) -> str:
    if name.startswith(("a/", "b/")):
        return name[2:]
    return name


_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.\d+)?"
                    r"(?:\s*([+-])(\d\d):?(\d\d))?")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def is_epoch(stamp: str | None) -> bool:
    """``diff -N`` marks a missing file with the epoch (in the local time zone)."""
    if not stamp:
        return False
    found = _STAMP.match(stamp.strip())
    if found is None:
        return "Jan  1 00:00:00 1970" in stamp
    year, month, day, hour, minute, second = (int(found.group(i)) for i in range(1, 7))
    moment = datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)
    if found.group(7):
        sign = 1 if found.group(7) == "+" else -1
        moment -= sign * timedelta(hours=int(found.group(8)), minutes=int(found.group(9)))
    return moment == _EPOCH


def _mode(raw: str | None) -> int | None:
    if not raw:
        return None
    try:
        return int(raw, 8) & 0o7777
    except ValueError:
        return None


def _file_patch(patched: Any, origin: str) -> FilePatch:
    if getattr(patched, "is_binary_file", False):
        raise PatchFormatError(f"{origin}: binary changes ({patched.path}) are not supported")
    source = str(getattr(patched, "source_file", "")).split("\t")[0]
    target = str(getattr(patched, "target_file", "")).split("\t")[0]
    raw_hunks = list(patched)
    is_new = source == DEV_NULL or (
        is_epoch(patched.source_timestamp) and len(raw_hunks) == 1
        and int(raw_hunks[0].source_length) == 0 and int(raw_hunks[0].source_start) == 0)
    is_deleted = target == DEV_NULL or (
        is_epoch(patched.target_timestamp) and len(raw_hunks) == 1
        and int(raw_hunks[0].target_length) == 0 and int(raw_hunks[0].target_start) == 0)
    if is_new and is_deleted:
        raise PatchFormatError(f"{origin}: a file goes from /dev/null to /dev/null")
    path = _strip_prefix(target if is_new or not is_deleted else source)
    check_relative(path, origin=origin)
    if not is_new and not is_deleted and _strip_prefix(source) != path:
        raise PatchFormatError(f"{origin}: renames ({source} -> {target}) are not supported")
    if not raw_hunks and not (is_new or is_deleted):
        raise PatchFormatError(f"{origin}: {path} has no hunks (mode-only changes and renames "
                               "are not supported)")
    ops = [_ops(raw) for raw in raw_hunks]
    exact_eol = any(eol == "\r\n" for hunk_ops in ops for _, _, eol in hunk_ops)
    pairs = enumerate(zip(raw_hunks, ops, strict=True), start=1)
    hunks = tuple(_hunk(number, raw, hunk_ops, exact_eol) for number, (raw, hunk_ops) in pairs)
    mode = None if is_deleted else _mode(getattr(patched, "target_mode", None))
    return FilePatch(path, is_new, is_deleted, hunks, mode, exact_eol)


def _ops(raw: Any) -> list[tuple[str, str, str]]:
    ops: list[tuple[str, str, str]] = []
    for line in raw:
        kind = line.line_type
        if kind == "\\":
            if ops:
                last_kind, text, _ = ops[-1]
                ops[-1] = (last_kind, text, "")
            continue
        if kind not in (" ", "-", "+"):
            continue
        value: str = line.value
        if value.endswith("\r\n"):
            ops.append((kind, value[:-2], "\r\n"))
        elif value.endswith("\n"):
            ops.append((kind, value[:-1], "\n"))
        else:
            ops.append((kind, value, "\n"))  # the diff's own last line lost its newline
    return ops


def line_key(text: str, eol: str, exact_eol: bool) -> str:
    """A line as hunks and files are compared: its text and, for CRLF patches, its ending."""
    return text + (eol if exact_eol or not eol else "\n")


def _hunk(number: int, raw: Any, ops: list[tuple[str, str, str]], exact_eol: bool) -> Hunk:
    pre: list[str] = []
    post: list[str] = []
    for kind, text, eol in ops:  # (line_key, inlined: a catalog's patches hold ~37,000 lines)
        key = text + (eol if exact_eol or not eol else "\n")
        if kind != "+":
            pre.append(key)
        if kind != "-":
            post.append(key)
    header = (f"@@ -{raw.source_start},{raw.source_length} "
              f"+{raw.target_start},{raw.target_length} @@")
    return Hunk(number, header, int(raw.source_start), int(raw.target_start), tuple(ops),
                tuple(pre), tuple(post))
