"""``ascendpatch bundle DIR [--platform TAG --python-version X.Y]``: a wheelhouse for
air-gapped hosts (run on a connected machine).

It holds ascendpatch itself, its dependencies and pip-tools, so that
``bash install.sh --wheelhouse DIR`` and ``ascendpatch lock --offline`` work with no index,
and uv (``ascendpatch[fast]``, the fast resolver) when this tool's own environment has it.
Air-gapped NPU hosts are often aarch64 (Kunpeng): ``--platform manylinux2014_aarch64
--python-version 3.11`` has pip download the wheels of that platform (``--only-binary :all:``:
nothing can be built for another machine).

ascendpatch's own wheel is built from the source checkout, or, from the copy install.sh
installs (no checkout), packed again from the installed files its RECORD lists: the same
files, the catalog included, each checked against the RECORD's hash first (a local edit is
refused, never packed and shipped to the nodes with a fresh RECORD that would vouch for it).
"""

from __future__ import annotations

import importlib.metadata
import io
import re
import tempfile
import zipfile
from argparse import ArgumentParser, Namespace
from pathlib import Path

from ascendpatch import catalog
from ascendpatch.env import pipadapter
from ascendpatch.env.pipadapter import PipError
from ascendpatch.errors import InvalidInputError, RefusedError
from ascendpatch.hashing import record_text, record_to_hex, sha256_bytes
from ascendpatch.results import CheckResult, CommandResult, Hint, Level, Phrase
from ascendpatch.shell import cliargs
from ascendpatch.store import atomic

TOOLS = ("pip-tools", "pip", "setuptools", "wheel")
_PLATFORM = re.compile(r"^[a-z0-9_]+$")
_PY_VERSION = re.compile(r"^3(\.\d{1,2})?$|^3\d{1,2}$")
_SKIP_INSTALLED = ("INSTALLER", "REQUESTED", "RECORD", "direct_url.json")


def source_tree() -> Path | None:
    root = catalog.data_root()
    return root if (root / "pyproject.toml").is_file() and (root / "ascendpatch").is_dir() \
        else None


def repack_installed(folder: Path) -> Path:
    """ascendpatch's wheel again, from the installed distribution (install.sh's copy)."""
    try:
        dist = importlib.metadata.distribution("ascendpatch")
    except importlib.metadata.PackageNotFoundError:
        raise InvalidInputError("ascendpatch is neither a source checkout nor an installed "
                                "distribution", fix=Phrase("run '", Hint(("bundle",)),
                                                           "' from a git checkout or from "
                                                           "install.sh's venv")) from None
    dist_info = f"ascendpatch-{dist.version}.dist-info"
    contents: dict[str, bytes] = {}
    edited: list[str] = []
    for item in dist.files or []:
        rel = item.as_posix()
        if rel.startswith("..") or "__pycache__" in item.parts or rel.endswith(".pyc"):
            continue  # console scripts are made again from entry_points.txt by the installer
        if rel.startswith(f"{dist_info}/") and item.name in _SKIP_INSTALLED:
            continue
        data = Path(str(dist.locate_file(item))).read_bytes()
        if not _as_recorded(item, data):
            edited.append(rel)
        contents[rel] = data
    if edited:
        raise RefusedError(f"the installed ascendpatch differs from its RECORD in "
                           f"{', '.join(edited)}: a wheel packed from it would carry those "
                           "edits to every node and pass their audit; nothing was written",
                           fix="reinstall it (bash install.sh) or bundle from a checkout")
    if f"{dist_info}/WHEEL" not in contents or f"{dist_info}/METADATA" not in contents:
        raise InvalidInputError(f"the installed ascendpatch ({dist_info}) lacks its WHEEL or "
                                "METADATA file and cannot be packed again",
                                fix="reinstall it (bash install.sh) or bundle from a checkout")
    record = f"{dist_info}/RECORD"
    contents[record] = record_text(contents, record).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for rel, payload in contents.items():
            archive.writestr(rel, payload)
    out = folder / f"ascendpatch-{dist.version}-py3-none-any.whl"
    atomic.write_atomic(out, buffer.getvalue(), mode=0o644)
    return out


def _as_recorded(item: importlib.metadata.PackagePath, data: bytes) -> bool:
    """Whether ``data`` is what the installer wrote: the RECORD's sha256 and size. A file the
    RECORD lists without a hash (or with another algorithm) cannot be vouched for."""
    expected = record_to_hex(f"{item.hash.mode}={item.hash.value}") if item.hash else None
    if expected is None or (item.size is not None and item.size != len(data)):
        return False
    return sha256_bytes(data) == expected


def own_wheel(folder: Path) -> Path:
    tree = source_tree()
    if tree is None:
        return repack_installed(folder)
    with tempfile.TemporaryDirectory() as tmp:
        proc = pipadapter.run_pip(["wheel", "--quiet", "--disable-pip-version-check",
                                   "--no-deps", "-w", tmp, str(tree)])
        if proc.returncode != 0:
            raise PipError(f"pip wheel {tree} failed: {pipadapter.explain(proc.stderr)}")
        (built,) = Path(tmp).glob("ascendpatch-*.whl")
        out = folder / built.name
        atomic.write_atomic(out, built.read_bytes(), mode=0o644)
    return out


def _target_args(platform: str | None, python_version: str | None) -> list[str]:
    if platform is None and python_version is None:
        return []
    if platform is not None and not _PLATFORM.match(platform):
        raise InvalidInputError(f"--platform {platform!r} is not a wheel platform tag "
                                "(e.g. manylinux2014_aarch64)")
    if python_version is not None and not _PY_VERSION.match(python_version):
        raise InvalidInputError(f"--python-version {python_version!r} is not a Python version "
                                "(e.g. 3.11)")
    args = ["--only-binary", ":all:"]  # nothing can be built for another machine
    if platform is not None:
        args += ["--platform", platform]
    if python_version is not None:
        args += ["--python-version", python_version]
    return args


def _fast() -> list[str]:
    """uv at this environment's version, when ascendpatch[fast] is installed here."""
    try:
        return [f"uv=={importlib.metadata.version('uv')}"]
    except importlib.metadata.PackageNotFoundError:
        return []


def run(folder: Path, platform: str | None = None,
        python_version: str | None = None) -> CommandResult:
    target = _target_args(platform, python_version)  # bad input: exit 2, nothing made
    folder.mkdir(parents=True, exist_ok=True)
    own = own_wheel(folder)
    proc = pipadapter.run_pip(["download", "--disable-pip-version-check", "-d", str(folder),
                               *target, str(own), *TOOLS, *_fast()])
    if proc.returncode != 0:
        raise PipError(f"pip download failed: {pipadapter.explain(proc.stdout + proc.stderr)}",
                       fix="check the platform tag and the Python version (pip needs a wheel "
                           "of every dependency for that platform)")
    wheels = sorted(p.name for p in folder.glob("*.whl"))
    where = f" for {platform or 'this platform'}, Python {python_version or 'of this tool'}" \
        if target else ""
    text = (f"wheelhouse {folder}{where}: {len(wheels)} wheels (ascendpatch, its "
            f"dependencies, pip-tools{', uv' if _fast() else ''})")
    return CommandResult("bundle", (CheckResult("bundle", "bundle", Level.OK, text,
                                                data={"wheels": wheels}),))


def from_args(args: Namespace) -> CommandResult:
    return run(args.folder, args.platform, args.python_version)


def configure(p: ArgumentParser) -> None:
    cliargs.folder(p)
    p.add_argument("--platform", metavar="TAG",
                   help="wheels for another platform, e.g. manylinux2014_aarch64 (binary only)")
    p.add_argument("--python-version", metavar="X.Y",
                   help="wheels for another Python version, e.g. 3.11 (binary only)")


COMMAND = cliargs.CommandSpec(
    name="bundle",
    help="build a wheelhouse of ascendpatch for offline hosts",
    description=("Build a wheelhouse (ascendpatch, its dependencies, pip-tools) for air-gapped "
                 "hosts; install there with: bash install.sh --wheelhouse DIR."),
    example="ascendpatch bundle ./wheels",
    run=from_args, configure=configure,
)
