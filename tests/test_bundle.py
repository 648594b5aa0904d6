"""`ascendpatch bundle`: a wheelhouse for another platform (aarch64 Kunpeng hosts), and from
the copy install.sh installs (no source checkout). pip itself is the reference: it must
resolve ascendpatch and pip-tools from the wheelhouse alone, for the platform asked for.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.tags import compatible_tags, cpython_tags
from packaging.utils import parse_wheel_filename

from tests.kit import REPO, run_cli, wheels

# each test builds the checkout, or packs the copy installed from it
pytestmark = pytest.mark.usefixtures("builds_the_checkout")

AARCH64 = ["manylinux2014_aarch64", "manylinux_2_17_aarch64", "linux_aarch64"]


def _pip_resolves(house: Path, platform: str, *reqs: str) -> subprocess.CompletedProcess[str]:
    """pip's own answer: can it install ``reqs`` for that platform from ``house`` alone?"""
    return subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
         "--no-index", "--find-links", str(house), "--only-binary", ":all:", "--platform",
         platform, "--python-version", "3.11", "--target", str(house.parent / "t"), *reqs],
        capture_output=True, text=True, check=False)


@pytest.mark.integration
def test_aarch64_wheelhouse_holds_only_wheels_for_that_platform(tmp_path: Path) -> None:
    house = tmp_path / "house"
    result = run_cli("--json", "bundle", house, "--platform", "manylinux2014_aarch64",
                     "--python-version", "3.11")
    assert result.code == 0, result.out + result.err
    names = sorted(p.name for p in house.glob("*.whl"))
    assert result.json["results"][0]["data"]["wheels"] == names
    projects = {str(parse_wheel_filename(n)[0]) for n in names}
    # uv: the fast resolver, bundled because this environment has ascendpatch[fast] (dev)
    assert {"ascendpatch", "packaging", "unidiff", "pyyaml", "rich", "pip-tools", "pip", "uv"} \
        <= projects
    supported = set(cpython_tags((3, 11), platforms=AARCH64)) | \
        set(compatible_tags((3, 11), "cp311", AARCH64))
    for name in names:
        assert parse_wheel_filename(name)[3] & supported, f"{name} does not run on aarch64"
    (pyyaml,) = [n for n in names if n.lower().startswith("pyyaml-")]
    assert "cp311" in pyyaml and "aarch64" in pyyaml and "x86_64" not in pyyaml
    assert not list(house.glob("*.tar.gz")), "nothing to build on the air-gapped host"
    ok = _pip_resolves(house, "manylinux2014_aarch64", "ascendpatch[fast]", "pip-tools")
    assert ok.returncode == 0, ok.stderr
    control = _pip_resolves(house, "manylinux2014_x86_64", "ascendpatch")
    assert control.returncode != 0 and "pyyaml" in control.stderr.lower()


def test_a_bad_platform_tag_is_a_usage_error_and_makes_nothing(tmp_path: Path) -> None:
    result = run_cli("bundle", tmp_path / "house", "--platform", "manylinux aarch64")
    assert result.code == 2 and "is not a wheel platform tag" in result.err
    assert not (tmp_path / "house").exists()


@pytest.mark.integration
def test_a_local_edit_of_the_installed_copy_is_never_packed(tmp_path: Path) -> None:
    """Repacking builds a fresh RECORD, so an edited installed file would be shipped to the
    nodes with hashes that vouch for it (89ee836 packed it): refused, naming the file, and
    nothing written."""
    tool = wheels.make_venv(tmp_path / "tool")
    wheels.pip_install(tool, str(REPO))
    (installed,) = (tmp_path / "tool").glob("lib/python*/site-packages/ascendpatch/errors.py")
    installed.write_text(installed.read_text() + "# a hand edit on the controller\n")
    house = tmp_path / "house"
    made = subprocess.run([str(tmp_path / "tool/bin/ascendpatch"), "bundle", str(house)],
                          capture_output=True, text=True, check=False, cwd=tmp_path)
    said = made.stdout + made.stderr
    assert made.returncode == 1, said
    assert "differs from its RECORD in ascendpatch/errors.py" in said and "fix:" in said
    assert not list(house.glob("*.whl"))


def _members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {n: archive.read(n) for n in archive.namelist() if not n.endswith("/RECORD")}


@pytest.mark.integration
def test_bundle_from_the_installed_copy_repacks_the_same_wheel(tmp_path: Path) -> None:
    """install.sh installs the checkout into a venv of its own (pip install <checkout>)."""
    tool = wheels.make_venv(tmp_path / "tool")
    wheels.pip_install(tool, str(REPO))
    house = tmp_path / "house"
    made = subprocess.run([str(tmp_path / "tool/bin/ascendpatch"), "bundle", str(house)],
                          capture_output=True, text=True, check=False, cwd=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    (repacked,) = house.glob("ascendpatch-*.whl")
    reference = tmp_path / "reference"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w",
                    str(reference), str(REPO)], check=True)
    (built,) = reference.glob("ascendpatch-*.whl")
    assert repacked.name == built.name
    assert _members(repacked) == _members(built)  # the catalog (_bundled) included
    # and it installs on a host with no index, where the catalog is there
    fresh = wheels.make_venv(tmp_path / "fresh")
    wheels.pip_install(fresh, "--no-index", "--find-links", str(house), "ascendpatch")
    listed = subprocess.run([str(tmp_path / "fresh/bin/ascendpatch"), "manifests"],
                            capture_output=True, text=True, check=False, cwd=tmp_path)
    assert listed.returncode == 0 and "[OK] vllm-ascend-0.18.0" in listed.stdout
