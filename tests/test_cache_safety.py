"""Issue 22 item 1: caches other users can write, without pip.

Run as root, the attacker is a real second user (uid 65534, through ``setpriv``) who owns the
shared cache folder (mode 0777) and plants a release or a wheel there; a cache reached through
a symbolic link is refused the same way. A data cache that fails the check is not used (one
[WARN] line), or, with --offline where it is the only source, the command exits 1 naming it.
(lock's pip-tools venv, the stack check and the online fallback: tests/test_cache_pip.py.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit import build_wheel, make_small_demo, run_cli, write_small_manifest
from tests.kit.caches import (
    FIX,
    PATCHED,
    demo_sdist,
    owned_by_nobody,
    plant,
    shared_cache,
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """m.yaml (the demo fix on demo>=1) and an empty wheelhouse ``house``."""
    write_small_manifest(tmp_path)
    (tmp_path / "house").mkdir()
    return tmp_path


@pytest.fixture
def shared(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """$ASCENDPATCH_CACHE: a folder owned by uid 65534, mode 0777."""
    with shared_cache() as cache:
        monkeypatch.setenv("ASCENDPATCH_CACHE", str(cache))
        yield cache


def catalog_check(project: Path) -> tuple[int, str]:
    result = run_cli("--manifest", project / "m.yaml", "catalog-check", "1.0", "--offline",
                     "--wheelhouse", project / "house")
    return result.code, result.out + result.err


def test_a_release_planted_by_another_user_decides_nothing_offline(shared: Path,
                                                                  project: Path) -> None:
    plant(shared / "releases" / "demo-1.0.tar.gz", demo_sdist(PATCHED))
    code, text = catalog_check(project)
    assert code == 1, text
    assert f"[FAIL] cannot use the cache: {owned_by_nobody(shared)}; --offline leaves no " \
           f"other place to look; {FIX}" in text
    assert "obsolete" not in text and len(text.strip().splitlines()) == 1


def test_with_the_release_in_the_wheelhouse_the_shared_cache_is_not_needed(
        shared: Path, project: Path) -> None:
    plant(shared / "releases" / "demo-1.0.tar.gz", demo_sdist(PATCHED))
    (project / "house" / "demo-1.0.tar.gz").write_bytes(demo_sdist())
    code, text = catalog_check(project)
    assert (code, "demo-fix x demo 1.0: applies" in text) == (0, True), text


def test_a_planted_sandbox_wheel_is_never_installed(shared: Path, tmp_path: Path) -> None:
    evil = build_wheel(tmp_path / "evil", "vllm-ascend", "0.18.0")
    plant(shared / "wheels" / evil.name, evil.read_bytes())
    (tmp_path / "house").mkdir()
    result = run_cli("sandbox", tmp_path / "box", "--offline", "--wheelhouse", tmp_path / "house")
    assert result.code == 1, result.err
    assert f"[FAIL] cannot use the cache: {owned_by_nobody(shared)}; --offline leaves no other " \
           f"place to look; {FIX}" in result.err
    assert not (tmp_path / "box").exists()


def test_audit_says_once_that_the_shared_cache_is_not_used(shared: Path, site: Path) -> None:
    make_small_demo(site)
    for _ in range(2):  # the second run must not answer from a cache the other user holds
        result = run_cli("--site-packages", site, "audit")
        warnings = [line for line in result.err.splitlines() if line.startswith("[WARN]")]
        assert result.code == 0, result.err
        assert warnings == [f"[WARN] cache not used this run: {owned_by_nobody(shared)}; {FIX}"]
    assert list(shared.iterdir()) == []  # nothing written there either


@pytest.mark.parametrize("linked", ["root", "releases"])
def test_a_cache_reached_through_a_link_is_not_used(tmp_path: Path, project: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    linked: str) -> None:
    real = tmp_path / "elsewhere"
    (real / "releases").mkdir(parents=True, mode=0o700)
    (real / "releases" / "demo-1.0.tar.gz").write_bytes(demo_sdist(PATCHED))
    cache = tmp_path / "cache"
    if linked == "root":
        cache.symlink_to(real)
    else:
        cache.mkdir(mode=0o700)
        (cache / "releases").symlink_to(real / "releases")
    monkeypatch.setenv("ASCENDPATCH_CACHE", str(cache))
    code, text = catalog_check(project)
    where = cache if linked == "root" else cache / "releases"
    assert code == 1, text
    assert f"cannot use the cache: {where} is a symbolic link" in text and FIX in text


def test_the_check_from_the_cache_root_down_and_above_it(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from ascendpatch import cachedir

    above = tmp_path / "above"
    above.mkdir(mode=0o755)
    monkeypatch.setenv("ASCENDPATCH_CACHE", str(above / "cache"))
    folder = above / "cache" / "releases"
    assert cachedir.problem(folder) is None  # created, 0700, from the root down
    assert {oct(p.stat().st_mode & 0o777) for p in (folder, folder.parent)} == {"0o700"}
    above.chmod(0o1777)  # sticky, like /tmp: others cannot move our folder away
    assert cachedir.problem(folder) is None
    above.chmod(0o777)
    assert cachedir.problem(folder) == f"{above} is writable by other users (mode 777)"
    above.chmod(0o755)
    (tmp_path / "via").symlink_to(above)  # a link above the root: its target is checked
    monkeypatch.setenv("ASCENDPATCH_CACHE", str(tmp_path / "via" / "cache"))
    assert cachedir.problem(tmp_path / "via" / "cache" / "releases") is None
    folder.chmod(0o770)
    assert cachedir.problem(tmp_path / "via" / "cache" / "releases") == \
        f"{tmp_path / 'via' / 'cache' / 'releases'} is writable by other users (mode 770)"
