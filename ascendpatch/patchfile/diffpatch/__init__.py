"""Unified diffs, parsed with unidiff and applied in memory, decided by content.

Three modules, one job each: :mod:`.parse` turns the diff's text into :class:`FilePatch`
objects; :mod:`.place` finds where each hunk belongs in a file, as ``git apply`` does (the
reference the tests compare with), and splices it in; :mod:`.analyze` decides from a file's
content whether it is pristine, applied, partial or a conflict, and gives the rewritten file.

Line endings: a patch whose lines carry ``\\r\\n`` is matched and written byte for byte; an LF
patch also matches a CRLF file and its added lines take the file's dominant ending. Creations
and deletions (``/dev/null``, git's ``new file mode``/``deleted file mode``, or a ``diff -N``
epoch timestamp) are decided on the whole file.
"""

from __future__ import annotations

from ascendpatch.patchfile.diffpatch.analyze import (
    FileAnalysis,
    HunkReport,
    analyze,
    apply_forward,
    apply_reverse,
)
from ascendpatch.patchfile.diffpatch.parse import FilePatch, Hunk, parse_patch
from ascendpatch.patchfile.diffpatch.place import split_lines

__all__ = ["FileAnalysis", "FilePatch", "Hunk", "HunkReport", "analyze", "apply_forward",
           "apply_reverse", "parse_patch", "split_lines"]
