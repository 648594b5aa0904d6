"""Colour, spinner, -v/-q and streaming, on a real pseudo-terminal and through pipes.

The command runs as a separate process whose stdout and stderr are a pty (what a user's
terminal is), then with NO_COLOR, then piped. The spinner is rich's live display on stderr: it
hides the cursor (ESC[?25l) and draws braille spinner frames next to the step's label.
"""

from __future__ import annotations

import contextlib
import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ascendpatch import progress
from ascendpatch.commands import apply as apply_command
from ascendpatch.commands.context import Context
from ascendpatch.env import pipadapter
from ascendpatch.env.target import from_site_packages
from ascendpatch.manifest import loader
from ascendpatch.shell import output
from tests.kit import make_dist, run_cli, write_manifest
from tests.kit.fakes import PIP_VERSION_OUTPUT, FakePip

ESC = "\x1b["
HIDE_CURSOR = "\x1b[?25l"
SPINNER = re.compile("[\u2800-\u28ff]")  # rich's "dots" spinner frames
PATCH = """\
--- a/demo/m0.py
+++ b/demo/m0.py
@@ -1,3 +1,3 @@
 a = 1
-b = 2
+b = 22
 x = 1
"""


@pytest.fixture
def world(site: Path, tmp_path: Path) -> list[str]:
    files = {f"demo/m{i}.py": "a = 1\nb = 2\n" + "x = 1\n" * 2000 for i in range(40)}
    make_dist(site, "demo", "1.0.0", {"demo/__init__.py": "", **files})
    (tmp_path / "fix.patch").write_text(PATCH)
    manifest = write_manifest(tmp_path / "m.yaml", [
        {"id": "demo-fix", "title": "demo fix", "kind": "diff", "distribution": "demo",
         "versions": ">=1.0", "source": "fix.patch"}])
    return ["--site-packages", str(site), "--manifest", str(manifest)]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env.update({"TERM": "xterm-256color", "COLUMNS": "120", **extra})
    return env


def in_pty(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``python -m ascendpatch ARGS`` with stdout and stderr on a pseudo-terminal."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "ascendpatch", *args], stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


def piped(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ascendpatch", *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False, stdin=subprocess.DEVNULL)


def test_terminal_shows_spinner_and_colours(world: list[str]) -> None:
    code, text = in_pty([*world, "apply"], _clean_env())
    assert code == 0, text
    assert f"{ESC}32m[OK]{ESC}0m Applied demo fix" in text  # green [OK]
    assert re.search(r"\x1b\[[0-9;]*mrecap:", text)  # the recap, coloured
    code, text = in_pty([*world, "audit"], _clean_env())
    assert code == 0, text
    assert HIDE_CURSOR in text and SPINNER.search(text), text  # rich's live spinner ...
    assert re.search(r"hashing \d+ files", text)  # ... on the audit's hashing step


# Real processes (seconds in all): integration tier.
@pytest.mark.integration
def test_no_color_on_a_terminal_has_neither_colour_nor_spinner(world: list[str]) -> None:
    code, text = in_pty([*world, "apply"], _clean_env(NO_COLOR="1"))
    assert code == 0 and "[OK] Applied demo fix" in text
    code, text = in_pty([*world, "audit"], _clean_env(NO_COLOR="1"))
    assert code == 0
    assert ESC not in text and not SPINNER.search(text), repr(text)


# Real processes (seconds in all): integration tier.
@pytest.mark.integration
def test_piped_output_is_plain_and_force_color_colours_it(world: list[str]) -> None:
    done = piped([*world, "apply"], _clean_env())
    assert done.stdout == "[OK] Applied demo fix\n"
    assert done.stderr == "recap: ok=0 changed=1 skipped=0 failed=0\n"
    audit = piped([*world, "audit"], _clean_env())
    assert ESC not in audit.stdout + audit.stderr and not SPINNER.search(audit.stderr)
    forced = piped([*world, "status"], _clean_env(FORCE_COLOR="1"))
    assert f"{ESC}32m[OK]{ESC}0m demo fix applied" in forced.stdout
    assert HIDE_CURSOR not in forced.stderr  # colour forced, but a pipe never gets a spinner
    never = in_pty([*world, "--color", "never", "status"], _clean_env(FORCE_COLOR="1"))[1]
    assert ESC not in never  # --color beats the environment


# Real processes (seconds in all): integration tier.
@pytest.mark.integration
def test_plan_diff_is_coloured_on_a_terminal(world: list[str]) -> None:
    code, text = in_pty([*world, "plan"], _clean_env())
    assert code == 1  # changes pending
    assert f"{ESC}31m-b = 2{ESC}0m" in text and f"{ESC}32m+b = 22{ESC}0m" in text


def test_quiet_shows_only_problems(world: list[str]) -> None:
    assert run_cli(*world, "apply").code == 0
    quiet = run_cli(*world, "-q", "apply")
    assert (quiet.code, quiet.out, quiet.err) == (0, "", "")
    (Path(world[1]) / "demo" / "m0.py").write_text("a = 1\nb = 3\n")  # a hand edit: conflict
    quiet = run_cli(*world, "-q", "status")
    assert quiet.code == 1 and quiet.out.startswith("[FAIL] demo fix: conflict in demo/m0.py")


def test_verbose_shows_pip_command_lines_and_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """pip answers through FakePip with its recorded --version line (test_fakes runs the real
    pip through the same seam)."""
    FakePip(stdout=PIP_VERSION_OUTPUT).install(monkeypatch)
    err = io.StringIO()
    reporter = output.ConsoleReporter(color="never", verbose=True)
    with contextlib.redirect_stderr(err), progress.reporting(reporter):
        proc = pipadapter.run_pip(["--version"])
    assert proc.returncode == 0
    lines = err.getvalue().splitlines()
    assert lines[0] == f"$ {sys.executable} -m pip --version"
    assert lines[1].startswith("  pip ") and " from " in lines[1]
    quiet = io.StringIO()
    with contextlib.redirect_stderr(quiet), \
            progress.reporting(output.ConsoleReporter(color="never")):
        pipadapter.run_pip(["--version"])
    assert quiet.getvalue() == ""  # without -v: nothing


def test_results_stream_before_the_command_returns(world: list[str]) -> None:
    site, manifest = Path(world[1]), world[3]
    ctx = Context(target=from_site_packages(site), manifest=loader.load(manifest), env={})
    out = io.StringIO()
    reporter = output.ConsoleReporter(color="never")
    with contextlib.redirect_stdout(out), progress.reporting(reporter):
        result = apply_command.run(ctx, [])
        streamed = out.getvalue()  # the command has returned; nothing rendered it yet
    assert streamed == "[OK] Applied demo fix\n"
    final = io.StringIO()
    output.render(result, as_json=False, color="never", stream=final, streamed=True)
    assert final.getvalue() == ""  # not printed twice


def test_catalog_check_matrix_is_a_table_with_releases_as_rows() -> None:
    from ascendpatch.commands.catalog_check import CatalogMatrix, MatrixCell
    from ascendpatch.patchfile.porting import Verdict
    from ascendpatch.results import CheckResult, CommandResult, Level

    matrix = CatalogMatrix({"fix-a": {"0.18.0": MatrixCell(Verdict.EXACT),
                                      "0.9.1": MatrixCell(Verdict.NOT_NEEDED)},
                            "fix-b": {"0.18.0": MatrixCell(Verdict.CONFLICT),
                                      "0.9.1": MatrixCell(Verdict.EXACT)}})
    rows = (CheckResult("fix-a@0.18.0", "catalog", Level.OK, "fix-a x 0.18.0: applies"),
            CheckResult("fix-b@0.18.0", "catalog", Level.FAIL, "fix-b x 0.18.0: conflict"))
    result = CommandResult("catalog-check", rows, summary="| markdown |",
                           body=matrix)
    term = io.StringIO()
    output.render(result, as_json=False, color="always", stream=term)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", term.getvalue())
    lines = plain.splitlines()
    header = next(line for line in lines if "release" in line and "┃" in line)
    assert header.index("fix-a") < header.index("fix-b")  # artifacts are the columns
    first = next(i for i, line in enumerate(lines) if "0.9.1" in line)
    second = next(i for i, line in enumerate(lines) if "0.18.0" in line and "│" in line)
    assert first < second  # releases are the rows, oldest first
    assert "[FAIL] fix-b x 0.18.0: conflict" in plain and "fix-a x 0.18.0" not in plain
    piped = io.StringIO()
    output.render(result, as_json=False, color="never", stream=piped)
    assert piped.getvalue().endswith("| markdown |\n")  # a pipe keeps the Markdown table


def test_apply_diff_and_revert_dry_run(world: list[str]) -> None:
    dry = run_cli(*world, "apply", "--dry-run", "--diff")
    assert dry.code == 1  # changes pending
    assert "[WARN] demo fix: would be applied\n" in dry.out and "\n+b = 22\n" in dry.out
    assert dry.err == "recap: ok=0 changed=1 skipped=0 failed=0\n"
    applied = run_cli(*world, "apply", "--diff")  # a real run shows what it changed
    assert applied.code == 0
    assert applied.out.startswith("[OK] Applied demo fix\n") and "\n+b = 22\n" in applied.out
    site = Path(world[1])
    before = (site / "demo" / "m0.py").read_bytes()
    pending = run_cli(*world, "revert", "--dry-run")
    assert pending.code == 1
    assert pending.out == "[WARN] demo fix: would be reverted (demo/m0.py)\n"
    assert (site / "demo" / "m0.py").read_bytes() == before  # nothing changed
    assert run_cli(*world, "revert").code == 0
    assert run_cli(*world, "revert", "--dry-run").code == 0  # nothing left to revert
