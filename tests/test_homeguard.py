"""The suite's guard against writes to the real home directory (tests/kit/homeguard.py)."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.kit import REPO, pytest_command
from tests.kit.homeguard import GUARD, WroteToRealHome, real_home_probe
from tests.kit.wheels import CACHE

# A test written as the mistake looks: the home captured at import, before conftest isolates.
CARELESS_TEST = '''
import os
import pwd
from collections.abc import Callable
from pathlib import Path

HOME = Path(pwd.getpwuid(os.getuid()).pw_dir)


def test_remembers_the_real_home():
    try:
        (HOME / ".ascendpatch-home-guard-probe").write_text("written")
    except Exception:
        pass  # product code that swallows the error does not hide the write either
'''


def test_a_test_writing_to_the_real_home_fails(tmp_path: Path) -> None:
    probe = real_home_probe()
    assert not probe.exists()
    (tmp_path / "test_careless.py").write_text(CARELESS_TEST)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        run = subprocess.run(pytest_command(tmp_path / "basetemp", "-q", "-p",
                                            "tests.kit.homeguard", "test_careless.py"),
                             cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=120, check=False)
        assert run.returncode == 1, run.stdout + run.stderr
        assert "wrote to the real home directory" in run.stdout
        assert "1 error" in run.stdout and ".ascendpatch-home-guard-probe" in run.stdout
        assert not probe.exists()
    finally:
        if probe.exists():  # only if the guard failed
            probe.unlink()


def test_a_pytest_run_inside_a_test_leaves_other_runs_temp_folders_alone(tmp_path: Path) -> None:
    """tests.kit.pytest_command: an inner pytest run keeps its temp folders under the test's
    own; without --basetemp it deletes, as it exits, the older numbered folders of
    /tmp/pytest-of-<user> (here a stand-in root, through pytest's PYTEST_DEBUG_TEMPROOT)."""
    root = tmp_path / "temproot"
    others = root / f"pytest-of-{getpass.getuser()}"
    for number in (1, 10):
        (others / f"pytest-{number}" / "venv").mkdir(parents=True)
    (tmp_path / "test_t.py").write_text("def test_t(tmp_path):\n    assert tmp_path.is_dir()\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTEST_DEBUG_TEMPROOT": str(root)}

    def inner(command: list[str]) -> None:
        run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=120, check=False)
        assert run.returncode == 0, run.stdout + run.stderr

    inner(pytest_command(tmp_path / "basetemp", "-q", "test_t.py"))
    assert sorted(p.name for p in others.iterdir()) == ["pytest-1", "pytest-10"]
    # the mistake it replaces: pytest's own numbered folder, and the oldest one is gone
    inner([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_t.py"])
    assert not (others / "pytest-1").exists() and (others / "pytest-11").is_dir()


@pytest.mark.parametrize("write", [
    lambda p: p.write_text("x"),
    lambda p: p.mkdir(),
    lambda p: os.open(p, os.O_CREAT | os.O_WRONLY, 0o600),
    lambda p: p.symlink_to("/tmp"),
])
def test_each_kind_of_write_is_refused_before_it_happens(write: Callable[[Path], object]) -> None:
    probe = real_home_probe()
    start = len(GUARD.violations)
    with pytest.raises(WroteToRealHome):
        write(probe)
    del GUARD.violations[start:]  # this test's own refusals must not fail it in teardown
    assert not os.path.lexists(probe)


def test_reading_the_real_home_and_the_test_cache_are_allowed() -> None:
    assert not GUARD.guarded(CACHE / "wheels" / "x.whl")
    assert not GUARD.guarded(REPO / "ascendpatch" / "__pycache__" / "x.pyc")
    assert GUARD.guarded(real_home_probe())
    assert GUARD.leads_to_allowed(CACHE.parent)
    assert str(Path.home()) not in GUARD.homes  # HOME is isolated, the guard is not
