"""Run the benchmark: each ascendpatch command against its named baseline, in the same run.

    python bench/run.py [--repeat N] [--json FILE]

Prints one line per comparison: both medians and their ratio, and whether the goal is met.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import build_env

GOALS = {"verify --no-probes / pip check": 0.5, "audit cold / sha256sum -P2": 0.4,
         "audit repeat / pip freeze": 0.5, "--version / pip --version": 0.33}


def timed(cmd: list[str], before: list[str] | None = None, repeat: int = 5) -> float:
    """Median wall time of ``cmd`` (``before`` runs untimed ahead of each run)."""
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    samples = []
    for _ in range(repeat):
        if before:
            subprocess.run(before, check=True)
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    python = build_env.build()
    site = build_env.site_packages()
    tool = [sys.executable, "-m", "ascendpatch", "--python", str(python)]
    pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    cache = site / ".ascendpatch" / "statcache.json"
    drop_cache = [sys.executable, "-c", f"import pathlib; pathlib.Path({str(cache)!r})"
                  ".unlink(missing_ok=True)"]
    # Both sides read warm files (page cache): the comparison is CPU work, not disk.
    sha = ["sh", "-c", f"find {site} -type f -print0 | xargs -0 -P2 -n 1000 sha256sum"]
    pairs = {
        "verify --no-probes / pip check": (timed([*tool, "verify", "--no-probes"],
                                                 repeat=args.repeat),
                                           timed([*pip, "check"], repeat=args.repeat)),
        "audit cold / sha256sum -P2": (timed([*tool, "audit", "--workers", "2"], drop_cache,
                                             repeat=args.repeat),
                                       timed(sha, repeat=args.repeat)),
        "audit repeat / pip freeze": (timed([*tool, "audit"], repeat=args.repeat),
                                      timed([*pip, "freeze"], repeat=args.repeat)),
        "--version / pip --version": (timed([sys.executable, "-m", "ascendpatch", "--version"],
                                            repeat=args.repeat),
                                      timed([*pip, "--version"], repeat=args.repeat)),
    }
    files = sum(1 for p in site.rglob("*") if p.is_file())
    print(f"environment: {site} ({files} files)")
    report = {}
    for name, (ours, base) in pairs.items():
        ratio = ours / base
        goal = GOALS[name]
        verdict = "meets" if ratio <= goal else "MISSES"
        print(f"{name:34s} {ours:7.3f}s / {base:7.3f}s = {ratio:5.2f}  ({verdict} goal {goal})")
        report[name] = {"ours": ours, "baseline": base, "ratio": ratio, "goal": goal}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    shutil.rmtree(site / ".ascendpatch", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
