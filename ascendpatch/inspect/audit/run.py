"""One audit: RECORD files read, digests through the stat cache and the hash pool, the orphan
walk on the calling thread meanwhile, every file classified; or the whole audit answered from
the cache when nothing changed since the last full one."""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from ascendpatch.env.target import Row, read_record, record_problem
from ascendpatch.hashing import record_to_hex
from ascendpatch.inspect.audit import classify
from ascendpatch.inspect.audit import orphans as walks
from ascendpatch.inspect.audit.classify import Entry, changed, orphan_finding
from ascendpatch.inspect.audit.hashpool import hash_all
from ascendpatch.inspect.audit.report import (
    AuditFinding,
    AuditReport,
    ExpectedSource,
    Timings,
    Wanted,
)
from ascendpatch.inspect.audit.statcache import StatCache, Summary, stat_and_hash

if TYPE_CHECKING:
    from ascendpatch.env.target import Distribution, Target


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
    wanted = Wanted(expected)
    cache = StatCache(target.root)
    full = dists is None and orphans
    records_key = walks.records_key(target) if orphans else ""
    if full:
        repeat = _repeat(target, cache, records_key, wanted, workers or os.cpu_count() or 2)
        if repeat is not None:
            cache.save()  # what racy files it hashed again are verified now
            repeat.timings.total = clock() - start
            return repeat
    chosen = list(dists if dists is not None else target.distributions.values())
    everything = target.distributions.values() if orphans else ()  # the walk reads them all
    rows = {dist: read_record(dist.metadata_dir) for dist in {*chosen, *everything}}
    entries = {e.rel: e for e in classify.entries(target, {d: rows[d] for d in chosen})}
    records_time = clock() - start
    report = AuditReport()
    orphan_findings: list[AuditFinding] = []

    def walk() -> None:
        begin = clock()
        orphan_findings.extend(walks.findings(target, chosen, rows, wanted, cache, records_key))
        report.timings.orphans = clock() - begin

    before_hashing = clock() - start
    outcome = stat_and_hash(((key, e.path, e.size) for key, e in entries.items()), cache,
                            workers or os.cpu_count() or 2, walk if orphans else None)
    report.files_checked, report.files_hashed = len(outcome.digests), outcome.hashed
    summary = Summary(records_key)
    report.findings = [*classify.record_findings(outcome, entries, wanted, summary),
                       *orphan_findings, *_unread_records(target, chosen, rows, summary)]
    if full:
        _remember(cache, entries, summary)
    cache.save()
    report.findings.sort(key=lambda f: (f.expected, f.path))
    report.timings = _merged(outcome.timings, records_time, report.timings.orphans,
                             before_hashing)
    report.timings.total = clock() - start
    return report


def _unread_records(target: Target, chosen: Iterable[Distribution],
                    rows: Mapping[Distribution, list[Row]], summary: Summary) \
        -> list[AuditFinding]:
    """A RECORD that is there but gave no rows (a FIFO, a huge file) hides every file of its
    distribution: that is a finding, never a clean audit."""
    found = []
    for dist in chosen:
        why = record_problem(dist.metadata_dir) if not rows[dist] else None
        if why is not None:
            summary.unreadable = True  # (not answered from the cache next time)
            path = str(dist.metadata_dir / "RECORD")
            key = os.path.relpath(path, target.root) if path.startswith(
                str(target.root) + "/") else path
            found.append(AuditFinding("unreadable", key, dist.name,
                                      f"{dist.name} {dist.version}: {why}; its files are "
                                      "unchecked"))
    return found


def _merged(timings: Timings, records: float, orphans: float, before_hashing: float) \
        -> Timings:
    """The hashing's timings with the RECORD reading's and the orphan walk's (which ran
    meanwhile); the largest file's start counted from the audit's own start."""
    timings.records, timings.orphans = records, orphans
    if timings.largest_bytes:
        timings.largest_start += before_hashing
    return timings


def _remember(cache: StatCache, entries: Mapping[str, Entry], summary: Summary) -> None:
    """After a full audit: keep only the files it checked, and its outcome for _repeat."""
    if summary.unreadable:
        cache.summary = None
        return
    stale = [key for key in cache.entries if key not in entries]
    for key in stale:
        del cache.entries[key]
    gone = [f for f, walk in cache.orphans.items() if walk.records != summary.records]
    for folder in gone:  # folders of distributions since removed
        del cache.orphans[folder]
    summary.orphan_folders = sorted(cache.orphans)
    if stale or gone or summary != cache.summary:
        cache.summary = summary
        cache.dirty = True


def _repeat(target: Target, cache: StatCache, records_key: str, expected: Wanted,
            workers: int) -> AuditReport | None:
    """The whole audit from the cache, when nothing changed since the last full one: the same
    RECORD files, every file with the same stat, every missing file still missing, and no
    package folder that gained or lost an entry. No RECORD is read; None when anything moved.

    This is git status's trick: one lstat per tracked file against the index."""
    summary = cache.summary
    if summary is None or summary.records != records_key or not len(cache):
        return None
    clock = time.perf_counter
    begin = clock()
    root = str(target.root) + "/"
    hashed = _unchanged(cache, summary, root, workers)
    if hashed is None:
        return None
    report = AuditReport(files_checked=len(cache), files_hashed=hashed)
    report.timings.stat = clock() - begin
    begin = clock()
    for folder in summary.orphan_folders:
        unlisted = walks.cached_unlisted(cache.orphans.get(folder), records_key)
        if unlisted is None:
            return None
        owner = cache.orphans[folder].owner[0]
        report.findings += [orphan_finding(path[len(root):], path, owner, expected)
                            for path in unlisted]
    report.timings.orphans = clock() - begin
    for key, name, version in summary.missing:
        report.findings.append(AuditFinding("missing", key, name, f"{name} {version}"))
    entries = cache.entries if summary.differ else {}  # (after the walk: it reads the columns)
    if not all(key in entries for key, *_rest in summary.differ):
        return None  # (a summary naming a file the cache does not hold: not this cache's)
    report.findings += [changed(code, key, name, version,
                                 record_to_hex(entries[key][4]) or "", expected)
                        for key, code, name, version in summary.differ]
    report.findings.sort(key=lambda f: (f.expected, f.path))
    return report


def _unchanged(cache: StatCache, summary: Summary, root: str, workers: int) -> int | None:
    """How many files were hashed again when every cached file has the same stat, every
    missing one is still missing, and each file whose entry cannot vouch for it (racy: it may
    have changed within the tick it was hashed in) is hashed again and found the same; None
    when anything moved."""
    try:
        racy = _stat_walk(cache, root)
    except OSError:
        return None
    if racy is None:
        return None
    if any(os.path.lexists(key if key.startswith("/") else root + key)
           for key, *_rest in summary.missing):
        return None
    return len(racy) if not racy or _same_again(cache, racy, workers) else None


def _stat_walk(cache: StatCache, root: str) -> list[tuple[str, str, int]] | None:
    """One stat per cached file (keys relative to the target's folder, through a descriptor
    of it: the kernel walks only the key's own components, 10 % of the walk; keys as the
    cache file holds them, bytes, which os.stat takes without encoding them again); the racy
    files to hash again, or None at the first file whose stat differs."""
    stat, vouches, edge, decode = os.stat, cache.vouches, cache.edge, os.fsdecode
    racy: list[tuple[str, str, int]] = []
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_PATH", 0))
    try:  # (an absolute key, a file outside the folder, is stat'ed as it is: fstatat)
        for path, size, mtime, ino, ctime in cache.rows():
            st = stat(path, dir_fd=folder)
            if st.st_mtime_ns != mtime or st.st_size != size or st.st_ino != ino \
                    or st.st_ctime_ns != ctime:
                return None
            if (mtime > edge or ctime > edge) and not vouches(key := decode(path), st):
                racy.append((key, key if key.startswith("/") else root + key, size))
    finally:
        os.close(folder)
    return racy


def _same_again(cache: StatCache, racy: list[tuple[str, str, int]], workers: int) -> bool:
    """Hash the racy files again: True when each still has its cached digest (then verified
    by this audit); otherwise the full audit runs, its changed files hashed once."""
    same = True
    for key, digest, st, _clocks in hash_all(racy, workers):
        if st is None:  # missing or unreadable: the full audit says which
            return False
        same = same and digest == cache.entries[key][4]
        cache.put(key, st, digest)
    return same
