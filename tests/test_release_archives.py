"""Issue 22 item 6 (sdists): a release archive that cannot be read within bounds.

A truncated or corrupt sdist in the release cache exits 1 naming it and is dropped, so the
next run downloads it afresh; one in a wheelhouse (the user's) is named and kept; a member
whose header claims 1 GiB is never read (releases.MEMBER_CAP); a download that is no readable
sdist is never cached. Hypothesis feeds any bytes as a cached release.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascendpatch.env import releases
from tests.kit import TRACEBACK, Run, run_cli, write_small_manifest
from tests.kit.caches import demo_index, demo_sdist

GOOD = demo_sdist()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """m.yaml (the demo fix on demo>=1) and an empty wheelhouse ``house``."""
    write_small_manifest(tmp_path)
    (tmp_path / "house").mkdir()
    return tmp_path


def catalog_check(project: Path, *, online: bool = False) -> Run:
    offline = () if online else ("--offline", "--wheelhouse", project / "house")
    return run_cli("--manifest", project / "m.yaml", "catalog-check", "1.0", *offline)


def in_cache(data: bytes, name: str = "demo-1.0.tar.gz") -> Path:
    path = Path(os.environ["ASCENDPATCH_CACHE"]) / "releases" / name
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_bytes(data)
    return path


def test_a_truncated_sdist_in_the_cache_is_named_and_dropped(project: Path) -> None:
    path = in_cache(GOOD[:-40])
    result = catalog_check(project)
    assert result.code == 1, result.err
    assert result.err.startswith(f"[FAIL] {path} is not a readable release archive (")
    assert "removed it from the cache; fix: run the command again" in result.err
    assert len(result.err.strip().splitlines()) == 1 and not path.exists()


def test_a_corrupt_sdist_in_the_wheelhouse_is_named_and_kept(project: Path) -> None:
    path = project / "house" / "demo-1.0.tar.gz"
    path.write_bytes(b"\x1f\x8b" + os.urandom(300))
    result = catalog_check(project)
    assert result.code == 1, result.err
    assert result.err.startswith(f"[FAIL] {path} is not a readable release archive (")
    assert "fix: replace it with the file the index publishes" in result.err and path.exists()


def test_a_member_that_claims_a_gibibyte_is_not_read(project: Path) -> None:
    path = in_cache(demo_sdist(claimed=1 << 30))
    result = catalog_check(project)
    assert result.code == 1, result.err
    assert f"[FAIL] {path} is not a readable release archive (demo/mod.py claims 1073741824 " \
           f"bytes, more than the 256 MiB ascendpatch reads of one file)" in result.err


@pytest.mark.integration
def test_a_member_of_a_real_gibibyte_is_not_read(tmp_path: Path) -> None:
    """1 GiB of zeros, compressed to about 1 MiB: refused from its header, nothing read."""
    path = tmp_path / "demo-1.0.tar.gz"
    with gzip.open(path, "wb", compresslevel=1) as raw, \
            tarfile.open(fileobj=raw, mode="w|") as tf:
        info = tarfile.TarInfo("demo-1.0/demo/mod.py")
        info.size = 1 << 30
        tf.addfile(info, _Zeros(info.size))
    tracemalloc.start()
    try:
        with pytest.raises(releases.ReleaseError, match="claims 1073741824 bytes"):
            releases.read_member(path, "demo/mod.py")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak


class _Zeros:
    def __init__(self, size: int) -> None:
        self.left = size

    def read(self, size: int = -1) -> bytes:
        size = self.left if size < 0 else min(size, self.left)
        self.left -= size
        return bytes(size)


def _result_or_one_clean_error(path: Path, data: bytes) -> None:
    """demo/mod.py of the archive ``data`` at ``path``: its bytes (no more than a gzip or zip
    stream of that size can hold), None, or one line naming the file, which leaves the cache."""
    try:
        found = releases.read_member(path, "demo/mod.py")
    except releases.ReleaseError as exc:
        assert str(exc).startswith(f"{path} is not a readable release archive (")
        assert "\n" not in str(exc) and not path.exists()
    else:
        assert found is None or len(found) <= len(data) * 1100


def _mutations() -> st.SearchStrategy[bytes]:
    raw = gzip.decompress(GOOD)
    cut = st.integers(0, len(GOOD)).map(lambda n: GOOD[:n])
    flipped = st.tuples(st.integers(0, len(raw) - 1), st.integers(1, 255)).map(
        lambda t: gzip.compress(raw[:t[0]] + bytes([raw[t[0]] ^ t[1]]) + raw[t[0] + 1:]))
    return st.one_of(st.binary(max_size=4096), cut, flipped)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_mutations())
def test_any_bytes_as_a_cached_release_end_in_a_result_or_one_clean_error(data: bytes) -> None:
    """Bound: inputs of at most ~4 KiB (random, cut or bit-flipped real sdists); every member
    read is capped (releases.MEMBER_CAP), so none can take more than it holds."""
    _result_or_one_clean_error(in_cache(data), data)


def _wheel_mutations() -> st.SearchStrategy[bytes]:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("demo/__init__.py", "")
        zf.writestr("demo/mod.py", "a = 1\nb = 3\n" * 20)
        zf.writestr("demo-1.0.dist-info/METADATA", "Name: demo\nVersion: 1.0\n")
    good = out.getvalue()
    cut = st.integers(0, len(good)).map(lambda n: good[:n])
    flipped = st.tuples(st.integers(0, len(good) - 1), st.integers(1, 255)).map(
        lambda t: good[:t[0]] + bytes([good[t[0]] ^ t[1]]) + good[t[0] + 1:])
    return st.one_of(st.binary(max_size=4096), cut, flipped)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_wheel_mutations())
def test_any_bytes_as_a_cached_wheel_end_in_a_result_or_one_clean_error(data: bytes) -> None:
    """The same for wheels (zip): random, cut or bit-flipped, at most ~4 KiB."""
    _result_or_one_clean_error(in_cache(data, "demo-1.0-py3-none-any.whl"), data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_mutations())
def test_catalog_check_on_any_cached_release_exits_0_or_1_with_words(data: bytes) -> None:
    project = Path(os.environ["HOME"]) / "project"
    if not project.exists():
        project.mkdir()
        write_small_manifest(project)
        (project / "house").mkdir()
    in_cache(data)
    result = catalog_check(project)
    assert result.code in (0, 1), result.err
    assert TRACEBACK not in result.err and "details:" not in result.err


@pytest.mark.integration
def test_a_corrupt_cached_sdist_is_dropped_and_the_rerun_downloads_it(project: Path) -> None:
    cached = in_cache(GOOD[: len(GOOD) // 2])
    with demo_index(GOOD) as url, pytest.MonkeyPatch.context() as env:
        env.setenv("PIP_INDEX_URL", url)
        first = catalog_check(project, online=True)
        assert first.code == 1, first.out + first.err
        assert f"[FAIL] {cached} is not a readable release archive (" in first.err
        assert not cached.exists()
        again = catalog_check(project, online=True)
    assert (again.code, "demo 1.0: applies" in again.out) == (0, True), again.out + again.err
    assert cached.read_bytes() == GOOD


@pytest.mark.integration
def test_a_bad_download_is_never_cached(project: Path) -> None:
    with demo_index(GOOD[:-30], hashed=False) as url, pytest.MonkeyPatch.context() as env:
        env.setenv("PIP_INDEX_URL", url)  # no hash on the index to catch it with
        result = catalog_check(project, online=True)
    assert result.code == 1, result.out + result.err
    assert result.err.startswith(f"[FAIL] demo-1.0.tar.gz from {url} is not a readable sdist (")
    assert len(result.err.strip().splitlines()) == 1
    assert list((Path(os.environ["ASCENDPATCH_CACHE"]) / "releases").iterdir()) == []
