"""Port a diff artifact to a release: per hunk, does it apply exactly, at an offset, is it
already present upstream (obsolete for that release), or does it conflict (with the nearest
code)? This tells "retire the patch" apart from "port it" (a distinction patch-carrying
package managers lack, e.g. Spack #41447)."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from ascendpatch.patchfile.diffpatch import FilePatch, analyze
from ascendpatch.pipeline.filestate import FileState


class Verdict(str, enum.Enum):
    """Per hunk and per release: EXACT, OFFSET, OBSOLETE (already upstream), CONFLICT, GONE
    (the file is not in the release). By content (a release the catalog does not list, the
    diff kind's ``by_content``), also APPLIED, NOT_NEEDED and PORT_BY_HAND. The values are the
    words the output and --json show."""

    EXACT = "applies"
    OFFSET = "offset"
    OBSOLETE = "obsolete"
    CONFLICT = "conflict"
    GONE = "missing"
    APPLIED = "applied"
    NOT_NEEDED = "not needed"
    PORT_BY_HAND = "port by hand"


@dataclass(frozen=True)
class HunkVerdict:
    path: str
    index: int
    verdict: Verdict
    offset: int = 0
    nearest: str | None = None

    def describe(self) -> str:
        where = f"{self.path} hunk #{self.index}"
        if self.verdict is Verdict.OFFSET:
            return f"{where}: applies at offset {self.offset:+d}"
        if self.verdict is Verdict.OBSOLETE:
            return f"{where}: already present upstream"
        if self.verdict is Verdict.CONFLICT:
            near = f"; nearest code:\n{self.nearest}" if self.nearest else ""
            return f"{where}: conflict{near}"
        if self.verdict is Verdict.GONE:
            return f"{where}: the file is not in this release"
        return f"{where}: applies exactly"


def port(patches: tuple[FilePatch, ...], files: dict[str, bytes | None]) -> list[HunkVerdict]:
    verdicts = []
    for patch in patches:
        current = files.get(patch.path)
        if current is None and not patch.is_new:
            verdicts += [HunkVerdict(patch.path, h.index, Verdict.GONE) for h in patch.hunks]
            continue
        for report in analyze(patch, current).hunks:
            if report.state is FileState.APPLIED:
                verdict = Verdict.OBSOLETE
            elif report.state is FileState.CONFLICT:
                verdict = Verdict.CONFLICT
            else:
                verdict = Verdict.OFFSET if report.offset else Verdict.EXACT
            verdicts.append(HunkVerdict(patch.path, report.index, verdict, report.offset,
                                        report.nearest))
    return verdicts


def summary(verdicts: list[HunkVerdict]) -> Verdict:
    """One word for a release: obsolete, conflict, offset or applies."""
    kinds = {v.verdict for v in verdicts}
    if kinds & {Verdict.CONFLICT, Verdict.GONE}:
        return Verdict.CONFLICT
    if kinds == {Verdict.OBSOLETE}:
        return Verdict.OBSOLETE
    if Verdict.OBSOLETE in kinds:
        return Verdict.CONFLICT  # partly upstream, partly not: a human must look
    return Verdict.OFFSET if Verdict.OFFSET in kinds else Verdict.EXACT


# --------------------------------------------------------------------------- by content

Reader = Callable[[str], "bytes | None"]
