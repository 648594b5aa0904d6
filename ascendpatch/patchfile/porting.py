"""Port a diff artifact to a release: per hunk, does it apply exactly, at an offset, is it
already present upstream (obsolete for that release), or does it conflict (with the nearest
code)? This tells "retire the patch" apart from "port it" (a distinction patch-carrying
package managers lack, e.g. Spack #41447)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ascendpatch.filestate import FileState
from ascendpatch.patchfile.diffpatch import FilePatch, analyze

EXACT, OFFSET, OBSOLETE, CONFLICT, GONE = "applies", "offset", "obsolete", "conflict", "missing"


@dataclass(frozen=True)
class HunkVerdict:
    path: str
    index: int
    verdict: str
    offset: int = 0
    nearest: str | None = None

    def describe(self) -> str:
        where = f"{self.path} hunk #{self.index}"
        if self.verdict == OFFSET:
            return f"{where}: applies at offset {self.offset:+d}"
        if self.verdict == OBSOLETE:
            return f"{where}: already present upstream"
        if self.verdict == CONFLICT:
            near = f"; nearest code:\n{self.nearest}" if self.nearest else ""
            return f"{where}: conflict{near}"
        if self.verdict == GONE:
            return f"{where}: the file is not in this release"
        return f"{where}: applies exactly"


def port(patches: tuple[FilePatch, ...], files: dict[str, bytes | None]) -> list[HunkVerdict]:
    verdicts = []
    for patch in patches:
        current = files.get(patch.path)
        if current is None and not patch.is_new:
            verdicts += [HunkVerdict(patch.path, h.index, GONE) for h in patch.hunks]
            continue
        for report in analyze(patch, current).hunks:
            if report.state is FileState.APPLIED:
                verdict = OBSOLETE
            elif report.state is FileState.CONFLICT:
                verdict = CONFLICT
            else:
                verdict = OFFSET if report.offset else EXACT
            verdicts.append(HunkVerdict(patch.path, report.index, verdict, report.offset,
                                        report.nearest))
    return verdicts


def summary(verdicts: list[HunkVerdict]) -> str:
    """One word for a release: obsolete, conflict, offset or applies."""
    kinds = {v.verdict for v in verdicts}
    if kinds & {CONFLICT, GONE}:
        return CONFLICT
    if kinds == {OBSOLETE}:
        return OBSOLETE
    if OBSOLETE in kinds:
        return CONFLICT  # partly upstream, partly not: a human must look
    return OFFSET if OFFSET in kinds else EXACT


# --------------------------------------------------------------------------- by content

# What a release the catalog does not list gets, decided from its files (the diff kind's
# ``by_content``): beside EXACT / OFFSET, these.
APPLIED, NOT_NEEDED, PORT_BY_HAND = "applied", "not needed", "port by hand"

Reader = Callable[[str], "bytes | None"]
