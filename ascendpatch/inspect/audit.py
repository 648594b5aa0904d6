"""Audit installed files against their dist-info RECORD, in the spirit of `rpm -V`.

Every file a RECORD lists is checked for presence, size and sha256, and classified: ok;
changed by ascendpatch as its ledger or manifest expects; changed (unexpected); missing. Files
inside a package's folders that no RECORD lists are orphans (a drop-in left behind after
`pip uninstall`). ``.pyc`` entries with empty hashes are not noise: they are skipped.

Speed:
- A stat cache (size, mtime_ns, inode, ctime_ns -> digest) means a repeat audit of an unchanged
  environment hashes nothing. ctime cannot be set from user space, so a touched-back mtime does
  not fool it. The cache lives in ascendpatch's own cache folder (``$ASCENDPATCH_CACHE``, else
  ``$XDG_CACHE_HOME/ascendpatch``, else ``~/.cache/ascendpatch``), one file per target, never
  inside the target: auditing an image writes nothing into it.
- A cold audit is bounded by SHA-256 of the largest file (a digest cannot be split). Nothing is
  stat'ed up front: RECORD's sizes schedule the files longest first, so the biggest starts
  hashing on a background thread at once, while small files wait in batches for the main
  thread (after its orphan walk) and any thread done with the big ones. Each worker opens the
  file, fstats it (the stat the cache keeps, taken before the read), reads and hashes it; reads
  of big files go through a 1 MiB buffer per thread and release the GIL, as hashlib does.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, NamedTuple

from ascendpatch import progress
from ascendpatch.env.introcache import read_private, write_private
from ascendpatch.env.target import Row, read_record
from ascendpatch.hashing import CHUNK, read_digest, record_form, record_to_hex, sha256_file
from ascendpatch.store import atomic

if TYPE_CHECKING:
    from ascendpatch.env.target import Distribution, Target

CACHE_NAME = "statcache.json"
CACHE_FORMAT = 3  # 3: kept outside the target, keyed by the target's folder
_SWITCH_INTERVAL = 0.001  # while hashing threads run (Python's default is 5 ms)
_BATCH_BYTES = 4 << 20  # small files go to the threads in batches of this many bytes ...
_BATCH_FILES = 48  # ... or files
_OPEN = os.O_RDONLY | os.O_CLOEXEC

Expected = Mapping[str, tuple[str, str]]
ExpectedSource = Expected | Callable[[], Expected]


@dataclass(frozen=True)
class Finding:
    code: str  # rpm -V style: "S.5" size+digest, "..5" digest, "missing", "orphan"
    path: str  # relative to the target's site-packages
    package: str
    detail: str
    expected: bool = False  # changed as ascendpatch's ledger / manifest expects


@dataclass
class Timings:
    """Where a run's time went (seconds); the benchmark prints the critical path from these."""

    records: float = 0.0  # reading every RECORD
    stat: float = 0.0  # the stat pass and queueing files to hash (cold: queueing only)
    hash_wall: float = 0.0  # first file queued to last digest back
    largest_path: str = ""
    largest_bytes: int = 0
    largest_seconds: float = 0.0  # SHA-256 of the largest file hashed: the lower bound
    largest_cpu: float = 0.0  # the CPU time of that SHA-256 (the rest was spent waiting)
    largest_start: float = 0.0  # when that hash started, after audit() (or the hashing) began
    orphans: float = 0.0
    total: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in vars(self).items()}


@dataclass
class AuditReport:
    findings: list[Finding] = field(default_factory=list)
    files_checked: int = 0
    files_hashed: int = 0
    timings: Timings = field(default_factory=Timings)


class _Entry(NamedTuple):
    dist: Distribution
    rel: str  # relative to the target root (absolute when outside it)
    path: str
    record_hash: str  # "sha256=<urlsafe b64>", as RECORD writes it
    size: int | None


def cache_path(root: Path | str) -> Path:
    """The stat cache of the target whose state folder is ``root``: outside the target."""
    from ascendpatch import catalog

    key = hashlib.sha256(os.fsencode(os.path.realpath(root))).hexdigest()[:24]
    return catalog.cache_dir() / "audit" / key / CACHE_NAME


class StatCache:
    """(size, mtime_ns, inode, ctime_ns) -> digest in RECORD form, one file per target.

    Storing the RECORD form means an unchanged file is checked with one string comparison."""

    def __init__(self, root: Path | str) -> None:
        self.root = os.path.realpath(root)
        self.path = cache_path(root)
        self.entries: dict[str, list[int | str]] = {}
        self.orphans: dict[str, dict[str, Any]] = {}  # package folder -> unlisted files
        self.summary: dict[str, Any] = {}  # the last full audit's outcome, see _repeat
        self.dirty = False
        try:
            doc = json.loads(read_private(self.path) or b"{}")
            if doc.get("format") == CACHE_FORMAT and doc.get("target") == self.root:
                self.entries = doc["files"]
                self.orphans = doc.get("orphans", {})
                self.summary = doc.get("summary") or {}
        except (OSError, ValueError, KeyError, AttributeError):
            self.entries, self.orphans, self.summary = {}, {}, {}

    def get(self, rel: str, st: os.stat_result) -> str | None:
        cached = self.entries.get(rel)
        if isinstance(cached, list) and len(cached) == 5 and cached[0] == st.st_size \
                and cached[1] == st.st_mtime_ns and cached[2] == st.st_ino \
                and cached[3] == st.st_ctime_ns:
            return str(cached[4])
        return None

    def put(self, rel: str, st: os.stat_result, digest: str) -> None:
        self.entries[rel] = [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, digest]
        self.summary = {}  # a file hashed outside a full audit: its outcome may have changed
        self.dirty = True

    def save(self) -> None:
        """Best effort: a cache folder that cannot be written simply gets no cache."""
        if not self.dirty:
            return
        data = json.dumps({"format": CACHE_FORMAT, "target": self.root, "files": self.entries,
                           "orphans": self.orphans, "summary": self.summary},
                          separators=(",", ":")).encode()
        write_private(self.path, data)
        self.dirty = False


def _location_key(root: str, location: str) -> str | None:
    """Prefix that turns a RECORD path into a key relative to root (None: outside root)."""
    if location == root:
        return ""
    if location.startswith(root + os.sep):
        return location[len(root) + 1:] + "/"
    return None


def _entries(target: Target, rows: Mapping[Distribution, list[Row]]) -> list[_Entry]:
    root = str(target.root)
    out = []
    for dist, dist_rows in rows.items():
        location = str(dist.location)
        prefix = _location_key(root, location)
        for rel, record_hash, size in dist_rows:
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
    timings: Timings = field(default_factory=Timings)


Item = tuple[str, str, int]  # key, path, size (at the stat; RECORD's when cold)
Batch = list[Item]
Clocks = tuple[float, float, float]  # started (perf_counter), seconds, seconds of thread CPU
Hashed = tuple[str, str, os.stat_result | None, Clocks | None]
Done = list[Hashed]  # key, digest (RECORD form) or an error, fstat, clocks (big files)
UNREADABLE = "unreadable:"  # a digest that is an error: the file cannot be read
_GONE = "missing"  # the file is not there (a path component missing or not a folder)


def _hash_one(item: Item, buffer: bytearray) -> Hashed:
    """One file: open, fstat (the stat the cache keeps: taken before the read, as git does),
    read, hash, close. ``buffer`` is the thread's, allocated for its first big file."""
    key, path, _size = item
    try:
        fd = os.open(path, _OPEN)
    except (FileNotFoundError, NotADirectoryError):
        return key, _GONE, None, None
    except OSError as exc:
        return key, _unreadable(exc), None, None
    try:
        st = os.fstat(fd)
        if st.st_size < CHUNK:
            digest, clocks = record_form(read_digest(fd, st.st_size)), None
        else:
            digest, clocks = _big_digest(fd, st.st_size, buffer)
    except OSError as exc:
        return key, _unreadable(exc), None, None
    finally:
        os.close(fd)
    return key, digest, st, clocks


def _big_digest(fd: int, size: int, buffer: bytearray) -> tuple[str, Clocks]:
    """A big file's digest, timed in wall and in this thread's CPU: the difference is time
    spent waiting (for the GIL, or for a core on a loaded host)."""
    if not buffer:
        buffer.extend(bytes(CHUNK))  # in place: the thread keeps it for its next big file
    start, cpu = time.perf_counter(), time.thread_time()
    digest = record_form(read_digest(fd, size, buffer))
    return digest, (start, time.perf_counter() - start, time.thread_time() - cpu)


def _unreadable(exc: OSError) -> str:
    return UNREADABLE + (exc.strerror or type(exc).__name__)


def _drain_small(lane: deque[Batch], buffer: bytearray, done: Done) -> None:
    while True:
        try:
            batch = lane.popleft()  # atomic: threads share the deque without a lock
        except IndexError:
            return
        done += [_hash_one(item, buffer) for item in batch]


def _hash_worker(big: SimpleQueue[Item | None], small: deque[Batch]) -> Done:
    """A background thread: the big lane (largest first) until its stop sentinel, then help
    with the small files."""
    buffer = bytearray()
    done: Done = []
    while (item := big.get()) is not None:
        done.append(_hash_one(item, buffer))
    _drain_small(small, buffer, done)
    return done


class _Hasher:
    """Two lanes. Files of 1 MiB and more go one by one, largest first, to background threads
    that start on the first of them: hashing them is C code that rarely needs the GIL. Small
    files, whose cost is mostly Python and system calls under the GIL, wait in batches for the
    calling thread (once it is done with its own work) and any thread done with the big lane."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers - 1)  # the calling thread hashes too
        self.big: SimpleQueue[Item | None] = SimpleQueue()
        self.small: deque[Batch] = deque()
        self.threads: list[threading.Thread] = []
        self.done: list[Done] = []
        self.batch: Batch = []
        self.batch_bytes = 0
        self.count = 0
        self.started = 0.0
        self.interval = 0.005

    def _start(self) -> None:
        self.started = time.perf_counter()
        self.interval = sys.getswitchinterval()
        sys.setswitchinterval(_SWITCH_INTERVAL)
        for _ in range(self.workers):
            done: Done = []
            self.done.append(done)
            thread = threading.Thread(
                target=lambda out=done: out.extend(_hash_worker(self.big, self.small)),
                name="ascendpatch-hash", daemon=True)
            thread.start()
            self.threads.append(thread)

    def add(self, key: str, path: str, size: int) -> None:
        if not self.threads:
            self._start()
        self.count += 1
        if size >= CHUNK:
            self.big.put((key, path, size))
            return
        self.batch.append((key, path, size))
        self.batch_bytes += size
        if self.batch_bytes >= _BATCH_BYTES or len(self.batch) >= _BATCH_FILES:
            self.small.append(self.batch)
            self.batch, self.batch_bytes = [], 0

    def close(self) -> None:
        """No more files: the last batch, then one stop sentinel for each thread and one for
        the caller of ``results``."""
        if not self.threads:
            return
        if self.batch:
            self.small.append(self.batch)
            self.batch = []
        for _ in range(self.workers + 1):
            self.big.put(None)

    def results(self) -> Done:
        """Every digest; the calling thread hashes small files, then what is left of the big
        lane, then waits for the threads."""
        if not self.threads:
            return []
        done: Done = []
        buffer = bytearray()
        _drain_small(self.small, buffer, done)
        while (item := self.big.get()) is not None:
            done.append(_hash_one(item, buffer))
        for thread in self.threads:
            thread.join()
        sys.setswitchinterval(self.interval)
        for part in self.done:
            done += part
        return done


def _stat_pass(items: Iterable[tuple[str, str, int | None]], cache: StatCache,
               hasher: _Hasher, out: _Outcome) -> None:
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
                  meanwhile: Callable[[], None] | None = None) -> _Outcome:
    """Digests (RECORD form) of files, hashing only those whose stat changed since last time.

    ``items``: (key, path, expected size). Cold (an empty cache), nothing is stat'ed up front:
    the expected sizes (from RECORD) order the work, largest first, and the biggest file starts
    hashing at once; each worker stats the file it opens. With a cache, this thread stats every
    file and queues the changed ones. ``meanwhile`` then runs on this thread while the others
    hash, and this thread joins the hashing when it is done."""
    out = _Outcome()
    clock = time.perf_counter
    start = clock()
    hasher = _Hasher(workers)
    if cache.entries:
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
    return out


def _collect(hashed: Done, cache: StatCache, out: _Outcome, start: float) -> int:
    """The workers' results into ``out`` (and the cache), the largest file's timing; how many
    files turned out to be missing."""
    stats, digests, timings = out.stats, out.digests, out.timings
    gone = 0
    for key, digest, st, clocks in hashed:
        if digest == _GONE:
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


class _Lazy:
    """The expected changes, computed only when a file differs (loading them costs imports)."""

    def __init__(self, source: ExpectedSource) -> None:
        self.source = source
        self.value: Expected | None = None

    def get(self, rel: str) -> tuple[str, str] | None:
        if self.value is None:
            self.value = self.source() if callable(self.source) else self.source
        return self.value.get(rel)


def audit(target: Target, expected: ExpectedSource,
          dists: Iterable[Distribution] | None = None, workers: int | None = None,
          orphans: bool = True) -> AuditReport:
    """``expected``: rel path -> (sha256 ascendpatch wrote, why) from the ledger and manifest,
    or a function returning it (called only when some file differs from its RECORD)."""
    with _no_cyclic_gc():
        return _audit(target, expected, dists, workers, orphans)


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """An audit makes ~100k tuples, strings and dicts and no reference cycles: the cyclic
    collector would walk them again and again for nothing (about 4 % of a cold audit's CPU).
    Reference counting still frees everything."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _audit(target: Target, expected: ExpectedSource, dists: Iterable[Distribution] | None,
           workers: int | None, orphans: bool) -> AuditReport:
    clock = time.perf_counter
    start = clock()
    wanted = _Lazy(expected)
    cache = StatCache(target.root)
    full = dists is None and orphans
    records_key = _records_key(target) if orphans else ""
    if full:
        repeat = _repeat(target, cache, records_key, wanted)
        if repeat is not None:
            repeat.timings.total = clock() - start
            return repeat
    chosen = list(dists if dists is not None else target.distributions.values())
    everything = list(target.distributions.values()) if orphans else chosen
    rows = {dist: read_record(dist.metadata_dir) for dist in {*chosen, *everything}}
    entries = {entry.rel: entry for entry in _entries(target, {d: rows[d] for d in chosen})}
    records_time = clock() - start
    report = AuditReport()
    orphan_findings: list[Finding] = []

    def walk() -> None:
        begin = clock()
        orphan_findings.extend(_orphans(target, chosen, rows, wanted, cache, records_key))
        report.timings.orphans = clock() - begin

    before_hashing = clock() - start
    outcome = stat_and_hash(((key, e.path, e.size) for key, e in entries.items()), cache,
                            workers or os.cpu_count() or 2, walk if orphans else None)
    report.files_checked, report.files_hashed = len(outcome.digests), outcome.hashed
    summary: dict[str, Any] = {"records": records_key, "missing": [], "differ": []}
    report.findings = [*_record_findings(outcome, entries, wanted, summary), *orphan_findings]
    if full:
        _remember(cache, entries, summary)
    cache.save()
    report.findings.sort(key=lambda f: (f.expected, f.path))
    orphan_time = report.timings.orphans
    report.timings = outcome.timings
    report.timings.records, report.timings.orphans = records_time, orphan_time
    if report.timings.largest_bytes:
        report.timings.largest_start += before_hashing
    report.timings.total = clock() - start
    return report


def _record_findings(outcome: _Outcome, entries: Mapping[str, _Entry], wanted: _Lazy,
                     summary: dict[str, Any]) -> list[Finding]:
    """What the hashes say against RECORD: missing, unreadable and differing files (and the
    same, in ``summary``, for the cache of the next repeat audit)."""
    findings = []
    for key in outcome.missing:
        dist = entries[key].dist
        summary["missing"].append([key, dist.name, dist.version])
        findings.append(Finding("missing", key, dist.name, f"{dist.name} {dist.version}"))
    for key, digest in outcome.digests.items():
        entry = entries[key]
        if digest.startswith(UNREADABLE):
            summary["unreadable"] = True
            findings.append(Finding("unreadable", key, entry.dist.name,
                                    f"{entry.dist.name} {entry.dist.version}: "
                                    f"{digest[len(UNREADABLE):]}"))
        elif digest != entry.record_hash:
            finding = _compare(entry, outcome.stats[key], record_to_hex(digest) or "", wanted)
            summary["differ"].append([key, finding.code, entry.dist.name, entry.dist.version])
            findings.append(finding)
    return findings


def _remember(cache: StatCache, entries: Mapping[str, _Entry], summary: dict[str, Any]) -> None:
    """After a full audit: keep only the files it checked, and its outcome for _repeat."""
    if summary.get("unreadable"):
        cache.summary = {}
        return
    stale = [key for key in cache.entries if key not in entries]
    for key in stale:
        del cache.entries[key]
    gone = [f for f, walk in cache.orphans.items() if walk.get("records") != summary["records"]]
    for folder in gone:  # folders of distributions since removed
        del cache.orphans[folder]
    summary["orphan_folders"] = sorted(cache.orphans)
    if stale or gone or summary != cache.summary:
        cache.summary = summary
        cache.dirty = True


def _repeat(target: Target, cache: StatCache, records_key: str, expected: _Lazy) \
        -> AuditReport | None:
    """The whole audit from the cache, when nothing changed since the last full one: the same
    RECORD files, every file with the same stat, every missing file still missing, and no
    package folder that gained or lost an entry. No RECORD is read; None when anything moved.

    This is git status's trick: one lstat per tracked file against the index."""
    summary = cache.summary
    if not summary or summary.get("records") != records_key or not cache.entries:
        return None
    clock = time.perf_counter
    begin = clock()
    root = str(target.root) + "/"
    stat = os.stat
    try:
        for key, cached in cache.entries.items():
            st = stat(key if key.startswith("/") else root + key)
            if cached[0] != st.st_size or cached[1] != st.st_mtime_ns \
                    or cached[2] != st.st_ino or cached[3] != st.st_ctime_ns:
                return None
    except OSError:
        return None
    for key, *_rest in summary["missing"]:
        if os.path.lexists(key if key.startswith("/") else root + key):
            return None
    report = AuditReport(files_checked=len(cache.entries))
    report.timings.stat = clock() - begin
    begin = clock()
    for folder in summary.get("orphan_folders", []):
        unlisted = _cached_unlisted(cache.orphans.get(folder), records_key)
        if unlisted is None:
            return None
        owner = cache.orphans[folder].get("owner", ["", ""])
        report.findings += [_orphan_finding(path[len(root):], path, owner[0], expected)
                            for path in unlisted]
    report.timings.orphans = clock() - begin
    for key, name, version in summary["missing"]:
        report.findings.append(Finding("missing", key, name, f"{name} {version}"))
    report.findings += [_changed(code, key, name, version,
                                 record_to_hex(str(cache.entries[key][4])) or "", expected)
                        for key, code, name, version in summary["differ"]]
    report.findings.sort(key=lambda f: (f.expected, f.path))
    return report


def _compare(entry: _Entry, st: os.stat_result, digest: str, expected: _Lazy) -> Finding:
    size = "S" if entry.size is not None and entry.size != st.st_size else "."
    return _changed(f"{size}.5", entry.rel, entry.dist.name, entry.dist.version, digest,
                    expected)


def _changed(code: str, key: str, name: str, version: str, digest: str,
             expected: _Lazy) -> Finding:
    """A file that differs from its RECORD: expected when its sha256 (hex) is what
    ascendpatch's ledger or manifest says it wrote."""
    who = f"{name} {version}"
    wanted = expected.get(key)
    if wanted is not None and wanted[0] == digest:
        return Finding(code, key, name, f"{who}: {wanted[1]}", expected=True)
    return Finding(code, key, name, f"{who}: changed")


def _package_dirs(target: Target, dist: Distribution, rows: list[Row]) -> set[str]:
    from ascendpatch.store.ledger import STATE_DIR

    location = str(dist.location)
    if dist.location not in target.site_packages:
        return set()
    tops = {rel.split("/", 1)[0] for rel, _hash, _size in rows if "/" in rel}
    tops -= {"..", "__pycache__", STATE_DIR}
    return {f"{location}/{top}" for top in tops
            if not top.endswith((".dist-info", ".data")) and os.path.isdir(f"{location}/{top}")}


def _listed(rows: Mapping[Distribution, list[Row]], sites: Iterable[Path]) \
        -> dict[str, set[str]]:
    """Every RECORD path, as a set of paths relative to each site folder (a plain row is
    used as it is: no string is built for it)."""
    listed: dict[str, set[str]] = {str(site): set() for site in sites}
    for dist, dist_rows in rows.items():
        location = str(dist.location)
        here = listed.setdefault(location, set())
        here.update(rel for rel, _h, _s in dist_rows if ".." not in rel)
        for rel, _h, _s in dist_rows:
            if ".." in rel:  # it may land in another site folder
                path = os.path.normpath(f"{location}/{rel}")
                for site, names in listed.items():
                    if path.startswith(site + "/"):
                        names.add(path[len(site) + 1:])
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


def _walk_unlisted(folder: str, location: str, listed: set[str]) \
        -> tuple[list[str], list[list[Any]]]:
    """Files under ``folder`` (in ``location``) that no RECORD lists, and the folders' stats."""
    unlisted, dirs = [], []
    cut = len(location) + 1
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        dirs.append([dirpath, *_dir_key(dirpath)])
        rel = dirpath[cut:] + "/"
        unlisted += [f"{dirpath}/{name}" for name in filenames
                     if rel + name not in listed and not name.endswith(atomic.TEMP_SUFFIX)]
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


def _orphans(target: Target, dists: list[Distribution], rows: Mapping[Distribution, list[Row]],
             expected: _Lazy, cache: StatCache, key: str) -> list[Finding]:
    owners: dict[str, Distribution] = {}
    for dist in dists:
        for folder in _package_dirs(target, dist, rows[dist]):
            owners.setdefault(folder, dist)
    root = str(target.root)
    listed: dict[str, set[str]] | None = None
    findings = []
    for folder, dist in sorted(owners.items()):
        unlisted = _cached_unlisted(cache.orphans.get(folder), key)
        if unlisted is None:
            listed = listed if listed is not None else _listed(rows, target.site_packages)
            location = str(dist.location)
            unlisted, dirs = _walk_unlisted(folder, location, listed.get(location, set()))
            cache.orphans[folder] = {"records": key, "dirs": dirs, "unlisted": unlisted,
                                     "owner": [dist.name, dist.version]}
            cache.dirty = True
        findings += [_orphan_finding(path[len(root) + 1:], path, dist.name, expected)
                     for path in unlisted]
    return findings


def _orphan_finding(rel: str, path: str, package: str, expected: _Lazy) -> Finding:
    wanted = expected.get(rel)
    if wanted is not None and sha256_file(path) == wanted[0]:
        return Finding("added", rel, package, wanted[1], expected=True)
    return Finding("orphan", rel, package, f"in {package}'s folder, listed by no RECORD")
