"""Issue 22 item 1 where real pip runs: lock's pip-tools venv, the stack check's pip report,
and a release fetched from a package index when the cache is out of the way.

The attacker is a real second user (uid 65534, through ``setpriv``) who owns the shared cache
folder (mode 0777). Each test first shows, in a cache of our own, that what it plants is where
the command looks (the control), then that from the shared folder it decides nothing: lock
never runs a pip-compile from it, the stack check and catalog-check do without it and say so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit import Run, build_wheel, run_cli, wheels, write_manifest, write_small_manifest
from tests.kit.caches import (
    FIX,
    NOBODY,
    PATCHED,
    demo_index,
    demo_sdist,
    owned_by_nobody,
    plant,
    shared_cache,
)

pytestmark = pytest.mark.integration



@pytest.fixture
def shared() -> Iterator[Path]:
    with shared_cache() as cache:
        yield cache


def use_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ASCENDPATCH_CACHE", str(cache))
    return cache


# --------------------------------------------------------------------------- lock


@pytest.fixture
def house(tmp_path: Path) -> Path:
    """pip-tools and what it needs (real wheels from the index, cached outside the checkout)
    plus a tiny ``helper`` wheel to lock."""
    folder = wheels.with_pip_tools(tmp_path / "house")
    build_wheel(folder, "helper", "1.0")
    return folder


def _lock(tmp_path: Path, house: Path) -> Run:
    manifest = write_manifest(tmp_path / "stack.yaml", [], protected=["torch"],
                              stack={"packages": {"helper": "==1.0"}})
    return run_cli("--python", tmp_path / "venv" / "bin" / "python", "--manifest", manifest,
                   "lock", "-o", tmp_path / "stack.lock", "--offline", "--wheelhouse", house,
                   "--resolver", "pip")  # pip-compile's venv is what these tests guard


def test_lock_never_runs_a_pip_compile_another_user_planted(
        tmp_path: Path, house: Path, shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheels.make_venv(tmp_path / "venv")
    own = use_cache(tmp_path / "own-cache", monkeypatch)
    for _ in range(2):  # real pip-tools, in a venv of our own: built, then reused
        result = _lock(tmp_path, house)
        assert (result.code, "helper==1.0" in (tmp_path / "stack.lock").read_text()) \
            == (0, True), result.err
    (key,) = [p.name for p in (own / "piptools").iterdir()]
    marker = tmp_path / "pip-compile-ran"
    evil = f"#!/bin/sh\ntouch {marker}\nexit 1\n".encode()
    # what lock runs: the venv's interpreter, with pip-compile's command line
    # (env/_pipcompile.py); a link to the base interpreter, so replaced, never written through
    ran = own / "piptools" / key / "bin" / "python"
    ran.unlink()
    ran.write_bytes(evil)
    ran.chmod(0o755)
    assert _lock(tmp_path, house).code == 1 and marker.exists()  # control: this path is run
    marker.unlink()

    use_cache(shared, monkeypatch)
    plant(shared / "piptools" / key / "bin" / "pip-compile", evil)
    plant(shared / "piptools" / key / "bin" / "python", evil)
    result = _lock(tmp_path, house)
    assert result.code == 1, result.err
    assert f"[FAIL] cannot use the cache: {owned_by_nobody(shared)}; pip-compile is never " \
           f"run from it; {FIX}" in result.err
    assert not marker.exists()


def test_a_venv_file_another_user_owns_is_never_run(
        tmp_path: Path, house: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheels.make_venv(tmp_path / "venv")
    own = use_cache(tmp_path / "own-cache", monkeypatch)
    assert _lock(tmp_path, house).code == 0
    (venv,) = (own / "piptools").iterdir()
    script = venv / "bin" / "pip-compile"
    os.chown(script, NOBODY, NOBODY)  # what a chown of the folder alone would leave behind
    result = _lock(tmp_path, house)
    assert result.code == 1, result.err
    assert f"cannot use the cache: {owned_by_nobody(script)}" in result.err


# --------------------------------------------------------------------------- stack check


def test_a_planted_stack_report_decides_nothing(tmp_path: Path, shared: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "house"
    build_wheel(folder, "cv", "4.11")
    build_wheel(folder, "cv", "4.13")
    build_wheel(folder, "asc", "1.0", ["cv<=4.11"])
    build_wheel(folder, "vl", "1.0", ["cv>=4.13"])
    python = wheels.make_venv(tmp_path / "venv")
    manifest = write_manifest(tmp_path / "stack.yaml", [], protected=["torch"],
                              stack={"packages": {"asc": "==1.0", "vl": "==1.0"}})
    args = ("--python", python, "--manifest", manifest, "install", "--dry-run", "--offline",
            "--wheelhouse", folder)
    conflict = "[FAIL] conflict: asc 1.0 needs cv<=4.11 and vl 1.0 needs cv>=4.13"
    own = use_cache(tmp_path / "own-cache", monkeypatch)
    assert conflict in run_cli(*args).out
    (report,) = (own / "stackcheck").iterdir()
    report.write_text(json.dumps({"install": []}))
    assert conflict not in run_cli(*args).out  # control: the cached report is used

    use_cache(shared, monkeypatch)
    plant(shared / "stackcheck" / report.name, json.dumps({"install": []}).encode())
    result = run_cli(*args)
    assert (result.code, conflict in result.out) == (1, True), result.out + result.err
    assert f"[WARN] cache not used this run: {owned_by_nobody(shared)}; {FIX}" in result.err


# --------------------------------------------------------------------------- releases


def test_a_planted_release_is_ignored_and_the_index_decides(
        tmp_path: Path, shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = write_small_manifest(tmp_path)
    own = use_cache(tmp_path / "own-cache", monkeypatch)
    (own / "releases").mkdir(parents=True, mode=0o700)
    (own / "releases" / "demo-1.0.tar.gz").write_bytes(demo_sdist(PATCHED))
    with demo_index(demo_sdist()) as url:
        monkeypatch.setenv("PIP_INDEX_URL", url)
        control = run_cli("--manifest", manifest, "catalog-check", "1.0")
        assert "demo 1.0: obsolete" in control.out  # control: the cache is read

        use_cache(shared, monkeypatch)
        plant(shared / "releases" / "demo-1.0.tar.gz", demo_sdist(PATCHED))
        result = run_cli("--manifest", manifest, "catalog-check", "1.0")
    assert (result.code, "demo-fix x demo 1.0: applies" in result.out) == (0, True), \
        result.out + result.err
    assert f"[WARN] cache not used this run: {owned_by_nobody(shared)}; {FIX}" in result.err
    assert (shared / "releases" / "demo-1.0.tar.gz").read_bytes() == demo_sdist(PATCHED)
