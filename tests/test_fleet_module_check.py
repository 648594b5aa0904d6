"""The Ansible module's ``verify`` in check mode, through the real ``ansible-playbook`` and the
real ascendpatch: after an ``apply`` that only planned (the rollout's ``--check``), what that
apply would apply is pending, not a failure, so the preview goes on past its first node. On
89ee836 it failed the node, and ``max_fail_percentage: 0`` stopped the preview there.
Anything else verify finds still fails, and so does a verify that follows no apply."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import make_small_demo, tree_digest, write_small_manifest
from tests.kit.ansibleplay import module_args, play

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
