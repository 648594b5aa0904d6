"""The patch matcher (patchfile/diffpatch) against ``git apply``, on the real release-diff
corpus, in the same run.

    python bench/engine.py [--full] [--per-pair N] [--repeat N] [--json FILE]

1. Matcher alone: every sampled application (own release, re-apply, neighbours; four diff
   forms; see tests/kit/diffpatch_corpus.py) through the matcher API (parse, analyze, apply),
   against
   ``git apply`` of the same patches on the same files, one git process per patch as git is
   used. Goal: ratio <= 3.
2. Batch: one ``ascendpatch apply`` process applying a whole catalog (one diff artifact per
   changed file of 0.18.0 -> 0.19.1rc1, on a target holding the real 0.18.0 files with
   RECORD), then the re-apply ("already applied") run. Goals: under 1 s and under 0.5 s
   (bench/run.py prints these two too). Shown next to the
   same artifacts applied one process each, and to ``git apply`` of the same patches.

Figures are medians after a warm-up; this is a benchmark, never a test assertion.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ascendpatch.patchfile.diffpatch import analyze, apply_forward, parse_patch  # noqa: E402
from ascendpatch.pipeline.filestate import FileState  # noqa: E402
from tests.kit import diffpatch_corpus  # noqa: E402

GOAL_ENGINE = 3.0
GOAL_BATCH = 1.0
BATCH_PAIR = ("0.18.0", "0.19.1rc1")
PER_PROCESS_SAMPLE = 20


def _median(samples: list[float]) -> float:
    return statistics.median(samples)


def engine_pass(jobs: list[tuple[bytes, bytes | None]]) -> float:
    start = time.perf_counter()
    for text, current in jobs:
        for patch in parse_patch(text, origin="bench"):
            analysis = analyze(patch, current)
            if analysis.state is FileState.PRISTINE:
                apply_forward(analysis)
    return time.perf_counter() - start


def git_pass(jobs: list[tuple[diffpatch_corpus.CorpusPatch, bytes | None]], scratch: Path) -> float:
    """Only the git processes are timed; placing the input file is not."""
    total = 0.0
    env = {**os.environ, **diffpatch_corpus.GIT_ENV, "GIT_CEILING_DIRECTORIES": str(scratch.parent)}
    source = scratch.parent / "one.patch"
    for patch, current in jobs:
        target = scratch / patch.path
        if current is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(current)
        source.write_bytes(patch.text)
        args = ["git", "apply", *(["--unidiff-zero"] if patch.form == "git -U0" else []),
                str(source)]
        start = time.perf_counter()
        subprocess.run(args, cwd=scratch, capture_output=True, check=False, env=env)
        total += time.perf_counter() - start
        if target.exists():
            target.unlink()
    return total


def catalog(work: Path, corpus: diffpatch_corpus.Corpus) -> tuple[list[str], Path, Path]:
    """A site with the real old release's files (and RECORD) and one diff artifact per file."""
    import yaml

    from ascendpatch.env.standins import write_distribution

    old, new = BATCH_PAIR
    site = work / "site"
    site.mkdir(parents=True)
    write_distribution(site, "vllm-ascend", old, corpus.releases[old], (), summary="bench",
                       installer="pip")
    patches = [p for p in corpus.patches if (p.old, p.new, p.form) == (old, new, "git -U3")]
    artifacts = []
    for number, patch in enumerate(patches):
        source = work / "patches" / f"{number:04d}.patch"
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_bytes(patch.text)
        artifacts.append({"id": f"file-{number:04d}", "title": patch.path, "kind": "diff",
                          "distribution": "vllm-ascend", "versions": f"=={old}",
                          "source": str(source)})
    manifest = work / "catalog.yaml"
    manifest.write_text(yaml.safe_dump({"name": "bench-catalog", "artifacts": artifacts}))
    return [str(a["id"]) for a in artifacts], site, manifest


CPU: list[float] = []  # CPU seconds (user + sys) of each ascendpatch process, in order


def cli(site: Path, manifest: Path | None, *args: str) -> float:
    """Wall time of one ascendpatch process (its CPU time goes to ``CPU``: on a loaded
    machine the wall figure also holds the wait for a core and for fsync)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    chosen = ["--manifest", str(manifest)] if manifest else []  # none: the shipped catalog
    subprocess.run([sys.executable, "-m", "ascendpatch", "--site-packages", str(site),
                    *chosen, *args], capture_output=True, check=False, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall


def batch(site: Path, manifest: Path, pristine: Path, repeat: int) -> dict[str, float]:
    """Median wall and CPU seconds of ``apply`` on a pristine copy of the catalog's target,
    and of the re-apply that follows it ("already applied")."""
    walls: dict[str, list[float]] = {"apply": [], "re-apply": []}
    cpus: dict[str, list[float]] = {"apply": [], "re-apply": []}
    for _ in range(repeat):
        shutil.rmtree(site)
        shutil.copytree(pristine, site, symlinks=True)
        for name in ("apply", "re-apply"):
            walls[name].append(cli(site, manifest, "apply"))
            cpus[name].append(CPU[-1])
    return {**{f"{n}_s": _median(w) for n, w in walls.items()},
            **{f"{n}_cpu_s": _median(c) for n, c in cpus.items()}}


def batch_figures(repeat: int) -> dict[str, float]:
    """The batch figures alone (bench/run.py): the catalog built, applied and re-applied."""
    work = Path(tempfile.mkdtemp(prefix="ascendpatch-bench-engine-"))
    try:
        corpus = diffpatch_corpus.build(work / "build")
        ids, site, manifest = catalog(work / "catalog", corpus)
        pristine = work / "catalog" / "pristine"
        shutil.copytree(site, pristine, symlinks=True)
        return {"artifacts": len(ids), **batch(site, manifest, pristine, repeat)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="every file, not a sample")
    parser.add_argument("--per-pair", type=int, default=30, help="files sampled per pair")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ascendpatch-bench-engine-"))
    try:
        corpus = diffpatch_corpus.build(work / "build")
        chosen = diffpatch_corpus.sample(corpus.patches, None if args.full else args.per_pair)
        pairs = [(p, corpus.releases[t].get(p.path)) for p in chosen
                 for t, _ in corpus.targets(p)]
        jobs = [(p.text, current) for p, current in pairs]
        engine_pass(jobs)  # warm-up (imports, caches)
        engine_s = _median([engine_pass(jobs) for _ in range(args.repeat)])
        scratch = work / "git" / "work"
        scratch.mkdir(parents=True)
        git_s = _median([git_pass(pairs, scratch) for _ in range(args.repeat)])
        ratio = engine_s / git_s
        hunks = sum(p.text.count(b"\n@@ ") for p, _ in pairs)
        print(f"engine API  {engine_s:7.3f} s  git apply {git_s:7.3f} s  ratio {ratio:5.2f}  "
              f"goal <= {GOAL_ENGINE}  {'met' if ratio <= GOAL_ENGINE else 'NOT met'}  "
              f"({len(pairs)} applications, {hunks} hunks)")

        ids, site, manifest = catalog(work / "catalog", corpus)
        pristine = work / "catalog" / "pristine"
        shutil.copytree(site, pristine, symlinks=True)
        figures = batch(site, manifest, pristine, args.repeat)
        single: list[float] = []
        shutil.rmtree(site)
        shutil.copytree(pristine, site, symlinks=True)
        few = ids[:PER_PROCESS_SAMPLE]  # the per-process figure is extrapolated from these
        per_process = sum(cli(site, manifest, "apply", aid) for aid in few)
        single.append(per_process * len(ids) / len(few))
        catalog_jobs = [(p, corpus.releases[BATCH_PAIR[0]].get(p.path)) for p in corpus.patches
                        if (p.old, p.new, p.form) == (*BATCH_PAIR, "git -U3")]
        git_catalog = git_pass(catalog_jobs, scratch)
        b, a, s = figures["apply_s"], figures["re-apply_s"], _median(single)
        bc, ac = figures["apply_cpu_s"], figures["re-apply_cpu_s"]
        print(f"batch apply {b:7.3f} s wall, {bc:6.3f} s CPU  ({len(ids)} artifacts, one "
              f"process)  goal < {GOAL_BATCH} s  {'met' if b < GOAL_BATCH else 'NOT met'}"
              f" (wall), {'met' if bc < GOAL_BATCH else 'NOT met'} (CPU)")
        print(f"re-apply    {a:7.3f} s wall, {ac:6.3f} s CPU  (all already applied)")
        print(f"machine load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(f"one process per artifact {s:7.3f} s (from {PER_PROCESS_SAMPLE})   git apply, "
              f"one per patch {git_catalog:7.3f} s   batch / git apply {b / git_catalog:5.2f}")
        real = work / "real" / "site"
        real.mkdir(parents=True)
        from ascendpatch.env.standins import write_distribution

        write_distribution(real, "vllm-ascend", BATCH_PAIR[0], corpus.releases[BATCH_PAIR[0]],
                           (), summary="bench", installer="pip")
        real_pristine = work / "real" / "pristine"
        shutil.copytree(real, real_pristine, symlinks=True)
        shipped, shipped_cpu = [], []
        for _ in range(args.repeat):
            shutil.rmtree(real)
            shutil.copytree(real_pristine, real, symlinks=True)
            shipped.append(cli(real, None, "apply"))
            shipped_cpu.append(CPU[-1])
        r, rc = _median(shipped), _median(shipped_cpu)
        print(f"shipped catalog (manifests/default.yaml) on vllm-ascend {BATCH_PAIR[0]}: apply "
              f"{r:6.3f} s wall, {rc:6.3f} s CPU  goal < {GOAL_BATCH} s  "
              f"{'met' if r < GOAL_BATCH else 'NOT met'}")
        if args.json:
            args.json.write_text(json.dumps({
                "engine_s": engine_s, "git_apply_s": git_s, "ratio": ratio,
                "applications": len(pairs), "batch_apply_s": b, "reapply_s": a,
                "batch_apply_cpu_s": bc, "reapply_cpu_s": ac,
                "per_artifact_processes_s": s, "git_apply_catalog_s": git_catalog,
                "artifacts": len(ids), "shipped_catalog_apply_s": r,
                "shipped_catalog_apply_cpu_s": rc}, indent=2))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
