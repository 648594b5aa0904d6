"""What a cold machine downloads for the integration tier, fetched in the background while lint,
mypy and the first tests run: ``python -m tests.kit.prebuild [realserver] [stack-locks]``
(both when none is named). ``.ci/run`` starts it before lint; each part prints one line.

- ``realserver``: the real vLLM server's venv, model and PIT1 plugin (tests/kit/realserver.py),
  3 GB of wheels, under the kit's own build lock: the first server test waits on it.
- ``stack-locks``: pip's HTTP cache for tests/test_resolvers.py (``wheels.CACHE/pip-http``, the
  cache those tests give pip). vllm-ascend 0.13.0, 0.18.0 and 0.23.0 require
  arctic-inference 0.1.1, which has no wheel: pip-compile builds its metadata, and pip installs
  its build requirements (torch 2.7.0 and its CUDA libraries, about 3.3 GB) into a build
  environment, for each stack. Downloaded here once, with the settings those tests run pip with
  (no machine configuration, PyPI only), the two locks that run side by side find them in the
  cache instead of both downloading them at once. Nothing is installed; the test still runs
  real pip-compile, which reads the same files from the cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import pytest

from ascendpatch import config
from tests.kit import realserver, wheels

SDIST_BUILDS = [("arctic-inference", "0.1.1")]  # the stacks' requirements that have no wheel


def pip_env() -> dict[str, str]:
    """The environment tests/test_resolvers.py runs pip in (tests/kit.isolate: the machine's
    pip configuration dropped), with its HTTP cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_CACHE_DIR=str(wheels.CACHE / "pip-http"))
    return env


def build_requirements(name: str, version: str) -> list[str]:
    """The ``build-system.requires`` of a release's sdist (from the index, verified)."""
    pyproject = wheels.sdist_member(wheels.sdist(name, version), "pyproject.toml")
    build: Any = config.read_text(pyproject.decode())["build-system"]
    return [str(r) for r in build["requires"]]


def stack_locks() -> str:
    started = time.monotonic()
    requires = sorted({r for name, version in SDIST_BUILDS
                       for r in build_requirements(name, version)})
    with tempfile.TemporaryDirectory(prefix="ascendpatch-prefetch-") as dest:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--dest", dest,
                        *requires], check=True, env=pip_env(), stdin=subprocess.DEVNULL)
    took = time.monotonic() - started
    return f"[OK] pip cache of the stack locks warm in {took:.0f} s: {' '.join(requires)}"


PARTS: dict[str, Callable[[], str]] = {"realserver": realserver.prebuild,
                                       "stack-locks": stack_locks}


def main(names: list[str]) -> int:
    unknown = sorted(set(names) - PARTS.keys())
    if unknown:
        sys.stderr.write(f"unknown part {', '.join(unknown)}: choose from {', '.join(PARTS)}\n")
        return 2
    failed = 0
    for name in names or list(PARTS):
        try:
            line = PARTS[name]()
        except pytest.skip.Exception as skipped:
            line = f"[SKIP] {name}: {skipped}"
        except (OSError, subprocess.CalledProcessError, AssertionError) as exc:
            # the tests then download it themselves, as on a machine without this step
            line, failed = f"[WARN] {name} not prefetched: {exc}", 1
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
