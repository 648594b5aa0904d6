"""The suite's schedule (tests/kit/schedule.py): the files of minutes run first, whole and in
their own order, and each one the schedule names exists (a renamed file would silently drop
back to pytest's order)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.kit import REPO, pytest_command
from tests.kit.schedule import LONGEST_FIRST


def _pytest(tmp: Path, *args: str) -> str:
    return subprocess.run(pytest_command(tmp / "basetemp", *args), cwd=REPO,
                          capture_output=True, text=True, check=True, timeout=120).stdout


def _collected(tmp: Path, *args: str) -> list[str]:
    return [line for line in _pytest(tmp, "--collect-only", "-q", *args).splitlines()
            if "::" in line]


def test_every_file_the_schedule_names_is_a_test_file_of_the_suite() -> None:
    missing = [path for path in LONGEST_FIRST if not (REPO / path).is_file()]
    assert not missing
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


@pytest.mark.integration  # two real pytest collections: seconds
def test_a_long_file_is_collected_before_the_others_whole_and_in_its_own_order(
        tmp_path: Path) -> None:
    """Real pytest, through conftest's plugin: tests/test_words.py comes first alphabetically
    and on the command line, the long ones still run first, in the schedule's order."""
    longest, second = LONGEST_FIRST[0], LONGEST_FIRST[1]
    ids = _collected(tmp_path, "tests/test_words.py", second, longest)
    files = [nodeid.split("::")[0] for nodeid in ids]
    first_short = files.index("tests/test_words.py")
    assert set(files[:first_short]) == {longest, second}
    assert files[:first_short] == sorted(files[:first_short],
                                         key=LONGEST_FIRST.index)  # whole, longest first
    # in pytest's own order of that file: collected without the plugin
    assert ids[:files.count(longest)] == _collected(tmp_path, "-p", "no:tests.kit.schedule",
                                                    longest)


def test_durations_also_list_the_slowest_files_with_their_summed_time(tmp_path: Path) -> None:
    out = _pytest(tmp_path, "-q", "--durations=1", "tests/test_words.py")
    assert "slowest 1 files (setup + call + teardown)" in out
    assert re.search(r"^ +\d+\.\ds tests/test_words\.py$", out, re.M), out
