"""State files are data, not orders; temp files and links cannot be turned against the host.

Issue 11 items 5-10. Every victim file lives inside the test's temp dir, outside the target:
after a hostile journal, ledger, link or patch, it must hold exactly what it held before.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from ascendpatch.store import atomic
from ascendpatch.store.ledger import LedgerStore
from tests.kit import (
    DEMO_MOD,
    DEMO_OTHER,
    DEMO_PATCH,
    TRACEBACK,
    Run,
    make_demo_target,
    make_dist,
    run_cli,
    run_process,
    tree_digest,
    write_manifest,
)

MOD, OTHER = DEMO_MOD, DEMO_OTHER
PATCH = DEMO_PATCH
NEW_FILE_PATCH = """\
--- /dev/null
+++ b/demo/extra/deep/new.py
@@ -0,0 +1,2 @@
+added = True
+more = 1
"""
SECRET = b"root:do-not-touch\n"


@pytest.fixture
def env(site: Path, tmp_path: Path) -> dict[str, Path]:
    manifest = make_demo_target(site, tmp_path)
    victim = tmp_path / "victim" / "shadow"
    victim.parent.mkdir()
    victim.write_bytes(SECRET)
    return {"site": site, "manifest": manifest, "victim": victim, "tmp": tmp_path}


def cli(env: dict[str, Path], *args: str | Path) -> Run:
    return run_cli("--site-packages", env["site"], "--manifest", env["manifest"], *args)


def _target_files(site: Path) -> dict[str, str]:
    return {k: v for k, v in tree_digest(site).items() if not k.startswith(".ascendpatch")}


def _journal(site: Path, entries: list[dict[str, object]]) -> Path:
    state = site / ".ascendpatch"
    (state / "backups").mkdir(parents=True, exist_ok=True)
    path = state / "journal.json"
    path.write_text(json.dumps({"format": 2, "ledger_before": None, "files": entries}))
    return path


# ------------------------------------------------------------------------------ item 5


@pytest.mark.parametrize("how", ["absolute", "dotdot"])
def test_journal_paths_outside_the_target_are_refused(env: dict[str, Path], how: str) -> None:
    rel = str(env["victim"]) if how == "absolute" else "../victim/shadow"
    journal = _journal(env["site"], [{"path": rel, "before": None, "after": "0" * 64}])
    before = _target_files(env["site"])
    result = cli(env, "status")
    assert result.code == 2, result.err
    assert str(journal) in result.err and "fix:" in result.err
    assert env["victim"].read_bytes() == SECRET  # status did not delete it
    assert _target_files(env["site"]) == before
    journal.rename(journal.with_name("journal.json.bad"))  # the named fix works: no exit 2 loop
    assert cli(env, "status").code == 1


def test_ledger_path_outside_the_target_is_refused_by_revert(env: dict[str, Path]) -> None:
    assert cli(env, "apply").code == 0
    ledger_path = env["site"] / ".ascendpatch" / "ledger.json"
    ledger = json.loads(ledger_path.read_text())
    victim_sha = __import__("hashlib").sha256(SECRET).hexdigest()
    ledger["artifacts"]["demo-fix"]["../victim/shadow"] = {
        "sha256_before": None, "sha256_after": victim_sha, "backup": None, "time": "x"}
    ledger_path.write_text(json.dumps(ledger))
    result = cli(env, "revert")
    assert result.code == 2 and str(ledger_path) in result.err and "outside" in result.err
    assert env["victim"].read_bytes() == SECRET


@pytest.mark.parametrize("shape", ["list-ledger", "wrong-record", "backup-traversal",
                                   "ledger-folder", "journal-folder", "journal-files-number"])
def test_unknown_state_shapes_exit_2_with_the_file_and_a_fix(env: dict[str, Path],
                                                             shape: str) -> None:
    state = env["site"] / ".ascendpatch"
    (state / "backups").mkdir(parents=True)
    named = state / ("journal.json" if shape.startswith("journal") else "ledger.json")
    record = {"sha256_before": "a" * 64, "sha256_after": "b" * 64, "backup": "a" * 64,
              "time": "t"}
    if shape == "list-ledger":
        named.write_text("[1, 2]")
    elif shape == "wrong-record":
        named.write_text(json.dumps({"artifacts": {"demo-fix": {"demo/mod.py": [1]}}}))
    elif shape == "backup-traversal":
        record["backup"] = "../../../victim/shadow"
        named.write_text(json.dumps({"artifacts": {"demo-fix": {"demo/mod.py": record}}}))
    elif shape == "journal-files-number":
        named.write_text(json.dumps({"format": 2, "files": 3}))
    else:
        named.mkdir()
    for command in ("status", "revert", "apply"):
        result = cli(env, command)
        assert result.code == 2, (command, result.out, result.err)
        assert str(named) in result.err and "fix:" in result.err
        assert "unexpected error" not in result.err
    assert env["victim"].read_bytes() == SECRET


# ------------------------------------------------------------------------------ item 6


def test_a_patch_may_not_target_the_state_folder(env: dict[str, Path]) -> None:
    assert cli(env, "apply").code == 0
    (env["tmp"] / "evil.patch").write_text(
        "--- a/.ascendpatch/ledger.json\n+++ b/.ascendpatch/ledger.json\n@@ -1 +1 @@\n-{\n+[\n")
    manifest = write_manifest(env["tmp"] / "evil.yaml", [{
        "id": "evil", "title": "evil", "kind": "diff", "distribution": "demo",
        "versions": ">=1.0", "source": "evil.patch"}])
    before = tree_digest(env["site"])
    result = run_cli("--site-packages", env["site"], "--manifest", manifest, "apply")
    assert result.code == 2 and "state folder" in result.err
    assert tree_digest(env["site"]) == before


# ------------------------------------------------------------------------------ item 7


def test_journal_present_and_backups_lost(env: dict[str, Path]) -> None:
    pristine = _target_files(env["site"])
    killed = run_process("--site-packages", env["site"], "--manifest", env["manifest"], "apply",
                         env={"ASCENDPATCH_CRASH_AT": "3"})  # after the first file is written
    assert killed.code < 0
    state = env["site"] / ".ascendpatch"
    assert (state / "journal.json").exists()
    shutil.rmtree(state / "backups")
    half = tree_digest(env["site"])
    status = cli(env, "status")  # a reader never rolls back: it says who does
    assert status.code == 1, status.err  # an answer, not a traceback
    assert "an interrupted run needs recovery" in status.err and "revert" in status.err
    assert tree_digest(env["site"]) == half
    reverted = cli(env, "revert")
    assert reverted.code == 0, reverted.out + reverted.err
    assert "backups are gone" in reverted.err + reverted.out
    assert not (state / "journal.json").exists()
    assert _target_files(env["site"]) == pristine


# ------------------------------------------------------------------------------ item 8


def test_temp_files_never_follow_a_planted_symlink(env: dict[str, Path]) -> None:
    # The names the old writer used (".NAME.ascendpatch-tmp") and a guess in its new pattern.
    for name in ("mod.py", "other.py"):
        folder = env["site"] / "demo"
        (folder / f".{name}{atomic.TEMP_SUFFIX}").symlink_to(env["victim"])
        (folder / f".{name}.guess{atomic.TEMP_SUFFIX}").symlink_to(env["victim"])
    assert cli(env, "apply").code == 0
    assert env["victim"].read_bytes() == SECRET
    assert "value_5b" in (env["site"] / "demo/mod.py").read_text()
    out = env["tmp"] / "snap.json"
    (env["tmp"] / f".snap.json{atomic.TEMP_SUFFIX}").symlink_to(env["victim"])
    assert cli(env, "snapshot", "-o", out).code == 0
    assert env["victim"].read_bytes() == SECRET and json.loads(out.read_text())


def test_write_atomic_leaves_no_temp_file_when_it_fails(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    with pytest.raises(TypeError):
        atomic.write_atomic(target, "not bytes")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_crash_log_goes_to_a_private_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) \
        -> None:
    from ascendpatch.shell import crashlog

    monkeypatch.delenv("ASCENDPATCH_LOG_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    # the fallback is a fresh folder in the system temp folder: this test's own here
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    planted = tmp_path / "cache" / "ascendpatch" / "logs"
    planted.parent.mkdir(parents=True)
    log = Path(crashlog.write(RuntimeError("boom"), ["status"]))
    assert log.parent == planted and "boom" in log.read_text()
    assert planted.stat().st_mode & 0o777 == 0o700
    assert log.stat().st_mode & 0o777 == 0o600
    # A link where the folder should be is not followed: the log goes to a fresh private one.
    shutil.rmtree(planted)
    planted.symlink_to(tmp_path / "victim-dir", target_is_directory=True)
    (tmp_path / "victim-dir").mkdir()
    other = Path(crashlog.write(RuntimeError("boom"), ["status"]))
    assert not list((tmp_path / "victim-dir").iterdir())
    assert other.parent != planted and other.parent.stat().st_mode & 0o777 == 0o700
    assert other.parent.parent == tmp_path and other.parent.name.startswith("ascendpatch-logs-")


# ------------------------------------------------------------------------------ item 9


@pytest.mark.parametrize("which", [".ascendpatch", ".ascendpatch/backups", "demo/__pycache__"])
def test_symlinked_state_or_bytecode_folders_are_refused(env: dict[str, Path],
                                                        which: str) -> None:
    elsewhere = env["tmp"] / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "mod.cpython-311.pyc").write_bytes(SECRET)
    (elsewhere / "keep").write_bytes(SECRET)
    link = env["site"] / which
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(elsewhere, target_is_directory=True)
    before = _target_files(env["site"])
    result = cli(env, "apply")
    assert result.code == 1 and "is a symlink" in result.err, result.err
    assert str(link) in result.err
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep", "mod.cpython-311.pyc"]
    assert _target_files(env["site"]) == before


# ------------------------------------------------------------------------------ item 10


def test_an_in_tree_symlink_stays_a_symlink(env: dict[str, Path]) -> None:
    mod = env["site"] / "demo/mod.py"
    real = env["site"] / "demo/mod_impl.py"
    mod.rename(real)
    mod.symlink_to("mod_impl.py")
    assert cli(env, "apply").code == 0
    assert mod.is_symlink() and str(mod.readlink()) == "mod_impl.py"
    assert "value_5b" in real.read_text()
    assert cli(env, "revert").code == 0
    assert mod.is_symlink() and real.read_text() == MOD


def test_an_outward_symlink_is_refused(env: dict[str, Path]) -> None:
    mod = env["site"] / "demo/mod.py"
    outside = env["tmp"] / "outside.py"
    outside.write_text(MOD)
    mod.unlink()
    mod.symlink_to(outside)
    result = cli(env, "apply")
    assert result.code == 2 and "outside the target" in result.err
    assert f"; fix: find the link with 'namei -l {mod}'" in result.err  # (one line)
    assert result.err.count("\n") == 1, result.err
    assert outside.read_text() == MOD


def test_the_guard_resolves_each_file_of_an_artifact_once(
        env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file of an artifact is resolved by the path guard once per run (prepare, before
    anything is written; inspect and the engine take that answer: a catalog of 226 patches
    walked ~2,000 paths up from / on every re-apply)."""
    from ascendpatch.store.root import Root

    asked: list[str] = []
    real = Root.locate

    def counted(self: Root, rel: str, *, origin: str) -> tuple[Path, tuple[str, ...]]:
        if origin.startswith("artifact "):
            asked.append(f"{origin}:{rel}")
        return real(self, rel, origin=origin)

    monkeypatch.setattr(Root, "locate", counted)
    assert cli(env, "apply").code == 0
    assert cli(env, "status").code == 0
    # the patch's two files, once in each of the two runs
    assert sorted(asked) == sorted(["artifact demo-fix:demo/mod.py",
                                    "artifact demo-fix:demo/other.py"] * 2)


def test_a_refusal_is_never_remembered(tmp_path: Path) -> None:
    """The same site asked again after a refusal looks again: refused while the link leads
    out, answered once it is gone."""
    from ascendpatch.errors import UnsafePathError
    from ascendpatch.kinds.base import ArtifactSite
    from ascendpatch.manifest.model import Artifact, Variant

    tree, outside = tmp_path / "tree", tmp_path / "outside"
    tree.mkdir()
    outside.mkdir()
    (tree / "pkg").symlink_to(outside)
    variant = Variant(">=0", None, (), {})
    site = ArtifactSite(Artifact("a", "A", "diff", "pkg", (variant,)), variant, None, tree, None)
    for _ in range(2):
        with pytest.raises(UnsafePathError, match="outside the target"):
            site.path("pkg/mod.py")
    (tree / "pkg").unlink()
    (tree / "pkg").mkdir()
    assert site.path("pkg/mod.py") == tree / "pkg" / "mod.py"


@pytest.mark.parametrize("proc", [True, False], ids=["/proc", "no /proc"])
@pytest.mark.parametrize("command", [("apply", "--dry-run", "--diff"), ("status", "--json")])
def test_a_folder_swapped_for_an_outward_link_after_the_guard_looked_is_not_read(
        env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...],
        proc: bool) -> None:
    """The guard looks at every artifact's files first (prepare), and reads come later: a
    folder swapped for a link out of the tree in between is refused where the file is opened
    (where it really lies, before a byte is read), not shown in a diff or hashed in --json (a
    review found both, through the guard's memory of a name). Without /proc the whole guard
    runs again after the open."""
    from ascendpatch.kinds import KINDS

    if not proc:
        real_readlink = Path.readlink

        def no_proc(self: Path) -> Path:
            if str(self).startswith("/proc/self/fd/"):
                raise FileNotFoundError(str(self))
            return real_readlink(self)

        monkeypatch.setattr(Path, "readlink", no_proc)

    outside = env["tmp"] / "outside"
    shutil.copytree(env["site"] / "demo", outside)
    with (outside / "mod.py").open("a") as handle:
        handle.write("# root:stand-in-for-a-secret\n")
    kind = type(KINDS["diff"])
    real_prepare = kind.prepare

    def then_swapped(self: Any, site: Any) -> None:
        real_prepare(self, site)
        moved = env["tmp"] / "demo-moved"
        if not moved.exists():
            (env["site"] / "demo").rename(moved)
            (env["site"] / "demo").symlink_to(outside)

    monkeypatch.setattr(kind, "prepare", then_swapped)
    result = cli(env, *command)
    assert result.code == 2, result.out + result.err
    assert "outside the target" in result.out + result.err  # (--json: in its error object)
    assert "stand-in-for-a-secret" not in result.out + result.err
    assert hashlib.sha256((outside / "mod.py").read_bytes()).hexdigest() not in result.out


def test_created_folders_go_on_revert_and_on_rollback(env: dict[str, Path]) -> None:
    (env["tmp"] / "new.patch").write_text(NEW_FILE_PATCH)
    manifest = write_manifest(env["tmp"] / "new.yaml", [{
        "id": "new-file", "title": "new file", "kind": "diff", "distribution": "demo",
        "versions": ">=1.0", "source": "new.patch"}])
    args = ("--site-packages", env["site"], "--manifest", manifest)
    pristine = _target_files(env["site"])
    assert run_cli(*args, "apply").code == 0
    assert (env["site"] / "demo/extra/deep/new.py").is_file()
    assert run_cli(*args, "revert").code == 0
    assert not (env["site"] / "demo/extra").exists()
    assert _target_files(env["site"]) == pristine
    # Rollback: killed after writing the file, the next command removes it and its folders.
    killed = run_process(*args, "apply", env={"ASCENDPATCH_CRASH_AT": "3"})
    assert killed.code < 0 and (env["site"] / "demo/extra/deep/new.py").is_file()
    assert run_cli(*args, "status").code == 1  # a reader refuses; the next writer rolls back
    assert (env["site"] / "demo/extra/deep/new.py").is_file()
    assert run_cli(*args, "revert").code == 0
    assert not (env["site"] / "demo/extra").exists()
    assert _target_files(env["site"]) == pristine


def test_audit_cache_of_a_hostile_shape_is_ignored_never_followed(env: dict[str, Path]) -> None:
    from ascendpatch.inspect.audit import cache_path

    cache = cache_path(env["site"])
    cache.parent.mkdir(parents=True, mode=0o700)
    os.mkfifo(cache)  # reading it naively would block forever
    assert cli(env, "audit").code == 0
    cache.unlink()
    cache.write_text('{"format": 3, "files": {"demo/mod.py": 7}}')
    assert cli(env, "audit").code == 0
    cache.unlink()
    cache.symlink_to(env["victim"])
    assert cli(env, "audit").code == 0
    assert env["victim"].read_bytes() == SECRET


# ------------------------------------------------------------------ review: check-then-write races


def _swap_parent_for_link(monkeypatch: pytest.MonkeyPatch, folder: Path, outside: Path) -> None:
    """At the first crash point of the next transaction (after every path was checked, before
    any file is written), an attacker with write access to the target swaps ``folder`` for a
    symlink to ``outside``."""
    from ascendpatch.store import crash

    def point() -> None:
        if not folder.is_symlink():
            folder.rename(folder.with_name(folder.name + ".moved"))
            folder.symlink_to(outside, target_is_directory=True)

    monkeypatch.setattr(crash, "point", point)


def _site_store_and_victim(tmp_path: Path) -> tuple[Path, LedgerStore, Path]:
    """A target holding ``mod.py`` (``original``), its store, and an empty folder outside it."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "mod.py").write_bytes(b"original\n")
    outside = tmp_path / "victim"
    outside.mkdir()
    return root, LedgerStore(root), outside


@pytest.mark.parametrize("what", ["write", "create", "remove"])
def test_a_parent_folder_swapped_for_a_link_mid_run_is_never_followed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    from ascendpatch.errors import AscendpatchError
    from ascendpatch.store.ledger import Change, LedgerStore

    root = tmp_path / "site"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_bytes(b"original\n")
    outside = tmp_path / "victim"
    (outside / "__pycache__").mkdir(parents=True)
    (outside / "mod.py").write_bytes(SECRET)
    (outside / "__pycache__" / "mod.cpython-311.pyc").write_bytes(SECRET)  # bytecode removal
    store = LedgerStore(root)
    change = {"write": Change(root / "pkg" / "mod.py", b"original\n", b"patched\n"),
              "create": Change(root / "pkg" / "new.py", None, b"created\n"),
              "remove": Change(root / "pkg" / "mod.py", b"original\n", None)}[what]
    _swap_parent_for_link(monkeypatch, root / "pkg", outside)
    with pytest.raises((AscendpatchError, OSError)):
        store.commit([change], lambda ledger: ledger)
    assert sorted(p.name for p in outside.iterdir()) == ["__pycache__", "mod.py"]
    assert (outside / "mod.py").read_bytes() == SECRET
    assert (outside / "__pycache__" / "mod.cpython-311.pyc").read_bytes() == SECRET


def test_a_symlinked_bytecode_folder_of_a_later_file_is_refused_before_any_write(
        tmp_path: Path) -> None:
    """The link sits beside the second file of the patch: the refusal must come before the
    first file is written, so no journal is left behind for the next run to trip over."""
    site = tmp_path / "site"
    make_dist(site, "demo", "1.2.0", {"demo/__init__.py": "", "demo/mod.py": MOD,
                                      "demo/sub/__init__.py": "", "demo/sub/other.py": OTHER})
    (tmp_path / "fix.patch").write_text(PATCH.replace("demo/other.py", "demo/sub/other.py"))
    manifest = write_manifest(tmp_path / "m.yaml", [{
        "id": "demo-fix", "title": "demo fix", "kind": "diff", "distribution": "demo",
        "versions": ">=1.0", "source": "fix.patch"}])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "other.cpython-311.pyc").write_bytes(SECRET)
    link = site / "demo/sub/__pycache__"
    link.symlink_to(elsewhere, target_is_directory=True)
    before = _target_files(site)
    result = run_cli("--site-packages", site, "--manifest", manifest, "apply")
    assert result.code == 1 and "is a symlink" in result.err and str(link) in result.err
    assert _target_files(site) == before
    assert not (site / ".ascendpatch" / "journal.json").exists()
    assert (elsewhere / "other.cpython-311.pyc").read_bytes() == SECRET
    link.unlink()  # the named fix works at once
    assert run_cli("--site-packages", site, "--manifest", manifest, "apply").code == 0


def test_a_state_folder_swapped_for_a_link_mid_run_is_never_followed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``.ascendpatch/`` swapped for a link after its layout was checked: the journal is not
    written through it (and a later run refuses the link)."""
    from ascendpatch.errors import AscendpatchError
    from ascendpatch.store.ledger import Change

    root, store, outside = _site_store_and_victim(tmp_path)
    (outside / "keep").write_bytes(SECRET)
    _swap_parent_for_link(monkeypatch, store.dir, outside)
    with pytest.raises((AscendpatchError, OSError)):
        store.commit([Change(root / "mod.py", b"original\n", b"patched\n")], lambda led: led)
    assert sorted(p.name for p in outside.iterdir()) == ["keep"]
    assert (root / "mod.py").read_bytes() == b"original\n"


def test_garbage_collection_never_empties_a_folder_swapped_in_for_backups(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unreferenced backups are deleted after the commit point: if ``backups/`` became a link
    to another folder after the layout check, that folder's files are not 'unreferenced
    backups', and the committed change is still reported as done."""
    from ascendpatch.store import crash
    from ascendpatch.store.ledger import Change, Ledger

    root, store, outside = _site_store_and_victim(tmp_path)
    (outside / "passwd").write_bytes(SECRET)
    (outside / ("a" * 64)).write_bytes(SECRET)  # even a backup-shaped name
    store.commit([Change(root / "mod.py", b"original\n", b"patched\n")], lambda led: led)
    backups = store.dir / "backups"
    committed: list[bool] = []
    monkeypatch.setattr(crash, "point", lambda: committed.append(
        not store.journal_path.exists() and (store.dir / "ledger.json").exists()))
    real_load = store.load_ledger

    def load_then_swap() -> Ledger:
        ledger = real_load()
        if committed and committed[-1] and not backups.is_symlink():  # in _collect_garbage
            backups.rename(backups.with_name("backups.moved"))
            backups.symlink_to(outside, target_is_directory=True)
        return ledger

    monkeypatch.setattr(store, "load_ledger", load_then_swap)
    store.commit([Change(root / "mod.py", b"patched\n", b"again\n")], lambda led: led)
    assert backups.is_symlink()  # the window was hit
    assert sorted(p.name for p in outside.iterdir()) == ["a" * 64, "passwd"]
    assert (root / "mod.py").read_bytes() == b"again\n"


def test_recovery_undoes_several_entries_for_one_path_last_first(tmp_path: Path) -> None:
    """A journal holding two changes of one file (original -> mid -> final) rolls it back to
    the original, not to the middle state."""
    from ascendpatch.hashing import sha256_bytes
    from ascendpatch.store.ledger import LedgerStore

    root = tmp_path / "site"
    root.mkdir()
    (root / "mod.py").write_bytes(b"final\n")
    store = LedgerStore(root)
    (store.dir / "backups").mkdir(parents=True)
    for data in (b"original\n", b"mid\n"):
        (store.dir / "backups" / sha256_bytes(data)).write_bytes(data)
    digest = {k: sha256_bytes(v) for k, v in
              {"o": b"original\n", "m": b"mid\n", "f": b"final\n"}.items()}
    _journal(root, [{"path": "mod.py", "before": digest["o"], "after": digest["m"]},
                    {"path": "mod.py", "before": digest["m"], "after": digest["f"]}])
    assert store.recover() is not None
    assert (root / "mod.py").read_bytes() == b"original\n"


# Six real processes with a deadline: integration tier.
@pytest.mark.integration
@pytest.mark.parametrize("planted", ["fifo", "folder"])
def test_a_fifo_or_folder_at_a_patched_path_is_refused_not_waited_on(env: dict[str, Path],
                                                                     planted: str) -> None:
    """Opening a FIFO for reading blocks until a writer comes: as root, every command hung.
    (A real process with a deadline, so the old code fails instead of hanging the suite.)"""
    mod = env["site"] / "demo/mod.py"
    mod.unlink()
    if planted == "fifo":
        os.mkfifo(mod)
    else:
        mod.mkdir()
    before = _target_files(env["site"])
    for command in ("status", "apply", "revert"):
        try:
            result = run_process("--site-packages", env["site"], "--manifest", env["manifest"],
                                 command, timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{command} hung on a {planted} at {mod}")
        assert result.code == 1, (command, result.out, result.err)
        said = result.out + result.err
        assert f"{mod} is not a regular file" in said and "fix: move it aside" in said
        assert TRACEBACK not in said
    assert _target_files(env["site"]) == before
    assert not (env["site"] / ".ascendpatch" / "journal.json").exists()


def test_a_fifo_where_needed_if_reads_an_uncovered_release_is_refused_not_waited_on(
        site: Path, tmp_path: Path) -> None:
    """A release no variant covers is decided by reading its files (``needed_if``): that read
    refuses a FIFO as the kinds' reads do, instead of blocking on it."""
    (tmp_path / "fix.patch").write_text(DEMO_PATCH)
    manifest = write_manifest(tmp_path / "m.yaml", [{
        "id": "demo-fix", "title": "demo fix", "kind": "diff", "distribution": "demo",
        "needed_if": {"file": "demo/mod.py", "calls_unguarded": ["torch_npu.npu_top_k_top_p"]},
        "variants": [{"versions": ">=1.0,<2.0", "source": "fix.patch"}]}])
    make_dist(site, "demo", "2.0", {"demo/__init__.py": "", "demo/other.py": OTHER})
    mod = site / "demo/mod.py"
    os.mkfifo(mod)
    before = _target_files(site)
    try:
        result = run_process("--site-packages", site, "--manifest", manifest, "status",
                             timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"status hung on a FIFO at {mod}")
    said = result.out + result.err
    assert result.code == 1, said
    assert f"{mod} is not a regular file" in said and "fix: move it aside" in said
    assert _target_files(site) == before


def test_a_link_from_the_target_into_another_written_tree_is_still_written_through(
        tmp_path: Path) -> None:
    """The folder-descriptor writer starts from the tree the *destination* lies in: a link
    from the target into the Hugging Face cache (a tree the store may write) stays a link and
    its destination is written, as before the writer walked from a root."""
    from ascendpatch.store.ledger import Change, LedgerStore

    root, hub = tmp_path / "site", tmp_path / "hub"
    (root / "pkg").mkdir(parents=True)
    (hub / "blobs").mkdir(parents=True)
    (hub / "blobs" / "cfg").write_bytes(b"{}\n")
    (root / "pkg" / "cfg.json").symlink_to(hub / "blobs" / "cfg")
    store = LedgerStore(root, extra_roots=[hub])
    store.commit([Change(root / "pkg" / "cfg.json", b"{}\n", b"{\"a\": 1}\n")], lambda led: led)
    assert (root / "pkg" / "cfg.json").is_symlink()
    assert (hub / "blobs" / "cfg").read_bytes() == b"{\"a\": 1}\n"


def test_the_state_folder_is_created_without_following_a_link_planted_after_the_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ascendpatch.errors import AscendpatchError
    from ascendpatch.store.ledger import Change

    root, store, outside = _site_store_and_victim(tmp_path)
    real_check = store.check_layout

    def check_then_plant() -> None:
        real_check()
        if not store.dir.is_symlink():
            store.dir.symlink_to(outside, target_is_directory=True)

    monkeypatch.setattr(store, "check_layout", check_then_plant)
    with pytest.raises(AscendpatchError):
        store.commit([Change(root / "mod.py", b"original\n", b"patched\n")], lambda led: led)
    assert list(outside.iterdir()) == []
    assert (root / "mod.py").read_bytes() == b"original\n"


def test_a_change_through_a_link_out_of_an_extra_root_is_refused_before_the_journal(
        tmp_path: Path) -> None:
    """A tree a kind writes into (the Hugging Face cache) with a folder linked out of it: the
    store refuses the change with the guard recovery would apply, before any backup or
    journal is written (on 89ee836 the journal was written, the write refused, and the next
    run refused that journal: exit 2 until it was moved by hand)."""
    from ascendpatch.errors import UnsafePathError
    from ascendpatch.store.ledger import Change, LedgerStore

    site, cache, outside = tmp_path / "site", tmp_path / "cache", tmp_path / "outside"
    for folder in (site, cache / "repo", outside):
        folder.mkdir(parents=True)
    (cache / "repo" / "blobs").symlink_to(outside)
    (cache / "repo" / "kept").write_bytes(b"old")
    store = LedgerStore(site, [cache])
    changes = [Change(cache / "repo" / "kept", b"old", b"new"),
               Change(cache / "repo" / "blobs" / "x", None, b"data")]
    with pytest.raises(UnsafePathError, match="outside"):
        store.commit(changes, lambda ledger: ledger)
    assert not store.journal_path.exists() and not list(outside.iterdir())
    assert (cache / "repo" / "kept").read_bytes() == b"old"
    assert not list(store.backups.folder.iterdir())
    assert store.recover() is None  # nothing for the next run to trip over
