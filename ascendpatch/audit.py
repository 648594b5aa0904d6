"""Audit installed files against their dist-info RECORD, in the spirit of `rpm -V`.

Every file a RECORD lists is checked for presence, size and sha256, and classified: ok;
changed by ascendpatch as its ledger or manifest expects; changed (unexpected); missing. Files
inside a package's folders that no RECORD lists are orphans (a drop-in left behind after
`pip uninstall`). ``.pyc`` entries with empty hashes are not noise: they are skipped.

Speed: hashes run in parallel threads (hashlib releases the GIL), and a stat cache kept with the
target's state (size, mtime_ns, inode, ctime_ns -> sha256) means a repeat audit of an unchanged
environment hashes nothing. ctime cannot be set from user space, so a touched-back mtime does
not fool it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from queue import SimpleQueue
from typing import Any, NamedTuple

from ascendpatch.errors import AscendpatchError
from ascendpatch.hashing import record_to_hex
from ascendpatch.store import atomic
from ascendpatch.store.state import STATE_DIR, StateStore
from ascendpatch.target import Distribution, Target

CACHE_NAME = "statcache.json"
CACHE_FORMAT = 2  # 2: digests in RECORD form
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Finding:
    code: str  # rpm -V style: "S.5" size+digest, "..5" digest, "missing", "orphan"
    path: str  # relative to the target's site-packages
    package: str
    detail: str
    expected: bool = False  # changed as ascendpatch's ledger / manifest expects


@dataclass
class AuditReport:
    findings: list[Finding] = field(default_factory=list)
    files_checked: int = 0
    files_hashed: int = 0


class _Entry(NamedTuple):
    dist: Distribution
    rel: str  # relative to the target root (absolute when outside it)
    path: str
    record_hash: str  # "sha256=<urlsafe b64>", as RECORD writes it
    size: int | None


def record_form(digest: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def file_digest(path: Path | str, buffer: bytearray | None = None) -> bytes:
    """Chunked into one reused buffer (hashlib.file_digest needs Python 3.11)."""
    digest = hashlib.sha256()
    buf = buffer if buffer is not None else bytearray(_CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as handle:
        while size := handle.readinto(buf):
            digest.update(view[:size])
    return digest.digest()


def file_sha256(path: Path | str, buffer: bytearray | None = None) -> str:
    return file_digest(path, buffer).hex()


class StatCache:
    """(size, mtime_ns, inode, ctime_ns) -> digest in RECORD form, kept with the target's state.

    Storing the RECORD form means an unchanged file is checked with one string comparison."""

    def __init__(self, store: StateStore) -> None:
        self.path = store.dir / CACHE_NAME
        self.store = store
        self.entries: dict[str, list[int | str]] = {}
        self.orphans: dict[str, dict[str, Any]] = {}  # package folder -> unlisted files
        self.dirty = False
        try:  # never follows a link, never blocks on a FIFO; a bad cache is just no cache
            raw = store.read_state_file(self.path)
            doc = json.loads(raw) if raw is not None else {}
            if isinstance(doc, dict) and doc.get("format") == CACHE_FORMAT and \
                    isinstance(doc.get("files"), dict) and isinstance(doc.get("orphans", {}), dict):
                self.entries = doc["files"]
                self.orphans = doc.get("orphans", {})
        except (AscendpatchError, OSError, ValueError, KeyError):
            self.entries = {}

    def get(self, rel: str, st: os.stat_result) -> str | None:
        cached = self.entries.get(rel)
        if isinstance(cached, list) and len(cached) == 5 and cached[0] == st.st_size \
                and cached[1] == st.st_mtime_ns and cached[2] == st.st_ino \
                and cached[3] == st.st_ctime_ns:
            return str(cached[4])
        return None

    def put(self, rel: str, st: os.stat_result, digest: str) -> None:
        self.entries[rel] = [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, digest]
        self.dirty = True

    def save(self) -> None:
        """Best effort: a read-only target simply gets no cache."""
        if not self.dirty:
            return
        try:
            self.store.dir.mkdir(parents=True, exist_ok=True)
            data = json.dumps({"format": CACHE_FORMAT, "files": self.entries,
                               "orphans": self.orphans}, separators=(",", ":")).encode()
            atomic.write_atomic(self.path, data, mode=0o644)
        except OSError:
            pass


def _location_key(root: str, location: str) -> str | None:
    """Prefix that turns a RECORD path into a key relative to root (None: outside root)."""
    if location == root:
        return ""
    if location.startswith(root + os.sep):
        return location[len(root) + 1:] + "/"
    return None


def _entries(target: Target, dists: Iterable[Distribution]) -> list[_Entry]:
    root = str(target.root)
    out = []
    for dist in dists:
        location = str(dist.location)
        prefix = _location_key(root, location)
        for rel, (record_hash, size) in dist.record.items():
            if record_hash is None:
                continue  # RECORD itself and .pyc files: no hash to check against
            if ".." in rel or rel.startswith("/") or prefix is None:
                path = os.path.normpath(os.path.join(location, rel))
                key = path[len(root) + 1:] if path.startswith(root + os.sep) else path
            else:
                path, key = f"{location}/{rel}", prefix + rel
            out.append(_Entry(dist, key, path, record_hash, size))
    return out


@dataclass
class _Outcome:
    stats: dict[str, os.stat_result] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)  # RECORD form
    missing: list[str] = field(default_factory=list)
    hashed: int = 0


def _stat_pass(items: Iterable[tuple[str, str]], cache: StatCache, out: _Outcome) \
        -> list[tuple[str, str, os.stat_result]]:
    """One tight loop: stat every file, keep cached digests; return the files to hash."""
    todo = []
    get = cache.get
    for key, path in items:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            out.missing.append(key)
            continue
        out.stats[key] = st
        cached = get(key, st)
        if cached is None:
            todo.append((key, path, st))
        else:
            out.digests[key] = cached
    return todo


def _batches(todo: list[tuple[str, str, os.stat_result]]) -> list[list[tuple[str, str]]]:
    """Largest files first, one per batch; small files grouped (~8 MiB or 64 files a batch)."""
    batches: list[list[tuple[str, str]]] = []
    current: list[tuple[str, str]] = []
    size = 0
    for key, path, st in sorted(todo, key=lambda item: -item[2].st_size):
        current.append((key, path))
        size += st.st_size
        if size >= 8 * _CHUNK or len(current) >= 64:
            batches.append(current)
            current, size = [], 0
    if current:
        batches.append(current)
    return batches


def _hash_worker(queue: SimpleQueue[list[tuple[str, str]] | None]) -> list[tuple[str, str]]:
    """Pull batches until the sentinel: a thread done with a big file helps with the rest."""
    buffer = bytearray(4 * _CHUNK)
    done = []
    while (batch := queue.get()) is not None:
        done += [(key, record_form(file_digest(path, buffer))) for key, path in batch]
    return done


def stat_and_hash(items: Iterable[tuple[str, str]], cache: StatCache, workers: int) -> _Outcome:
    """Digests (RECORD form) of files, hashing only those whose stat changed since last time.

    The stat pass runs in one thread; hashing runs in ``workers`` threads that pull batches from
    one queue, largest files first (reads and hashlib updates of large buffers release the
    GIL, and SHA-256 of one file cannot be split, so the big files must start first)."""
    out = _Outcome()
    todo = _stat_pass(items, cache, out)
    if not todo:
        return out

    queue: SimpleQueue[list[tuple[str, str]] | None] = SimpleQueue()
    for batch in _batches(todo):
        queue.put(batch)
    count = max(1, min(workers, len(todo)))
    for _ in range(count):
        queue.put(None)
    with ThreadPoolExecutor(max_workers=count) as pool:
        for part in [pool.submit(_hash_worker, queue) for _ in range(count)]:
            for key, digest in part.result():
                out.digests[key] = digest
                cache.put(key, out.stats[key], digest)
    out.hashed = len(todo)
    return out


def hash_files(items: list[tuple[str, Path, os.stat_result]], cache: StatCache,
               workers: int) -> dict[str, str]:
    """Hex sha256 of each file, through the stat cache (for snapshots)."""
    outcome = stat_and_hash([(key, str(path)) for key, path, _st in items], cache, workers)
    return {key: record_to_hex(digest) or "" for key, digest in outcome.digests.items()}


def audit(target: Target, expected: dict[str, tuple[str, str]],
          dists: Iterable[Distribution] | None = None, workers: int | None = None,
          orphans: bool = True) -> AuditReport:
    """``expected``: rel path -> (sha256 ascendpatch wrote, why) from the ledger and manifest."""
    cache = StatCache(StateStore(target.root))
    chosen = list(dists if dists is not None else target.distributions.values())
    entries = {entry.rel: entry for entry in _entries(target, chosen)}
    outcome = stat_and_hash(((key, e.path) for key, e in entries.items()), cache,
                            workers or os.cpu_count() or 2)
    report = AuditReport(files_checked=len(outcome.digests), files_hashed=outcome.hashed)
    for key in outcome.missing:
        dist = entries[key].dist
        report.findings.append(Finding("missing", key, dist.name, f"{dist.name} {dist.version}"))
    for key, digest in outcome.digests.items():
        entry = entries[key]
        if digest != entry.record_hash:
            report.findings += _compare(entry, outcome.stats[key], record_to_hex(digest) or "",
                                        expected)
    if orphans:
        report.findings += _orphans(target, chosen, expected, cache)
    cache.save()
    report.findings.sort(key=lambda f: (f.expected, f.path))
    return report


def _compare(entry: _Entry, st: os.stat_result, digest: str,
             expected: dict[str, tuple[str, str]]) -> list[Finding]:
    size = "S" if entry.size is not None and entry.size != st.st_size else "."
    code = f"{size}.5"
    who = f"{entry.dist.name} {entry.dist.version}"
    wanted = expected.get(entry.rel)
    if wanted is not None and wanted[0] == digest:
        return [Finding(code, entry.rel, entry.dist.name, f"{who}: {wanted[1]}", expected=True)]
    return [Finding(code, entry.rel, entry.dist.name, f"{who}: changed")]


def _package_dirs(target: Target, dist: Distribution) -> set[str]:
    tops: set[str] = set()
    location = str(dist.location)
    if dist.location not in target.site_packages:
        return tops
    for rel in dist.record:
        first, sep, _rest = rel.partition("/")
        if sep and first not in ("..", "__pycache__", STATE_DIR) and \
                not first.endswith((".dist-info", ".data")):
            tops.add(f"{location}/{first}")
    return {top for top in tops if os.path.isdir(top)}


def _listed(target: Target) -> set[str]:
    listed: set[str] = set()
    for dist in target.distributions.values():
        location = str(dist.location)
        for rel in dist.record:
            listed.add(os.path.normpath(f"{location}/{rel}") if ".." in rel
                       else f"{location}/{rel}")
    return listed


def _records_key(target: Target) -> str:
    """Changes when any distribution is installed, removed or rewritten."""
    parts = []
    for dist in sorted(target.distributions.values(), key=lambda d: str(d.metadata_dir)):
        try:
            st = os.stat(f"{dist.metadata_dir}/RECORD")
        except OSError:
            continue
        parts.append(f"{dist.metadata_dir}:{st.st_mtime_ns}:{st.st_size}:{st.st_ino}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _dir_key(path: str) -> list[int]:
    st = os.stat(path)
    return [st.st_mtime_ns, st.st_ctime_ns]  # ctime cannot be set back from user space


def _walk_unlisted(folder: str, listed: set[str]) -> tuple[list[str], list[list[Any]]]:
    unlisted, dirs = [], []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        dirs.append([dirpath, *_dir_key(dirpath)])
        unlisted += [f"{dirpath}/{name}" for name in filenames
                     if f"{dirpath}/{name}" not in listed
                     and not name.endswith(atomic.TEMP_SUFFIX)]
    return unlisted, dirs


def _cached_unlisted(entry: dict[str, Any] | None, key: str) -> list[str] | None:
    """The files no RECORD lists, as last seen, while no folder gained or lost an entry."""
    if not entry or entry.get("records") != key:
        return None
    try:
        if any(_dir_key(d[0]) != d[1:] for d in entry["dirs"]):
            return None
    except OSError:
        return None
    return list(entry["unlisted"])


def _orphans(target: Target, dists: list[Distribution], expected: dict[str, tuple[str, str]],
             cache: StatCache | None = None) -> list[Finding]:
    owners: dict[str, Distribution] = {}
    for dist in dists:
        for folder in _package_dirs(target, dist):
            owners.setdefault(folder, dist)
    root = str(target.root)
    key = _records_key(target)
    memo = cache.orphans if cache is not None else {}
    listed: set[str] | None = None
    findings = []
    for folder, dist in sorted(owners.items()):
        unlisted = _cached_unlisted(memo.get(folder), key)
        if unlisted is None:
            listed = listed if listed is not None else _listed(target)
            unlisted, dirs = _walk_unlisted(folder, listed)
            memo[folder] = {"records": key, "dirs": dirs, "unlisted": unlisted}
            if cache is not None:
                cache.dirty = True
        findings += [_orphan(path[len(root) + 1:], path, dist, expected) for path in unlisted]
    return findings


def _orphan(rel: str, path: str, dist: Distribution,
            expected: dict[str, tuple[str, str]]) -> Finding:
    wanted = expected.get(rel)
    if wanted is not None and file_sha256(path) == wanted[0]:
        return Finding("added", rel, dist.name, wanted[1], expected=True)
    return Finding("orphan", rel, dist.name, f"in {dist.name}'s folder, listed by no RECORD")
