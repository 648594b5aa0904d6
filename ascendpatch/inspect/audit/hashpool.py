"""The hash pool: the digests of many files, the largest first, on every core.

A cold audit is bounded by SHA-256 of the largest file (a digest cannot be split). RECORD's
sizes schedule the files longest first, so the biggest starts hashing on a background thread at
once, while small files wait in batches for the calling thread (after its own work) and any
thread done with the big ones. Each worker opens the file, fstats it (the stat the cache keeps,
taken before the read), reads and hashes it; reads of big files go through a 1 MiB buffer per
thread and release the GIL, as hashlib does.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from queue import SimpleQueue
from typing import TypeVar

from ascendpatch.hashing import CHUNK, read_digest, record_form

_T = TypeVar("_T")
# Set (to anything): each hashing thread also times its system calls and hashing, and the
# audit's timings carry the totals as ``phases`` (bench/run.py prints where a cold audit's
# time goes). Unset, the calls below are the plain functions: nothing is timed.
PHASES_ENV = "ASCENDPATCH_AUDIT_PHASES"
_local = threading.local()
_tables: list[dict[str, float]] = []  # one per thread that timed something


def _table() -> dict[str, float]:
    table: dict[str, float] | None = getattr(_local, "table", None)
    if table is None:
        table = _local.table = {}
        _tables.append(table)  # (atomic: threads share the list without a lock)
    return table


def _timed(phase: str, call: Callable[..., _T]) -> Callable[..., _T]:
    if not os.environ.get(PHASES_ENV):
        return call

    def timed(*args: object) -> _T:
        begin = time.perf_counter()
        try:
            return call(*args)
        finally:
            table = _table()
            table[phase] = table.get(phase, 0.0) + time.perf_counter() - begin
            table[f"{phase} calls"] = table.get(f"{phase} calls", 0) + 1
    return timed


def phases() -> dict[str, float]:
    """The timed phases (seconds, and counts), summed over threads, since the last call;
    empty unless PHASES_ENV is set. ``span``: the threads' time from their start to their
    last file; ``idle``: the part of it spent in none of the phases (waiting for work, the
    GIL or a core: the pool's hand-off)."""
    totals: dict[str, float] = {}
    for table in _tables:
        for phase, value in table.items():
            totals[phase] = totals.get(phase, 0.0) + value
    _tables.clear()
    _local.__dict__.clear()
    if totals:
        busy = sum(v for k, v in totals.items() if not k.endswith(" calls") and k != "span")
        totals["idle"] = totals.get("span", 0.0) - busy
    return totals


_open = _timed("open", os.open)
_fstat = _timed("fstat", os.fstat)
_close = _timed("close", os.close)
_small_digest = _timed("read+hash small", read_digest)
_big_read = _timed("read+hash big", read_digest)
_spanned = bool(os.environ.get(PHASES_ENV))

_SWITCH_INTERVAL = 0.001  # while hashing threads run (Python's default is 5 ms)
_BATCH_BYTES = 4 << 20  # small files go to the threads in batches of this many bytes ...
_BATCH_FILES = 48  # ... or files
_OPEN = os.O_RDONLY | os.O_CLOEXEC

HashJob = tuple[str, str, int]  # key, path, size (at the stat; RECORD's when cold)
HashBatch = list[HashJob]
Clocks = tuple[float, float, float]  # started (perf_counter), seconds, seconds of thread CPU
Hashed = tuple[str, str, os.stat_result | None, Clocks | None]
Done = list[Hashed]  # key, digest (RECORD form) or an error, fstat, clocks (big files)
UNREADABLE = "unreadable:"  # a digest that is an error: the file cannot be read
GONE = "missing"  # the file is not there (a path component missing or not a folder)


def hash_one(item: HashJob, buffer: bytearray) -> Hashed:
    """One file: open, fstat (the stat the cache keeps: taken before the read, as git does),
    read, hash, close. ``buffer`` is the thread's, allocated for its first big file."""
    key, path, _size = item
    try:
        fd = _open(path, _OPEN)
    except (FileNotFoundError, NotADirectoryError):
        return key, GONE, None, None
    except OSError as exc:
        return key, _unreadable(exc), None, None
    try:
        st = _fstat(fd)
        if st.st_size < CHUNK:
            digest, clocks = record_form(_small_digest(fd, st.st_size)), None
        else:
            digest, clocks = _big_digest(fd, st.st_size, buffer)
    except OSError as exc:
        return key, _unreadable(exc), None, None
    finally:
        _close(fd)
    return key, digest, st, clocks


def _big_digest(fd: int, size: int, buffer: bytearray) -> tuple[str, Clocks]:
    """A big file's digest, timed in wall and in this thread's CPU: the difference is time
    spent waiting (for the GIL, or for a core on a loaded host)."""
    if not buffer:
        buffer.extend(bytes(CHUNK))  # in place: the thread keeps it for its next big file
    start, cpu = time.perf_counter(), time.thread_time()
    digest = record_form(_big_read(fd, size, buffer))
    return digest, (start, time.perf_counter() - start, time.thread_time() - cpu)


def _unreadable(exc: OSError) -> str:
    return UNREADABLE + (exc.strerror or type(exc).__name__)


def _drain_small(lane: deque[HashBatch], buffer: bytearray, done: Done) -> None:
    while True:
        try:
            batch = lane.popleft()  # atomic: threads share the deque without a lock
        except IndexError:
            return
        done += [hash_one(item, buffer) for item in batch]


def _hash_worker(big: SimpleQueue[HashJob | None], small: deque[HashBatch]) -> Done:
    """A background thread: the big lane (largest first) until its stop sentinel, then help
    with the small files."""
    begin = time.perf_counter()
    buffer = bytearray()
    done: Done = []
    while (item := big.get()) is not None:
        done.append(hash_one(item, buffer))
    _drain_small(small, buffer, done)
    _span(begin)
    return done


def _span(begin: float) -> None:
    if _spanned:
        table = _table()
        table["span"] = table.get("span", 0.0) + time.perf_counter() - begin


class Hasher:
    """Two lanes. Files of 1 MiB and more go one by one, largest first, to background threads
    that start on the first of them: hashing them is C code that rarely needs the GIL. Small
    files, whose cost is mostly Python and system calls under the GIL, wait in batches for the
    calling thread (once it is done with its own work) and any thread done with the big lane."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers - 1)  # the calling thread hashes too
        self.big: SimpleQueue[HashJob | None] = SimpleQueue()
        self.small: deque[HashBatch] = deque()
        self.threads: list[threading.Thread] = []
        self.done: list[Done] = []
        self.batch: HashBatch = []
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
        begin = time.perf_counter()
        done: Done = []
        buffer = bytearray()
        _drain_small(self.small, buffer, done)
        while (item := self.big.get()) is not None:
            done.append(hash_one(item, buffer))
        _span(begin)
        for thread in self.threads:
            thread.join()
        sys.setswitchinterval(self.interval)
        for part in self.done:
            done += part
        return done


def hash_all(items: list[HashJob], workers: int) -> Done:
    """The digests of ``items``, on ``workers`` threads (the caller's one of them)."""
    hasher = Hasher(workers)
    for key, path, size in items:
        hasher.add(key, path, size)
    hasher.close()
    return hasher.results()
