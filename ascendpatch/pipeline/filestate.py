"""The one word for where a file (or a hunk, or a whole artifact) stands: :class:`FileState`.

Defined here, below both users: the patch matcher (:mod:`ascendpatch.patchfile.diffpatch`)
decides it per hunk and per file from content, every kind (:mod:`ascendpatch.kinds`) reports
it per file, and the planner folds an artifact's files into one with :meth:`FileState.combine`.
A hunk is never ``partial``; a file or an artifact can be.

:class:`Content` lives here for the same reason: the patch matcher says what a file holds before
and after a patch, the kinds say it for every file, and the engine and the store hash it. It
carries its sha256, computed on first use and kept: one apply used to hash the same bytes
about ten times (the kind, the ledger record, the re-check each hashed them again).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from ascendpatch.hashing import sha256_optional


class FileState(str, enum.Enum):
    PRISTINE = "pristine"  # not applied; applying is safe
    APPLIED = "applied"
    PARTIAL = "partial"  # some parts applied, some not
    CONFLICT = "conflict"  # content ascendpatch does not recognise
    # content ascendpatch wrote itself (its ledger says so), but what the file should hold has
    # changed since (the artifact's source was edited): applying replaces it (engine.recognise)
    OUTDATED = "outdated"

    def __str__(self) -> str:  # users read "pristine", never "FileState.PRISTINE"
        return self.value

    @classmethod
    def combine(cls, states: Iterable[FileState]) -> FileState | None:
        """The state of a whole made of parts: any conflict is a conflict, any outdated part
        (with no partial one) is outdated, all applied is applied, all pristine is pristine, a
        mix is partial; no part at all is None."""
        seen = set(states)
        if not seen:
            return None
        if cls.CONFLICT in seen:
            return cls.CONFLICT
        if cls.OUTDATED in seen and cls.PARTIAL not in seen:  # applying brings it all up to date
            return cls.OUTDATED
        if len(seen) == 1:
            return seen.pop()
        return cls.PARTIAL


@dataclass(frozen=True)
class Content:
    """File content that may be unknown: ``known`` False means we cannot tell it."""

    data: bytes | None  # None: the file is (or should be) absent
    known: bool = True
    link: str | None = None  # the file is (or should be) a symlink to this relative target
    mode: int | None = None  # permission bits to give a file this content creates

    @cached_property
    def sha256(self) -> str | None:
        """The hex digest of ``data`` (None: absent or unknown), computed once."""
        return sha256_optional(self.data) if self.known else None


UNKNOWN = Content(None, known=False)
