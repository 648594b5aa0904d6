"""The README's two commands, parsed from README.md and run exactly as written in a fresh clone.

The first (the main job, `bash install.sh --sandbox`) runs fully. The second (the tests and
their setup, `bash .ci/run`) runs fully too (new venv, `.[dev]`, CPU torch, ruff, mypy), except
that ASCENDPATCH_CI_PYTEST_ARGS narrows its final pytest runs to a fast-tier selection: the
whole suite would include this test and recurse. That still proves the point of the command:
on a fresh clone it builds everything the tests need and the tests run green in it.
Both commands run with the machine's own environment (its pip configuration, captured before
the test fixtures isolate pip), and a temp HOME.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.kit import REPO, wheels

MACHINE_ENV = dict(os.environ)  # read at import, before conftest's fixtures change it
IN_CLONE = "ASCENDPATCH_IN_README_TEST"
SECTION = "## The two commands"


def readme_commands(text: str) -> list[str]:
    """The ```bash blocks of the README's opening section: exactly two, one line each."""
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = [b.strip() for b in re.findall(r"```bash\n(.*?)```", section, re.S)]
    assert len(blocks) == 2, blocks
    assert all("\n" not in block for block in blocks), blocks
    return blocks


def test_readme_opens_with_exactly_two_commands() -> None:
    text = (REPO / "README.md").read_text()
    assert re.findall(r"^## .*", text, re.M)[0] == SECTION  # the README opens with them
    assert readme_commands(text) == ["bash install.sh --sandbox", "bash .ci/run"]
    assert "TIME_" not in text, "state the timings as measured"
    ci = (REPO / ".ci" / "run").read_text()
    # a selection when one is given ...
    assert 'pytest --basetemp "$venv_root/tmp" "${pytest_args[@]}"' in ci
    # ... else all, gated, in two workers; the tests' temp folders in the run's own folder
    assert ('"$py" -m pytest --cov --durations=25 -n 2 --dist loadfile --no-loadscope-reorder'
            ' \\\n        --basetemp "$venv_root/tmp" \\\n        || suite_rc=$?\n') in ci
    assert "`python -m pytest --cov`" in text  # and the README says so
    assert '`VENV/bin/python -m pytest -m "not integration"`' in text  # the fast tier


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get(IN_CLONE):
        pytest.skip("already inside the README test's clone")
    folder = tmp_path_factory.mktemp("readme") / "ascendpatch"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(folder)], check=True)
    return folder


def _env(home: Path) -> dict[str, str]:
    env = {**MACHINE_ENV, "HOME": str(home), IN_CLONE: "1"}
    for name in [n for n in env if n.startswith("COVERAGE_")]:
        env.pop(name)  # a run under --cov: the clone's processes are not this checkout's code
    for name in ("ASCENDPATCH_PREFIX", "ASCENDPATCH_BIN_DIR", "ASCENDPATCH_PYTHON",
                 "XDG_DATA_HOME", "XDG_CACHE_HOME", "ASCENDPATCH_CACHE"):
        env.pop(name, None)
    return env


def _run(command: str, cwd: Path, env: dict[str, str], timeout: float) -> \
        subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL)


@pytest.mark.integration
def test_the_main_job_command_as_written(clone: Path, tmp_path: Path) -> None:
    command = readme_commands((clone / "README.md").read_text())[0]
    home = tmp_path / "home"
    cache = home / ".cache" / "ascendpatch" / "wheels"
    cache.mkdir(parents=True)
    shutil.copy(wheels.wheel("0.18.0"), cache)  # the 29 MB download is cached by the test tier
    env = _env(home)
    done = _run(command, clone, env, timeout=900)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "[OK] Applied sampler top_k/top_p fallback patch" in out
    assert f"[OK] launcher {home}/.local/bin/ascendpatch -> " in out
    assert f'export PATH="{home}/.local/bin:$PATH"' in out.splitlines()
    assert out.rstrip().endswith("=== Installation complete ===")
    # the launcher on PATH runs the installed tool against the sandbox it built
    env["PATH"] = f"{home}/.local/bin:{env['PATH']}"
    status = _run("ascendpatch --python ascendpatch-sandbox/bin/python status", clone, env, 120)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "[OK] sampler top_k/top_p fallback patch applied" in status.stdout
    # ... and remembers it: from any folder, no --python needed
    remembered = _run("ascendpatch -v verify", home, env, 300)
    assert remembered.returncode == 0, remembered.stdout + remembered.stderr
    assert f"(from {home}/.config/ascendpatch/config.toml)" in remembered.stderr
    again = _run(command, clone, env, timeout=900)
    assert again.returncode == 0 and "already applied" in again.stdout
    assert "export PATH=" not in again.stdout  # now it is on PATH
    gone = _run("bash install.sh --uninstall", clone, env, timeout=120)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert not (home / ".local" / "bin" / "ascendpatch").exists()
    assert not (home / ".local" / "share" / "ascendpatch" / "venv").exists()
    assert (clone / "ascendpatch-sandbox" / "bin" / "python").exists()  # targets stay


@pytest.mark.integration
def test_the_test_command_as_written_sets_up_and_runs_the_tests(clone: Path,
                                                                tmp_path: Path) -> None:
    command = readme_commands((clone / "README.md").read_text())[1]
    env = _env(tmp_path / "home")
    env["ASCENDPATCH_CI_PYTEST_ARGS"] = ("-q -m 'not integration' tests/test_json_schema.py "
                                         "tests/test_readme.py")
    done = _run(command, clone, env, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "All checks passed!" in done.stdout  # ruff
    assert "Success: no issues found" in done.stdout  # mypy
    assert re.search(r"^\d+ passed", done.stdout, re.M), done.stdout[-2000:]
    assert re.search(r"^\[OK\] \.ci/run passed in \d+ s", done.stdout, re.M)
