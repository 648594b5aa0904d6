"""The Ansible module's ``verify`` in check mode, through the real ``ansible-playbook`` and the
real ascendpatch: after an ``apply`` that only planned (the rollout's ``--check``), what that
apply would apply is pending, not a failure, so the preview goes on past its first node. On
89ee836 it failed the node, and ``max_fail_percentage: 0`` stopped the preview there.
Anything else verify finds still fails, and so does a verify that follows no apply."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import (
    SMALL_PATCH,
    build_wheel,
    fake_cann,
    make_small_demo,
    tree_digest,
    wheels,
    write_manifest,
    write_small_manifest,
)
from tests.kit.ansibleplay import BIN, module_args, play

pytestmark = pytest.mark.integration


def test_check_mode_verify_after_apply_reports_the_pending_patch(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    make_small_demo(site)
    manifest = write_small_manifest(tmp_path)
    before = tree_digest(site)
    pending = play(tmp_path, module_args(site, manifest, command="verify", after_apply=True),
                   "--check")
    assert pending.get("failed") is not True, pending
    assert pending["pending"] == ["demo-fix"] and pending["changed"] is False
    assert "the rollout's apply would apply demo-fix" in str(pending["msg"])
    alone = play(tmp_path, module_args(site, manifest, command="verify"), "--check")
    assert alone["failed"] is True and "demo fix not applied" in str(alone["msg"]), alone
    assert tree_digest(site) == before  # check mode wrote nothing
    # a file the patch cannot apply to: plan says conflict, nothing pending, verify fails
    (site / "demo" / "mod.py").write_text("a = 5\nb = 3\n")
    conflict = play(tmp_path, module_args(site, manifest, command="verify", after_apply=True),
                    "--check")
    assert conflict["failed"] is True and "pending" not in conflict, conflict
    assert conflict["exit_code"] == 1  # the tool's failure (on main: the module crashed)


def test_check_mode_verify_after_apply_reports_pins_the_install_would_install(
        tmp_path: Path) -> None:
    """A stack whose pin is not installed yet: verify fails it, but the rollout's install step
    (its ``install --dry-run`` plan, from the same wheelhouse) would install it, so it is
    pending like the patch (on main: failed). A pin the wheelhouse cannot meet still fails."""
    house = tmp_path / "house"
    build_wheel(house, "demo-pin", "2.0")
    python = wheels.make_venv(tmp_path / "venv")
    make_small_demo(wheels.site_packages(python))
    (tmp_path / "fix.patch").write_text(SMALL_PATCH)
    fix: list[dict[str, object]] = [{
        "id": "demo-fix", "title": "demo fix", "kind": "diff", "distribution": "demo",
        "versions": ">=1", "source": "fix.patch"}]
    args: dict[str, object] = {
        "command": "verify", "python": str(python), "after_apply": True, "no_probes": True,
        "wheelhouse": str(house), "executable": str(BIN / "ascendpatch")}
    cann = fake_cann(tmp_path)  # the node's sourced CANN: only the pin and the patch fail
    before = tree_digest(tmp_path / "venv")
    met = write_manifest(tmp_path / "m.yaml", fix, stack={"packages": {"demo-pin": "==2.0"}})
    pending = play(tmp_path, {**args, "manifest": str(met)}, "--check", env_more=cann)
    assert pending.get("failed") is not True, pending
    assert pending["pending"] == ["demo-fix"] and pending["pending_pins"] == ["demo-pin"]
    assert "the rollout's install would install demo-pin 2.0; the rollout's apply would " \
           "apply demo-fix" in str(pending["msg"]), pending
    unmet = write_manifest(tmp_path / "n.yaml", fix, stack={"packages": {"demo-pin": "==3.0"}})
    failed = play(tmp_path, {**args, "manifest": str(unmet)}, "--check", env_more=cann)
    assert failed["failed"] is True and "pending" not in failed, failed
    assert "demo-pin is not installed" in str(failed["msg"])
    after = tree_digest(tmp_path / "venv")
    after.pop(".lock", None)  # the target's (empty) run lock, which install --dry-run takes
    assert after == before  # check mode installed nothing


def test_preview_returns_the_manifests_patch_as_the_diff(tmp_path: Path) -> None:
    """``preview`` (run on the controller for a node without the tool): the manifest's patch
    as Ansible's diff, said to be the manifest's change, not a diff against the node."""
    manifest = write_small_manifest(tmp_path)
    args: dict[str, object] = {"command": "preview", "manifest": str(manifest),
            "executable": str(BIN / "ascendpatch")}
    shown = play(tmp_path, args, "--check", "--diff")
    assert shown.get("failed") is not True and shown["changed"] is True, shown
    diffs = shown["diff"]
    assert isinstance(diffs, list) and len(diffs) == 1, diffs
    diff = diffs[0]
    assert isinstance(diff, dict) and SMALL_PATCH in diff["prepared"]
    assert f"manifest {manifest}, demo-fix, patch fix.patch for demo >=1 (the manifest's " \
           "change, not a diff against this node's files)" in diff["prepared"]
    assert play(tmp_path, args).get("skipped") is True  # outside check mode: nothing
