"""Benchmark: `ascendpatch logs` is linear in distinct unknown lines (issue 11 item 16).

    python bench/logs.py [--repeat N] [--big-mb MB]

Triage of 2,500 and of 10,000 distinct unknown WARNING lines (each differs in letters, so
none group together), in the same run; the baseline is the 2,500-line log. Linear work gives a
ratio near 4 (the old list scan was quadratic: about 16). Measured twice: as shipped (at most
MAX_GROUPS kinds are kept, the rest counted) and with that cap lifted, so the grouping itself is
shown linear too. Each figure is the median of several runs after one warm-up.

Memory: peak RSS of `python -m ascendpatch logs` on a 200 MB log (mostly INFO lines, a
WARNING every 50 lines) against the same command on a 1 kB log; streaming keeps the ratio near
1 (reading the file whole would add its 200 MB).
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import statistics
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascendpatch.commands import logs as logs_command
from ascendpatch.deploy import logs as logs_core
from ascendpatch.manifest import loader

GOAL = 5.0  # 10k / 2.5k; linear is 4


def write_log(folder: Path, count: int) -> Path:
    letters = string.ascii_letters
    words = ("".join(w) for w in itertools.product(letters, repeat=4))
    path = folder / f"distinct-{count}.log"
    with path.open("w") as handle:
        for index, word in enumerate(itertools.islice(words, count)):
            handle.write(f"(EngineCore_DP0 pid=91) WARNING 11-30 05:00:{index % 60:02d} "
                         f"[worker.py:{index}] unexpected scheduler state {word} in queue\n")
        handle.write("INFO:     Application startup complete.\n")
    return path


def timed(path: Path, repeat: int) -> float:
    manifest = loader.load()
    logs_command.run(manifest, [path])
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        logs_command.run(manifest, [path])
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def write_big(folder: Path, megabytes: int) -> Path:
    path = folder / "big.log"
    info = ("(APIServer pid=7) INFO 11-30 05:00:00 [loggers.py:123] Engine 000: Avg prompt "
            "throughput: 0.0 tokens/s, Avg generation throughput: 26.1 tokens/s, Running: 1\n")
    warn = "(EngineCore_DP0 pid=9) WARNING 11-30 05:00:00 [x.py:1] slow step in queue\n"
    block = (info * 49 + warn).encode()
    with path.open("wb") as handle:
        for _ in range(megabytes * 1024 * 1024 // len(block) + 1):
            handle.write(block)
        handle.write(b"INFO:     Application startup complete.\n")
    return path


def peak_rss_mb(path: Path) -> float:
    """Peak RSS of a child running `ascendpatch logs PATH` (one child at a time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    subprocess.run([sys.executable, "-m", "ascendpatch", "logs", str(path)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                   env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(before, after) / 1024


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--big-mb", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small, large = write_log(Path(tmp), 2_500), write_log(Path(tmp), 10_000)
        ok = True
        for label, cap in (("as shipped", logs_core.MAX_GROUPS), ("cap lifted", 10**9)):
            logs_core.MAX_GROUPS = cap
            base, big = timed(small, args.repeat), timed(large, args.repeat)
            ratio = big / base
            ok &= ratio <= GOAL
            print(f"logs {label}: 2.5k distinct lines {base * 1000:.1f} ms, 10k "
                  f"{big * 1000:.1f} ms, ratio {ratio:.2f} (goal <= {GOAL:g}, linear = 4)")
        tiny = Path(tmp) / "tiny.log"
        tiny.write_text("INFO:     Application startup complete.\n")
        small_rss = peak_rss_mb(tiny)  # first: RUSAGE_CHILDREN keeps the maximum
        big_path = write_big(Path(tmp), args.big_mb)
        start = time.perf_counter()
        big_rss = peak_rss_mb(big_path)
        took = time.perf_counter() - start
        ok &= big_rss / small_rss <= 1.5
        print(f"logs memory: {args.big_mb} MB log peak RSS {big_rss:.0f} MB in {took:.0f} s, "
              f"1 kB log {small_rss:.0f} MB, ratio {big_rss / small_rss:.2f} (goal <= 1.5)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
