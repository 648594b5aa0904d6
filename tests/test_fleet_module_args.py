"""The Ansible module's arguments are data, never options: run through the real
ansible-playbook (ansible-core from PyPI, local connection) and the real ascendpatch.

On 89ee836, ``ids: [demo-fix, --force]`` became ``apply demo-fix --force``, and an id
``--python=/x`` retargeted the run and executed that interpreter (as root, on a node). Now a
value that starts with '-' fails the task naming it, nothing runs, and ids are passed after
``--``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import make_small_demo, run_process, tree_digest, write_small_manifest
from tests.kit.ansibleplay import module_args, play

pytestmark = pytest.mark.integration


@pytest.fixture
def target(tmp_path: Path) -> tuple[Path, Path]:
    site = tmp_path / "site"
    site.mkdir()
    make_small_demo(site)
    return site, write_small_manifest(tmp_path)


@pytest.mark.parametrize("bad", [
    {"ids": ["demo-fix", "--force"]},
    {"ids": ["--site-packages=/"]},
    {"with_ids": ["--force"]},
    {"ids": ["-x"]},
])
def test_an_id_that_looks_like_an_option_is_refused_and_nothing_runs(
        tmp_path: Path, target: tuple[Path, Path], bad: dict[str, object]) -> None:
    site, manifest = target
    before = tree_digest(tmp_path)
    result = play(tmp_path, module_args(site, manifest, **bad))
    assert result["failed"] is True
    assert "is not an artifact id" in str(result["msg"]) and "nothing was run" in str(
        result["msg"])
    assert "cmd" not in result  # the tool was never started
    after = tree_digest(tmp_path)
    after.pop("result.json", None)
    before.pop("result.json", None)
    assert {k: v for k, v in after.items() if not k.startswith(("play.yml", "collections"))} \
        == {k: v for k, v in before.items() if not k.startswith(("play.yml", "collections"))}


def test_an_id_can_never_choose_the_interpreter(tmp_path: Path,
                                                target: tuple[Path, Path]) -> None:
    """The planted interpreter would leave a marker if anything executed it."""
    site, manifest = target
    marker = tmp_path / "executed"
    evil = tmp_path / "evil-python"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    evil.chmod(0o755)
    for check in ((), ("--check",)):
        result = play(tmp_path, module_args(site, manifest, ids=[f"--python={evil}"]), *check)
        assert result["failed"] is True and not marker.exists()


def test_good_ids_still_apply_after_the_separator(tmp_path: Path,
                                                  target: tuple[Path, Path]) -> None:
    site, manifest = target
    result = play(tmp_path, module_args(site, manifest, ids=["demo-fix"]))
    assert result.get("failed") is not True, result
    assert result["changed"] is True
    cmd = result["cmd"]
    assert isinstance(cmd, list) and cmd[-2:] == ["--", "demo-fix"]
    assert "a2 = 2" in (site / "demo" / "mod.py").read_text()


def test_check_mode_reports_a_pending_patch_as_a_change_and_writes_nothing(
        tmp_path: Path, target: tuple[Path, Path]) -> None:
    """Check mode runs `plan`, whose items say "pending": that is a change the real run would
    make (changed, with the file named), never a failure, and nothing is written."""
    site, manifest = target
    before = tree_digest(site)
    result = play(tmp_path, module_args(site, manifest), "--check")
    assert result.get("failed") is not True, result
    assert result["changed"] is True and result["changed_files"] == ["demo/mod.py"], result
    assert tree_digest(site) == before


def test_check_mode_never_recovers_an_interrupted_run(tmp_path: Path,
                                                     target: tuple[Path, Path]) -> None:
    """Check mode writes nothing, ever: on 89ee836 its `plan` rolled the journal of a killed
    apply back (rewriting demo/mod.py, deleting the journal). Now the task fails naming the
    recovery, the target and the journal stay byte for byte; a real apply then recovers."""
    site, manifest = target
    killed = run_process("--site-packages", site, "--manifest", manifest, "apply",
                         env={"ASCENDPATCH_CRASH_AT": "3"})  # after the file was written
    journal = site / ".ascendpatch" / "journal.json"
    assert killed.code < 0 and journal.exists()
    half = tree_digest(site)
    for command in ("apply", "revert"):  # their check-mode stand-ins: plan, status
        result = play(tmp_path, module_args(site, manifest, command=command), "--check")
        assert result["failed"] is True, result
        assert "an interrupted run needs recovery" in str(result["msg"]), result["msg"]
        assert tree_digest(site) == half
    applied = play(tmp_path, module_args(site, manifest))
    assert applied.get("failed") is not True, applied
    assert not journal.exists() and "a2 = 2" in (site / "demo" / "mod.py").read_text()
