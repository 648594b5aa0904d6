"""`status` in text lists each artifact's files with their states, as --json does."""

from __future__ import annotations

from pathlib import Path

from tests.kit import make_small_demo, run_cli, write_small_manifest


def test_status_lists_every_file_with_its_state_in_text(site: Path, tmp_path: Path) -> None:
    """On main the text showed only the artifact's line (the files were in --json alone)."""
    make_small_demo(site)
    manifest = write_small_manifest(tmp_path)
    args = ("--site-packages", site, "--manifest", manifest)
    before = run_cli(*args, "status")
    assert before.code == 1
    assert before.out.splitlines()[:2] == [
        f"[WARN] demo fix not applied; run: ascendpatch --site-packages {site} --manifest "
        f"{manifest} apply demo-fix",
        "    demo/mod.py: pristine"]
    assert run_cli(*args, "apply").code == 0
    after = run_cli(*args, "status")
    assert after.code == 0
    assert after.out.splitlines()[:2] == ["[OK] demo fix applied", "    demo/mod.py: applied"]
    as_json = run_cli(*args, "--json", "status").json["results"][0]["files"]
    assert [(f["path"], f["state"]) for f in as_json] == [("demo/mod.py", "applied")]
