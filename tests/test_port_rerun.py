"""`port --write` can be re-run: a write that would not change which variant decides a release
changes nothing and says so (integration tier: the real vllm-ascend wheels, copies of the real
catalog files)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.kit import REPO, Run, build_wheel, run_cli, tree_digest, wheels

pytestmark = pytest.mark.integration

ID = "sampler-topk-topp-fallback"


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "data"
    shutil.copytree(REPO / "manifests", folder / "manifests")
    shutil.copytree(REPO / "patches", folder / "patches")
    monkeypatch.setenv("ASCENDPATCH_DATA_DIR", str(folder))
    return folder


def _write(house: Path, *args: str) -> Run:
    return run_cli("port", ID, *args, "--write", "--offline", "--wheelhouse", house)


def test_a_release_a_variant_already_covers_is_left_alone_every_time(data: Path) -> None:
    """On main each run appended `versions: ==0.26.0rc1` after ">=0.26.0rc1,<0.27.1rc1"."""
    catalog = data / "manifests/default.yaml"
    before = tree_digest(data)
    for _ in range(2):
        result = _write(wheels.WHEELS, "--to", "0.26.0rc1")
        assert result.code == 0, result.out + result.err
        assert result.out.splitlines()[-1] == (
            f"[OK] variant >=0.26.0rc1,<0.27.1rc1 of {ID} in {catalog} already covers "
            "0.26.0rc1: nothing written")
        assert tree_digest(data) == before


def test_a_second_write_of_a_new_release_changes_no_byte(data: Path, tmp_path: Path) -> None:
    house = tmp_path / "house"
    shifted = b"# a new header comment upstream\n" * 4 + wheels.wheel_member("0.26.0rc1",
                                                                            wheels.SAMPLER)
    build_wheel(house, "vllm-ascend", "0.99.1", files={
        "vllm_ascend/__init__.py": "", wheels.SAMPLER: shifted.decode()})
    first = _write(house, "--from", "0.26.0rc1", "--to", "0.99.1")
    assert first.code == 0 and "added variant ==0.99.1" in first.out, first.out + first.err
    written = tree_digest(data)
    second = _write(house, "--to", "0.99.1")
    assert second.code == 0, second.out + second.err
    assert "[OK] variant ==0.99.1 of " in second.out and "already covers 0.99.1" in second.out
    assert tree_digest(data) == written


def test_porting_another_variant_onto_a_covered_release_names_the_one_that_decides(
        data: Path) -> None:
    before = tree_digest(data)
    result = _write(wheels.WHEELS, "--from", "0.15.0rc1", "--to", "0.16.0rc1")
    assert result.code == 0, result.out + result.err
    assert ("[WARN] nothing written: variant >=0.16.0rc1,<0.18.0rc1 of "
            f"{ID} in {data / 'manifests/default.yaml'} already covers 0.16.0rc1 and decides "
            "it, not the ported >=0.15.0rc1,<0.16.0rc1; fix: check that one: 'ascendpatch port "
            f"{ID} --to 0.16.0rc1', or narrow its versions by hand") in result.out
    assert tree_digest(data) == before
