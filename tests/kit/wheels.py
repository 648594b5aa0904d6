"""Real vllm-ascend artifacts from the index, cached outside the checkout.

Wheels come from ``pip download --no-deps``; sdist-only releases (whose metadata pip cannot
build without CANN) come through the product's own env/releases.download_sdist (pip's finder
and session, no build), checked against the sha256 the index publishes.
The cache lives in ``$ASCENDPATCH_TEST_CACHE`` (default ``~/.cache/ascendpatch-test``), read
once at import, before the test fixtures point HOME at a temp dir.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from ascendpatch.env.releases import download_sdist, known_releases, read_member
from ascendpatch.hashing import record_text
from tests.kit import cachefill

CACHE = Path(os.environ.get("ASCENDPATCH_TEST_CACHE",
                            Path.home() / ".cache" / "ascendpatch-test"))
WHEELS = CACHE / "wheels"
SAMPLER = "vllm_ascend/sample/sampler.py"

# The releases the catalog's sampler fix claims, and those it must leave alone (the one list:
# ascendpatch/data/releases.yaml). Sdist-only on the index: affected, and (0.30) fixed
# upstream, which the catalog decides by the sampler's content (no variant names them).
KNOWN = known_releases()
AFFECTED = [r.version for r in KNOWN if r.wheel and r.sampler_fix == "applies"]
UNAFFECTED = [r.version for r in KNOWN if r.wheel and r.sampler_fix == "not needed"]
SDIST_AFFECTED = [r.version for r in KNOWN if not r.wheel and r.sampler_fix == "applies"]
FIXED_UPSTREAM = [r.version for r in KNOWN if r.sampler_fix == "not needed (fixed upstream)"]
SDIST_ONLY = {r.version for r in KNOWN if not r.wheel}


def wheel(version: str) -> Path:
    return cachefill.downloaded(WHEELS, f"vllm_ascend-{version}-*.whl",
                                f"vllm-ascend=={version}")[0]


def wheel_member(version: str, member: str) -> bytes:
    with zipfile.ZipFile(wheel(version)) as archive:
        return archive.read(member)


def wheel_metadata(version: str) -> str:
    return wheel_member(version, f"vllm_ascend-{version}.dist-info/METADATA").decode()


def sdist(name: str, version: str) -> Path:
    """An sdist, straight from the index (no build), verified against the published sha256:
    the product's own download (env/releases.download_sdist), cached here."""
    folder = CACHE / "sdists"
    folder.mkdir(parents=True, exist_ok=True)
    cached = folder / f"{name.replace('-', '_')}-{version}.tar.gz"
    if cached.exists():
        return cached
    path = download_sdist(name, version, folder)  # written atomically: no torn file
    assert path is not None, f"no sdist of {name} {version} on the index"
    return path


def sdist_member(path: Path, member: str) -> bytes:
    data = read_member(path, member)
    assert data is not None, f"{path.name} has no {member}"
    return data


def install_from_sdist(path: Path, site: Path, version: str) -> None:
    """Lay out the sdist's pure-Python package as an installed distribution with a RECORD.

    This is no build (the C extensions need CANN): only what the patch engine touches.
    """
    listed: dict[str, bytes] = {}
    with tarfile.open(path) as archive:
        root = archive.getnames()[0].split("/")[0]
        for member in archive.getmembers():
            rel = member.name[len(root) + 1:]
            if not member.isfile() or not rel.startswith("vllm_ascend/"):
                continue
            handle = archive.extractfile(member)
            assert handle is not None
            data = handle.read()
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            (site / rel).write_bytes(data)
            listed[rel] = data
        pkg_info = archive.extractfile(f"{root}/PKG-INFO")
        assert pkg_info is not None
        metadata = pkg_info.read()
    dist_info = site / f"vllm_ascend-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_bytes(metadata)
    (dist_info / "INSTALLER").write_text("ascendpatch-tests (sdist layout, not built)\n")
    listed[f"{dist_info.name}/METADATA"] = metadata
    (dist_info / "RECORD").write_text(record_text(listed, f"{dist_info.name}/RECORD"))


def make_venv(root: Path) -> Path:
    """A real venv (without its own pip: the outer pip installs into it with --python)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return root / "bin" / "python"


def venv_with(root: Path, version: str) -> Path:
    """A real venv with the real vllm-ascend ``version`` wheel pip-installed --no-deps."""
    python = make_venv(root)
    pip_install(python, "--no-deps", str(wheel(version)))
    return python


def pip_install(python: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--disable-pip-version-check", *args], check=True)


def site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; "
                          "print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return Path(out)


def with_pip_tools(folder: Path) -> Path:
    """``folder`` with real pip-tools and what it needs (wheels from the index, downloaded once
    into the cache), so that ``lock --offline --wheelhouse folder`` can build its pip-compile."""
    import shutil

    cached = CACHE / "pip-tools"
    cachefill.downloaded(cached, "pip_tools-*.whl", "pip-tools", deps=True)
    shutil.copytree(cached, folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".*"))
    return folder
