"""Audit installed files against their dist-info RECORD, in the spirit of `rpm -V`.

Every file a RECORD lists is checked for presence, size and sha256, and classified: ok;
changed by ascendpatch as its ledger or manifest expects; changed (unexpected); missing. Files
inside a package's folders that no RECORD lists are orphans (a drop-in left behind after
`pip uninstall`). ``.pyc`` entries with empty hashes are not noise: they are skipped.

One job per module: :mod:`.hashpool` hashes many files on every core, largest first;
:mod:`.statcache` keeps (size, mtime_ns, inode, ctime_ns) -> digest, the last full audit's
:class:`Summary` and each package folder's last :class:`FolderWalk`, so a repeat audit of an
unchanged environment hashes nothing; :mod:`.orphans` walks package folders for unlisted
files; :mod:`.classify` turns digests into findings; :mod:`.run` puts them together;
:mod:`.report` holds what an audit returns.
"""

from __future__ import annotations

from ascendpatch.inspect.audit.report import AuditFinding, AuditReport, Timings
from ascendpatch.inspect.audit.run import audit
from ascendpatch.inspect.audit.statcache import (
    FolderWalk,
    StatCache,
    Summary,
    cache_path,
    hash_files,
    stat_and_hash,
)

__all__ = [
    "AuditFinding",
    "AuditReport",
    "FolderWalk",
    "StatCache",
    "Summary",
    "Timings",
    "audit",
    "cache_path",
    "hash_files",
    "stat_and_hash",
]
