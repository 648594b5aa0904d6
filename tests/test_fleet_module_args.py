"""The Ansible module's arguments are data, never options: run through the real
ansible-playbook (ansible-core from PyPI, local connection) and the real ascendpatch.

On 89ee836, ``ids: [demo-fix, --force]`` became ``apply demo-fix --force``, and an id
``--python=/x`` retargeted the run and executed that interpreter (as root, on a node). Now a
value that starts with '-' fails the task naming it, nothing runs, and ids are passed after
``--``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.kit import REPO, make_small_demo, tree_digest, write_small_manifest

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent


def _play(root: Path, args: dict[str, object], *flags: str) -> dict[str, object]:
    """One task of the module on localhost; its registered result."""
    collections = root / "collections" / "ansible_collections" / "ascendpatch"
    if not collections.exists():
        collections.mkdir(parents=True)
        (collections / "fleet").symlink_to(REPO / "ansible")
    out = root / "result.json"
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "run the module", "ascendpatch.fleet.ascendpatch": args, "register": "r",
         "ignore_errors": True},
        {"name": "keep the result", "ansible.builtin.copy": {
            "content": "{{ r | to_json }}", "dest": str(out)}, "check_mode": False}]}]
    playbook = root / "play.yml"
    playbook.write_text(yaml.safe_dump(play))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "ANSIBLE_"))}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(root / "collections"), ANSIBLE_NOCOLOR="1",
               PATH=f"{BIN}:{env['PATH']}")
    proc = subprocess.run([BIN / "ansible-playbook", "-i", "localhost,", "-c", "local",
                           "-e", f"ansible_python_interpreter={sys.executable}", playbook,
                           *flags], capture_output=True, text=True, env=env, timeout=300,
                          check=False, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert isinstance(result, dict)
    return result


@pytest.fixture
def target(tmp_path: Path) -> tuple[Path, Path]:
    site = tmp_path / "site"
    site.mkdir()
    make_small_demo(site)
    return site, write_small_manifest(tmp_path)


def _args(site: Path, manifest: Path, **more: object) -> dict[str, object]:
    return {"command": "apply", "site_packages": str(site), "manifest": str(manifest),
            "executable": str(BIN / "ascendpatch"), **more}


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
    result = _play(tmp_path, _args(site, manifest, **bad))
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
        result = _play(tmp_path, _args(site, manifest, ids=[f"--python={evil}"]), *check)
        assert result["failed"] is True and not marker.exists()


def test_good_ids_still_apply_after_the_separator(tmp_path: Path,
                                                  target: tuple[Path, Path]) -> None:
    site, manifest = target
    result = _play(tmp_path, _args(site, manifest, ids=["demo-fix"]))
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
    result = _play(tmp_path, _args(site, manifest), "--check")
    assert result.get("failed") is not True, result
    assert result["changed"] is True and result["changed_files"] == ["demo/mod.py"], result
    assert tree_digest(site) == before
