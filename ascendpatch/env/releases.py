"""Files of a released distribution, without installing it: from a wheelhouse, the cache, a
wheel that `pip download --no-deps` fetches, or the sdist that pip's own finder and session
fetch without building it (env/pipindex; vllm-ascend sdists cannot have their metadata built
without CANN). Every index access goes through this tool's pip, with pip's configuration;
--offline never leaves the wheelhouse. Also the one list of the vllm-ascend releases the
catalog was checked against (``data/releases.yaml``), which the maintainer tools, the tests
and the README's matrix read."""

from __future__ import annotations

import contextlib
import hashlib
import io
import lzma
import tarfile
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import yaml
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ascendpatch import cachedir, catalog
from ascendpatch.env import pipadapter, pipindex
from ascendpatch.env.pipadapter import Source
from ascendpatch.env.pipindex import ReleaseError as ReleaseError  # defined beside the index
from ascendpatch.store import atomic


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


def versions_on_index(name: str, source: Source, *, sdists: bool = True) -> list[str]:
    """Every release of ``name`` with a wheel (and, with ``sdists``, sdist-only ones too): in
    the wheelhouse with --offline, else those pip finds (a wheel: one for this interpreter);
    ReleaseError when there is none."""
    if source.offline:
        assert source.wheelhouse is not None
        folder = source.wheelhouse
        names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
        return [str(v) for v in versions_in(name, names, sdists=sdists)]
    found = pipindex.versions(name, sdists=sdists)
    if not found:
        raise ReleaseError(f"no release of {name} on {pipindex.where()}", fix=pipindex.FIX)
    return [str(v) for v in found]


def download_sdist(name: str, version: str, folder: Path) -> Path | None:
    """The sdist of ``name==version`` from pip's indexes, checked against the sha256 the index
    publishes and read through once before it is written (atomically) into ``folder``; None
    when the index has none."""
    fetched = pipindex.sdist(name, version, DOWNLOAD_CAP)
    if fetched is None or not _is_release(fetched.filename, name, version):
        return None
    if len(fetched.data) > DOWNLOAD_CAP:
        raise ReleaseError(f"{fetched.filename} on {fetched.where} is larger than "
                           f"{DOWNLOAD_CAP >> 20} MiB; not downloaded",
                           fix="use --wheelhouse DIR holding it (and --offline)")
    if fetched.sha256 and hashlib.sha256(fetched.data).hexdigest() != fetched.sha256:
        raise ReleaseError(f"{fetched.filename} from {fetched.where}: sha256 differs from the "
                           f"index's; not kept",
                           fix="try again later, or use --wheelhouse DIR holding it")
    _scan(io.BytesIO(fetched.data), fetched.filename, fetched.where)  # never cached when bad
    path = folder / fetched.filename
    atomic.write_atomic(path, fetched.data, mode=0o644)
    return path


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
        raise ReleaseError(f"no wheel or sdist of {name} {version} on {pipindex.where()}",
                           fix=pipindex.FIX)
    return sdist


class ArchiveError(ReleaseError):
    """A release archive that cannot be read within the bounds (corrupt, truncated, too big)."""


# What is read out of a release archive: no source file comes near these.
MEMBER_CAP = 256 << 20  # bytes of one member read into memory (vllm's largest .so: 181 MiB)
SCAN_CAP = 2 << 30  # bytes of a tar stream passed over while looking for a member
MEMBERS_CAP = 100_000  # entries of one archive
DOWNLOAD_CAP = 1 << 30  # bytes of one download
_BROKEN = (tarfile.TarError, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error,
           lzma.LZMAError, OSError, ValueError, NotImplementedError, RuntimeError)


def _why(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _bad(path: Path, why: str) -> ArchiveError:
    """The error for a release archive that cannot be read; one in the release cache is
    removed first, so that the next run downloads it afresh."""
    if path.parent.absolute() == (catalog.cache_dir() / "releases").absolute():
        with contextlib.suppress(OSError):
            path.unlink()
        return ArchiveError(f"{path} is not a readable release archive ({why}); removed it "
                            f"from the cache", fix="run the command again to download it afresh")
    return ArchiveError(f"{path} is not a readable release archive ({why})",
                        fix="replace it with the file the index publishes")


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[None]:
    """Whatever reading ``path`` raises becomes one ArchiveError naming it (see _bad)."""
    try:
        yield
    except ArchiveError as exc:
        raise _bad(path, exc.message) from None
    except _BROKEN as exc:
        raise _bad(path, _why(exc)) from None


def _tar_entries(tf: tarfile.TarFile, name: str) -> Iterator[tarfile.TarInfo]:
    """The archive's entries, each header read once; raises before passing over an entry
    that would take the stream past SCAN_CAP (a skip decompresses what it skips)."""
    count = 0
    while (info := tf.next()) is not None:
        count += 1
        if count > MEMBERS_CAP or info.offset_data + info.size > SCAN_CAP:
            raise ArchiveError(f"{name} holds more than {MEMBERS_CAP} entries or "
                               f"{SCAN_CAP >> 30} GiB")
        yield info


def _bounded(size: int, name: str) -> int:
    if size > MEMBER_CAP:
        raise ArchiveError(f"{name} claims {size} bytes, more than the {MEMBER_CAP >> 20} MiB "
                           f"ascendpatch reads of one file")
    return size


def _tar_member(tf: tarfile.TarFile, member: str, label: str) -> bytes | None:
    root = None
    for info in _tar_entries(tf, label):
        root = root or info.name.split("/")[0]
        if info.name == f"{root}/{member}":
            handle = tf.extractfile(info) if info.isreg() else None
            return handle.read(_bounded(info.size, member)) if handle else None
    return None


def _zip_member(zf: zipfile.ZipFile, member: str) -> bytes | None:
    if len(zf.infolist()) > MEMBERS_CAP:
        raise ArchiveError(f"more than {MEMBERS_CAP} entries")
    try:
        info = zf.getinfo(member)
    except KeyError:
        return None
    with zf.open(info) as handle:
        return handle.read(_bounded(info.file_size, member))


def _scan(data: io.BytesIO, name: str, where: str) -> None:
    """Every header of an sdist read once (which reads all of its compressed stream)."""
    try:
        with tarfile.open(fileobj=data, mode="r:gz") as tf:
            for _ in _tar_entries(tf, name):
                pass
    except _BROKEN as exc:
        raise ArchiveError(f"{name} from {where} is not a readable sdist ({_why(exc)})",
                           fix="try again later, or use --wheelhouse DIR holding it") from None


def read_member(path: Path, member: str) -> bytes | None:
    """A file of the release, by its path inside the installed package (None if absent).
    Bounded (MEMBER_CAP, SCAN_CAP, MEMBERS_CAP); an archive that cannot be read is
    ArchiveError, naming it (and removed from the release cache)."""
    with _reading(path):
        if path.suffix == ".whl":
            with zipfile.ZipFile(path) as zf:
                return _zip_member(zf, member)
        with tarfile.open(path, "r:gz") as tf:
            return _tar_member(tf, member, path.name)


def wheel_files(path: Path, members: Iterable[str]) -> dict[str, bytes]:
    """These files of a wheel (those it holds), within MEMBER_CAP each."""
    with _reading(path), zipfile.ZipFile(path) as zf:
        found = {rel: _zip_member(zf, rel) for rel in members}
    return {rel: data for rel, data in found.items() if data is not None}
