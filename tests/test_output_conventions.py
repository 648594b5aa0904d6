"""Output conventions of issue 25: `-o` the same everywhere, messages on one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendpatch.env.reqs import parse
from ascendpatch.errors import InvalidInputError
from tests.kit import chdir, make_dist, run_cli
from tests.kit.properties import deadline


def _snapshots(site: Path, folder: Path) -> Path:
    make_dist(site, "demo", "1.0.0", {"demo/__init__.py": ""})
    folder.mkdir()
    for host in ("node-1", "node-2"):
        assert run_cli("--site-packages", site, "snapshot", "-o", folder / f"{host}.json").code == 0
    return folder


def test_fleet_report_into_a_missing_folder_is_exit_2(site: Path, tmp_path: Path) -> None:
    """On main: exit 3, FileNotFoundError, after the whole report was built."""
    snapshots = _snapshots(site, tmp_path / "snaps")
    result = run_cli("fleet-report", snapshots, "-o", tmp_path / "nodir" / "r.html")
    assert result.code == 2, result.err
    last = result.err.strip().splitlines()[-1]  # after argparse's usage, one [FAIL] line
    assert last.startswith("[FAIL] ") and "does not exist; create it first" in last
    assert not (tmp_path / "nodir").exists()


def test_fleet_report_to_dash_writes_the_page_to_stdout(site: Path, tmp_path: Path) -> None:
    """On main: a file named "-" in the current folder."""
    snapshots = _snapshots(site, tmp_path / "snaps")
    with chdir(tmp_path):
        result = run_cli("fleet-report", snapshots, "-o", "-")
    assert result.code == 0, result.err
    assert result.out.startswith("<!DOCTYPE html>") and result.out.rstrip().endswith("</html>")
    assert "[OK] node-1: as the baseline" in result.err and "report written to stdout" in \
        result.err
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("argv", [["fleet-report", "{snaps}", "-o", "{folder}"],
                                  ["lock", "-o", "{folder}"],
                                  ["catalog-check", "--markdown", "{folder}"]])
def test_an_output_that_is_a_folder_is_exit_2(site: Path, tmp_path: Path,
                                              argv: list[str]) -> None:
    """On main `fleet-report -o DIR` built the report, then exited 3 (IsADirectoryError)."""
    snapshots = _snapshots(site, tmp_path / "snaps")
    folder = tmp_path / "out"
    folder.mkdir()
    result = run_cli(*[a.format(snaps=snapshots, folder=folder) for a in argv])
    assert result.code == 2, result.err
    assert result.err.strip().splitlines()[-1].endswith(
        f"{folder} is a folder, not a file; give a file name in it, e.g. {folder / 'out'}")
    assert list(folder.iterdir()) == []


def test_an_invalid_requirement_is_one_clean_line(site: Path) -> None:
    """On main: packaging's three lines, shown as `...or end\\x0a    six>=>1\\x0a       ^`."""
    result = run_cli("--site-packages", site, "install", "six>=>1", "--dry-run")
    assert result.code == 2
    assert result.err.strip() == (
        "[FAIL] requirement 'six>=>1' is not valid PEP 508: Expected semicolon (after name with "
        "no version specifier) or end, at '>=>1'; fix: write it as pip takes it, e.g. "
        "'six>=1.16'")


@settings(max_examples=200, deadline=deadline(1000))
@given(st.text(max_size=60))
def test_any_requirement_parses_or_is_one_line(raw: str) -> None:
    try:
        parse(raw)
    except InvalidInputError as exc:
        text = str(exc)
        assert "\n" not in text and "\r" not in text.replace(repr(raw), "")
        assert text.startswith(f"requirement {raw!r} is not valid PEP 508: ")
