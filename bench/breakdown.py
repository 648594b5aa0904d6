"""Where a cold audit's time goes, against its physical bound (bench/run.py prints these).

The bound: the process start (``python -c pass``, the same interpreter and site), then the
SHA-256 of the largest file on one core while the other core hashes the rest (or everything
shared by both, when the rest takes longer): each hashing figure is one core's, timed inside a
process of its own, as the audit hashes (a 1 MiB buffer, OpenSSL). The rest of the audit's
time is measured, not guessed: its start-up imports (``python -X importtime``), its phases
(``audit --json`` timings, with ``ASCENDPATCH_AUDIT_PHASES`` set: the hashing threads' open,
fstat, read+hash and close, and their idle time, the pool's hand-off), and two counts that
do not depend on the machine's load: its system calls (``strace -f -c``) and its Python
function calls (cProfile, the main thread).
"""

from __future__ import annotations

import contextlib
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# One core's SHA-256 of the files a listing names (NUL-separated), as the audit hashes them (a
# 1 MiB buffer, OpenSSL), timed inside the process: the hashing alone, no start-up.
HASH_ALONE = """\
import hashlib, sys, time
buf = bytearray(1 << 20)
view = memoryview(buf)
names = open(sys.argv[1], "rb").read().split(b"\\0")[:-1]
wall, cpu = time.perf_counter(), time.process_time()
for name in names:
    digest = hashlib.sha256()
    with open(name, "rb", buffering=0) as handle:
        while size := handle.readinto(buf):
            digest.update(view[:size])
print(time.perf_counter() - wall, time.process_time() - cpu)
"""


# The least a repeat audit in Python can cost: the interpreter's start and one os.stat of each
# file (the same files), in a bare loop, nothing compared and nothing imported.
STAT_ALONE = """\
import os, sys
stat = os.stat
for name in open(sys.argv[1], "rb").read().split(b"\\0")[:-1]:
    stat(name)
"""


@dataclass
class Bound:
    """The cold audit's physical bound: the process start, then the largest file's SHA-256 on
    one core while the other hashes the rest (or all of it shared by both cores, when the rest
    takes longer)."""

    start: float  # median wall of `python -c pass`, the same interpreter and site
    largest: float  # one core's SHA-256 of the largest file (median, timed in-process)
    rest: float  # one core's SHA-256 of every other file the audit hashes
    largest_cpu: float
    rest_cpu: float

    start_cpu: float = 0.0

    @property
    def seconds(self) -> float:
        return self.start + max(self.largest, (self.largest + self.rest) / 2)

    @property
    def cpu(self) -> float:
        """The work that cannot be skipped, on whichever cores: start and every SHA-256."""
        return self.start_cpu + self.largest_cpu + self.rest_cpu


def hash_alone(listing: Path, repeat: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds of HASH_ALONE over ``listing``."""
    runs = []
    for _ in range(repeat + 1):  # the first warms the page cache
        out = subprocess.run([sys.executable, "-c", HASH_ALONE, str(listing)],
                             capture_output=True, text=True, check=True).stdout.split()
        runs.append((float(out[0]), float(out[1])))
    return (statistics.median(r[0] for r in runs[1:]), statistics.median(r[1] for r in runs[1:]))


def repeat_floor(listing: Path, repeat: int) -> Any:
    """The repeat audit's floor (STAT_ALONE, the same interpreter): a ``run.Sample``."""
    from run import timed  # (run imports this module)

    return timed([sys.executable, "-c", STAT_ALONE, str(listing)], repeat=repeat)


def bound(scratch: Path, listing: Path, repeat: int) -> tuple[Bound, Path]:
    from run import timed  # (run imports this module)

    names = listing.read_bytes().split(b"\0")[:-1]
    largest = max(names, key=lambda n: Path(os.fsdecode(n)).stat().st_size)
    one, rest = scratch / "largest", scratch / "rest"
    one.write_bytes(largest + b"\0")
    rest.write_bytes(b"".join(n + b"\0" for n in names if n != largest))
    start = timed([sys.executable, "-c", "pass"], repeat=repeat)
    (big, big_cpu), (others, others_cpu) = hash_alone(one, repeat), hash_alone(rest, repeat)
    return Bound(start.wall, big, others, big_cpu, others_cpu, start.cpu), \
        Path(os.fsdecode(largest))


def import_times(cmd: Sequence[str], env: dict[str, str], top: int = 6) -> list[str]:
    """Start-up imports of one run (python -X importtime): their total and the biggest
    top-level ones (cumulative microseconds, as importtime prints them)."""
    err = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], capture_output=True,
                         text=True, check=False, env=env).stderr
    rows = []
    for line in err.splitlines():
        parts = line.split("|")
        if line.startswith("import time:") and len(parts) == 3 and \
                parts[2].startswith(" ") and not parts[2].startswith("  "):
            with contextlib.suppress(ValueError):
                rows.append((int(parts[1]), parts[2].strip()))
    total = sum(t for t, _ in rows) / 1e6
    best = sorted(rows, reverse=True)[:top]
    return [f"imports {total:.3f}s", *(f"{name} {t / 1e6:.3f}s" for t, name in best)]


def syscalls(cmd: Sequence[str], env: dict[str, str], top: int = 6) -> list[str]:
    """The most frequent system calls of one run (strace -f -c), or why there are none."""
    if shutil.which("strace") is None:
        return ["strace not installed"]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "counts"
        subprocess.run(["strace", "-f", "-c", "-o", str(out), *cmd], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False, env=env)
        lines = out.read_text().splitlines() if out.exists() else []
    rows = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
            rows.append((int(parts[3]), parts[-1]))
    total = sum(n for n, _ in rows)
    return [f"{total} system calls", *(f"{name} {n}" for n, name in sorted(rows)[::-1][:top])]


def python_calls(cmd: Sequence[str], env: dict[str, str]) -> int:
    """Python function calls of one run (cProfile: the main thread only)."""
    with tempfile.TemporaryDirectory() as tmp:
        prof = Path(tmp) / "prof"
        subprocess.run([cmd[0], "-m", "cProfile", "-o", str(prof), *cmd[1:]],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env)
        return int(pstats.Stats(str(prof)).total_calls)  # type: ignore[attr-defined]


def phases_run(tool: Sequence[str], env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """One cold audit: its wall time and its --json timings, its hashing threads' phases
    timed (the time outside audit() is this run's own: wall minus its audit() total)."""
    begin = time.perf_counter()
    out = subprocess.run([*tool, "--json", "audit", "--workers", "2"], capture_output=True,
                         text=True, check=False, env={**env, "ASCENDPATCH_AUDIT_PHASES": "1"})
    wall = time.perf_counter() - begin
    timings: dict[str, Any] = json.loads(out.stdout).get("timings", {})
    return wall, timings


def explain(total: float, limit: Bound, imports: list[str], t: dict[str, Any]) -> list[str]:
    """The lines that say where one cold audit's ``total`` seconds (wall) went."""
    p = t.get("phases", {})
    files = int(p.get("open calls", 0))
    inside = float(t.get("total", 0.0))
    return [
        f"bound {limit.seconds:.3f}s = start {limit.start:.3f}s + max(largest {limit.largest:.3f}s,"
        f" (largest + rest {limit.rest:.3f}s) / 2)  [one core's CPU: largest "
        f"{limit.largest_cpu:.3f}s, rest {limit.rest_cpu:.3f}s]",
        f"this run {total:.3f}s, of which outside audit() {total - inside:.3f}s (interpreter "
        f"start, {'; '.join(imports)}; the target's cached report, the lock, the output, "
        "teardown)",
        f"audit() {inside:.3f}s: RECORDs read and parsed {t.get('records', 0):.3f}s, queueing "
        f"{t.get('stat', 0):.3f}s, then the largest file from {t.get('largest_start', 0):.3f}s "
        f"for {t.get('largest_seconds', 0):.3f}s ({t.get('largest_cpu', 0):.3f}s of CPU); the "
        f"orphan walk {t.get('orphans', 0):.3f}s on the main thread meanwhile",
        f"hashing threads (summed): open {p.get('open', 0):.3f}s, fstat {p.get('fstat', 0):.3f}s,"
        f" close {p.get('close', 0):.3f}s ({files} files), read+hash small "
        f"{p.get('read+hash small', 0):.3f}s, big {p.get('read+hash big', 0):.3f}s, idle (the "
        f"pool's hand-off: waiting for work, the GIL or a core) {p.get('idle', 0):.3f}s",
    ]
