"""audit / snapshot / diff on targets built in temp dirs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ascendpatch.inspect.audit import statfile
from ascendpatch.inspect.audit.statcache import CACHE_NAME
from tests.kit import make_dist, make_small_demo, past_racy_window, run_cli, write_small_manifest


@pytest.fixture
def env(site: Path, tmp_path: Path) -> dict[str, Path]:
    make_small_demo(site)
    make_dist(site, "other", "2.0", {"other/__init__.py": "x = 1\n", "other/util.py": "y = 2\n",
                                     "other/data.txt": "data\n"})
    manifest = write_small_manifest(tmp_path)
    return {"site": site, "manifest": manifest}


def audit(env: dict[str, Path], *args: str | Path) -> tuple[int, str, dict[str, Any]]:
    doc = run_cli("--site-packages", env["site"], "--manifest", env["manifest"], "--json",
                  "audit", *args).json  # first: its counts describe this state
    run = run_cli("--site-packages", env["site"], "--manifest", env["manifest"], "audit", *args)
    return run.code, run.out, doc


def test_clean_environment_and_expected_patch(env: dict[str, Path]) -> None:
    code, out, _ = audit(env)
    assert code == 0 and "0 unexpected finding(s)" in out
    run_cli("--site-packages", env["site"], "--manifest", env["manifest"], "apply")
    code, out, _ = audit(env)
    assert code == 0
    assert "[OK] S.5      demo/mod.py (demo 1.0: patched by ascendpatch (demo-fix))" in out


def test_finds_edit_deletion_and_orphan(env: dict[str, Path]) -> None:
    site = env["site"]
    (site / "other/util.py").write_text("y = 3\n")  # same size, different digest
    (site / "other/data.txt").unlink()
    (site / "other/dropin_extra.py").write_text("left behind\n")
    code, out, doc = audit(env)
    assert code == 1
    assert "[FAIL] ..5      other/util.py (other 2.0: changed)" in out
    assert "[FAIL] missing  other/data.txt (other 2.0)" in out
    assert "[FAIL] orphan   other/dropin_extra.py (in other's folder, listed by no RECORD)" in out
    codes = {r["data"]["code"] for r in doc["results"]}
    assert codes == {"..5", "missing", "orphan"}


def test_pyc_and_pycache_are_not_noise(env: dict[str, Path]) -> None:
    import py_compile

    py_compile.compile(str(env["site"] / "other/util.py"), doraise=True)
    code, out, _ = audit(env)
    assert code == 0, out


def test_repeat_audit_hashes_no_file(env: dict[str, Path]) -> None:
    past_racy_window(env["site"])  # files written this instant are hashed again (racy git)
    _, _, first = audit(env)
    assert first["files_hashed"] == first["files_checked"] > 0  # cold: everything hashed
    _, _, again = audit(env)
    assert again["files_checked"] == first["files_checked"]
    assert again["files_hashed"] == 0
    (env["site"] / "other/util.py").write_text("y = 4\n")
    _, _, after_edit = audit(env)
    assert after_edit["files_hashed"] == 1


def test_baseline_reports_upgraded_added_removed(env: dict[str, Path], tmp_path: Path) -> None:
    snap = tmp_path / "before.json"
    made = run_cli("--site-packages", env["site"], "--manifest", env["manifest"], "snapshot",
                   "-o", snap)
    assert made.code == 0 and snap.exists()
    site = env["site"]
    shutil.rmtree(site / "other-2.0.dist-info")
    make_dist(site, "other", "2.1", {"other/__init__.py": "x = 1\n", "other/util.py": "y = 2\n",
                                     "other/data.txt": "data\n"})
    make_dist(site, "newcomer", "0.1", {"newcomer/__init__.py": ""})
    code, out, _ = audit(env, "--baseline", snap)
    assert code == 1
    assert "[FAIL] upgraded other upgraded: 2.0 -> 2.1 since the baseline" in out
    assert "[FAIL] added    newcomer 0.1 added since the baseline" in out


def test_diff_of_two_snapshots(env: dict[str, Path], tmp_path: Path) -> None:
    common = ("--site-packages", env["site"], "--manifest", env["manifest"])
    run_cli(*common, "snapshot", "--all-files", "-o", tmp_path / "a.json")
    run_cli(*common, "apply")
    run_cli(*common, "snapshot", "--all-files", "-o", tmp_path / "b.json")
    same = run_cli("diff", tmp_path / "a.json", tmp_path / "a.json")
    assert same.code == 0 and "describe the same environment" in same.out
    changed = run_cli("diff", tmp_path / "a.json", tmp_path / "b.json")
    assert changed.code == 1
    assert "artifact   demo-fix: not-applied -> already-applied" in changed.out
    assert "S.5        demo/mod.py" in changed.out  # the patch adds a line: size and digest
    bad = run_cli("diff", tmp_path / "a.json", env["manifest"])
    assert bad.code == 2 and "is not an ascendpatch snapshot" in bad.err


def test_a_snapshot_that_is_no_text_is_refused_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_bytes(b"\xff\xfe{}")  # snapshot.load, the one reader
    run = run_cli("diff", tmp_path / "a.json", tmp_path / "a.json")
    assert run.code == 2 and "a.json cannot be read" in run.err


def test_cached_audit_still_sees_orphans_come_and_go(env: dict[str, Path]) -> None:
    """The orphan walk is cached on folder mtimes: adding or removing a file must show."""
    site = env["site"]
    (site / "other" / "sub").mkdir()
    assert audit(env)[0] == 0
    assert audit(env)[0] == 0  # from the cache
    (site / "other" / "sub" / "late.py").write_text("x = 1\n")
    code, out, _ = audit(env)
    assert code == 1 and "orphan   other/sub/late.py" in out
    (site / "other" / "sub" / "late.py").unlink()
    assert audit(env)[0] == 0


def tree(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


def test_cache_lives_outside_the_target_one_per_target(env: dict[str, Path],
                                                      tmp_path: Path) -> None:
    """An audit writes nothing into the audited tree: its cache is in $ASCENDPATCH_CACHE,
    one file per target folder, in one folder (where cachedir bounds their number)."""
    before = tree(env["site"])
    audit(env)
    assert tree(env["site"]) == before
    caches = sorted(Path(os.environ["ASCENDPATCH_CACHE"]).glob(f"audit/*.{CACHE_NAME}"))
    assert len(caches) == 1
    header, columns = statfile.load(caches[0].read_bytes())
    assert header["target"] == os.path.realpath(env["site"])
    assert "other/util.py" in columns.entries()
    second = tmp_path / "second" / "site-packages"
    second.mkdir(parents=True)
    make_dist(second, "solo", "1.0", {"solo/__init__.py": ""})
    assert run_cli("--site-packages", second, "--manifest", env["manifest"], "audit").code == 0
    assert len(list(Path(os.environ["ASCENDPATCH_CACHE"]).glob(f"audit/*.{CACHE_NAME}"))) == 2


def test_repeat_audit_sees_a_change_a_snapshot_hashed_first(env: dict[str, Path],
                                                           tmp_path: Path) -> None:
    """A snapshot shares the stat cache; a file it re-hashed must still show in the audit."""
    past_racy_window(env["site"])
    assert audit(env)[0] == 0
    (env["site"] / "other/util.py").write_text("y = 5\n")
    past_racy_window(env["site"])
    run_cli("--site-packages", env["site"], "--manifest", env["manifest"], "snapshot",
            "--all-files", "-o", tmp_path / "s.json")
    code, out, doc = audit(env)
    assert code == 1 and "..5      other/util.py" in out
    assert doc["files_hashed"] == 0  # the snapshot hashed it; the audit only compared


def test_repeat_audit_reports_the_same_findings(env: dict[str, Path]) -> None:
    """The repeat audit answers from the cache: the same lines as the audit that hashed."""
    site = env["site"]
    run_cli("--site-packages", site, "--manifest", env["manifest"], "apply")
    (site / "other/data.txt").unlink()
    (site / "other/dropin.py").write_text("x\n")
    past_racy_window(site)
    first = audit(env)
    again = audit(env)
    assert first[0] == again[0] == 1
    assert first[1] == again[1]
    assert again[2]["files_hashed"] == 0
    assert "[OK] S.5      demo/mod.py" in again[1] and "missing  other/data.txt" in again[1]


def test_diff_default_against_all_files_compares_what_both_recorded(env: dict[str, Path],
                                                                   tmp_path: Path) -> None:
    """A default snapshot records the manifest's distributions (demo), --all-files every one:
    the files only --all-files recorded (other's) are counted, never reported as added."""
    common = ("--site-packages", env["site"], "--manifest", env["manifest"])
    run_cli(*common, "snapshot", "-o", tmp_path / "default.json")
    run_cli(*common, "snapshot", "--all-files", "-o", tmp_path / "all.json")
    same = run_cli("diff", tmp_path / "default.json", tmp_path / "all.json")
    assert same.code == 0, same.out
    assert "describe the same environment" in same.out
    assert "file(s) recorded only by the --all-files snapshot were not compared" in same.out
    assert "added" not in same.out
    run_cli(*common, "apply")
    run_cli(*common, "snapshot", "--all-files", "-o", tmp_path / "after.json")
    changed = run_cli("diff", tmp_path / "default.json", tmp_path / "after.json", "--json")
    files = [r for r in changed.json["results"] if r["id"].startswith("file:")]
    assert [(r["data"]["code"], r["data"]["path"]) for r in files] == [("S.5", "demo/mod.py")]


def test_a_cache_folder_others_can_write_is_not_used(env: dict[str, Path], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """ascendpatch runs as root: a cache in a folder anyone can write could lie about files,
    or be a symlink trap. It is neither read nor written; the audit hashes every time."""
    shared = tmp_path / "shared-cache"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("ASCENDPATCH_CACHE", str(shared))
    first, second = audit(env)[2], audit(env)[2]
    assert first["files_hashed"] == second["files_hashed"] == first["files_checked"] > 0
    assert not list(shared.rglob("*.json"))


def test_digests_of_every_size_class_match_hashlib(tmp_path: Path) -> None:
    """Small files (one read), medium ones and big ones (own batch, large buffer) all give
    the RECORD form of hashlib's SHA-256, whichever thread hashes them."""
    import hashlib

    from ascendpatch.hashing import record_form
    from ascendpatch.inspect.audit import StatCache, stat_and_hash

    sizes = [0, 1, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 << 20, (8 << 20) + 17]
    items, want = [], {}
    for i, size in enumerate(sizes):
        blob = os.urandom(size)
        path = tmp_path / f"f{i}"
        path.write_bytes(blob)
        items.append((f"f{i}", str(path), size))
        want[f"f{i}"] = record_form(hashlib.sha256(blob).digest())
    cache = StatCache(tmp_path)
    outcome = stat_and_hash(items, cache, workers=2)
    assert outcome.digests == want and outcome.hashed == len(sizes)
    assert outcome.timings.largest_bytes == (8 << 20) + 17
    again = stat_and_hash(items, cache, workers=2)
    assert again.digests == want and again.hashed == 0


def test_cold_audit_tells_missing_files_from_hashed_ones(env: dict[str, Path]) -> None:
    """Cold, no file is stat'ed before the workers open it: a file that is not there (also when
    a folder on its path is now a file) is reported missing and not counted as hashed, as the
    repeat audit (which stats every file first) reports it."""
    site = env["site"]
    make_dist(site, "deep", "1.0", {"deep/__init__.py": "", "deep/sub/leaf.py": "x = 1\n"})
    (site / "other/data.txt").unlink()
    shutil.rmtree(site / "deep/sub")
    (site / "deep/sub").write_text("a file where a folder was\n")
    past_racy_window(site)
    code, out, cold = audit(env)
    assert code == 1 and {"[FAIL] missing  other/data.txt (other 2.0)",
                          "[FAIL] missing  deep/sub/leaf.py (deep 1.0)",
                          "[FAIL] orphan   deep/sub (in deep's folder, listed by no RECORD)",
                          } <= set(out.splitlines()), out
    from ascendpatch.env.target import read_record

    listed = sum(1 for info in site.glob("*.dist-info") for _p, digest, _s in read_record(info)
                 if digest is not None)
    assert cold["files_hashed"] == cold["files_checked"] == listed - 2
    code_again, out_again, again = audit(env)
    assert (code_again, out_again) == (code, out) and again["files_hashed"] == 0
    (site / "deep/sub").write_text("changed, so the cache is not used whole\n")
    (site / "demo/__init__.py").write_text("# edited\n")
    code_warm, out_warm, warm = audit(env)
    assert code_warm == 1 and warm["files_hashed"] == 1
    assert "[FAIL] missing  deep/sub/leaf.py (deep 1.0)" in out_warm


def test_record_sizes_only_order_the_work(tmp_path: Path) -> None:
    """A RECORD size that is wrong or absent changes nothing but the schedule: the digest and
    the stat kept for the next run are the file's own."""
    import hashlib

    from ascendpatch.hashing import CHUNK, record_form
    from ascendpatch.inspect.audit import StatCache, stat_and_hash

    blobs = {"big-said-small": os.urandom(3 * CHUNK), "small-said-big": b"tiny\n",
             "no-size": os.urandom(CHUNK + 7)}
    said: dict[str, int | None] = {"big-said-small": 10, "small-said-big": 1 << 30,
                                   "no-size": None}
    for name, blob in blobs.items():
        (tmp_path / name).write_bytes(blob)
    items = [(name, str(tmp_path / name), said[name]) for name in blobs]
    cache = StatCache(tmp_path)
    outcome = stat_and_hash(items, cache, workers=2)
    assert outcome.digests == {n: record_form(hashlib.sha256(b).digest()) for n, b in blobs.items()}
    assert {n: st.st_size for n, st in outcome.stats.items()} == {n: len(b) for n, b in
                                                                  blobs.items()}
    assert outcome.timings.largest_path == "big-said-small"
    assert stat_and_hash(items, cache, workers=2).hashed == 0


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real venv (no pip: fast) with two distributions."""
    from tests.kit.wheels import make_venv, site_packages

    python = make_venv(tmp_path_factory.mktemp("venv"))
    site = site_packages(python)
    make_dist(site, "demo", "1.0", {"demo/__init__.py": "", "demo/mod.py": "a = 1\n"})
    make_dist(site, "other", "2.0", {"other/__init__.py": "x = 1\n"})
    return python


def test_python_target_starts_its_interpreter_before_waiting_for_it(venv_python: Path,
                                                                    tmp_path: Path) -> None:
    """start_python returns while the interpreter is still held at a gate (it does not wait
    for the report); the report comes when asked for, and the audit through --python finds
    what --site-packages finds."""
    from ascendpatch.env.target import start_python

    gate = tmp_path / "gate"
    held = tmp_path / "bin" / "python"
    held.parent.mkdir()
    held.write_text(f"#!/bin/sh\nfor _ in $(seq 1000); do [ -e {gate} ] && "  # 10 s at most:
                    f"exec {venv_python} \"$@\"; sleep 0.01; done\nexit 1\n")  # no hang
    held.chmod(0o755)
    wait = start_python(held)  # returns although the interpreter cannot answer yet
    gate.touch()
    target = wait()
    assert {"demo", "other"} <= set(target.distributions)
    (target.root / "demo/mod.py").write_text("a = 2\n")
    by_python = run_cli("--python", venv_python, "--json", "audit")
    by_site = run_cli("--site-packages", target.root, "--json", "audit")
    assert by_python.code == by_site.code == 1
    assert [r["id"] for r in by_python.json["results"]] == ["file:demo/mod.py"]
    assert by_python.json["results"] == by_site.json["results"]


def test_a_repeat_audit_imports_only_what_a_stat_walk_needs(tmp_path: Path) -> None:
    """A repeat audit of an unchanged --python target answers from its caches: it imports no
    packaging, yaml or rich (the manifest is read only when a file differs), and nothing a
    subprocess, a temp folder, a quoted RECORD row or METADATA would need (its start-up is
    most of what it costs: bench/run.py, issue 27 item 3)."""
    from tests.kit.wheels import make_venv, site_packages

    python = make_venv(tmp_path / "venv")
    site = site_packages(python)
    make_dist(site, "demo", "1.0", {"demo/__init__.py": "", "demo/mod.py": "a = 1\n"})
    env = {**os.environ, "ASCENDPATCH_CACHE": str(tmp_path / "cache")}
    code = ("import sys\nfrom ascendpatch.shell.cli import main\n"
            f"code = main(['--python', {str(python)!r}, 'audit'])\n"
            "print(code, ' '.join(sorted(sys.modules)))")
    past_racy_window(site / "demo" / "mod.py")  # (the stat cache and the report's cache both)
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120, check=True, env=env)
    assert first.stdout.split("\n")[-2].startswith("0 "), first.stdout + first.stderr
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120, check=True, env=env)
    status, *modules = again.stdout.split("\n")[-2].split()
    assert status == "0" and "(0 hashed)" in again.stdout, again.stdout + again.stderr
    assert "ascendpatch.inspect.audit.run" in modules
    # what this interpreter imports before any of ours (under CI's `pytest --cov`, coverage's
    # own start-up in every subprocess: random, subprocess, ...) is not the audit's
    bare = subprocess.run([sys.executable, "-c", "import sys; print(' '.join(sys.modules))"],
                          capture_output=True, text=True, timeout=120, check=True, env=env)
    modules = sorted(set(modules) - set(bare.stdout.split()))
    heavy = ("packaging", "yaml", "rich", "ascendpatch.manifest", "ascendpatch.pipeline.engine",
             "importlib.metadata", "email", "subprocess", "tempfile", "random", "csv")
    assert not [m for m in modules if m.startswith(heavy)], modules


def test_the_hash_pool_times_its_phases_only_when_asked(env: dict[str, Path],
                                                       tmp_path: Path) -> None:
    """With ASCENDPATCH_AUDIT_PHASES set (bench/run.py's breakdown), a cold audit's --json
    timings carry the hashing threads' open / fstat / read+hash / close seconds and counts and
    their idle time; unset, nothing is timed and there are none."""
    def cold(**extra: str) -> dict[str, Any]:
        shutil.rmtree(tmp_path / "cache", ignore_errors=True)
        done = subprocess.run(
            [sys.executable, "-m", "ascendpatch", "--site-packages", str(env["site"]),
             "--json", "audit", "--workers", "2"], capture_output=True, text=True, timeout=120,
            check=False, env={**os.environ, "ASCENDPATCH_CACHE": str(tmp_path / "cache"),
                              **extra})
        doc: dict[str, Any] = json.loads(done.stdout)
        return doc

    timed = cold(ASCENDPATCH_AUDIT_PHASES="1")
    phases = timed["timings"]["phases"]
    assert phases["open calls"] == phases["fstat calls"] == timed["files_hashed"] > 0
    assert phases["read+hash small calls"] == timed["files_hashed"]
    assert {"open", "fstat", "close", "read+hash small", "span", "idle"} <= set(phases)
    assert cold()["timings"]["phases"] == {}


# The summary of a full audit as the stat cache (format 3) has held it since 89ee836.
SUMMARY_89EE836 = {"records": "ab" * 32, "missing": [["demo/gone.py", "demo", "1.0"]],
                   "differ": [["demo/mod.py", "S.5", "demo", "1.0"]],
                   "orphan_folders": ["/site/demo"]}


def test_summary_reads_and_writes_the_cache_format_unchanged() -> None:
    from ascendpatch.inspect.audit import Summary

    summary = Summary.from_json(SUMMARY_89EE836)
    assert summary is not None and summary.missing == [("demo/gone.py", "demo", "1.0")]
    assert summary.to_json() == SUMMARY_89EE836
    bad: object
    for bad in ({}, [], {"records": "x"}, {**SUMMARY_89EE836, "differ": [["too", "short"]]}):
        assert Summary.from_json(bad) is None


def test_folder_walk_reads_and_writes_the_cache_format_unchanged() -> None:
    from ascendpatch.inspect.audit import FolderWalk

    doc = {"records": "cd" * 32, "dirs": [["/site/demo", 1, 2]],
           "unlisted": ["/site/demo/dropin.py"], "owner": ["demo", "1.0"]}  # as in 89ee836
    walk = FolderWalk.from_json(doc)
    assert walk is not None and walk.owner == ("demo", "1.0")
    assert walk.to_json() == doc
    assert FolderWalk.from_json({"records": "x"}) is None
    assert FolderWalk.from_json([]) is None


def test_a_cached_summary_of_another_shape_is_ignored(env: dict[str, Path]) -> None:
    """A broken summary in the cache costs a full audit, never a wrong answer or a crash."""
    site = env["site"]
    (site / "other/util.py").write_text("y = 5\n")
    past_racy_window(site)  # (else the second audit hashes the racy files again)
    first = audit(env)
    cache = next(Path(os.environ["ASCENDPATCH_CACHE"]).glob(f"audit/*.{CACHE_NAME}"))
    doc, columns = statfile.load(cache.read_bytes())
    assert doc["summary"]["differ"] == [["other/util.py", "..5", "other", "2.0"]]
    doc["summary"] = {"records": doc["summary"]["records"], "missing": 3}
    cache.write_bytes(statfile.dump(doc, columns.entries()))
    again = audit(env)
    assert again[:2] == first[:2] and again[2]["results"] == first[2]["results"]
    rewritten = statfile.load(cache.read_bytes())[0]["summary"]  # a full audit ran, remembered
    assert rewritten["differ"] == [["other/util.py", "..5", "other", "2.0"]]


def test_a_racy_entry_is_hashed_again_or_forgotten(tmp_path: Path) -> None:
    """An entry whose mtime is not safely older than the start of the audit that hashed it
    proves nothing (git's racy-git rule): the next run hashes that file again, and a run that
    saves the cache without doing so forgets the entry (git's smudging), so that no later run
    takes it for verified. (An mtime in the future is racy whatever the clock does.)"""
    import time

    from ascendpatch.inspect.audit import StatCache, stat_and_hash

    items = []
    for name in ("a", "b"):
        path = tmp_path / name
        path.write_text(f"{name}\n")
        future = time.time_ns() + 3600 * 10**9
        os.utime(path, ns=(future, future))
        items.append((name, str(path), 2))
    first = StatCache(tmp_path)
    assert stat_and_hash(items, first, workers=2).hashed == 2
    assert stat_and_hash(items, first, workers=2).hashed == 0  # this run hashed them itself
    first.save()
    later = StatCache(tmp_path)
    assert later.get("a", (tmp_path / "a").stat()) is None
    assert stat_and_hash(items[:1], later, workers=2).hashed == 1  # as a snapshot of one dist
    later.save()
    assert set(StatCache(tmp_path).entries) == {"a"}



def test_a_file_the_cache_cannot_hold_is_checked_by_every_audit(env: dict[str, Path]) -> None:
    """A file whose mtime is past 2262 (beyond the cache's int64 nanoseconds; anyone who can
    write the target can set one) is left out of the cache: the repeat audit must not then
    answer without it. Rewritten later with the same size and mtime, it is found changed."""
    site = env["site"]
    late = site / "other/util.py"
    when = 2**63 + 10**17  # ns: the year 2264
    os.utime(late, ns=(when, when))
    if late.stat().st_mtime_ns != when:
        pytest.skip("this file system cannot store an mtime past 2262")
    first, second = audit(env)[2], audit(env)[2]
    assert first["files_checked"] == second["files_checked"]
    assert first["exit_code"] == second["exit_code"] == 0
    late.write_text("y = 3\n")  # same size as "y = 2\n"
    os.utime(late, ns=(when, when))
    code, out, doc = audit(env)
    assert code == 1 and "other/util.py" in out
    assert [r["data"]["code"] for r in doc["results"] if r["level"] == "FAIL"] == ["..5"]


def test_a_summary_naming_a_file_the_cache_does_not_hold_means_a_full_audit(
        env: dict[str, Path]) -> None:
    """A summary whose differ rows name a path with no entry (a hand-edited file) is not this
    cache's: the audit runs in full, never a crash."""
    site = env["site"]
    (site / "other/util.py").write_text("y = 5\n")
    past_racy_window(site)
    first = audit(env)
    cache = next(Path(os.environ["ASCENDPATCH_CACHE"]).glob(f"audit/*.{CACHE_NAME}"))
    doc, columns = statfile.load(cache.read_bytes())
    doc["summary"]["differ"].append(["not/cached.py", "..5", "other", "2.0"])
    cache.write_bytes(statfile.dump(doc, columns.entries()))
    again = audit(env)
    assert again[:2] == first[:2] and again[2]["results"] == first[2]["results"]


def _audit_modules(site: Path, env: dict[str, str]) -> tuple[str, list[str]]:
    """An audit of ``site`` with no manifest named (the default one: loaded only if needed),
    in a process of its own: its output, and the modules it imported beyond a bare start."""
    code = ("import sys\nfrom ascendpatch.shell.cli import main\n"
            f"code = main(['--site-packages', {str(site)!r}, 'audit'])\n"
            "print('MODULES', ' '.join(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False, env=env)
    bare = subprocess.run([sys.executable, "-c", "import sys; print(' '.join(sys.modules))"],
                          capture_output=True, text=True, timeout=120, check=True, env=env)
    out, _, listed = done.stdout.rpartition("MODULES ")
    return out + done.stderr, sorted(set(listed.split()) - set(bare.stdout.split()))


def test_files_the_ledger_lists_are_told_expected_without_loading_the_manifest(
        env: dict[str, Path], tmp_path: Path) -> None:
    """After an apply, the patched files differ from their RECORD: the ledger alone says
    they are expected (it has precedence over the manifest's hashes anyway), so the manifest
    and every artifact kind are not loaded for them (about half of such a repeat audit). A
    file the ledger does not list still loads the manifest, and is judged by it."""
    run_cli("--site-packages", env["site"], "--manifest", env["manifest"], "apply")
    cache = {**os.environ, "ASCENDPATCH_CACHE": str(tmp_path / "cache")}
    out, modules = _audit_modules(env["site"], cache)
    assert "[OK] S.5      demo/mod.py (demo 1.0: patched by ascendpatch (demo-fix))" in out
    assert "0 unexpected finding(s), 1 expected" in out
    assert not [m for m in modules if m.startswith(("ascendpatch.manifest", "ascendpatch.kinds",
                                                    "yaml"))], modules
    (env["site"] / "other/util.py").write_text("y = 3\n")
    out, modules = _audit_modules(env["site"], cache)
    assert "[FAIL] ..5      other/util.py (other 2.0: changed)" in out
    assert "[OK] S.5      demo/mod.py (demo 1.0: patched by ascendpatch (demo-fix))" in out
    assert "ascendpatch.manifest.loader" in modules


def test_a_ledger_that_cannot_be_read_alone_is_worded_as_before(env: dict[str, Path]) -> None:
    """The ledger is first read with the target as its only tree; when that fails the audit
    falls back to reading it with the manifest, which words what is wrong with it."""
    run_cli("--site-packages", env["site"], "--manifest", env["manifest"], "apply")
    ledger = env["site"] / ".ascendpatch" / "ledger.json"
    ledger.write_text("{not json")
    result = run_cli("--site-packages", env["site"], "audit")
    assert result.code == 2, result.out + result.err
    assert "is not an ascendpatch ledger" in result.err and "fix: move it aside" in result.err


def test_an_error_while_the_manifest_loads_is_not_taken_for_not_expected(
        env: dict[str, Path]) -> None:
    """LedgerFirst's get is its own: Mapping's would take a KeyError raised while the
    expected changes load for "this file is not expected" (a second review's NIT)."""
    from ascendpatch.commands.audit import LedgerFirst

    def failing() -> dict[str, tuple[str, str]]:
        raise KeyError("a bug while loading")

    with pytest.raises(KeyError, match="a bug while loading"):
        LedgerFirst(env["site"], failing).get("other/util.py")


@pytest.mark.parametrize(("ledger", "said"), [
    ("[" * 200_000, "is nested deeper than 64 levels"),  # exit 3 (RecursionError) before
    ("outside", "names a file this run cannot place"),
])
def test_a_ledger_that_cannot_be_read_is_exit_2_in_one_line(env: dict[str, Path], ledger: str,
                                                           said: str) -> None:
    """A ledger too deep for the JSON parser is one worded line; one naming a file outside
    every tree this run knows (a Hugging Face cache file, audited without the $HF_HUB_CACHE
    of the apply) says to run with that environment before saying to move it aside (that
    advice alone threw a good ledger away)."""
    run_cli("--site-packages", env["site"], "--manifest", env["manifest"], "apply")
    path = env["site"] / ".ascendpatch" / "ledger.json"
    if ledger == "outside":  # the apply's own record, as if its file lay in an HF cache
        doc = json.loads(path.read_text())
        files = doc["artifacts"]["demo-fix"]
        files["/nonexistent-hf-cache/models--x/blob"] = files.pop("demo/mod.py")
        ledger = json.dumps(doc)
    path.write_text(ledger)
    result = run_cli("--site-packages", env["site"], "--manifest", env["manifest"], "audit")
    assert result.code == 2, result.out + result.err
    assert result.err.count("\n") == 1 and said in result.err, result.err
    if "cannot place" in said:
        assert "fix: run with the manifest and the environment ($HF_HUB_CACHE" in result.err
