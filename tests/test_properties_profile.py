"""The property suites' clock (tests/kit/properties.py): a developer's run fails an example
that overruns its suite's deadline; a CI run (CI=true) replays its fixed sequence without one,
so a machine that stalls (on CI, the real server's venv unpacked beside the fast tier once
stalled a 3 ms example for 3.4 s) fails no test. Each side is a real pytest run of one suite."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.kit import REPO, pytest_command

pytestmark = pytest.mark.integration  # two real pytest runs, 4 s each

SUITE = '''
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kit.properties import deadline


@settings(max_examples=2, deadline=deadline(100))
@given(st.just(0))
def test_a_slow_example(n: int) -> None:
    time.sleep(0.3)
'''


def _pytest(folder: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    (folder / "test_slow.py").write_text(SUITE)
    (folder / "conftest.py").write_text("from tests.kit import properties\n\n"
                                        "properties.register()\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(REPO)
    if ci:
        env["CI"] = "true"
    return subprocess.run(pytest_command(folder / "basetemp", "-q", "--rootdir", str(folder),
                                         str(folder / "test_slow.py")),
                          env=env, cwd=folder, capture_output=True, text=True, timeout=120,
                          check=False)


def test_a_local_run_fails_an_example_over_its_deadline(tmp_path: Path) -> None:
    run = _pytest(tmp_path, ci=False)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "DeadlineExceeded" in run.stdout


def test_a_ci_run_has_no_wall_clock_deadline(tmp_path: Path) -> None:
    run = _pytest(tmp_path, ci=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
