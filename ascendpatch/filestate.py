"""The one word for where a file (or a hunk, or a whole artifact) stands: :class:`FileState`.

Defined here, below both users: the diff engine (:mod:`ascendpatch.patchfile.diffpatch`)
decides it per hunk and per file from content, every kind (:mod:`ascendpatch.kinds`) reports
it per file, and the planner folds an artifact's files into one with :meth:`FileState.combine`.
A hunk is never ``partial``; a file or an artifact can be.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class FileState(str, enum.Enum):
    PRISTINE = "pristine"  # not applied; applying is safe
    APPLIED = "applied"
    PARTIAL = "partial"  # some parts applied, some not
    CONFLICT = "conflict"  # content ascendpatch does not recognise

    def __str__(self) -> str:  # users read "pristine", never "FileState.PRISTINE"
        return self.value

    @classmethod
    def combine(cls, states: Iterable[FileState]) -> FileState | None:
        """The state of a whole made of parts: any conflict is a conflict, all applied is
        applied, all pristine is pristine, a mix is partial; no part at all is None."""
        seen = set(states)
        if not seen:
            return None
        if cls.CONFLICT in seen:
            return cls.CONFLICT
        if len(seen) == 1:
            return seen.pop()
        return cls.PARTIAL
