"""fleet-report at 50, 200 and 500 hosts, against reading the same snapshots with json.load.

    python bench/fleet.py [--sizes 50,200,500] [--repeat 3] [--json FILE]

One real snapshot (a sandbox with the real vllm-ascend 0.18.0 wheel, patched by ascendpatch,
built once in $ASCENDPATCH_BENCH_DIR) is varied into N host snapshots: every 10th host at
another vllm-ascend version (its dist-info renamed, its package files re-hashed), every 7th
with a modified file, every 13th with an extra package. Each size runs
``ascendpatch fleet-report DIR -o report.html --json`` as a process and reports its median
wall time and peak RSS, the named baseline (a process that only json.loads the same files) and
the time per host x package, which stays flat when the cost grows linearly.
Goal at 500 hosts: <= 2 s and <= 300 MB.

``--hostile N`` makes host ``node-0000`` a hostile node that claims N invented packages (each
with one file of its own), as a compromised node could send: what one host can add to the
report is bounded (fleet.MAX_HOST_COLUMNS), so the same goal holds.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(os.environ.get("ASCENDPATCH_BENCH_DIR", Path.home() / ".cache/ascendpatch-bench"))
GOAL_SECONDS, GOAL_MB = 2.0, 300
LOAD_ONLY = ("import json, pathlib, sys\n"
             "for p in sorted(pathlib.Path(sys.argv[1]).glob('*.json')):\n"
             "    json.loads(p.read_text())\n")


def real_snapshot() -> dict[str, Any]:
    folder = BENCH / "fleet-sandbox"
    snap = BENCH / "fleet-snapshot.json"
    if not snap.exists():
        tool = [sys.executable, "-m", "ascendpatch"]
        subprocess.run([*tool, "sandbox", str(folder)], check=True)
        python = str(folder / "bin" / "python")
        subprocess.run([*tool, "--python", python, "apply"], check=True)
        subprocess.run([*tool, "--python", python, "snapshot", "-o", str(snap)], check=True)
    doc: dict[str, Any] = json.loads(snap.read_text())
    return doc


def _rehash(text: str, salt: str) -> str:
    return hashlib.sha256((salt + text).encode()).hexdigest()


def vary(base: dict[str, Any], i: int) -> dict[str, Any]:
    doc = copy.deepcopy(base)
    if i % 10 == 3:  # another release
        old = doc["distributions"]["vllm-ascend"]["version"]
        doc["distributions"]["vllm-ascend"]["version"] = "0.18.0rc1"
        doc["files"] = {k.replace(f"vllm_ascend-{old}.", "vllm_ascend-0.18.0rc1."):
                        (_rehash(v, "rc1") if k.startswith("vllm_ascend") else v)
                        for k, v in doc["files"].items()}
    if i % 7 == 5:  # a hand-edited file
        key = sorted(k for k in doc["files"] if k.startswith("vllm_ascend/"))[i % 50]
        doc["files"][key] = _rehash(key, str(i))
        for aid in doc["artifacts"]:
            doc["artifacts"][aid] = "conflict"
    if i % 13 == 1:  # an extra package
        doc["distributions"]["debugpy"] = {"name": "debugpy", "version": "1.8.0",
                                           "installer": "pip", "requested": True,
                                           "direct_url": None}
    return doc


def invent(doc: dict[str, Any], count: int) -> dict[str, Any]:
    """``doc`` claiming ``count`` more packages, each with one file."""
    doc = copy.deepcopy(doc)
    for i in range(count):
        name = f"invented-{i:05d}"
        doc["distributions"][name] = {"name": name, "version": f"1.{i}", "installer": "pip",
                                      "requested": True, "direct_url": None}
        doc["files"][f"invented_{i:05d}/__init__.py"] = _rehash(name, "x")
    return doc


def generate(base: dict[str, Any], n: int, folder: Path, hostile: int = 0) -> None:
    for i in range(n):
        doc = vary(base, i)
        if i == 0 and hostile:
            doc = invent(doc, hostile)
        (folder / f"node-{i:04d}.json").write_text(json.dumps(doc, indent=1))


def measure(cmd: list[str], repeat: int) -> tuple[float, float]:
    """Median wall seconds and the peak RSS (MB) of ``cmd`` run as a child process."""
    samples, peak = [], 0.0
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, _, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        samples.append(time.perf_counter() - start)
        peak = max(peak, usage.ru_maxrss / 1024)  # Linux: KiB
    return statistics.median(samples), peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="50,200,500")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--hostile", type=int, default=0, metavar="N",
                        help="node-0000 claims N invented packages")
    args = parser.parse_args()
    base = real_snapshot()
    packages = len(base["distributions"])
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "snapshots"
            folder.mkdir()
            generate(base, n, folder, args.hostile)
            report = [sys.executable, "-m", "ascendpatch", "--json", "fleet-report",
                      str(folder), "-o", str(Path(tmp) / "report.html")]
            seconds, mb = measure(report, args.repeat)
            page_mb = (Path(tmp) / "report.html").stat().st_size / 2**20
            load, load_mb = measure([sys.executable, "-c", LOAD_ONLY, str(folder)],
                                    args.repeat)
        per = seconds / (n * packages) * 1e6
        rows.append({"hosts": n, "packages": packages, "hostile": args.hostile,
                     "files": len(base["files"]),
                     "seconds": round(seconds, 3), "peak_mb": round(mb, 1),
                     "page_mb": round(page_mb, 2),
                     "json_load_seconds": round(load, 3), "json_load_mb": round(load_mb, 1),
                     "ratio": round(seconds / load, 2), "us_per_host_package": round(per, 1)})
        print(f"{n:4d} hosts x {packages} packages ({len(base['files'])} files each"
              + (f"; one claims {args.hostile} more" if args.hostile else "") + "): "
              f"fleet-report {seconds:.2f} s, {mb:.0f} MB peak, page {page_mb:.1f} MB | "
              f"json.load only {load:.2f} s, "
              f"{load_mb:.0f} MB | ratio {seconds / load:.2f} | {per:.1f} us per host x package")
    last = rows[-1]
    ok = last["seconds"] <= GOAL_SECONDS and last["peak_mb"] <= GOAL_MB
    print(f"goal at {last['hosts']} hosts: <= {GOAL_SECONDS} s and <= {GOAL_MB} MB: "
          f"{'met' if ok else 'NOT met'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
