"""Place hunks in a file as ``git apply`` does, and splice them in: the file as an image.

Hunks are applied in order to the evolving file; each one's pre-image is looked for exactly,
nearest to the line its header names (ties: the later line), anywhere in the file; a hunk
starting at line 1 or 0 must match at the top and one without trailing context at the end (not
for zero-context ``-U0`` hunks, as with ``git apply --unidiff-zero``). There is no fuzz.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ascendpatch.patchfile.diffpatch.parse import Hunk, line_key


def split_lines(data: bytes) -> list[str]:
    """Lines with their endings; only ``\\n`` ends a line (``\\r\\n`` is kept whole)."""
    text = data.decode("utf-8", errors="surrogateescape")
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def join_lines(lines: Sequence[str]) -> bytes:
    return "".join(lines).encode("utf-8", errors="surrogateescape")


class Image:
    """A file as raw lines plus the keys hunks are compared with."""

    def __init__(self, raw: list[str], exact_eol: bool, eol: str) -> None:
        self.raw = raw
        self.eol = eol  # the ending LF patches' added lines take
        crlf = not exact_eol and any(line.endswith("\r\n") for line in raw)
        self.keys = [line[:-2] + "\n" if line.endswith("\r\n") else line
                     for line in raw] if crlf else raw
        self.exact_eol = exact_eol

    @classmethod
    def of(cls, data: bytes, exact_eol: bool) -> Image:
        raw = split_lines(data)
        crlf = sum(1 for line in raw if line.endswith("\r\n"))
        eol = "\r\n" if crlf > len(raw) - crlf else "\n"
        return cls(raw, exact_eol, eol)

    def copy(self) -> Image:
        image = Image.__new__(Image)
        image.raw = list(self.raw)
        image.keys = image.raw if self.keys is self.raw else list(self.keys)
        image.eol, image.exact_eol = self.eol, self.exact_eol
        return image

    def render(self) -> bytes:
        return join_lines(self.raw)

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
                keys.append(line_key(text, eol, self.exact_eol))
        self.raw[pos:ptr] = raw
        if not same:
            self.keys[pos:ptr] = keys


# --------------------------------------------------------------------------- placement


@dataclass(frozen=True)
class Placement:
    result: Image | None  # None: some hunk did not apply
    positions: tuple[int | None, ...]
    offsets: tuple[int, ...]
    evidence: int  # lines of the images found
    distance: int  # how far from their headers the images were found, summed


def expected_at(hunk: Hunk, forward: bool) -> tuple[int, bool, bool]:
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


def place(image: Image, hunks: Sequence[Hunk], forward: bool) -> Placement:
    work = image.copy()
    positions: list[int | None] = []
    offsets: list[int] = []
    evidence = distance = 0
    for hunk in hunks:
        line, beginning, end = expected_at(hunk, forward)
        wanted = hunk.pre_keys if forward else hunk.post_keys
        pos = work.find(wanted, line, beginning, end)
        if pos is None:
            positions.append(None)
            return Placement(None, tuple(positions), tuple(offsets), evidence, distance)
        anchor = _anchor(hunk, forward)
        positions.append(pos)
        offsets.append(pos - anchor)
        distance += min(abs(pos - anchor), abs(pos - line))  # equal lines: either is right
        evidence += len(wanted)
        work.splice(pos, hunk, forward)
    return Placement(work, tuple(positions), tuple(offsets), evidence, distance)


def round_trip(image: Image, hunks: Sequence[Hunk], forward: bool) -> Placement | None:
    """The placement, if it succeeds and the opposite direction gives ``image`` back."""
    there = place(image, hunks, forward)
    if there.result is None:
        return None
    back = place(there.result, hunks, not forward)
    if back.result is None or back.result.raw != image.raw:
        return None
    return there
