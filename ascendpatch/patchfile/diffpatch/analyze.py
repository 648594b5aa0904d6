"""Decide, from a file's content, where it stands against a patch; give the rewritten file.

The state of a file is decided so that applying twice is never possible:

* *pristine* when the whole patch applies and reversing the result gives the file back,
* *applied* when the whole patch reverses and re-applying gives the file back,
* when both hold (content cannot tell), the nearer placement wins, then the larger evidence
  (the image with more lines), then *applied*;
* a file is only called pristine when the patched result would be called applied; if not,
  the placement is ambiguous and the file is a *conflict* that names the candidate lines.

Creations and deletions are decided on the whole file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ascendpatch.patchfile.diffpatch.parse import FilePatch, Hunk
from ascendpatch.patchfile.diffpatch.place import (
    Image,
    Placement,
    expected_at,
    join_lines,
    place,
    round_trip,
)
from ascendpatch.pipeline.filestate import UNKNOWN, Content, FileState


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
    # The whole file once every hunk is applied (forward) or reverted (reverse); unknown for
    # a conflict.
    forward: Content = field(default=UNKNOWN, repr=False, compare=False)
    reverse: Content = field(default=UNKNOWN, repr=False, compare=False)

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


@dataclass
class _Decision:
    state: FileState
    forward: Placement | None
    reverse: Placement | None


def _core(image: Image, hunks: Sequence[Hunk]) -> _Decision:
    fwd = round_trip(image, hunks, True)
    rev = round_trip(image, hunks, False)
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


def _reports(hunks: Sequence[Hunk], placement: Placement, state: FileState) \
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
    if current and _whole_addition(patch) and not _same_text(current, whole_image(patch, "+"),
                                                                patch):
        return _whole_conflict(patch)
    image = Image.of(current, patch.exact_eol)
    decision = _core(image, patch.hunks)
    if decision.state is FileState.APPLIED:
        assert decision.reverse is not None and decision.reverse.result is not None
        return FileAnalysis(patch.path, FileState.APPLIED,
                            _reports(patch.hunks, decision.reverse, FileState.APPLIED),
                            forward=Content(current),
                            reverse=Content(decision.reverse.result.render()))
    if decision.state is FileState.PRISTINE:
        assert decision.forward is not None and decision.forward.result is not None
        after = decision.forward.result
        if _core(after, patch.hunks).state is not FileState.APPLIED:
            return _ambiguous(patch, image, decision.forward)
        return FileAnalysis(patch.path, FileState.PRISTINE,
                            _reports(patch.hunks, decision.forward, FileState.PRISTINE),
                            forward=Content(after.render()), reverse=Content(current))
    return _per_hunk(patch, image, current)


def _ambiguous(patch: FilePatch, image: Image, placement: Placement) -> FileAnalysis:
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


def _per_hunk(patch: FilePatch, image: Image, current: bytes) -> FileAnalysis:
    """Neither direction works as a whole: say, per hunk, what ``git apply`` would do."""
    states: list[FileState] = []
    for hunk in patch.hunks:
        line_f, beg_f, end_f = expected_at(hunk, True)
        line_r, beg_r, end_r = expected_at(hunk, False)
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
    completed = place(image, todo, True)
    undone = place(image, done, False)
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
                        forward=Content(completed.result.render()),
                        reverse=Content(undone.result.render()))


def _placed_but_unproven(image: Image, hunks: Sequence[Hunk]) -> str:
    forward = place(image, hunks, True)
    if forward.result is None:
        return ""
    moved = sorted({off for off in forward.offsets if off})
    where = f" (offsets {', '.join(f'{o:+d}' for o in moved)})" if moved else ""
    return ("ambiguous placement: the hunks fit" + where + ", but the result would not "
            "reverse to this content, so their places cannot be proven; port the patch with "
            "more context")


def _conflict(patch: FilePatch, image: Image, states: Sequence[FileState],
              reason: str = "") -> FileAnalysis:
    reports = []
    for hunk, state in zip(patch.hunks, states, strict=True):
        if state is FileState.CONFLICT:
            line, _, _ = expected_at(hunk, True)
            reports.append(HunkReport(hunk.index, state, None, 0,
                                      _nearest_code(image, hunk, line)))
        else:
            reports.append(HunkReport(hunk.index, state, None, 0))
    if not reason and FileState.CONFLICT not in states:
        reason = ("every hunk matches on its own, but not all together (overlapping or "
                  "ambiguous placement)")
    return FileAnalysis(patch.path, FileState.CONFLICT, tuple(reports), reason)


def _nearest_code(image: Image, hunk: Hunk, expected: int) -> str | None:
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
    return join_lines([text + eol for hunk in patch.hunks for kind, text, eol in hunk.ops
                  if kind in (" ", side)])


def _analyze_whole(patch: FilePatch, current: bytes | None) -> FileAnalysis:
    image = whole_image(patch, "+" if patch.is_new else "-")
    if patch.is_new:
        state = (FileState.PRISTINE if current is None else
                 FileState.APPLIED if _same_text(current, image, patch) else FileState.CONFLICT)
    else:
        state = (FileState.APPLIED if current is None else
                 FileState.PRISTINE if _same_text(current, image, patch) else FileState.CONFLICT)
    if state is FileState.CONFLICT:
        return _whole_conflict(patch)
    reports = tuple(HunkReport(h.index, state, 0, 0) for h in patch.hunks)
    before, after = (None, image) if patch.is_new else (image, None)
    forward = Content(current if state is FileState.APPLIED else after)
    reverse = Content(current if state is FileState.PRISTINE else before)
    return FileAnalysis(patch.path, state, reports, "", forward, reverse)


def _whole_conflict(patch: FilePatch) -> FileAnalysis:
    near = "    (the file exists with other content)"
    reports = tuple(HunkReport(h.index, FileState.CONFLICT, 0, 0, near) for h in patch.hunks)
    return FileAnalysis(patch.path, FileState.CONFLICT, reports,
                        "" if reports else "the file exists with other content")


def _whole_addition(patch: FilePatch) -> bool:
    """One hunk ``@@ -0,0 +1,N @@``: a whole file, under ``a/`` ``b/`` names instead of
    ``/dev/null``. ``git apply`` matches it at both ends of the file, so only an empty file
    takes it (and only the file holding exactly its lines has it applied); a file with other
    content is a conflict, never "not applied" (inserting at the top is what
    ``--unidiff-zero`` would do, which a lone zero-line hunk cannot ask for)."""
    if len(patch.hunks) != 1:
        return False
    hunk = patch.hunks[0]
    return hunk.old_start == 0 and not hunk.pre_keys and hunk.new_start == 1


def _same_text(current: bytes, image: bytes, patch: FilePatch) -> bool:
    if current == image:
        return True
    mine, theirs = Image.of(current, patch.exact_eol), Image.of(image, patch.exact_eol)
    return mine.keys == theirs.keys


# --------------------------------------------------------------------------- rewriting


def apply_forward(analysis: FileAnalysis) -> bytes | None:
    """Content after applying every pristine hunk (None: the file is deleted)."""
    return _rewritten(analysis, analysis.forward)


def apply_reverse(analysis: FileAnalysis) -> bytes | None:
    """Content after reverting every applied hunk (None: the file did not exist before)."""
    return _rewritten(analysis, analysis.reverse)


def _rewritten(analysis: FileAnalysis, content: Content) -> bytes | None:
    if analysis.state is FileState.CONFLICT or not content.known:
        raise ValueError(f"{analysis.path}: cannot rewrite a conflicting file")
    return content.data
