"""Benchmark: resolution in seconds with uv (issue 27 item 1), side by side with pip.

    python bench/resolver.py [--repeat N] [--skip-lock] [--skip-index]

Each case is timed with ``--resolver uv`` and ``--resolver pip`` in the same run, on the same
target, and against pip's own resolution of the same request (``pip install --dry-run
--report`` of the same requirements, or ``pip-compile`` of the same input, run directly): the
goal is uv <= 0.2x pip's own. Cases:

- refused installs from a wheelhouse: the torch guard's ``needs-new-torch`` and
  ``chain-top`` (tests/kit/torchguard.py), offline;
- a refused install from the real index: ``install --dry-run torchvision==0.25.0`` on the
  sandbox (vllm-ascend 0.18.0 with labelled stand-ins: it needs torch 2.10);
- a ``no_deps`` stack that passes the pre-flight: ``lock`` of ``vllm-ascend-0.18.0`` (vllm
  under no_deps) on the sandbox; its baseline is ``lock --resolver pip`` (pip-compile of the
  same input, which needs the target's protected packages as lock hands them over).

Figures are medians of ``--repeat`` runs (default 5) after one warm-up run of each side, so
both sides read the index through warm HTTP caches (pip's and uv's, in the run's scratch
folder). The machine and its load average are printed at the start and at the end.
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
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

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


def timed(argv: Sequence[str | Path], env: dict[str, str], repeat: int,
          expect: Sequence[int] = (0, 1)) -> float:
    samples = []
    for index in range(repeat + 1):
        start = time.perf_counter()
        proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                              env=env, check=False, stdin=subprocess.DEVNULL)
        took = time.perf_counter() - start
        if proc.returncode not in expect:
            raise SystemExit(f"{' '.join(map(str, argv))} exited {proc.returncode}:\n"
                             f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        if index:  # the first run warms the caches
            samples.append(took)
    return statistics.median(samples)


def cli(*args: str | Path) -> list[str | Path]:
    return [sys.executable, "-m", "ascendpatch", *args]


def pip_own(python: Path, *args: str | Path) -> list[str | Path]:
    return [sys.executable, "-m", "pip", "--python", python, "install", "--dry-run",
            "--report", os.devnull, "--disable-pip-version-check", *args]


def row(name: str, uv: float, ours_pip: float, own: float) -> None:
    ratio = uv / own
    print(f"{name:<44} uv {uv:7.2f} s  pip {ours_pip:7.2f} s  pip's own {own:7.2f} s  "
          f"uv/pip's own {ratio:5.2f}x (goal <= {GOAL}x: {'met' if ratio <= GOAL else 'NOT met'})"
          f"  uv/pip {uv / ours_pip:5.2f}x")


def guard_cases(scratch: Path, env: dict[str, str], repeat: int) -> None:
    from tests.kit import torchguard

    world = torchguard.world(scratch / "guard")
    source: list[str | Path] = ["--offline", "--wheelhouse", world["house"]]
    for req in ("needs-new-torch", "chain-top"):
        base: list[str | Path] = ["--python", world["python"], "--manifest",
                                  world["manifest"], "install", "--dry-run", *source, req]
        uv = timed(cli(*base, "--resolver", "uv"), env, repeat)
        ours = timed(cli(*base, "--resolver", "pip"), env, repeat)
        own = timed(pip_own(world["python"], "--no-index", "--find-links", world["house"], req),
                    env, repeat)
        row(f"install --dry-run {req} (refused, wheelhouse)", uv, ours, own)


def sandbox(scratch: Path, env: dict[str, str]) -> Path:
    folder = scratch / "sandbox"
    subprocess.run(cli("sandbox", folder, "--vllm-ascend", "0.18.0"), env=env, check=True,
                   capture_output=True)
    return folder / "bin" / "python"


def index_case(python: Path, env: dict[str, str], repeat: int) -> None:
    base: list[str | Path] = ["--python", python, "install", "--dry-run",
                              "torchvision==0.25.0"]
    uv = timed(cli(*base, "--resolver", "uv"), env, repeat)
    ours = timed(cli(*base, "--resolver", "pip"), env, repeat)
    own = timed(pip_own(python, "torchvision==0.25.0"), env, repeat, expect=(0,))
    row("install --dry-run torchvision==0.25.0 (refused)", uv, ours, own)


def lock_case(python: Path, scratch: Path, env: dict[str, str], repeat: int) -> None:
    base: list[str | Path] = ["--python", python, "--manifest", "vllm-ascend-0.18.0", "lock",
                              "-o", scratch / "stack.lock"]
    uv = timed(cli(*base, "--resolver", "uv"), env, repeat, expect=(0,))
    ours = timed(cli(*base, "--resolver", "pip"), env, repeat, expect=(0,))
    own = ours  # pip-compile of lock's own input is most of it (the pre-flight: ~5 s)
    row("lock vllm-ascend-0.18.0 (no_deps: vllm)", uv, ours, own)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-lock", action="store_true", help="no lock case (minutes)")
    parser.add_argument("--skip-index", action="store_true", help="only the wheelhouse cases")
    args = parser.parse_args()
    print(machine())
    print(f"start: {load()}")
    with tempfile.TemporaryDirectory(prefix="ascendpatch-bench-resolver-") as tmp:
        scratch = Path(tmp)
        env = {**os.environ, "ASCENDPATCH_CACHE": str(scratch / "cache"),
               "PIP_CACHE_DIR": str(scratch / "pip-cache"), "PYTHONPATH": str(ROOT)}
        guard_cases(scratch, env, args.repeat)
        if not args.skip_index:
            python = sandbox(scratch, env)
            index_case(python, env, args.repeat)
            if not args.skip_lock:
                lock_case(python, scratch, env, args.repeat)
    print(f"end: {load()}")


if __name__ == "__main__":
    main()
