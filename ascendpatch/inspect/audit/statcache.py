"""The stat cache: (size, mtime_ns, inode, ctime_ns) -> digest, so a repeat audit of an
unchanged environment hashes nothing, and the last full audit's outcome (:class:`Summary`).

ctime cannot be set from user space, so a touched-back mtime does not fool it. A stat proves
nothing about a file changed in the same timestamp tick as it was hashed (git's "racy git",
Documentation/technical/racy-git.txt): on a file system with 1-second timestamps (ext4 with
128-byte inodes, FAT), a same-size rewrite within the second of an audit keeps size, mtime,
ctime and inode. So the cache records when the audit that wrote it started (``verified_ns``,
taken before any file was stat'ed), and an entry whose mtime or ctime is not safely older than
that (``ascendpatch.stamps.racy``) is *unverified*: the next audit hashes that file again, and
a cache saved without having done so forgets the entry (git's "smudging"). The cache lives
in ascendpatch's own cache folder (``$ASCENDPATCH_CACHE``, else ``$XDG_CACHE_HOME/ascendpatch``,
else ``~/.cache/ascendpatch``), one file per target, never inside the target: auditing an image
writes nothing into it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ascendpatch import cachedir, progress
from ascendpatch.hashing import record_to_hex
from ascendpatch.inspect.audit import hashpool, statfile
from ascendpatch.inspect.audit.hashpool import GONE, Done, Hasher
from ascendpatch.inspect.audit.report import Timings
from ascendpatch.inspect.audit.statfile import Entry
from ascendpatch.stamps import COARSE_RACY_NS, racy

CACHE_NAME = "statcache.v5"
# 3: kept outside the target, keyed by the target's folder; 4: the files' entries packed in
# columns inside JSON (statcache.json); 5: a binary file (statfile.py). A cache of another
# format is not read: the next audit is a full one (and its save removes the old file).
CACHE_FORMAT = statfile.FORMAT
# Each target's cache was a folder of its own (audit/<key>/), which nothing bounded: a fresh
# venv audited by each CI job left 2 MB for good. It is one file in audit/ now, where
# cachedir keeps the KEEP most recently written (fewer than the other caches keep: about 150
# bytes per audited file, a serving image's is several MB); a target's old folder goes at its
# next save.
_OLD_NAMES = (CACHE_NAME, "statcache.json")
KEEP = 16


def cache_path(root: Path | str) -> Path:
    """The stat cache of the target whose state folder is ``root``: outside the target."""
    from ascendpatch import catalog

    key = hashlib.sha256(os.fsencode(os.path.realpath(root))).hexdigest()[:24]
    return catalog.cache_dir() / "audit" / f"{key}.{CACHE_NAME}"


Missing = tuple[str, str, str]  # key, distribution name, version
Differ = tuple[str, str, str, str]  # key, rpm -V code, distribution name, version


@dataclass
class Summary:
    """The outcome of the last full audit, for the repeat audit that answers from the cache.

    Saved as the JSON object cache formats 3 and 4 hold ({"records", "missing",
    "differ", "orphan_folders"}, rows as lists), so a cache written before this class
    existed is still used."""

    records: str  # the RECORD files' key (orphans.records_key) the audit saw
    missing: list[Missing] = field(default_factory=list)
    differ: list[Differ] = field(default_factory=list)
    orphan_folders: list[str] = field(default_factory=list)
    unreadable: bool = False  # some file could not be read: such an outcome is not kept

    def to_json(self) -> dict[str, Any]:
        return {"records": self.records, "missing": [list(m) for m in self.missing],
                "differ": [list(d) for d in self.differ], "orphan_folders": self.orphan_folders}

    @classmethod
    def from_json(cls, doc: Any) -> Summary | None:
        """None for no summary, or for one of any other shape (the cache is then unused)."""
        if not isinstance(doc, dict) or not doc:
            return None
        try:
            missing = [(str(k), str(n), str(v)) for k, n, v in doc["missing"]]
            differ = [(str(k), str(c), str(n), str(v)) for k, c, n, v in doc["differ"]]
            return cls(str(doc["records"]), missing, differ,
                       [str(f) for f in doc.get("orphan_folders", [])])
        except (KeyError, TypeError, ValueError):
            return None


@dataclass
class FolderWalk:
    """What the orphan walk last saw in one package folder: the files no RECORD lists, and
    every folder's (mtime_ns, ctime_ns) so that a folder that gained or lost an entry shows.

    Saved as the JSON object cache formats 3 and 4 hold ({"records", "dirs", "unlisted",
    "owner"})."""

    records: str  # the RECORD files' key when the folder was walked
    dirs: list[list[Any]]  # [folder, mtime_ns, ctime_ns], as os.walk found them
    unlisted: list[str]  # absolute paths
    owner: tuple[str, str] = ("", "")  # the distribution's name and version

    def to_json(self) -> dict[str, Any]:
        return {"records": self.records, "dirs": self.dirs, "unlisted": self.unlisted,
                "owner": list(self.owner)}

    @classmethod
    def from_json(cls, doc: Any) -> FolderWalk | None:
        """None for an entry of any other shape (the folder is then walked again)."""
        try:
            name, version = doc.get("owner", ["", ""])
            return cls(str(doc["records"]), list(doc["dirs"]), [str(p) for p in doc["unlisted"]],
                       (str(name), str(version)))
        except (AttributeError, KeyError, TypeError, ValueError):
            return None


class StatCache:
    """(size, mtime_ns, inode, ctime_ns) -> digest in RECORD form, one file per target.

    Storing the RECORD form means an unchanged file is checked with one string comparison.
    ``verified_ns``: when the audit that saved the loaded entries started; ``started_ns``: when
    this one did (what :meth:`save` records). An entry hashed by this audit (``fresh``) is
    verified; one loaded is only when it is not :func:`racy` against ``verified_ns``."""

    def __init__(self, root: Path | str) -> None:
        self.started_ns = time.time_ns()  # before any file of this audit is stat'ed
        self.root = os.path.realpath(root)
        self.path = cache_path(root)
        # the entries as loaded, until something looks a file up (then the dict below)
        self._columns: statfile.Columns | None = None
        self._entries: dict[str, Entry] | None = {}
        self.orphans: dict[str, FolderWalk] = {}  # package folder -> its last walk
        self.summary: Summary | None = None  # the last full audit's outcome, see run._repeat
        self.verified_ns = 0
        self.fresh: set[str] = set()  # keys hashed (or re-hashed) since this cache was loaded
        self.dirty = False
        data = cachedir.read(self.path)
        if data:
            self._load(data)
        # A stat with mtime and ctime at or below this is never racy (the fast test).
        self.edge = self.verified_ns - COARSE_RACY_NS

    def _load(self, data: bytes) -> None:
        try:
            header, columns = statfile.load(data)
            if header.get("format") != CACHE_FORMAT or header.get("target") != self.root:
                return
            orphans = _walks(header.get("orphans", {}))
            summary = Summary.from_json(header.get("summary"))
            verified = header.get("verified_ns", 0)  # none: nothing verified
            if type(verified) is not int or not 0 <= verified <= self.started_ns:
                # (a start in the future would vouch for racy entries; the clock set back
                # costs one full audit)
                return
        except (ValueError, KeyError, AttributeError, TypeError):
            return  # no cache: a full audit
        self._columns, self._entries = columns, None
        self.orphans, self.summary, self.verified_ns = orphans, summary, verified

    @property
    def entries(self) -> dict[str, Entry]:
        """path -> (size, mtime_ns, inode, ctime_ns, digest); built from the loaded columns on
        first use (a repeat audit walks :meth:`rows` and never needs it)."""
        if self._entries is None:
            self._entries = self._columns.entries() if self._columns is not None else {}
            self._columns = None
        return self._entries

    def __len__(self) -> int:
        return len(self._columns) if self._columns is not None else len(self.entries)

    def rows(self) -> Iterable[statfile.Row]:
        """(path as bytes, size, mtime_ns, inode, ctime_ns) of every entry."""
        if self._columns is not None:
            return self._columns.rows()
        return ((os.fsencode(key), size, mtime, ino, ctime)
                for key, (size, mtime, ino, ctime, _digest) in self.entries.items())

    def vouches(self, rel: str, st: os.stat_result) -> bool:
        """Whether the entry of ``rel``, whose stat is ``st`` (the caller compared them), proves
        its digest: hashed by this audit, or not :func:`racy` against ``verified_ns``."""
        mtime, ctime = st.st_mtime_ns, st.st_ctime_ns
        return (mtime <= self.edge and ctime <= self.edge) or rel in self.fresh \
            or not racy(mtime, ctime, self.verified_ns)

    def get(self, rel: str, st: os.stat_result) -> str | None:
        cached = self.entries.get(rel)
        if cached is not None and cached[0] == st.st_size \
                and cached[1] == st.st_mtime_ns and cached[2] == st.st_ino \
                and cached[3] == st.st_ctime_ns and self.vouches(rel, st):
            return cached[4]
        return None

    def put(self, rel: str, st: os.stat_result, digest: str) -> None:
        old = self.entries.get(rel)
        self.entries[rel] = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, digest)
        self.fresh.add(rel)
        if old is None or old[4] != digest:
            self.summary = None  # a file hashed outside a full audit: its outcome may differ
        self.dirty = True

    def save(self) -> None:
        """Best effort: a cache folder that cannot be written simply gets no cache. An entry
        still unverified (this audit did not hash its file again) is forgotten: recorded
        with this audit's start, it would look verified."""
        if not self.dirty:
            return
        self._forget_unverified()
        # the clock stepped back during this audit: files written since may look older than
        # its start, so the entries it loaded and did not hash vouch for nothing (0: all racy)
        verified = self.started_ns if time.time_ns() >= self.started_ns else 0
        header = {"format": CACHE_FORMAT, "target": self.root, "verified_ns": verified,
                  "orphans": {f: w.to_json() for f, w in self.orphans.items()},
                  "summary": self.summary.to_json() if self.summary else {}}
        # an entry left out (numbers out of range: an mtime past 2262) drops the summary
        cachedir.write(self.path, statfile.dump(header, self.entries, dict(header, summary={})),
                       keep=KEEP)
        self._remove_old_place()
        self.dirty = False

    def _remove_old_place(self) -> None:
        """The folders every target's cache had before (audit/<key>/), whose files are never
        read again, removed with those files (a target audited once, a CI job's venv, is
        never saved again to remove its own); a link, a folder that is not this user's
        alone, or anything else there is left alone, quietly."""
        old_places: list[Path] = []
        with contextlib.suppress(OSError), os.scandir(self.path.parent) as entries:
            old_places = [Path(entry.path) for entry in entries
                          if len(entry.name) == 24 and cachedir.is_hex(entry.name)
                          and entry.is_dir(follow_symlinks=False)]
        for folder in old_places:
            if cachedir.problem(folder) is not None:
                continue  # (not this user's alone: not ours to clear, and no cause to warn)
            for old in _OLD_NAMES:
                with contextlib.suppress(OSError):
                    (folder / old).unlink()
            with contextlib.suppress(OSError):
                folder.rmdir()

    def _forget_unverified(self) -> None:
        stale = [rel for rel, cached in self.entries.items() if not self._kept(rel, cached)]
        for rel in stale:
            del self.entries[rel]
        if stale:
            self.summary = None  # the repeat audit needs every file's entry

    def _kept(self, rel: str, cached: Entry) -> bool:
        return rel in self.fresh or not racy(cached[1], cached[3], self.verified_ns)


def _walks(doc: Any) -> dict[str, FolderWalk]:
    folders = doc.items() if isinstance(doc, dict) else ()
    return {folder: walk for folder, entry in folders
            if (walk := FolderWalk.from_json(entry)) is not None}

@dataclass
class Outcome:
    stats: dict[str, os.stat_result] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)  # RECORD form
    missing: list[str] = field(default_factory=list)
    hashed: int = 0
    timings: Timings = field(default_factory=Timings)


def _stat_pass(items: Iterable[tuple[str, str, int | None]], cache: StatCache,
               hasher: Hasher, out: Outcome) -> None:
    """With a cache: one stat per file; only a file whose stat changed is queued to hash."""
    get = cache.get
    stats, digests, missing = out.stats, out.digests, out.missing
    for key, path, _size in items:
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            missing.append(key)
            continue
        stats[key] = st
        cached = get(key, st)
        if cached is None:
            hasher.add(key, path, st.st_size)
        else:
            digests[key] = cached


def stat_and_hash(items: Iterable[tuple[str, str, int | None]], cache: StatCache, workers: int,
                  meanwhile: Callable[[], None] | None = None) -> Outcome:
    """Digests (RECORD form) of files, hashing only those whose stat changed since last time.

    ``items``: (key, path, expected size). Cold (an empty cache), nothing is stat'ed up front:
    the expected sizes (from RECORD) order the work, largest first, and the biggest file starts
    hashing at once; each worker stats the file it opens. With a cache, this thread stats every
    file and queues the changed ones. ``meanwhile`` then runs on this thread while the others
    hash, and this thread joins the hashing when it is done."""
    out = Outcome()
    clock = time.perf_counter
    start = clock()
    hasher = Hasher(workers)
    if len(cache):
        _stat_pass(items, cache, hasher, out)
    else:
        for key, path, size in sorted(items, key=lambda item: -(item[2] or 0)):
            hasher.add(key, path, size or 0)
    hasher.close()
    out.timings.stat = clock() - start
    if meanwhile is not None:
        meanwhile()
    with progress.task(f"hashing {hasher.count} files"):  # a spinner on a terminal
        hashed = hasher.results()
    out.hashed = hasher.count - _collect(hashed, cache, out, start)
    if hasher.count:
        out.timings.hash_wall = clock() - hasher.started
    out.timings.phases = hashpool.phases()
    return out


def _collect(hashed: Done, cache: StatCache, out: Outcome, start: float) -> int:
    """The workers' results into ``out`` (and the cache), the largest file's timing; how many
    files turned out to be missing."""
    stats, digests, timings = out.stats, out.digests, out.timings
    gone = 0
    for key, digest, st, clocks in hashed:
        if digest == GONE:
            out.missing.append(key)
            gone += 1
            continue
        digests[key] = digest
        if st is None:  # unreadable
            continue
        stats[key] = st
        cache.put(key, st, digest)
        if st.st_size > timings.largest_bytes:
            timings.largest_path, timings.largest_bytes = key, st.st_size
            began, timings.largest_seconds, timings.largest_cpu = clocks or (start, 0.0, 0.0)
            timings.largest_start = began - start
    out.missing.sort()
    return gone


def hash_files(items: list[tuple[str, str, int | None]], cache: StatCache,
               workers: int) -> tuple[dict[str, str], dict[str, int]]:
    """Hex sha256 and size of each file that is there, through the stat cache (for
    snapshots). ``items``: (key, path, RECORD's size); nothing is stat'ed twice."""
    outcome = stat_and_hash(items, cache, workers)
    digests = {key: record_to_hex(digest) or "" for key, digest in outcome.digests.items()}
    sizes = {key: st.st_size for key, st in outcome.stats.items()}
    paths = {key: path for key, path, _size in items}
    for key in digests.keys() - sizes.keys():  # unreadable: no stat was taken
        with contextlib.suppress(OSError):
            sizes[key] = os.stat(paths[key]).st_size
    return digests, sizes
