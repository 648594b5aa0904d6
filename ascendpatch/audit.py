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

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ascendpatch.store import atomic
from ascendpatch.store.state import STATE_DIR, StateStore
from ascendpatch.target import Distribution, Target

CACHE_NAME = "statcache.json"
CACHE_FORMAT = 1
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
    hashes: dict[str, str] = field(default_factory=dict)  # rel -> sha256 of every checked file

    @property
    def unexpected(self) -> list[Finding]:
        return [f for f in self.findings if not f.expected]


@dataclass(frozen=True)
class _Entry:
    dist: Distribution
    rel: str  # relative to the target root
    path: Path
    sha256: str | None
    size: int | None


def file_sha256(path: Path) -> str:
    """Chunked, into one reused buffer (hashlib.file_digest needs Python 3.11)."""
    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while size := handle.readinto(buffer):
            digest.update(view[:size])
    return digest.hexdigest()


class StatCache:
    """(size, mtime_ns, inode, ctime_ns) -> sha256, stored in the target's state folder."""

    def __init__(self, store: StateStore) -> None:
        self.path = store.dir / CACHE_NAME
        self.store = store
        self.entries: dict[str, list[int | str]] = {}
        self.dirty = False
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
            if doc.get("format") == CACHE_FORMAT:
                self.entries = doc["files"]
        except (OSError, ValueError, KeyError):
            self.entries = {}

    @staticmethod
    def key(st: os.stat_result) -> list[int]:
        return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]

    def get(self, rel: str, st: os.stat_result) -> str | None:
        cached = self.entries.get(rel)
        if cached is not None and cached[:4] == self.key(st):
            return str(cached[4])
        return None

    def put(self, rel: str, st: os.stat_result, digest: str) -> None:
        self.entries[rel] = [*self.key(st), digest]
        self.dirty = True

    def save(self) -> None:
        """Best effort: a read-only target simply gets no cache."""
        if not self.dirty:
            return
        try:
            self.store.dir.mkdir(parents=True, exist_ok=True)
            data = json.dumps({"format": CACHE_FORMAT, "files": self.entries},
                              separators=(",", ":")).encode()
            atomic.write_atomic(self.path, data, mode=0o644)
        except OSError:
            pass


def _entries(target: Target, dists: Iterable[Distribution]) -> Iterator[_Entry]:
    root = target.root
    for dist in dists:
        for rel, rec in dist.record.items():
            path = Path(os.path.normpath(dist.location / rel))
            try:
                key = path.relative_to(root).as_posix()
            except ValueError:
                key = str(path)
            yield _Entry(dist, key, path, rec.sha256, rec.size)


def hash_files(items: list[tuple[str, Path, os.stat_result]], cache: StatCache,
               workers: int) -> dict[str, str]:
    """sha256 of each file, from the stat cache where it is still valid, else hashed."""
    digests: dict[str, str] = {}
    todo = []
    for rel, path, st in items:
        cached = cache.get(rel, st)
        if cached is not None:
            digests[rel] = cached
        else:
            todo.append((rel, path, st))
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for (rel, _path, st), digest in zip(todo, pool.map(lambda t: file_sha256(t[1]), todo),
                                            strict=True):
            digests[rel] = digest
            cache.put(rel, st, digest)
    return digests


def audit(target: Target, expected: dict[str, tuple[str, str]],
          dists: Iterable[Distribution] | None = None, workers: int | None = None,
          orphans: bool = True) -> AuditReport:
    """``expected``: rel path -> (sha256 ascendpatch wrote, why) from the ledger and manifest."""
    store = StateStore(target.root)
    cache = StatCache(store)
    chosen = list(dists if dists is not None else target.distributions.values())
    report = AuditReport()
    present: list[tuple[str, Path, os.stat_result]] = []
    entries: dict[str, _Entry] = {}
    for entry in _entries(target, chosen):
        if entry.sha256 is None:
            continue  # RECORD itself and .pyc files: no hash to check against
        try:
            st = entry.path.stat()
        except FileNotFoundError:
            report.findings.append(Finding("missing", entry.rel, entry.dist.name,
                                           f"{entry.dist.name} {entry.dist.version}"))
            continue
        present.append((entry.rel, entry.path, st))
        entries[entry.rel] = entry
    before = len(cache.entries), sum(1 for rel, _p, st in present if cache.get(rel, st))
    digests = hash_files(present, cache, workers or os.cpu_count() or 2)
    report.files_checked = len(present)
    report.files_hashed = len(present) - before[1]
    report.hashes = digests
    for rel, _path, st in present:
        report.findings += _compare(entries[rel], st, digests[rel], expected)
    if orphans:
        report.findings += _orphans(target, chosen, expected)
    cache.save()
    report.findings.sort(key=lambda f: (f.expected, f.path))
    return report


def _compare(entry: _Entry, st: os.stat_result, digest: str,
             expected: dict[str, tuple[str, str]]) -> list[Finding]:
    if digest == entry.sha256:
        return []
    size = "S" if entry.size is not None and entry.size != st.st_size else "."
    code = f"{size}.5"
    who = f"{entry.dist.name} {entry.dist.version}"
    wanted = expected.get(entry.rel)
    if wanted is not None and wanted[0] == digest:
        return [Finding(code, entry.rel, entry.dist.name, f"{who}: {wanted[1]}", expected=True)]
    return [Finding(code, entry.rel, entry.dist.name, f"{who}: changed")]


def _package_dirs(target: Target, dist: Distribution) -> set[Path]:
    tops = set()
    for rel in dist.record:
        first = rel.split("/", 1)[0]
        if "/" in rel and not first.endswith((".dist-info", ".data")) and first not in (
                "..", "__pycache__", STATE_DIR):
            tops.add(dist.location / first)
    return {t for t in tops if t.is_dir() and t.parent in target.site_packages}


def _orphans(target: Target, dists: list[Distribution],
             expected: dict[str, tuple[str, str]]) -> list[Finding]:
    listed: set[Path] = set()
    owners: dict[Path, Distribution] = {}
    for dist in target.distributions.values():
        for rel in dist.record:
            listed.add(Path(os.path.normpath(dist.location / rel)))
    for dist in dists:
        for folder in _package_dirs(target, dist):
            owners.setdefault(folder, dist)
    findings = []
    for folder, dist in sorted(owners.items()):
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for name in filenames:
                path = Path(dirpath) / name
                if path in listed or name.endswith(atomic.TEMP_SUFFIX):
                    continue
                rel = path.relative_to(target.root).as_posix()
                wanted = expected.get(rel)
                if wanted is not None and file_sha256(path) == wanted[0]:
                    findings.append(Finding("added", rel, dist.name, wanted[1], expected=True))
                    continue
                findings.append(Finding("orphan", rel, dist.name,
                                        f"in {dist.name}'s folder, listed by no RECORD"))
    return findings
