"""Unified diffs, parsed with unidiff and applied in memory, decided by content.

For every hunk the engine looks for its pre-image (what the file holds before the patch) and
its post-image (after) in the current file, exactly, nearest to where the hunk says it
belongs, and never before the previous hunk. A hunk whose pre-image is found is *pristine*,
one whose post-image is found is *applied*, one with neither is a *conflict*. When both are
found the nearer match wins; at equal distance the larger image does, which keeps zero-context
insertions idempotent (the inserted lines at their place mean "applied", whatever an empty
pre-image "matches"). There is no fuzz: context must match exactly; offsets are reported.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ascendpatch.errors import PatchFormatError
from ascendpatch.paths import check_relative
from ascendpatch.textfile import Line, TextFile

DEV_NULL = "/dev/null"


class HunkState(str, enum.Enum):
    PRISTINE = "pristine"
    APPLIED = "applied"
    CONFLICT = "conflict"


class FileState(str, enum.Enum):
    PRISTINE = "pristine"
    APPLIED = "applied"
    PARTIAL = "partial"
    CONFLICT = "conflict"


@dataclass(frozen=True)
class Hunk:
    index: int  # 1-based, as people count hunks
    header: str
    source_index: int  # 0-based line where the pre-image starts in the original file
    ops: tuple[tuple[str, str], ...]  # (" " | "-" | "+", text without line ending)
    pre_no_eol: bool
    post_no_eol: bool

    @property
    def pre(self) -> tuple[str, ...]:
        return tuple(text for kind, text in self.ops if kind != "+")

    @property
    def post(self) -> tuple[str, ...]:
        return tuple(text for kind, text in self.ops if kind != "-")


@dataclass(frozen=True)
class FilePatch:
    path: str  # relative path of the file the patch changes
    is_new: bool
    is_deleted: bool
    hunks: tuple[Hunk, ...]


@dataclass(frozen=True)
class HunkReport:
    index: int
    state: HunkState
    position: int | None  # 0-based line in the current file where the image was found
    offset: int  # found position minus expected position
    nearest: str | None = None  # for conflicts: the closest code in the file

    def describe(self) -> str:
        if self.state is HunkState.CONFLICT:
            near = f"; nearest code:\n{self.nearest}" if self.nearest else ""
            return f"hunk #{self.index} does not match{near}"
        where = f" at offset {self.offset:+d} lines" if self.offset else ""
        return f"hunk #{self.index} {self.state.value}{where}"


@dataclass(frozen=True)
class FileAnalysis:
    path: str
    state: FileState
    hunks: tuple[HunkReport, ...]

    def summary(self) -> str:
        if self.state is FileState.PARTIAL:
            done = _indices(self.hunks, HunkState.APPLIED)
            todo = _indices(self.hunks, HunkState.PRISTINE)
            return f"{self.path}: partially patched (applied: hunks {done}; not applied: {todo})"
        if self.state is FileState.CONFLICT:
            bad = [h for h in self.hunks if h.state is HunkState.CONFLICT]
            return f"{self.path}: " + "; ".join(h.describe() for h in bad)
        offsets = [h for h in self.hunks if h.offset]
        extra = ", ".join(h.describe() for h in offsets)
        return f"{self.path}: {self.state.value}" + (f" ({extra})" if extra else "")


def _indices(hunks: Iterable[HunkReport], state: HunkState) -> str:
    return ", ".join(f"#{h.index}" for h in hunks if h.state is state) or "none"


# --------------------------------------------------------------------------- parsing


def parse_patch(text: str, *, origin: str) -> tuple[FilePatch, ...]:
    """Parse a unified diff; every problem is a PatchFormatError naming ``origin``."""
    from unidiff.errors import UnidiffParseError  # here: commands that parse no patch skip it
    from unidiff.patch import PatchSet

    try:
        patch_set = PatchSet(text)
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


def _file_patch(patched: Any, origin: str) -> FilePatch:
    source = str(getattr(patched, "source_file", "")).split("\t")[0]
    target = str(getattr(patched, "target_file", "")).split("\t")[0]
    is_new = source == DEV_NULL
    is_deleted = target == DEV_NULL
    if is_new and is_deleted:
        raise PatchFormatError(f"{origin}: a file goes from /dev/null to /dev/null")
    path = _strip_prefix(source if is_deleted else target)
    check_relative(path, origin=origin)
    if not is_new and not is_deleted and _strip_prefix(source) != path:
        raise PatchFormatError(f"{origin}: renames ({source} -> {target}) are not supported")
    hunks = tuple(_hunk(number, raw) for number, raw in enumerate(patched, start=1))
    if not hunks:
        raise PatchFormatError(f"{origin}: {path} has no hunks")
    return FilePatch(path=path, is_new=is_new, is_deleted=is_deleted, hunks=hunks)


def _hunk(number: int, raw: Any) -> Hunk:
    ops: list[tuple[str, str]] = []
    pre_no_eol = post_no_eol = False
    for line in raw:
        kind = line.line_type
        if kind == "\\":
            last = ops[-1][0] if ops else " "
            pre_no_eol = pre_no_eol or last in (" ", "-")
            post_no_eol = post_no_eol or last in (" ", "+")
            continue
        if kind not in (" ", "-", "+"):
            continue
        ops.append((kind, line.value.rstrip("\r\n")))
    source_start = int(raw.source_start)
    source_length = int(raw.source_length)
    source_index = source_start if source_length == 0 else source_start - 1
    header = (f"@@ -{source_start},{source_length} "
              f"+{raw.target_start},{raw.target_length} @@")
    return Hunk(number, header, source_index, tuple(ops), pre_no_eol, post_no_eol)


# --------------------------------------------------------------------------- matching


def _find(lines: Sequence[Line], image: Sequence[str], no_eol: bool, other_no_eol: bool,
          expected: int, start: int) -> int | None:
    """Nearest position >= start where ``image`` matches exactly (None if nowhere)."""
    size = len(image)
    if size == 0:
        return min(max(expected, start), len(lines))
    best: int | None = None
    first = image[0]
    for pos in range(start, len(lines) - size + 1):
        if lines[pos].text != first:
            continue
        if any(lines[pos + i].text != image[i] for i in range(1, size)):
            continue
        if not _eof_ok(lines, pos + size, no_eol, other_no_eol):
            continue
        if best is None or abs(pos - expected) < abs(best - expected):
            best = pos
    return best


def _eof_ok(lines: Sequence[Line], end: int, no_eol: bool, other_no_eol: bool) -> bool:
    at_eof = end == len(lines)
    if no_eol:
        return at_eof and lines[-1].eol == ""
    if other_no_eol and at_eof:
        return lines[-1].eol != ""
    return True


def _nearest_code(lines: Sequence[Line], image: Sequence[str], expected: int) -> str | None:
    """The window of the file that shares most lines with the pre-image, for conflict reports."""
    if not lines or not image:
        return None
    size = len(image)
    best_pos, best_score = 0, -1
    for pos in range(0, max(1, len(lines) - size + 1)):
        window = lines[pos:pos + size]
        score = sum(1 for i, line in enumerate(window) if line.text == image[i])
        if score > best_score or (score == best_score and
                                  abs(pos - expected) < abs(best_pos - expected)):
            best_pos, best_score = pos, score
    shown = lines[best_pos:best_pos + size]
    return "\n".join(f"    {best_pos + i + 1:5d}| {line.text}" for i, line in enumerate(shown))


def _classify(hunk: Hunk, lines: Sequence[Line], expected: int, start: int) -> HunkReport:
    pre, post = hunk.pre, hunk.post
    fwd = _find(lines, pre, hunk.pre_no_eol, hunk.post_no_eol, expected, start)
    rev = _find(lines, post, hunk.post_no_eol, hunk.pre_no_eol, expected, start)
    if fwd is None and rev is None:
        return HunkReport(hunk.index, HunkState.CONFLICT, None, 0,
                          _nearest_code(lines, pre, expected))
    if rev is None or (fwd is not None and _prefer_forward(fwd, rev, expected, pre, post)):
        assert fwd is not None
        return HunkReport(hunk.index, HunkState.PRISTINE, fwd, fwd - expected)
    return HunkReport(hunk.index, HunkState.APPLIED, rev, rev - expected)


def _prefer_forward(fwd: int, rev: int, expected: int, pre: Sequence[str],
                    post: Sequence[str]) -> bool:
    dist_f, dist_r = abs(fwd - expected), abs(rev - expected)
    if dist_f != dist_r:
        return dist_f < dist_r
    return len(pre) > len(post)


def analyze(patch: FilePatch, current: bytes | None) -> FileAnalysis:
    """Decide the state of one file, hunk by hunk, from its current content."""
    if patch.is_new or patch.is_deleted:
        return _analyze_whole(patch, current)
    if current is None:
        missing = tuple(HunkReport(h.index, HunkState.CONFLICT, None, 0, "    (file is missing)")
                        for h in patch.hunks)
        return FileAnalysis(patch.path, FileState.CONFLICT, missing)
    lines = TextFile.parse(current).lines
    reports: list[HunkReport] = []
    base, prev_end = 0, 0
    for hunk in patch.hunks:
        expected = base + (hunk.source_index - prev_end)
        report = _classify(hunk, lines, expected, base)
        reports.append(report)
        if report.position is not None:
            image = hunk.post if report.state is HunkState.APPLIED else hunk.pre
            base = report.position + len(image)
        prev_end = hunk.source_index + len(hunk.pre)
    return FileAnalysis(patch.path, _file_state(reports), tuple(reports))


def _file_state(reports: Sequence[HunkReport]) -> FileState:
    states = {r.state for r in reports}
    if HunkState.CONFLICT in states:
        return FileState.CONFLICT
    if states == {HunkState.APPLIED}:
        return FileState.APPLIED
    if states == {HunkState.PRISTINE}:
        return FileState.PRISTINE
    return FileState.PARTIAL


def _whole_image(patch: FilePatch, side: str) -> bytes:
    lines = [text for hunk in patch.hunks for kind, text in hunk.ops if kind in (" ", side)]
    no_eol = any(h.post_no_eol if side == "+" else h.pre_no_eol for h in patch.hunks)
    text = "\n".join(lines) + ("" if no_eol or not lines else "\n")
    return text.encode("utf-8", errors="surrogateescape")


def _analyze_whole(patch: FilePatch, current: bytes | None) -> FileAnalysis:
    image = _whole_image(patch, "+" if patch.is_new else "-")
    if patch.is_new:
        state = (HunkState.PRISTINE if current is None else
                 HunkState.APPLIED if _same_text(current, image) else HunkState.CONFLICT)
    else:
        state = (HunkState.APPLIED if current is None else
                 HunkState.PRISTINE if _same_text(current, image) else HunkState.CONFLICT)
    near = "    (the file exists with other content)" if state is HunkState.CONFLICT else None
    reports = tuple(HunkReport(h.index, state, 0, 0, near) for h in patch.hunks)
    return FileAnalysis(patch.path, _file_state(reports), reports)


def _same_text(current: bytes, image: bytes) -> bool:
    return TextFile.parse(current).texts == TextFile.parse(image).texts


# --------------------------------------------------------------------------- rewriting


def apply_forward(patch: FilePatch, current: bytes | None, analysis: FileAnalysis) -> bytes | None:
    """Content after applying every pristine hunk (None: the file is deleted)."""
    return _rewrite(patch, current, analysis, HunkState.PRISTINE, forward=True)


def apply_reverse(patch: FilePatch, current: bytes | None, analysis: FileAnalysis) -> bytes | None:
    """Content after reverting every applied hunk (None: the file did not exist before)."""
    return _rewrite(patch, current, analysis, HunkState.APPLIED, forward=False)


def _rewrite(patch: FilePatch, current: bytes | None, analysis: FileAnalysis,
             wanted: HunkState, *, forward: bool) -> bytes | None:
    if analysis.state in (FileState.CONFLICT,):
        raise ValueError(f"{patch.path}: cannot rewrite a conflicting file")
    if patch.is_new or patch.is_deleted:
        return _rewrite_whole(patch, current, analysis, forward=forward)
    assert current is not None
    text = TextFile.parse(current)
    lines = list(text.lines)
    eol = text.dominant_eol
    pairs = [(h, r) for h, r in zip(patch.hunks, analysis.hunks, strict=True) if r.state is wanted]
    for hunk, report in sorted(pairs, key=lambda pair: pair[1].position or 0, reverse=True):
        assert report.position is not None
        lines = _splice(lines, hunk, report.position, eol, forward=forward)
    return TextFile(tuple(lines)).render()


def _splice(lines: list[Line], hunk: Hunk, pos: int, eol: str, *, forward: bool) -> list[Line]:
    drop, add = ("-", "+") if forward else ("+", "-")
    new: list[Line] = []
    ptr = pos
    for kind, text in hunk.ops:
        if kind == " ":
            new.append(lines[ptr])
            ptr += 1
        elif kind == drop:
            ptr += 1
        elif kind == add:
            new.append(Line(text, eol))
    at_eof = ptr == len(lines)
    result_no_eol = hunk.post_no_eol if forward else hunk.pre_no_eol
    if at_eof and new:
        last = new[-1]
        new[-1] = Line(last.text, "" if result_no_eol else (last.eol or eol))
    return lines[:pos] + new + lines[ptr:]


def _rewrite_whole(patch: FilePatch, current: bytes | None, analysis: FileAnalysis, *,
                   forward: bool) -> bytes | None:
    state = analysis.state
    creating = (patch.is_new and forward) or (patch.is_deleted and not forward)
    done = FileState.APPLIED if forward else FileState.PRISTINE
    if state is done:
        return current
    if creating:
        return _whole_image(patch, "+" if patch.is_new else "-")
    return None
