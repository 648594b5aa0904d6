"""Benchmark: resolution in seconds with uv (issue 27 item 1), side by side with pip.

    python bench/resolver.py [--repeat N] [--skip-lock | --only-lock] [--skip-index]

Each case is timed with ``--resolver uv`` and ``--resolver pip`` in the same run, on the same
target, and against pip's own resolution of the same request (``pip install --dry-run
--report`` of the same requirements, or ``pip-compile`` of the same input, run directly): the
goal is uv <= 0.2x pip's own. Cases:

- refused installs from a wheelhouse: the torch guard's ``needs-new-torch`` and
  ``chain-top`` (tests/kit/torchguard.py), offline;
- a refused install from the real index: ``install --dry-run torchvision==0.25.0`` on the
  sandbox (vllm-ascend 0.18.0 with labelled stand-ins: it needs torch 2.10);
- a ``no_deps`` stack that passes the pre-flight: ``lock`` of ``vllm-ascend-0.18.0`` (vllm
  under no_deps) on the sandbox; its baseline is pip-compile run directly on the input lock
  writes for it (the stack's pins less the protected and no_deps ones, constrained to the
  target's protected packages as metadata-only wheels: commands/lock.pip_compile_argv, the
  arguments ``lock --resolver pip`` gives pip-compile). lock runs them through
  env/_pipcompile.py, which takes the hashes the index states; the baseline is stock
  pip-compile, which downloads every file of each pin to hash it from an index without the
  PyPI JSON API (this machine's): pip/pip's own shows that difference, uv/pip's own does not
  depend on it.

Each row prints uv/pip's own (the goal) and pip/pip's own: ascendpatch's own cost around the
resolution it hands to pip (a second resolution or an extra pip run would show there). Figures
are medians of ``--repeat`` runs (default 5) after one warm-up round; the sides take turns
within each round, so a change of the machine's load falls on all of them alike. pip's and
uv's caches live in the run's scratch folder (an index that serves no PEP 658 metadata and no
cacheable responses is downloaded again by every pip run). The machine and its load average
are printed at the start and at the end, and which pip each side runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import build_env  # noqa: E402  (bench/, beside this script)

GOAL = 0.2


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    return (f"{platform.node()}: {cpu}, {os.cpu_count()} cores, {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


@dataclass(frozen=True)
class Side:
    """One side of a case: a command line, the exit codes it may end with, where it runs and
    what is undone before each run (untimed)."""

    argv: Sequence[str | Path]
    expect: Sequence[int] = (0, 1)
    cwd: Path | None = None
    reset: Callable[[], None] | None = None


def _once(side: Side, env: dict[str, str]) -> float:
    if side.reset is not None:
        side.reset()
    start = time.perf_counter()
    proc = subprocess.run([str(a) for a in side.argv], capture_output=True, text=True, env=env,
                          check=False, stdin=subprocess.DEVNULL, cwd=side.cwd)
    took = time.perf_counter() - start
    if proc.returncode not in side.expect:
        raise SystemExit(f"{' '.join(map(str, side.argv))} exited {proc.returncode}:\n"
                         f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return took


def timed(sides: dict[str, Side], env: dict[str, str], repeat: int) -> dict[str, float]:
    """The median of ``repeat`` runs of each side, after one warm-up run of each; the sides
    take turns (uv, pip, pip's own, uv, ...), so a change of the machine's load during the
    case falls on all of them alike."""
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for index in range(repeat + 1):
        round_took = {name: _once(side, env) for name, side in sides.items()}
        said = ", ".join(f"{SHOWN[name]} {took:.2f} s" for name, took in round_took.items())
        print(f"    {'warm-up' if not index else f'run {index}'}: {said} "
              f"({load().split(' on ')[0]})", flush=True)
        if index:  # the first round warms the caches
            for name, took in round_took.items():
                samples[name].append(took)
    return {name: statistics.median(values) for name, values in samples.items()}


SHOWN = {"uv": "uv", "pip": "pip", "own": "pip's own"}


def cli(*args: str | Path) -> list[str | Path]:
    return [sys.executable, "-m", "ascendpatch", *args]


def pip_own(python: Path, *args: str | Path) -> list[str | Path]:
    return [sys.executable, "-m", "pip", "--python", python, "install", "--dry-run",
            "--report", os.devnull, "--disable-pip-version-check", *args]


def measure(name: str, sides: dict[str, Side], env: dict[str, str], repeat: int) -> None:
    """One case: its rounds as they run, then the medians and the ratios."""
    print(name, flush=True)
    took = timed(sides, env, repeat)
    uv, ours, own = took["uv"], took["pip"], took["own"]
    ratio = uv / own
    print(f"    medians: uv {uv:7.2f} s  pip {ours:7.2f} s  pip's own {own:7.2f} s  "
          f"uv/pip's own {ratio:5.2f}x (goal <= {GOAL}x: {'met' if ratio <= GOAL else 'NOT met'})"
          f"  pip/pip's own {ours / own:5.2f}x  uv/pip {uv / ours:5.2f}x", flush=True)


def pips(python: Path) -> str:
    """Which pip each side runs: ascendpatch runs the target's own pip when it has one
    (env/pipadapter), pip's own baseline is this interpreter's pip with --python."""
    def version(argv: list[str | Path]) -> str:
        proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                              check=False)
        return proc.stdout.split(" from ")[0].strip() or "none"

    own = version([sys.executable, "-m", "pip", "--version"])
    target = version([python, "-m", "pip", "--version"])
    if target == "none":
        return f"{python}: no pip of its own; both pip sides run {own} --python"
    return f"{python}: ascendpatch's pip side runs the target's {target}; pip's own is {own} " \
           "--python"


def guard_cases(scratch: Path, env: dict[str, str], repeat: int) -> None:
    from tests.kit import torchguard

    world = torchguard.world(scratch / "guard")
    source: list[str | Path] = ["--offline", "--wheelhouse", world["house"]]
    print(pips(world["python"]))
    for req in ("needs-new-torch", "chain-top"):
        base: list[str | Path] = ["--python", world["python"], "--manifest",
                                  world["manifest"], "install", "--dry-run", *source, req]
        measure(f"install --dry-run {req} (refused, wheelhouse)",
                {"uv": Side(cli(*base, "--resolver", "uv")),
                 "pip": Side(cli(*base, "--resolver", "pip")),
                 "own": Side(pip_own(world["python"], "--no-index", "--find-links",
                                     world["house"], req))}, env, repeat)


def sandbox(scratch: Path, env: dict[str, str]) -> Path:
    folder = scratch / "sandbox"
    subprocess.run(cli("sandbox", folder, "--vllm-ascend", "0.18.0"), env=env, check=True,
                   capture_output=True)
    python = folder / "bin" / "python"
    print(pips(python))
    return python


def index_case(python: Path, env: dict[str, str], repeat: int) -> None:
    base: list[str | Path] = ["--python", python, "install", "--dry-run",
                              "torchvision==0.25.0"]
    measure("install --dry-run torchvision==0.25.0 (refused)",
            {"uv": Side(cli(*base, "--resolver", "uv")),
             "pip": Side(cli(*base, "--resolver", "pip")),
             "own": Side(pip_own(python, "torchvision==0.25.0"), expect=(0,))}, env, repeat)


def lock_own(python: Path, manifest: str, folder: Path) -> Side:
    """pip's own resolution of lock's request: stock pip-compile run directly on the input
    lock writes for it (commands/lock.pip_compile_argv: the same arguments, constraints and
    no_deps handling; lock runs them through env/_pipcompile.py), a fresh output each run as
    lock's own temp folder has."""
    from ascendpatch.commands.context import Context
    from ascendpatch.commands.lock import pip_compile_argv
    from ascendpatch.env.target import from_python
    from ascendpatch.manifest import loader

    folder.mkdir()
    ctx = Context(target=from_python(python), manifest=loader.load(manifest),
                  env=dict(os.environ))
    argv = pip_compile_argv(ctx, folder)
    output = folder / "lock.txt"
    return Side(argv, expect=(0,), cwd=folder, reset=lambda: output.unlink(missing_ok=True))


def lock_case(python: Path, scratch: Path, env: dict[str, str], repeat: int) -> None:
    name = "vllm-ascend-0.18.0"
    base: list[str | Path] = ["--python", python, "--manifest", name, "lock",
                              "-o", scratch / "stack.lock"]
    measure(f"lock {name} (no_deps: vllm)",
            {"uv": Side(cli(*base, "--resolver", "uv"), expect=(0,)),
             "pip": Side(cli(*base, "--resolver", "pip"), expect=(0,)),
             "own": lock_own(python, name, scratch / "lock-input")}, env, repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-lock", action="store_true", help="no lock case (minutes)")
    parser.add_argument("--skip-index", action="store_true", help="only the wheelhouse cases")
    parser.add_argument("--only-lock", action="store_true", help="only the lock case")
    args = parser.parse_args()
    if args.only_lock and (args.skip_lock or args.skip_index):
        parser.error("--only-lock runs the lock case, which --skip-lock and --skip-index skip")
    build_env.in_tool()  # ascendpatch (and its uv) as installed, not an editable checkout
    print(machine())
    print(f"start: {load()}")
    with tempfile.TemporaryDirectory(prefix="ascendpatch-bench-resolver-") as tmp:
        scratch = Path(tmp)
        env = {**os.environ, "ASCENDPATCH_CACHE": str(scratch / "cache"),
               "PIP_CACHE_DIR": str(scratch / "pip-cache")}
        os.environ.update(env)  # lock_own's pip-tools venv is the one lock uses
        if not args.only_lock:
            guard_cases(scratch, env, args.repeat)
        if not args.skip_index:
            python = sandbox(scratch, env)
            if not args.only_lock:
                index_case(python, env, args.repeat)
            if not args.skip_lock:
                lock_case(python, scratch, env, args.repeat)
    print(f"end: {load()}")


if __name__ == "__main__":
    main()
