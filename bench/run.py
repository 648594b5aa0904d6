"""Run the benchmark: each ascendpatch command against its named baseline, in the same run.

    python bench/run.py [--repeat N] [--json FILE] [--skip-scale] [--only audit]

Prints the machine it ran on (and its load at the start and the end), then one line per
comparison: both medians (wall time, of N runs after one warm-up), their ratio, the same ratio
in CPU time (user + sys of the process tree, steadier on a shared host), and whether the goal
is met. Then the cold audit against its physical bound and where the rest of its time goes
(bench/breakdown.py), the repeat audit's start-up, both with load-independent counts (system
calls, Python calls); where apply and verify spend theirs; the 226-artifact catalog's apply and
re-apply (bench/engine.py); and how the audit, the fleet report and ``logs`` grow with 1x, 2x
and 4x their input (bench/scale.py). One command prints all of it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

import breakdown
import build_env

REPO = Path(__file__).resolve().parent.parent
GOALS = {
    "audit cold / sha256sum -P2": 0.33,
    "audit cold / its physical bound": 1.2,
    "audit repeat / pip freeze": 0.35,
    "audit repeat / git status": 1.0,
    "apply 226-artifact catalog (s)": 1.0,
    "re-apply 226-artifact catalog (s)": 0.5,
    "apply, nothing to do / pip check (bench env)": 0.5,
    "apply, nothing to do / pip check (sandbox)": 0.5,
    "verify --no-probes / pip check": 0.5,
    "--version / pip --version": 0.33,
}


@dataclass
class Sample:
    wall: float  # median seconds
    cpu: float  # median user + sys seconds of the process and its children
    rss_kb: int  # peak resident set of the largest process, max over the runs


# GNU time reports the peak RSS of the command it forks. wait4's own figure cannot be used: a
# child's ru_maxrss starts at its parent's peak (Linux keeps the forked memory's high-water
# mark across exec), so every child of a bench process that had grown to 175 MiB (the patch
# corpus) "peaked" at 175 MiB.
GNU_TIME = "/usr/bin/time" if Path("/usr/bin/time").is_file() else None


def _run(cmd: Sequence[str], env: dict[str, str] | None) -> tuple[float, float, int]:
    """Wall time; CPU (user + sys) from wait4, which counts every descendant the process
    waited for (a shell pipeline's children too); peak RSS (KiB) from GNU time when there is
    one (else wait4's, an upper bound)."""
    with tempfile.NamedTemporaryFile(prefix="ascendpatch-bench-rss-") as rss:
        wrap = [GNU_TIME, "-f", "%M", "-o", rss.name] if GNU_TIME else []
        start = time.perf_counter()
        proc = subprocess.Popen([*wrap, *cmd], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env)
        _pid, _status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = 0  # reaped by wait4
        text = Path(rss.name).read_text().split()
    peak = int(text[-1]) if GNU_TIME and text and text[-1].isdigit() else usage.ru_maxrss
    return wall, usage.ru_utime + usage.ru_stime, peak


def launched(cmd: Sequence[str]) -> list[str]:
    """``cmd`` as users run it: ``PYTHON -m NAME ARGS`` through the launcher that pip wrote
    beside that interpreter (``bin/NAME``: ``ascendpatch`` as install.sh leaves it, ``pip``),
    when there is one. ``-m`` would add runpy's imports (3.6 ms here) to both sides."""
    if len(cmd) >= 3 and cmd[1] == "-m" and cmd[2] in ("ascendpatch", "pip"):
        script = Path(cmd[0]).parent / cmd[2]
        if script.is_file() and os.access(script, os.X_OK):
            return [str(script), *cmd[3:]]
    return list(cmd)


def timed(cmd: Sequence[str], before: Sequence[str] | None = None, repeat: int = 5,
          env: dict[str, str] | None = None) -> Sample:
    """Medians of ``cmd`` over ``repeat`` runs (``before`` runs untimed ahead of each), run
    as users run it (:func:`launched`)."""
    cmd = launched(cmd)
    subprocess.run(list(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False, env=env)  # warm-up: page cache, bytecode
    walls, cpus, peak = [], [], 0
    for _ in range(repeat):
        if before:
            subprocess.run(list(before), check=True, stdout=subprocess.DEVNULL)
        wall, cpu, rss = _run(cmd, env)
        walls.append(wall)
        cpus.append(cpu)
        peak = max(peak, rss)
    return Sample(statistics.median(walls), statistics.median(cpus), peak)


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    sha_ni = "sha_ni" in Path("/proc/cpuinfo").read_text()
    return (f"{platform.node()}: {cpu}, {os.cpu_count()} cores{' (SHA-NI)' if sha_ni else ''}, "
            f"{mem:.0f} GiB, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def audit_json(tool: Sequence[str], *args: str, env: dict[str, str] | None = None) \
        -> dict[str, object]:
    out = subprocess.run([*tool, "--json", "audit", *args], capture_output=True, text=True,
                         check=False, env=env).stdout
    doc: dict[str, object] = json.loads(out)
    return doc


def record_files(site: Path, listing: Path) -> tuple[int, int]:
    """The files audit hashes (RECORD rows with a sha256), NUL-separated, for sha256sum:
    their number and bytes."""
    sys.path.insert(0, str(REPO))
    from ascendpatch.env.target import read_record

    found: list[Path] = []
    for info in site.glob("*.dist-info"):
        for rel, digest, _size in read_record(info):
            path = Path(os.path.normpath(site / rel))
            if digest is not None and path.is_file():
                found.append(path)
    listing.write_bytes(b"".join(bytes(p) + b"\0" for p in found))
    return len(found), sum(p.stat().st_size for p in found)


def where_time_goes(tool: Sequence[str], args: Sequence[str], top: int = 6) -> list[str]:
    """One profiled run: the ascendpatch functions (and subprocess waits) with the most
    cumulative time."""
    with tempfile.TemporaryDirectory() as tmp:
        prof = Path(tmp) / "prof"
        cmd = [tool[0], "-m", "cProfile", "-o", str(prof), "-m", "ascendpatch", *tool[3:], *args]
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        table = pstats.Stats(str(prof)).stats  # type: ignore[attr-defined]
    skip = {"<module>", "main", "_dispatch", "from_args", "run"}
    rows: dict[str, float] = {}
    for (file, _line, func), (_cc, _nc, _tt, cumulative, _callers) in table.items():
        if ("ascendpatch" in file and func not in skip) or \
                (file.endswith("subprocess.py") and func == "run"):
            name = f"{Path(file).stem}.{func}"
            rows[name] = max(rows.get(name, 0.0), cumulative)
    total = max(entry[3] for entry in table.values())
    best = sorted(rows.items(), key=lambda item: -item[1])[:top]
    return [f"total {total:.3f}s (profiled)", *(f"{name} {t:.3f}s" for name, t in best)]


def others(pairs: dict[str, tuple[Sample, Sample]], applied: dict[str, tuple[float, float, int]],
           profiles: dict[str, list[str]], tool: list[str], pip: list[str],
           sandbox_tool: list[str], sandbox_pip: list[str], repeat: int) -> None:
    """Every comparison but the audits': verify, apply, --version, and the profiles."""
    pip_check = timed([*pip, "check"], repeat=repeat)
    sandbox_check = timed([*sandbox_pip, "check"], repeat=repeat)
    pairs["verify --no-probes / pip check"] = (timed([*tool, "verify", "--no-probes"],
                                                     repeat=repeat), pip_check)
    pairs["verify (probes) / pip check (bench env)"] = (timed([*tool, "verify"], repeat=repeat),
                                                        pip_check)
    pairs["verify (probes) / pip check (sandbox)"] = (timed([*sandbox_tool, "verify"],
                                                            repeat=repeat), sandbox_check)
    for name, who, check in (("bench env", tool, pip_check),
                             ("sandbox", sandbox_tool, sandbox_check)):
        first = _run([*who, "apply"], None)  # the real work, once
        applied[name] = first
        pairs[f"apply, nothing to do / pip check ({name})"] = (
            timed([*who, "apply"], repeat=repeat), check)
    profiles.update({
        "apply (nothing to do), bench env": where_time_goes(tool, ["apply"]),
        "verify (probes), bench env": where_time_goes(tool, ["verify"]),
        "verify (probes), sandbox": where_time_goes(sandbox_tool, ["verify"]),
    })
    for who in (tool, sandbox_tool):
        subprocess.run([*who, "revert"], stdout=subprocess.DEVNULL, check=False)
    pairs["--version / pip --version"] = (
        timed([sys.executable, "-m", "ascendpatch", "--version"], repeat=repeat),
        timed([*pip, "--version"], repeat=repeat))


def catalog_apply(repeat: int) -> dict[str, float]:
    """The 226-artifact catalog of bench/engine.py: apply, then re-apply, in one process each
    (medians of ``repeat``)."""
    import engine  # (imports the patch corpus kit: only for this figure)

    figures = engine.batch_figures(repeat)
    for name, goal in (("apply", GOALS["apply 226-artifact catalog (s)"]),
                       ("re-apply", GOALS["re-apply 226-artifact catalog (s)"])):
        wall, cpu = figures[f"{name}_s"], figures[f"{name}_cpu_s"]
        print(f"{name + ' 226-artifact catalog':45s} {wall:6.3f}s wall, cpu {cpu:6.3f}s  "
              f"({'meets' if wall < goal else 'MISSES'} goal < {goal}s; CPU "
              f"{'meets' if cpu < goal else 'misses'} it)")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--only", choices=["audit"],
                        help="only the audit comparisons and the critical path (to iterate)")
    args = parser.parse_args()
    build_env.in_tool()  # ascendpatch timed as installed, not this checkout's editable install
    repeat = args.repeat
    if repeat < 5:
        print(f"[WARN] --repeat {repeat}: fewer than 5 runs, a smoke test, not a measurement")
    started = load()
    # The installed tool has its bytecode (pip compiled it); bench/engine.py still runs the
    # checkout (from its folder, for the catalog's relative paths): compile that too, so that
    # no figure is of a cold import against a warm one.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "ascendpatch")],
                   check=True, stdout=subprocess.DEVNULL)
    python = build_env.build()
    site = build_env.site_packages()
    tool = [sys.executable, "-m", "ascendpatch", "--python", str(python)]
    pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    sandbox_python = build_env.sandbox([sys.executable, "-m", "ascendpatch"])
    sandbox_tool = [sys.executable, "-m", "ascendpatch", "--python", str(sandbox_python)]
    sandbox_pip = [str(sandbox_python), "-m", "pip", "--disable-pip-version-check"]
    git_dir = build_env.git_index()
    git_status = ["git", f"--git-dir={git_dir}", f"--work-tree={site}", "status",
                  "--porcelain"]

    # The audits keep their caches in a folder of this run's own: another run on the same
    # host (or a developer's audit) can neither warm nor drop them under us.
    scratch = Path(tempfile.mkdtemp(prefix="ascendpatch-bench-"))
    cache = scratch / "cache"
    audit_env = dict(os.environ, ASCENDPATCH_CACHE=str(cache))
    drop_cache = [sys.executable, "-c", "import shutil; "
                  f"[shutil.rmtree({str(cache)!r} + '/' + d, ignore_errors=True) "
                  "for d in ('audit', 'introspect')]"]
    listing = scratch / "files"
    count, size = record_files(site, listing)
    # The same files audit hashes, 1000 per sha256sum, 2 at a time.
    sha = ["sh", "-c", f"xargs -0 -P2 -n 1000 sha256sum < {listing} > /dev/null"]

    print(f"machine: {machine()}")
    print(f"started with {started}")
    print(f"environment: {site} ({count} files in RECORDs, {size / 2**20:.0f} MiB)")
    print(f"medians of {repeat} runs after one warm-up; CPU = user + sys of the process tree\n")

    pairs: dict[str, tuple[Sample, Sample]] = {}
    pairs["audit cold / sha256sum -P2"] = (
        timed([*tool, "audit", "--workers", "2"], drop_cache, repeat, audit_env),
        timed(sha, repeat=repeat))
    subprocess.run([*tool, "audit"], stdout=subprocess.DEVNULL, check=False, env=audit_env)
    repeat_audit = timed([*tool, "audit"], repeat=repeat, env=audit_env)
    pairs["audit repeat / pip freeze"] = (repeat_audit, timed([*pip, "freeze"], repeat=repeat))
    pairs["audit repeat / git status"] = (repeat_audit, timed(git_status, repeat=repeat))
    applied: dict[str, tuple[float, float, int]] = {}
    profiles: dict[str, list[str]] = {}
    if args.only is None:
        others(pairs, applied, profiles, tool, pip, sandbox_tool, sandbox_pip, repeat)
    report: dict[str, object] = {"machine": machine(), "load_start": started}
    for name, (ours, base) in pairs.items():
        ratio, cpu_ratio = ours.wall / base.wall, ours.cpu / max(base.cpu, 1e-9)
        goal = GOALS.get(name)
        verdict = "" if goal is None else \
            f"({'meets' if ratio <= goal else 'MISSES'} goal {goal})"
        print(f"{name:45s} {ours.wall:6.3f}s / {base.wall:6.3f}s = {ratio:5.2f}  "
              f"cpu {ours.cpu:6.3f}s / {base.cpu:6.3f}s = {cpu_ratio:5.2f}  {verdict}")
        report[name] = {"ours": vars(ours), "baseline": vars(base), "ratio": ratio,
                        "cpu_ratio": cpu_ratio, "goal": goal}
    for name, (wall, cpu, _rss) in applied.items():
        print(f"first apply (real work), {name}: {wall:.3f}s wall, {cpu:.3f}s cpu")

    # The cold audit against its physical bound, and where the rest of its time goes.
    cold_sample = pairs["audit cold / sha256sum -P2"][0]
    limit, largest = breakdown.bound(scratch, listing, repeat)
    ratio = cold_sample.wall / limit.seconds
    verdict = "meets" if ratio <= GOALS["audit cold / its physical bound"] else "MISSES"
    print(f"{'audit cold / its physical bound':45s} {cold_sample.wall:6.3f}s / "
          f"{limit.seconds:6.3f}s = {ratio:5.2f}  ({verdict} goal "
          f"{GOALS['audit cold / its physical bound']}; largest file {largest.name}, "
          f"{largest.stat().st_size / 2**20:.0f} MiB)")
    cpu_ratio = cold_sample.cpu / limit.cpu
    print(f"{'audit cold CPU / its CPU bound':45s} {cold_sample.cpu:6.3f}s / {limit.cpu:6.3f}s = "
          f"{cpu_ratio:5.2f}  (the start's and every SHA-256's CPU: the work that cannot be "
          "skipped; steadier than wall on a loaded host)")
    report["audit cold / its physical bound"] = {"ours": vars(cold_sample), "ratio": ratio,
                                                 "cpu_ratio": cpu_ratio, "bound": vars(limit),
                                                 "bound_seconds": limit.seconds,
                                                 "bound_cpu": limit.cpu}
    cold_cmd = [*tool, "audit", "--workers", "2"]
    subprocess.run(drop_cache, check=True)
    imports = breakdown.import_times(cold_cmd, audit_env)
    subprocess.run(drop_cache, check=True)
    wall, t = breakdown.phases_run(tool, audit_env)
    print("\nwhere the cold audit's time goes (one run each):")
    for line in breakdown.explain(wall, limit, imports, t):
        print(f"  {line}")
    subprocess.run(drop_cache, check=True)
    calls_cold = breakdown.syscalls(cold_cmd, audit_env)
    subprocess.run(drop_cache, check=True)
    py_cold = breakdown.python_calls(cold_cmd, audit_env)
    print(f"  counts (load-independent): {'; '.join(calls_cold)}; {py_cold} Python calls "
          "(main thread)")
    report["cold_audit_timings"] = t
    report["cold_audit_counts"] = {"syscalls": calls_cold, "python_calls": py_cold,
                                   "imports": imports}
    warm = audit_json([*tool], env=audit_env)
    w = warm.get("timings", {})
    assert isinstance(w, dict)
    git = pairs["audit repeat / git status"][1]
    floor = breakdown.repeat_floor(listing, repeat)
    print(f"\nrepeat audit: stat walk of {warm.get('files_checked')} files {w.get('stat'):.3f}s, "
          f"audit() {w.get('total'):.3f}s, the whole command {repeat_audit.wall:.3f}s; "
          f"git status on the same tree {git.wall:.3f}s")
    print(f"  its floor in Python (the interpreter's start and a bare os.stat loop over the same "
          f"files, bench/breakdown.STAT_ALONE) {floor.wall:.3f}s wall, {floor.cpu:.3f}s cpu: "
          f"audit repeat / floor {repeat_audit.wall / floor.wall:.2f}, floor / git status "
          f"{floor.wall / git.wall:.2f} (cpu {floor.cpu / max(git.cpu, 1e-9):.2f})")
    warm_cmd = [*tool, "audit"]
    warm_imports = breakdown.import_times(warm_cmd, audit_env)
    warm_calls = breakdown.syscalls(warm_cmd, audit_env)
    warm_py = breakdown.python_calls(warm_cmd, audit_env)
    start_up = timed([sys.executable, "-c", "pass"], repeat=repeat)
    print(f"  outside audit() {repeat_audit.wall - float(w.get('total', 0.0)):.3f}s (python -c "
          f"pass {start_up.wall:.3f}s; {'; '.join(warm_imports)})")
    print(f"  counts (load-independent): {'; '.join(warm_calls)}; {warm_py} Python calls; git "
          f"status: {'; '.join(breakdown.syscalls(git_status, audit_env)[:1])}")
    report["repeat_audit_timings"] = w
    report["repeat_audit_floor"] = vars(floor)
    report["repeat_audit_counts"] = {"syscalls": warm_calls, "python_calls": warm_py,
                                     "imports": warm_imports, "python_start": vars(start_up)}
    if profiles:
        print("\nwhere the time goes (one cProfile run each, cumulative):")
        for name, lines in profiles.items():
            print(f"  {name}: " + "; ".join(lines))
        report["profiles"] = profiles

    if args.only is None:
        report["catalog"] = catalog_apply(repeat)
    if not args.skip_scale and args.only is None:
        import scale  # (it imports this module: here, not at the top)

        print()
        report["scale"] = scale.run_all(repeat)
    finished = load()
    print(f"\nfinished with {finished}")
    report["load_end"] = finished
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
