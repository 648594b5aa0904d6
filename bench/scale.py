"""Scale: the audit, the fleet report and ``logs`` at 1x, 2x and 4x their input, in one run.

    python bench/scale.py [--repeat N] [--json FILE]

Each row is one process per run (medians of ``--repeat`` runs after a warm-up): wall and CPU
time (user + sys, from wait4), the peak RSS of the process, and the same three relative to
1x beside the input's own growth. Linear means the ratios follow the input's (a fixed
start-up makes them a little smaller); quadratic work would show 4x and 16x. Beside the times,
a count that does not depend on the machine's load: the Python function calls of one run
(cProfile, the main thread), which grow with the work done, whatever else the machine runs.

- audit, cold (no cache) and repeat, of ``--site-packages`` folders with 1, 2 and 4 copies of
  the benchmark environment's distributions (bench/build_env.scale: hard links, new names);
- fleet-report of 125, 250 and 500 hosts varied from one real snapshot (bench/fleet.py);
- logs of 5,000, 10,000 and 20,000 distinct unknown WARNING lines among INFO lines
  (bench/logs.py), as shipped (at most MAX_GROUPS kinds kept, the rest counted).
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import build_env
import fleet
import logs
from run import Sample, load, machine, timed

TIMES = (1, 2, 4)
TOOL = [sys.executable, "-m", "ascendpatch"]


def calls(cmd: list[str], env: dict[str, str] | None = None) -> int:
    """Python function calls of one run of ``TOOL + cmd`` (cProfile's count, main thread)."""
    with tempfile.TemporaryDirectory() as tmp:
        prof = Path(tmp) / "prof"
        subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "ascendpatch",
                        *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False, env=env)
        return int(pstats.Stats(str(prof)).total_calls)  # type: ignore[attr-defined]


def row(name: str, times: int, size: int, unit: str, sample: Sample, count: int,
        base: tuple[int, Sample, int] | None) -> dict[str, object]:
    size0, first, count0 = base or (size, sample, count)
    line = (f"  {name:13s} {times}x {size:7d} {unit:8s} {sample.wall:7.3f}s wall "
            f"(x{sample.wall / first.wall:4.2f})  {sample.cpu:7.3f}s cpu "
            f"(x{sample.cpu / first.cpu:4.2f})  {sample.rss_kb / 1024:5.0f} MiB "
            f"(x{sample.rss_kb / first.rss_kb:4.2f})  {count:9d} calls "
            f"(x{count / count0:4.2f})  input x{size / size0:4.2f}")
    print(line)
    return {"name": name, "times": times, "size": size, "unit": unit, **vars(sample),
            "calls": count}


def audits(repeat: int, env: dict[str, str], cache: Path) -> list[dict[str, object]]:
    drop = [sys.executable, "-c", f"import shutil; shutil.rmtree({str(cache)!r}, "
            "ignore_errors=True)"]
    rows: list[dict[str, object]] = []
    bases: dict[str, tuple[int, Sample, int]] = {}
    for times in TIMES:
        folder = build_env.scale(times)
        where = ["--site-packages", str(folder)]
        out = subprocess.run([*TOOL, *where, "--json", "audit"], capture_output=True,
                             text=True, check=False, env=env).stdout
        files = int(json.loads(out)["files_checked"])
        for name in ("audit cold", "audit repeat"):
            cold = name == "audit cold"
            sample = timed([*TOOL, *where, "audit", "--workers", "2"], drop if cold else None,
                           repeat, env)
            if cold:
                subprocess.run(drop, check=True)
            count = calls([*where, "audit", "--workers", "2"], env)
            rows.append(row(name, times, files, "files", sample, count, bases.get(name)))
            bases.setdefault(name, (files, sample, count))
    return rows


def fleets(repeat: int, work: Path) -> list[dict[str, object]]:
    base_doc = fleet.real_snapshot()
    rows: list[dict[str, object]] = []
    first: tuple[int, Sample, int] | None = None
    for times in TIMES:
        hosts = 125 * times
        folder = work / f"fleet-{hosts}"
        folder.mkdir()
        fleet.generate(base_doc, hosts, folder)
        cmd = ["--json", "fleet-report", str(folder), "-o", str(work / f"report-{hosts}.html")]
        sample = timed([*TOOL, *cmd], repeat=repeat)
        count = calls(cmd)
        rows.append(row("fleet-report", times, hosts, "hosts", sample, count, first))
        first = first or (hosts, sample, count)
        shutil.rmtree(folder)
    return rows


def triage(repeat: int, work: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    first: tuple[int, Sample, int] | None = None
    for times in TIMES:
        lines = 5_000 * times
        path = logs.write_log(work, lines)
        sample = timed([*TOOL, "logs", str(path)], repeat=repeat)
        count = calls(["logs", str(path)])
        rows.append(row("logs", times, lines, "lines", sample, count, first))
        first = first or (lines, sample, count)
    return rows


def run_all(repeat: int) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="ascendpatch-bench-scale-"))
    env = dict(os.environ, ASCENDPATCH_CACHE=str(work / "cache"))
    try:
        print(f"scale: medians of {repeat} runs; each figure x relative to 1x; calls = Python "
              "function calls of one run (cProfile, load-independent)")
        report: dict[str, object] = {
            "audit": audits(repeat, env, work / "cache"),
            "fleet": fleets(repeat, work),
            "logs": triage(repeat, work),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    print(f"machine: {machine()}\nstarted with {load()}")
    build_env.build()
    report = run_all(args.repeat)
    finished = load()
    print(f"finished with {finished}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), **report,
                                         "load_end": finished}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
