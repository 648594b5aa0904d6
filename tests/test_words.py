"""Users never see an enum's repr: every command's words are plain ("applied", not
"FileState.APPLIED"), in plain output and in --json, whatever state the target is in."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import Run, make_demo_target, run_cli

REPRS = ("FileState.", "Status.", "Level.")


def _demo(site: Path, tmp_path: Path) -> Path:
    return make_demo_target(site, tmp_path)


def _every_output(site: Path, manifest: Path, commands: list[list[str]]) -> list[Run]:
    runs = []
    for command in commands:
        for json in ([], ["--json"]):
            runs.append(run_cli("--site-packages", site, "--manifest", manifest, *json,
                                *command))
    return runs


def _assert_plain(runs: list[Run]) -> None:
    for run in runs:
        text = run.out + run.err
        assert text.strip()  # each command said something
        leaked = [r for r in REPRS if r in text]
        assert not leaked, f"{leaked} in:\n{text}"


def test_no_enum_repr_through_a_whole_cycle(site: Path, tmp_path: Path) -> None:
    manifest = _demo(site, tmp_path)
    runs = _every_output(site, manifest, [["status"], ["plan"], ["apply", "--dry-run"],
                                          ["apply"], ["status"], ["plan"], ["apply"],
                                          ["revert", "--dry-run"], ["revert"], ["status"]])
    assert {r.code for r in runs} <= {0, 1}
    _assert_plain(runs)


@pytest.mark.parametrize("state", ["conflict", "partial"])
def test_no_enum_repr_when_things_go_wrong(site: Path, tmp_path: Path, state: str) -> None:
    manifest = _demo(site, tmp_path)
    mod = site / "demo" / "mod.py"
    if state == "conflict":
        mod.write_text(mod.read_text().replace("value_5 = 5\n", "value_5 = 'changed'\n"))
    else:  # only the second file of the two-file patch is patched
        other = site / "demo" / "other.py"
        other.write_text(other.read_text().replace("other_3 = 3\n", "other_3 = 33\n"))
    runs = _every_output(site, manifest, [["status"], ["plan"], ["apply"], ["revert"]])
    assert 1 in {r.code for r in runs}  # the trouble is reported as trouble
    _assert_plain(runs)
