"""apply / plan / revert / status through the real CLI, on targets built in temp dirs."""

from __future__ import annotations

import importlib.util
import py_compile
from pathlib import Path

import pytest

from tests.kit import (
    DEMO_MOD,
    DEMO_OTHER,
    TRACEBACK,
    Run,
    make_demo_target,
    make_dist,
    run_cli,
    tree_digest,
    write_manifest,
)

MOD, OTHER = DEMO_MOD, DEMO_OTHER


@pytest.fixture
def env(site: Path, tmp_path: Path) -> dict[str, Path]:
    manifest = make_demo_target(site, tmp_path)
    return {"site": site, "manifest": manifest, "patch": tmp_path / "fix.patch"}


def cli(env: dict[str, Path], *args: str) -> Run:
    return run_cli("--site-packages", env["site"], "--manifest", env["manifest"], *args)


def test_apply_then_second_apply_changes_zero_bytes(env: dict[str, Path]) -> None:
    first = cli(env, "apply")
    assert first.code == 0, first.err
    assert first.out.strip() == "[OK] Applied demo fix"
    before = tree_digest(env["site"])
    second = cli(env, "apply")
    assert second.code == 0
    assert second.out.strip() == "[OK] demo fix already applied"
    assert tree_digest(env["site"]) == before


def test_json_document_shape(env: dict[str, Path]) -> None:
    doc = cli(env, "--json", "apply").json
    assert doc["command"] == "apply" and doc["ok"] is True
    (item,) = doc["results"]
    assert {"id", "kind", "status", "message", "files"} <= set(item)
    assert item["status"] == "applied"
    paths = {f["path"]: f for f in item["files"]}
    assert set(paths) == {"demo/mod.py", "demo/other.py"}
    assert all(f["sha256_before"] != f["sha256_after"] for f in paths.values())
    assert cli(env, "apply", "--json").json["results"][0]["status"] == "already-applied"


def test_revert_restores_byte_identical_files(env: dict[str, Path]) -> None:
    pristine = tree_digest(env["site"])
    assert cli(env, "apply").code == 0
    result = cli(env, "revert")
    assert result.code == 0 and result.out.strip() == "[OK] Reverted demo fix"
    after = {k: v for k, v in tree_digest(env["site"]).items() if not k.startswith(".ascendpatch")}
    assert after == pristine
    again = cli(env, "revert")
    assert again.code == 0 and "nothing to revert" in again.out


def test_revert_after_backups_and_ledger_are_deleted(env: dict[str, Path]) -> None:
    pristine = tree_digest(env["site"])
    cli(env, "apply")
    state = env["site"] / ".ascendpatch"
    for blob in (state / "backups").iterdir():
        blob.unlink()
    (state / "ledger.json").unlink()
    result = cli(env, "revert")
    assert result.code == 0, result.out
    after = {k: v for k, v in tree_digest(env["site"]).items() if not k.startswith(".ascendpatch")}
    assert after == pristine


def test_status_and_plan_report_without_writing(env: dict[str, Path]) -> None:
    before = tree_digest(env["site"])
    status = cli(env, "status")
    assert status.code == 1 and "[WARN] demo fix not applied" in status.out
    plan = cli(env, "plan")
    assert plan.code == 1
    assert "+value_5b = 55" in plan.out and "-other_3 = 3" in plan.out
    dry = cli(env, "apply", "--dry-run")
    assert dry.code == 1 and "would be applied" in dry.out
    assert {k: v for k, v in tree_digest(env["site"]).items()
            if not k.startswith(".ascendpatch")} == before
    cli(env, "apply")
    assert cli(env, "status").code == 0
    assert cli(env, "plan").code == 0


def test_partial_across_files_is_reported_and_refused(env: dict[str, Path]) -> None:
    other = env["site"] / "demo/other.py"
    other.write_text(OTHER.replace("other_3 = 3", "other_3 = 33"))
    before = tree_digest(env["site"])
    result = cli(env, "apply")
    assert result.code == 1
    assert "[FAIL] demo fix: partially applied" in result.out
    assert tree_digest(env["site"]) == before
    forced = cli(env, "apply", "--force")
    assert forced.code == 0 and "[OK] Applied demo fix" in forced.out
    assert "value_5b = 55" in (env["site"] / "demo/mod.py").read_text()


def test_conflict_in_one_file_leaves_every_file_untouched(env: dict[str, Path]) -> None:
    other = env["site"] / "demo/other.py"
    other.write_text(OTHER.replace("other_3 = 3", "other_3 = 'drifted'"))
    before = tree_digest(env["site"])
    result = cli(env, "apply")
    assert result.code == 1
    assert "[FAIL] demo fix: conflict in demo/other.py" in result.out
    assert "hunk #1 does not match" in result.out
    assert "other_3 = 'drifted'" in result.out  # the nearest code is shown
    assert tree_digest(env["site"]) == before
    assert cli(env, "apply", "--force").code == 1  # no full post-image: force cannot help


def test_file_mode_is_kept(env: dict[str, Path]) -> None:
    mod = env["site"] / "demo/mod.py"
    mod.chmod(0o750)
    cli(env, "apply")
    assert mod.stat().st_mode & 0o777 == 0o750
    cli(env, "revert")
    assert mod.stat().st_mode & 0o777 == 0o750


def test_stale_bytecode_is_removed_including_unchecked_hash_pycs(env: dict[str, Path]) -> None:
    mod = env["site"] / "demo/mod.py"
    cache = Path(importlib.util.cache_from_source(str(mod)))
    py_compile.compile(str(mod), cfile=str(cache),
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    assert cache.exists()
    cli(env, "apply")
    assert not cache.exists()


def test_unknown_artifact_id_is_a_usage_error(env: dict[str, Path]) -> None:
    result = cli(env, "apply", "nope")
    assert result.code == 2 and "unknown artifact id(s) nope" in result.err


def test_missing_distribution_is_skipped(env: dict[str, Path], tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m2.yaml", [{
        "id": "x", "title": "x fix", "kind": "diff", "distribution": "absent-pkg",
        "versions": ">=1", "source": "fix.patch"}])
    result = run_cli("--site-packages", env["site"], "--manifest", manifest, "apply")
    assert result.code == 0
    assert result.out.startswith("[SKIP] x fix: absent-pkg is not installed")


def test_version_out_of_range_is_skipped_and_nothing_changes(env: dict[str, Path],
                                                              tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m3.yaml", [{
        "id": "x", "title": "x fix", "kind": "diff", "distribution": "demo",
        "versions": ">=0.1,<1.0", "source": "fix.patch",
        "not_needed": {"versions": ">=1.0", "reason": "fixed upstream in 1.0"}}])
    before = tree_digest(env["site"])
    result = run_cli("--site-packages", env["site"], "--manifest", manifest, "apply")
    assert result.code == 0
    assert result.out.strip() == ("[SKIP] x fix: not needed for demo 1.2.0: fixed upstream "
                                  "in 1.0")
    assert tree_digest(env["site"]) == before


# ------------------------------------------------------------------------- other kinds


def _dropin_env(site: Path, tmp_path: Path, original: str) -> Path:
    make_dist(site, "quant", "0.18.0", {"quant/w8a8.py": original})
    (tmp_path / "w8a8.py.smooth").write_text("SMOOTH = True\n")
    return write_manifest(tmp_path / "d.yaml", [{
        "id": "smooth", "title": "SmoothQuant drop-in", "kind": "dropin",
        "distribution": "quant", "versions": ">=0.18", "source": "w8a8.py.smooth",
        "targets": ["quant/w8a8.py"]}])


def test_dropin_over_known_original_and_revert(site: Path, tmp_path: Path) -> None:
    manifest = _dropin_env(site, tmp_path, "ORIGINAL = 1\n")
    target = site / "quant/w8a8.py"
    assert run_cli("--site-packages", site, "--manifest", manifest, "apply").code == 0
    assert target.read_text() == "SMOOTH = True\n"
    again = run_cli("--site-packages", site, "--manifest", manifest, "apply")
    assert "already applied" in again.out
    assert run_cli("--site-packages", site, "--manifest", manifest, "revert").code == 0
    assert target.read_text() == "ORIGINAL = 1\n"


def test_dropin_over_unknown_content_needs_force_and_keeps_backup(site: Path,
                                                                   tmp_path: Path) -> None:
    manifest = _dropin_env(site, tmp_path, "ORIGINAL = 1\n")
    target = site / "quant/w8a8.py"
    target.write_text("LOCAL EDIT = 1\n")
    refused = run_cli("--site-packages", site, "--manifest", manifest, "apply")
    assert refused.code == 1 and "unrecognised content" in refused.out
    assert "--force overwrites it" in refused.out
    assert target.read_text() == "LOCAL EDIT = 1\n"
    forced = run_cli("--site-packages", site, "--manifest", manifest, "apply", "--force")
    assert forced.code == 0 and target.read_text() == "SMOOTH = True\n"
    assert run_cli("--site-packages", site, "--manifest", manifest, "revert").code == 0
    assert target.read_text() == "LOCAL EDIT = 1\n"  # the backup brought the edit back


def test_file_kind_creates_and_reverts(site: Path, tmp_path: Path) -> None:
    make_dist(site, "demo", "1.0", {"demo/__init__.py": ""})
    (tmp_path / "extra.json").write_text('{"a": 1}\n')
    manifest = write_manifest(tmp_path / "f.yaml", [{
        "id": "extra", "title": "extra file", "kind": "file", "distribution": "demo",
        "versions": ">=1", "source": "extra.json", "targets": ["demo/extra.json"]}])
    assert run_cli("--site-packages", site, "--manifest", manifest, "apply").code == 0
    assert (site / "demo/extra.json").read_text() == '{"a": 1}\n'
    assert "already applied" in run_cli("--site-packages", site, "--manifest", manifest,
                                        "apply").out
    assert run_cli("--site-packages", site, "--manifest", manifest, "revert").code == 0
    assert not (site / "demo/extra.json").exists()
    (site / "demo/extra.json").write_text("different\n")
    assert run_cli("--site-packages", site, "--manifest", manifest, "apply").code == 1


def test_a_file_ascendpatch_installed_is_updated_when_its_source_changes(site: Path,
                                                                       tmp_path: Path) -> None:
    """The ledger proves ascendpatch wrote the installed content: an edited source is applied
    (on main it was "conflict in ...", a stranger's file that --force had to overwrite), and
    revert still restores the original. An installed file someone edited since stays a
    conflict that names the edit applying would lose."""
    original = _dropin_env(site, tmp_path, "ORIGINAL = 1\n")
    target, source = site / "quant/w8a8.py", tmp_path / "w8a8.py.smooth"

    def ap(*args: str) -> Run:
        return run_cli("--site-packages", site, "--manifest", original, *args)

    assert ap("apply").code == 0
    source.write_text("SMOOTH = 2\n")
    status = ap("status")
    assert status.code == 1, status.out
    assert "SmoothQuant drop-in: applied from an earlier source; quant/w8a8.py now differ" \
        in status.out
    again = ap("apply")
    assert again.code == 0, again.out + again.err
    assert again.out.startswith("[OK] Applied SmoothQuant drop-in (new content in "
                                "quant/w8a8.py, which it had installed before)")
    assert target.read_text() == "SMOOTH = 2\n"
    assert "already applied" in ap("apply").out

    target.write_text("SMOOTH = 2  # tuned on the host\n")
    source.write_text("SMOOTH = 3\n")
    refused = ap("apply")
    assert refused.code == 1, refused.out
    assert "quant/w8a8.py: changed by someone since ascendpatch wrote it" in refused.out
    assert "applying would lose that edit" in refused.out
    assert target.read_text() == "SMOOTH = 2  # tuned on the host\n"

    target.write_text("SMOOTH = 2\n")  # the edit undone: the file is ascendpatch's again
    assert ap("revert").code == 0
    assert target.read_text() == "ORIGINAL = 1\n"


# ------------------------------------------------------------------------- bad input


def _bad(site: Path, tmp_path: Path, patch_text: str) -> Run:
    make_dist(site, "demo", "1.0", {"demo/mod.py": MOD, "demo/__init__.py": ""})
    (tmp_path / "bad.patch").write_text(patch_text)
    manifest = write_manifest(tmp_path / "b.yaml", [{
        "id": "bad", "title": "bad", "kind": "diff", "distribution": "demo",
        "versions": ">=1", "source": "bad.patch"}])
    before = tree_digest(tmp_path)
    result = run_cli("--site-packages", site, "--manifest", manifest, "apply")
    assert tree_digest(tmp_path) == before, "bad input must change zero bytes"
    assert result.code == 2, result.out + result.err
    assert len(result.err.strip().splitlines()) == 1 and TRACEBACK not in result.err
    return result


@pytest.mark.parametrize("patch_text, fragment", [
    ("--- a/../../evil.py\n+++ b/../../evil.py\n@@ -1 +1 @@\n-a\n+b\n", "contains '..'"),
    ("--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "absolute path"),
    ("--- a/demo/mod.py\n+++ b/demo/mod.py\n@@ -1,3 +1,3 @@\n value_1 = 1\n-value_2 = 2\n",
     "not a valid unified diff"),
    ("this is not a patch at all\n", "contains no file changes"),
])
def test_bad_patches_exit_2_with_one_line(site: Path, tmp_path: Path, patch_text: str,
                                          fragment: str) -> None:
    assert fragment in _bad(site, tmp_path, patch_text).err


def test_symlink_out_of_the_tree_is_refused(site: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.py").write_text("a\n")
    (site / "demo").mkdir()
    (site / "demo/escape").symlink_to(outside)
    result = _bad(site, tmp_path, "--- a/demo/escape/victim.py\n+++ b/demo/escape/victim.py\n"
                                  "@@ -1 +1 @@\n-a\n+b\n")
    assert "outside the target" in result.err
    assert (outside / "victim.py").read_text() == "a\n"


def test_unexpected_error_exit_3_with_log(env: dict[str, Path],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import ascendpatch.pipeline.engine as engine

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(engine, "apply_artifact", boom)
    result = cli(env, "apply")
    assert result.code == 3
    assert "unexpected error: RuntimeError: simulated bug" in result.err
    log = result.err.split("(details: ")[1].rstrip(")\n")
    assert "Traceback" in Path(log).read_text()


def test_color_always_uses_ansi_and_keeps_brackets_literal(env: dict[str, Path]) -> None:
    plain = cli(env, "status", "--color", "never")
    colored = cli(env, "status", "--color", "always")
    assert "\x1b[" not in plain.out and "\x1b[" in colored.out
    assert plain.out.startswith("[WARN] demo fix not applied")
    assert "[WARN]" in colored.out and "demo fix not applied" in colored.out


def _ctrl_c_in(monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    """A ^C raised from ``target`` (a dotted name in the store's modules)."""

    def interrupt(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(target, interrupt)


def test_ctrl_c_after_the_commit_point_names_what_the_session_committed(
        env: dict[str, Path]) -> None:
    """The store's session says what it committed (no process-wide list to read)."""
    with pytest.MonkeyPatch.context() as patched:  # (monkeypatch's undo would end isolate's)
        _ctrl_c_in(patched, "ascendpatch.store.garbage.collect")  # just after the commit point
        done = cli(env, "--color", "never", "apply")
    assert done.code == 130
    assert done.err == (f"[FAIL] interrupted after the commit point: 2 file(s) in {env['site']} "
                        f"applied in full, not rolled back; run 'ascendpatch status' to see "
                        f"every artifact's state\n")
    assert cli(env, "status").code == 0


def test_ctrl_c_before_the_commit_point_is_rolled_back_even_after_an_earlier_run(
        env: dict[str, Path]) -> None:
    assert cli(env, "apply").code == 0  # a commit by an earlier run in this process
    with pytest.MonkeyPatch.context() as patched:
        _ctrl_c_in(patched, "ascendpatch.store.journal.Transaction._replace")
        done = cli(env, "--color", "never", "revert")
    assert done.code == 130
    assert done.err == "[FAIL] interrupted; any change in progress was rolled back\n"
    assert cli(env, "status").code == 0


def test_execute_yields_a_written_result_only_once_its_transaction_is_committed(
        env: dict[str, Path]) -> None:
    """No placeholder: a result that comes out of the engine is final. One that needs no write
    (here a skip) comes at once; the written one after the commit, re-checked."""
    from ascendpatch.commands import apply as apply_command
    from ascendpatch.commands.context import Context
    from ascendpatch.env.target import from_site_packages
    from ascendpatch.manifest import loader
    from ascendpatch.pipeline.engine import execute
    from ascendpatch.pipeline.planner import prepare
    from ascendpatch.results import Status

    manifest = write_manifest(env["manifest"].parent / "two.yaml", [
        {"id": "demo-fix", "title": "demo fix", "kind": "diff", "distribution": "demo",
         "versions": ">=1.0", "source": "fix.patch"},
        {"id": "later", "title": "later fix", "kind": "diff", "distribution": "demo",
         "versions": ">=9", "source": "fix.patch"}])
    ctx = Context(target=from_site_packages(env["site"]), manifest=loader.load(str(manifest)),
                  env={})
    store = ctx.store
    seen = []
    with store.session(5.0):
        for result in execute(prepare(list(ctx.manifest.artifacts), ctx.target, ctx.env),
                              store, diff=True):
            seen.append((result.id, result.status, result.id in store.load_ledger(),
                         "+value_5b = 55" in result.diff))  # apply --diff: built in, not grafted
            assert not store.journal_path.exists()
    assert seen == [("later", Status.SKIPPED, False, False),
                    ("demo-fix", Status.APPLIED, True, True)]
    assert cli(env, "revert").code == 0
    ordered = apply_command.run(ctx, [])  # streamed as final, kept in the manifest's order
    assert [r.id for r in ordered.results] == ["demo-fix", "later"]
