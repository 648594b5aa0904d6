"""Unified diffs, parsed with unidiff and applied in memory, decided by content.

Placement follows ``git apply`` (the reference the tests compare with): hunks are applied in
order to the evolving file; each one's pre-image is looked for exactly, nearest to the line
its header names (ties: the later line), anywhere in the file; a hunk starting at line 1 or
0 must match at the top and one without trailing context at the end (not for zero-context
``-U0`` hunks, as with ``git apply --unidiff-zero``). There is no fuzz.

The state of a file is decided so that applying twice is never possible:

* *pristine* when the whole patch applies and reversing the result gives the file back,
* *applied* when the whole patch reverses and re-applying gives the file back,
* when both hold (content cannot tell), the nearer placement wins, then the larger evidence
  (the image with more lines), then *applied*;
* a file is only called pristine when the patched result would be called applied; if not,
  the placement is ambiguous and the file is a *conflict* that names the candidate lines.

Creations and deletions (``/dev/null``, git's ``new file mode``/``deleted file mode``, or a
``diff -N`` epoch timestamp) are decided on the whole file. Line endings: a patch whose lines
carry ``\\r\\n`` is matched and written byte for byte; an LF patch also matches a CRLF file and
its added lines take the file's dominant ending.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from io import StringIO
from typing import Any

from ascendpatch.errors import PatchFormatError
from ascendpatch.filestate import FileState
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
    def pre(self) -> tuple[str, ...]:
        return tuple(text for kind, text, _ in self.ops if kind != "+")

    @property
    def post(self) -> tuple[str, ...]:
        return tuple(text for kind, text, _ in self.ops if kind != "-")

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


@dataclass(frozen=True)
class HunkReport:
    index: int
    state: FileState
    position: int | None  # 0-based line in the current file where the image was found
    offset: int  # found position minus expected position
    nearest: str | None = None  # for conflicts: the closest code, or the candidate lines

    def describe(self) -> str:
        if self.state is FileState.CONFLICT:
            near = f"; nearest code:\n{self.nearest}" if self.nearest else ""
            return f"hunk #{self.index} does not match{near}"
        where = f" at offset {self.offset:+d} lines" if self.offset else ""
        return f"hunk #{self.index} {self.state.value}{where}"


@dataclass(frozen=True)
class FileAnalysis:
    path: str
    state: FileState
    hunks: tuple[HunkReport, ...]
    reason: str = ""  # why a conflict that no single hunk explains (ambiguous placement)
    forward: tuple[bytes | None] | None = field(default=None, repr=False, compare=False)
    reverse: tuple[bytes | None] | None = field(default=None, repr=False, compare=False)

    def summary(self) -> str:
        if self.state is FileState.PARTIAL:
            done = _indices(self.hunks, FileState.APPLIED)
            todo = _indices(self.hunks, FileState.PRISTINE)
            return f"{self.path}: partially patched (applied: hunks {done}; not applied: {todo})"
        if self.state is FileState.CONFLICT:
            if self.reason:
                return f"{self.path}: {self.reason}"
            bad = [h for h in self.hunks if h.state is FileState.CONFLICT]
            return f"{self.path}: " + "; ".join(h.describe() for h in bad)
        offsets = [h for h in self.hunks if h.offset]
        extra = ", ".join(h.describe() for h in offsets)
        return f"{self.path}: {self.state.value}" + (f" ({extra})" if extra else "")


def _indices(hunks: Iterable[HunkReport], state: FileState) -> str:
    return ", ".join(f"#{h.index}" for h in hunks if h.state is state) or "none"


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
        raise PatchFormatError(f"{origin}: not a valid unified diff ({exc})") from None
    if len(patch_set) == 0:
        raise PatchFormatError(f"{origin}: contains no file changes (empty or not a diff)")
    files = tuple(_file_patch(patched, origin) for patched in patch_set)
    paths = [f.path for f in files]
    if len(set(paths)) != len(paths):
        raise PatchFormatError(f"{origin}: changes the same file more than once")
    return files


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


def _key(text: str, eol: str, exact_eol: bool) -> str:
    return text + (eol if exact_eol or not eol else "\n")


def _hunk(number: int, raw: Any, ops: list[tuple[str, str, str]], exact_eol: bool) -> Hunk:
    pre = tuple(_key(t, e, exact_eol) for k, t, e in ops if k != "+")
    post = tuple(_key(t, e, exact_eol) for k, t, e in ops if k != "-")
    header = (f"@@ -{raw.source_start},{raw.source_length} "
              f"+{raw.target_start},{raw.target_length} @@")
    return Hunk(number, header, int(raw.source_start), int(raw.target_start), tuple(ops),
                pre, post)


# --------------------------------------------------------------------------- the image


def split_lines(data: bytes) -> list[str]:
    """Lines with their endings; only ``\\n`` ends a line (``\\r\\n`` is kept whole)."""
    text = data.decode("utf-8", errors="surrogateescape")
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _join(lines: Sequence[str]) -> bytes:
    return "".join(lines).encode("utf-8", errors="surrogateescape")


class _Image:
    """A file as raw lines plus the keys hunks are compared with."""

    def __init__(self, raw: list[str], exact_eol: bool, eol: str) -> None:
        self.raw = raw
        self.eol = eol  # the ending LF patches' added lines take
        crlf = not exact_eol and any(line.endswith("\r\n") for line in raw)
        self.keys = [line[:-2] + "\n" if line.endswith("\r\n") else line
                     for line in raw] if crlf else raw
        self.exact_eol = exact_eol

    @classmethod
    def of(cls, data: bytes, exact_eol: bool) -> _Image:
        raw = split_lines(data)
        crlf = sum(1 for line in raw if line.endswith("\r\n"))
        eol = "\r\n" if crlf > len(raw) - crlf else "\n"
        return cls(raw, exact_eol, eol)

    def copy(self) -> _Image:
        image = _Image.__new__(_Image)
        image.raw = list(self.raw)
        image.keys = image.raw if self.keys is self.raw else list(self.keys)
        image.eol, image.exact_eol = self.eol, self.exact_eol
        return image

    def render(self) -> bytes:
        return _join(self.raw)

    def candidates(self, image: Sequence[str]) -> list[int]:
        """Every position where ``image`` matches exactly."""
        keys, size = self.keys, len(image)
        if size == 0:
            return list(range(len(keys) + 1))
        found: list[int] = []
        first, last, wanted = image[0], len(keys) - size, list(image)  # list: slices compare
        pos = -1
        while True:
            try:
                pos = keys.index(first, pos + 1, last + 1)
            except ValueError:
                return found
            if size == 1 or keys[pos:pos + size] == wanted:
                found.append(pos)

    def find(self, image: Sequence[str], line: int, beginning: bool, end: bool) -> int | None:
        """Where ``git apply`` puts the image: nearest to ``line``, the later one at a tie."""
        total, size = len(self.keys), len(image)
        if size > total:
            return None
        if beginning or end:
            pos = 0 if beginning else total - size
            if end and pos + size != total:
                return None
            return pos if self.keys[pos:pos + size] == list(image) else None
        line = min(max(line, 0), total)
        if size == 0:
            return line
        found = self.candidates(image)
        if not found:
            return None
        return min(found, key=lambda p: (abs(p - line), p < line))

    def splice(self, pos: int, hunk: Hunk, forward: bool) -> None:
        drop, add = ("-", "+") if forward else ("+", "-")
        raw: list[str] = []
        keys: list[str] = []
        same = self.keys is self.raw
        ptr = pos
        for kind, text, eol in hunk.ops:
            if kind == " ":
                raw.append(self.raw[ptr])
                keys.append(self.keys[ptr])
                ptr += 1
            elif kind == drop:
                ptr += 1
            elif kind == add:
                ending = eol if self.exact_eol or not eol else self.eol
                raw.append(text + ending)
                keys.append(_key(text, eol, self.exact_eol))
        self.raw[pos:ptr] = raw
        if not same:
            self.keys[pos:ptr] = keys


# --------------------------------------------------------------------------- placement


@dataclass(frozen=True)
class _Placement:
    result: _Image | None  # None: some hunk did not apply
    positions: tuple[int | None, ...]
    offsets: tuple[int, ...]
    evidence: int  # lines of the images found
    distance: int  # how far from their headers the images were found, summed


def _expected(hunk: Hunk, forward: bool) -> tuple[int, bool, bool]:
    """git's start line, must-match-at-beginning and must-match-at-end for one hunk."""
    old, new = (hunk.old_start, hunk.new_start) if forward else (hunk.new_start, hunk.old_start)
    zero = hunk.zero_context
    beginning = old == 0 or (old == 1 and not zero)
    end = not zero and hunk.trailing == 0
    return (new - 1 if new else 0), beginning, end


def _anchor(hunk: Hunk, forward: bool) -> int:
    """Where the image belongs in the evolving file, for offsets (an empty side names the
    line before it, so git's start line is one short for pure insertions and deletions)."""
    new, image = (hunk.new_start, hunk.post_keys) if forward else (hunk.old_start,
                                                                   hunk.pre_keys)
    return new - 1 if image and new else new


def _place(image: _Image, hunks: Sequence[Hunk], forward: bool) -> _Placement:
    work = image.copy()
    positions: list[int | None] = []
    offsets: list[int] = []
    evidence = distance = 0
    for hunk in hunks:
        line, beginning, end = _expected(hunk, forward)
        wanted = hunk.pre_keys if forward else hunk.post_keys
        pos = work.find(wanted, line, beginning, end)
        if pos is None:
            positions.append(None)
            return _Placement(None, tuple(positions), tuple(offsets), evidence, distance)
        anchor = _anchor(hunk, forward)
        positions.append(pos)
        offsets.append(pos - anchor)
        distance += min(abs(pos - anchor), abs(pos - line))  # equal lines: either is right
        evidence += len(wanted)
        work.splice(pos, hunk, forward)
    return _Placement(work, tuple(positions), tuple(offsets), evidence, distance)


@dataclass
class _Decision:
    state: FileState
    forward: _Placement | None
    reverse: _Placement | None


def _round_trip(image: _Image, hunks: Sequence[Hunk], forward: bool) -> _Placement | None:
    """The placement, if it succeeds and the opposite direction gives ``image`` back."""
    there = _place(image, hunks, forward)
    if there.result is None:
        return None
    back = _place(there.result, hunks, not forward)
    if back.result is None or back.result.raw != image.raw:
        return None
    return there


def _core(image: _Image, hunks: Sequence[Hunk]) -> _Decision:
    fwd = _round_trip(image, hunks, True)
    rev = _round_trip(image, hunks, False)
    if fwd is not None and rev is not None:
        score_f = (fwd.distance, -fwd.evidence)
        score_r = (rev.distance, -rev.evidence)
        state = FileState.PRISTINE if score_f < score_r else FileState.APPLIED
    elif fwd is not None:
        state = FileState.PRISTINE
    elif rev is not None:
        state = FileState.APPLIED
    else:
        state = FileState.CONFLICT
    return _Decision(state, fwd, rev)


def _reports(hunks: Sequence[Hunk], placement: _Placement, state: FileState) \
        -> tuple[HunkReport, ...]:
    return tuple(HunkReport(h.index, state, pos, off)
                 for h, pos, off in zip(hunks, placement.positions, placement.offsets, strict=True))


def analyze(patch: FilePatch, current: bytes | None) -> FileAnalysis:
    """Decide the state of one file, hunk by hunk, from its current content."""
    if patch.is_new or patch.is_deleted:
        return _analyze_whole(patch, current)
    if current is None:
        missing = tuple(HunkReport(h.index, FileState.CONFLICT, None, 0, "    (file is missing)")
                        for h in patch.hunks)
        return FileAnalysis(patch.path, FileState.CONFLICT, missing)
    image = _Image.of(current, patch.exact_eol)
    decision = _core(image, patch.hunks)
    if decision.state is FileState.APPLIED:
        assert decision.reverse is not None and decision.reverse.result is not None
        return FileAnalysis(patch.path, FileState.APPLIED,
                            _reports(patch.hunks, decision.reverse, FileState.APPLIED),
                            forward=(current,), reverse=(decision.reverse.result.render(),))
    if decision.state is FileState.PRISTINE:
        assert decision.forward is not None and decision.forward.result is not None
        after = decision.forward.result
        if _core(after, patch.hunks).state is not FileState.APPLIED:
            return _ambiguous(patch, image, decision.forward)
        return FileAnalysis(patch.path, FileState.PRISTINE,
                            _reports(patch.hunks, decision.forward, FileState.PRISTINE),
                            forward=(after.render(),), reverse=(current,))
    return _per_hunk(patch, image, current)


def _ambiguous(patch: FilePatch, image: _Image, placement: _Placement) -> FileAnalysis:
    """Applying here would leave a file the patch still applies to: refuse, show where."""
    reports = []
    shown = []
    for hunk, pos, off in zip(patch.hunks, placement.positions, placement.offsets, strict=True):
        found = image.candidates(hunk.pre_keys) if hunk.pre_keys else []
        if len(found) > 1 or off:
            lines = ", ".join(str(p + 1) for p in found[:8]) + (" ..." if len(found) > 8 else "")
            shown.append(f"hunk #{hunk.index} matches at line(s) {lines}" if lines else
                         f"hunk #{hunk.index} has no context and fits anywhere")
        listed = ", ".join(str(p + 1) for p in found[:8])
        reports.append(HunkReport(hunk.index, FileState.CONFLICT, pos, off,
                                  f"    candidate lines: {listed}" if listed else
                                  "    (no context: fits anywhere)"))
    where = "; ".join(shown) or "its own inserted lines would match again"
    reason = (f"ambiguous placement: after applying, the patch would still apply ({where}); "
              "port the patch with more context")
    return FileAnalysis(patch.path, FileState.CONFLICT, tuple(reports), reason)


def _per_hunk(patch: FilePatch, image: _Image, current: bytes) -> FileAnalysis:
    """Neither direction works as a whole: say, per hunk, what ``git apply`` would do."""
    states: list[FileState] = []
    for hunk in patch.hunks:
        line_f, beg_f, end_f = _expected(hunk, True)
        line_r, beg_r, end_r = _expected(hunk, False)
        fwd = image.find(hunk.pre_keys, line_f, beg_f, end_f)
        rev = image.find(hunk.post_keys, line_r, beg_r, end_r)
        removes = any(kind == "-" for kind, _, _ in hunk.ops)
        if fwd is not None and rev is not None and not removes:
            nearer = abs(rev - line_r) <= abs(fwd - line_f) and hunk.post_keys
            states.append(FileState.APPLIED if nearer else FileState.PRISTINE)
        elif fwd is not None and (hunk.pre_keys or rev is None):
            states.append(FileState.PRISTINE)
        elif rev is not None:
            states.append(FileState.APPLIED)
        else:
            states.append(FileState.CONFLICT)
    if FileState.combine(states) is not FileState.PARTIAL:  # a conflict, or one direction
        return _conflict(patch, image, states, _placed_but_unproven(image, patch.hunks))
    todo = [h for h, s in zip(patch.hunks, states, strict=True) if s is FileState.PRISTINE]
    done = [h for h, s in zip(patch.hunks, states, strict=True) if s is FileState.APPLIED]
    completed = _place(image, todo, True)
    undone = _place(image, done, False)
    if completed.result is None or undone.result is None or \
            _core(completed.result, patch.hunks).state is not FileState.APPLIED:
        return _conflict(patch, image, [FileState.CONFLICT] * len(states))
    pos_f = iter(zip(completed.positions, completed.offsets, strict=True))
    pos_r = iter(zip(undone.positions, undone.offsets, strict=True))
    reports = []
    for hunk, state in zip(patch.hunks, states, strict=True):
        pos, off = next(pos_f) if state is FileState.PRISTINE else next(pos_r)
        reports.append(HunkReport(hunk.index, state, pos, off))
    return FileAnalysis(patch.path, FileState.PARTIAL, tuple(reports),
                        forward=(completed.result.render(),), reverse=(undone.result.render(),))


def _placed_but_unproven(image: _Image, hunks: Sequence[Hunk]) -> str:
    forward = _place(image, hunks, True)
    if forward.result is None:
        return ""
    moved = sorted({off for off in forward.offsets if off})
    where = f" (offsets {', '.join(f'{o:+d}' for o in moved)})" if moved else ""
    return ("ambiguous placement: the hunks fit" + where + ", but the result would not "
            "reverse to this content, so their places cannot be proven; port the patch with "
            "more context")


def _conflict(patch: FilePatch, image: _Image, states: Sequence[FileState],
              reason: str = "") -> FileAnalysis:
    reports = []
    for hunk, state in zip(patch.hunks, states, strict=True):
        if state is FileState.CONFLICT:
            line, _, _ = _expected(hunk, True)
            reports.append(HunkReport(hunk.index, state, None, 0,
                                      _nearest_code(image, hunk, line)))
        else:
            reports.append(HunkReport(hunk.index, state, None, 0))
    if not reason and FileState.CONFLICT not in states:
        reason = ("every hunk matches on its own, but not all together (overlapping or "
                  "ambiguous placement)")
    return FileAnalysis(patch.path, FileState.CONFLICT, tuple(reports), reason)


def _nearest_code(image: _Image, hunk: Hunk, expected: int) -> str | None:
    """The window of the file that shares most lines with the pre-image, for conflict reports."""
    pre, keys = hunk.pre_keys, image.keys
    if not keys or not pre:
        return None
    where: dict[str, list[int]] = {}
    for pos, key in enumerate(keys):
        where.setdefault(key, []).append(pos)
    score: dict[int, int] = {}
    for i, key in enumerate(pre):
        for pos in where.get(key, ()):
            score[pos - i] = score.get(pos - i, 0) + 1
    if not score:
        best = min(max(expected, 0), len(keys) - 1)
    else:
        best = max(score, key=lambda p: (score[p], -abs(p - expected)))
    best = min(max(best, 0), len(keys) - 1)
    shown = image.raw[best:best + len(pre)]
    return "\n".join(f"    {best + i + 1:5d}| {line.rstrip(chr(10)).rstrip(chr(13))}"
                     for i, line in enumerate(shown))


# --------------------------------------------------------------------------- whole files


def whole_image(patch: FilePatch, side: str) -> bytes:
    """The whole file a creation ("+") or deletion ("-") patch holds, byte for byte."""
    return _join([text + eol for hunk in patch.hunks for kind, text, eol in hunk.ops
                  if kind in (" ", side)])


def _analyze_whole(patch: FilePatch, current: bytes | None) -> FileAnalysis:
    image = whole_image(patch, "+" if patch.is_new else "-")
    if patch.is_new:
        state = (FileState.PRISTINE if current is None else
                 FileState.APPLIED if _same_text(current, image, patch) else FileState.CONFLICT)
    else:
        state = (FileState.APPLIED if current is None else
                 FileState.PRISTINE if _same_text(current, image, patch) else FileState.CONFLICT)
    near = "    (the file exists with other content)" if state is FileState.CONFLICT else None
    reports = tuple(HunkReport(h.index, state, 0, 0, near) for h in patch.hunks)
    if state is FileState.CONFLICT:
        return FileAnalysis(patch.path, state, reports,
                            "" if reports else "the file exists with other content")
    before, after = (None, image) if patch.is_new else (image, None)
    forward: tuple[bytes | None] = (current,) if state is FileState.APPLIED else (after,)
    reverse: tuple[bytes | None] = (current,) if state is FileState.PRISTINE else (before,)
    return FileAnalysis(patch.path, state, reports, "", forward, reverse)


def _same_text(current: bytes, image: bytes, patch: FilePatch) -> bool:
    if current == image:
        return True
    mine, theirs = _Image.of(current, patch.exact_eol), _Image.of(image, patch.exact_eol)
    return mine.keys == theirs.keys


# --------------------------------------------------------------------------- rewriting


def apply_forward(patch: FilePatch, current: bytes | None, analysis: FileAnalysis) -> bytes | None:
    """Content after applying every pristine hunk (None: the file is deleted)."""
    if analysis.state is FileState.CONFLICT or analysis.forward is None:
        raise ValueError(f"{patch.path}: cannot rewrite a conflicting file")
    return analysis.forward[0]


def apply_reverse(patch: FilePatch, current: bytes | None, analysis: FileAnalysis) -> bytes | None:
    """Content after reverting every applied hunk (None: the file did not exist before)."""
    if analysis.state is FileState.CONFLICT or analysis.reverse is None:
        raise ValueError(f"{patch.path}: cannot rewrite a conflicting file")
    return analysis.reverse[0]
