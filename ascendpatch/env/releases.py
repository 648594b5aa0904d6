"""Files of a released distribution, without installing it: from a wheelhouse, the cache, a
wheel that `pip download --no-deps` fetches, or the sdist taken from the index's PEP 691 JSON
API (vllm-ascend sdists cannot have their metadata built without CANN, so pip cannot download
them). Honours $PIP_INDEX_URL; --offline never leaves the wheelhouse. Also the one list of the
vllm-ascend releases the catalog was checked against (``data/releases.yaml``), which the
maintainer tools, the tests and the README's matrix read."""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import yaml
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ascendpatch import cachedir, progress
from ascendpatch.env import pipadapter
from ascendpatch.env.pipadapter import Source
from ascendpatch.errors import AscendpatchError
from ascendpatch.store import atomic

SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"


class ReleaseError(AscendpatchError):
    """A release's files could not be had."""


@dataclass(frozen=True)
class KnownRelease:
    """One release of ``data/releases.yaml``: what the index holds of it and what
    ``catalog-check`` says of the sampler fix there."""

    version: str
    wheel: bool  # False: the index has only its sdist
    sampler_fix: str
    sampler_as: str | None = None  # its sampler.py is byte-identical to this release's


def known_releases(name: str = "vllm-ascend") -> list[KnownRelease]:
    """The releases of ``name`` the catalog was checked against, oldest first."""
    doc = yaml.safe_load(files("ascendpatch").joinpath("data/releases.yaml").read_text())
    return [KnownRelease(str(e["version"]), bool(e["wheel"]), str(e["sampler_fix"]),
                         e.get("sampler_as")) for e in doc[name]]


def index_url() -> str:
    return os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")


def release_of(filename: str, *, sdists: bool = True) -> tuple[str, Version] | None:
    """The (canonical name, version) a wheel's (or, with ``sdists``, an sdist's) file name
    gives; None for any other file or a name that does not parse."""
    try:
        if filename.endswith(".whl"):
            dist, ver, *_ = parse_wheel_filename(filename)
        elif sdists and filename.endswith(".tar.gz"):
            dist, ver = parse_sdist_filename(filename)
        else:
            return None
    except (ValueError, InvalidVersion):
        return None
    return str(canonicalize_name(dist)), ver


def versions_in(name: str, filenames: Iterable[str], *, sdists: bool = True) -> list[Version]:
    """The versions of ``name`` that these release files hold, sorted."""
    wanted = canonicalize_name(name)
    return sorted({found[1] for f in filenames
                   if (found := release_of(f, sdists=sdists)) and found[0] == wanted})


def _is_release(filename: str, name: str, version: str) -> bool:
    found = release_of(filename)
    return (found is not None and found[0] == canonicalize_name(name)
            and found[1] == Version(version))


def _archives(folder: Path, name: str, version: str) -> list[Path]:
    if not folder.is_dir():
        return []
    found = [path for path in folder.iterdir() if _is_release(path.name, name, version)]
    return sorted(found, key=lambda p: (p.suffix != ".whl", p.name))


def listing(name: str) -> list[dict[str, object]]:
    request = urllib.request.Request(f"{index_url()}/{canonicalize_name(name)}/",
                                     headers={"Accept": SIMPLE_JSON})
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            doc = json.load(resp)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ReleaseError(f"cannot list {name} on {index_url()}: {exc}",
                           fix="use --wheelhouse DIR (and --offline)") from None
    files = doc.get("files", [])
    assert isinstance(files, list)
    return files


def versions_on_index(name: str, source: Source, *, sdists: bool = True) -> list[str]:
    """Every release of ``name`` with a wheel (and, with ``sdists``, sdist-only ones too)."""
    if source.offline:
        assert source.wheelhouse is not None
        folder = source.wheelhouse
        names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    else:
        names = [str(f["filename"]) for f in listing(name)]
    return [str(v) for v in versions_in(name, names, sdists=sdists)]


def download_sdist(name: str, version: str, folder: Path) -> Path | None:
    for entry in listing(name):
        filename = str(entry["filename"])
        if not filename.endswith(".tar.gz"):
            continue
        if not _is_release(filename, name, version):
            continue
        url = urllib.parse.urljoin(f"{index_url()}/{canonicalize_name(name)}/",
                                   str(entry["url"]))
        try:
            with progress.task(f"downloading {filename}"), \
                    urllib.request.urlopen(url, timeout=600) as resp:
                data = resp.read()
        except (urllib.error.URLError, OSError) as exc:
            raise ReleaseError(f"cannot download {filename} from {index_url()}: {exc}",
                               fix="use --wheelhouse DIR holding it (and --offline)") from None
        hashes = entry.get("hashes")
        expected = hashes.get("sha256") if isinstance(hashes, dict) else None
        if expected and hashlib.sha256(data).hexdigest() != expected:
            raise ReleaseError(f"{filename}: sha256 differs from the index's")
        path = folder / filename
        atomic.write_atomic(path, data, mode=0o644)
        return path
    return None


def archive(name: str, version: str, source: Source) -> Path:
    """A wheel (preferred) or sdist of ``name==version``: from the wheelhouse, else the cache
    (when it passes cachedir's check), else downloaded."""
    if source.wheelhouse is not None and (found := _archives(source.wheelhouse, name, version)):
        return found[0]
    cache = cachedir.folder("releases", only_source=source.offline)
    if found := _archives(cache, name, version):
        return found[0]
    if source.offline:
        raise ReleaseError(f"{name} {version} is not in the wheelhouse {source.wheelhouse}",
                           fix="add its wheel or sdist there, or drop --offline")
    proc = pipadapter.run_pip(["download", "--no-deps", "--only-binary", ":all:", "--quiet",
                               "-d", str(cache), f"{name}=={version}"])
    if proc.returncode == 0 and (found := _archives(cache, name, version)):
        return found[0]
    sdist = download_sdist(name, version, cache)
    if sdist is None:
        raise ReleaseError(f"no wheel or sdist of {name} {version} on {index_url()}")
    return sdist


def read_member(path: Path, member: str) -> bytes | None:
    """A file of the release, by its path inside the installed package (None if absent)."""
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as zf:
            try:
                return zf.read(member)
            except KeyError:
                return None
    with tarfile.open(path) as tf:
        root = tf.getnames()[0].split("/")[0]
        try:
            handle = tf.extractfile(f"{root}/{member}")
        except KeyError:
            return None
        return handle.read() if handle else None


def wheel_files(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist() if not n.endswith("/")}

