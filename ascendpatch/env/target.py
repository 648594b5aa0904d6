"""The target environment: an interpreter (inspected in one subprocess) or a bare site-packages.

Facts come from the stdlib-only ``_introspect`` script run *in* the target interpreter, so the
tool's own Python never has to match the target's. A ``--site-packages`` target is read
directly with ``importlib.metadata`` and needs no interpreter at all.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache, cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ascendpatch.env import inscript, introspection
from ascendpatch.errors import AscendpatchError, TargetError
from ascendpatch.hashing import record_to_hex
from ascendpatch.paths import NotRegularFileError, describe_mode, read_regular

if TYPE_CHECKING:
    from importlib import metadata

    from packaging.specifiers import SpecifierSet
    from packaging.version import Version


class RecordEntry(NamedTuple):  # a tuple: audits build ~20k of these
    hash: str | None  # as RECORD writes it: "sha256=<urlsafe b64>"; None for .pyc and RECORD
    size: int | None

    @property
    def sha256(self) -> str | None:
        """The hex digest (what sha256sum prints), converted on demand."""
        return record_to_hex(self.hash) if self.hash else None


Row = tuple[str, str | None, int | None]  # path, "sha256=..." or None, size


MAX_RECORD_BYTES = 64 << 20  # torch's RECORD, the largest known, is about 1 MB


def read_record(metadata_dir: Path | str) -> list[Row]:
    """A RECORD's rows (for Distribution.record and the audit), in one tight loop: a plain row
    is split from the right (hash and size never contain commas); only quoted rows go to csv.

    RECORD is the target's, not ours: this never raises and never waits. A RECORD that is
    missing, not a regular file (a FIFO would hang the audit) or over MAX_RECORD_BYTES has no
    rows; bytes that are not UTF-8 are kept as ``os.fsdecode`` keeps them (so the path still
    names its file); a row csv cannot read, or whose path holds a NUL, is skipped; a size that
    is not ASCII digits is no size."""
    try:
        data = read_regular(f"{metadata_dir}/RECORD", MAX_RECORD_BYTES)
    except (OSError, NotRegularFileError):
        return []
    rows: list[Row] = []
    for line in data.decode("utf-8", "surrogateescape").splitlines():
        fields = _quoted(line) if '"' in line else line.rsplit(",", 2)
        if not fields or not fields[0] or "\0" in fields[0]:
            continue
        digest = fields[1] if len(fields) > 1 and fields[1].startswith("sha256=") else None
        sized = len(fields) > 2 and fields[2].isascii() and fields[2].isdigit()
        rows.append((fields[0], digest, int(fields[2]) if sized else None))
    return rows


def record_problem(metadata_dir: Path | str) -> str | None:
    """Why a RECORD that is there gives no rows (read_record): not a regular file, or over
    MAX_RECORD_BYTES; None when it is readable, or not there at all."""
    try:
        info = (Path(metadata_dir) / "RECORD").stat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return f"its RECORD is {describe_mode(info.st_mode)}, not a regular file"
    if info.st_size > MAX_RECORD_BYTES:
        return f"its RECORD is larger than {MAX_RECORD_BYTES >> 20} MiB"
    return None


def _quoted(line: str) -> list[str]:
    import csv  # only a quoted row (a path with a comma) needs it

    try:
        return next(csv.reader([line]), [])
    except csv.Error:  # (a NUL, say)
        return []


@dataclass(frozen=True)
class Distribution:
    name: str  # canonical (PEP 503) name
    display_name: str
    version: str
    metadata_dir: Path

    @property
    def location(self) -> Path:
        """The folder RECORD paths are relative to (usually site-packages)."""
        return self.metadata_dir.parent

    @cached_property
    def parsed_version(self) -> Version | None:
        from packaging.version import InvalidVersion, Version

        try:
            return Version(self.version)
        except InvalidVersion:
            return None

    def satisfies(self, specifier: SpecifierSet | str) -> bool:
        """PEP 440 containment, admitting pre-releases and local labels (2.10.0+cpu)."""
        from packaging.specifiers import SpecifierSet

        spec = SpecifierSet(specifier) if isinstance(specifier, str) else specifier
        version = self.parsed_version
        return version is not None and spec.contains(version, prereleases=True)

    @cached_property
    def record(self) -> dict[str, RecordEntry]:
        """RECORD entries keyed by path relative to ``location`` (empty when there is none)."""
        return {rel: RecordEntry(digest, size)
                for rel, digest, size in read_record(self.metadata_dir)}

    @cached_property
    def metadata(self) -> metadata.PackageMetadata:
        """METADATA's headers (Name, Version, Requires-Dist, ...), as ``importlib.metadata``
        reads them; the long description after them is never parsed. See :func:`headers`."""
        return headers(self.metadata_dir)


MAX_METADATA_BYTES = 16 << 20  # torch's METADATA, among the largest, is about 50 kB


def headers(metadata_dir: Path | str) -> metadata.PackageMetadata:
    """The headers of a distribution's METADATA (Name, Version, Requires-Dist, ...), exactly as
    ``importlib.metadata.PathDistribution(metadata_dir).metadata`` holds them, from the text
    before the first blank line only: a verify of 300 distributions parsed 100 kB of long
    descriptions for the 684 ``Requires-Dist`` lines it needed.

    importlib itself reads them (its METADATA / PKG-INFO fallbacks, its email parser and its
    adapter), from a distribution (:func:`_head_only`) whose files end at that blank line: the
    parser reads line by line and the headers end at the first line that is not a header, at
    the latest that blank line, which the cut keeps. What is lost is the body
    (``Description``). The file is the target's, so untrusted: a FIFO, a file over
    MAX_METADATA_BYTES or one that cannot be read counts as absent (importlib would hang on
    the FIFO and read the huge file whole), bytes that are not UTF-8 are replaced."""
    return _head_only()(Path(metadata_dir)).metadata


@cache
def _head_only() -> type[metadata.PathDistribution]:
    """A PathDistribution whose files end at their first blank line (defined on first use:
    importlib.metadata is not imported at start-up, a --python audit never needs it)."""
    from importlib import metadata

    class HeadOnly(metadata.PathDistribution):
        def read_text(self, filename: str | os.PathLike[str]) -> str | None:
            folder = str(self._path)
            try:
                data = read_regular(f"{folder}/{os.fspath(filename)}" if filename else folder,
                                    MAX_METADATA_BYTES)
            except (OSError, NotRegularFileError):
                return None
            return head(data.decode("utf-8", "replace"))

    return HeadOnly


def head(text: str) -> str:
    """``text`` read as importlib reads it (``read_text``: universal newlines, so every line
    ends in "\n"), up to and including its first blank line; all of it when there is none."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    cut = text.find("\n\n")
    return text if cut < 0 else text[:cut + 2]


@dataclass(frozen=True)
class Target:
    site_packages: tuple[Path, ...]
    distributions: dict[str, Distribution] = field(repr=False)
    python: Path | None = None
    python_version: str | None = None
    prefix: str | None = None
    markers: dict[str, str] | None = None  # PEP 508 environment of the target interpreter

    @property
    def root(self) -> Path:
        """Where ascendpatch keeps its state: the first site-packages folder."""
        return self.site_packages[0]

    def get(self, name: str) -> Distribution | None:
        return self.distributions.get(canonical_name(name))

    def describe(self) -> str:
        if self.python is not None:
            return f"{inscript.brief(self.python)} (Python {self.python_version})"
        return f"site-packages {self.root}"


def canonical_name(name: str) -> str:
    """A distribution's PEP 503 name: ``re.sub(r"[-_.]+", "-", name).lower()``, as
    ``packaging.utils.canonicalize_name`` computes it (tests/test_target.py compares them).
    Not packaging's own here: ``packaging.utils`` imports ``packaging.tags`` (platform,
    subprocess, logging, sysconfig), 12 ms of every audit's start-up, for one line."""
    value = name.lower().replace("_", "-").replace(".", "-")
    while "--" in value:
        value = value.replace("--", "-")
    return value


def _distribution(name: str, version: str, path: str) -> Distribution:
    return Distribution(canonical_name(name), name, version, Path(path))


def _index(dists: Iterable[Distribution]) -> dict[str, Distribution]:
    index: dict[str, Distribution] = {}
    for dist in dists:
        index.setdefault(dist.name, dist)
    return index


def from_python(python: Path) -> Target:
    """Inspect a target interpreter with one subprocess; never imports the NPU stack."""
    return start_python(python)()


def start_python(python: Path) -> Callable[[], Target]:
    """Start inspecting ``python`` (env/introspection) and return at once; calling the result
    waits for the Target. The caller loads what it needs meanwhile: the target interpreter's
    start-up (tens of milliseconds) is then off its critical path. Nothing runs in the target
    when the cached report still holds."""
    started = introspection.start(python)
    return lambda: started.make(partial(_target_from_report, python))


def answered(started: introspection.Started) -> Target | None:
    """The target an introspection answered from its cached report (introspection.answered)
    makes, without waiting; None when that report is not readable."""
    try:
        return started.make(partial(_target_from_report, started.python))
    except AscendpatchError:
        return None  # (the command meets it again, and words it)


def _target_from_report(python: Path, info: dict[str, Any]) -> Target:
    """The Target the report describes; the report is the target interpreter's (anything its
    site runs may print it): every field of a wrong type is TargetError, worded."""
    try:
        sites = tuple(Path(_text(p)) for p in info["site_packages"])
        dists = [_distribution(_text(d["name"]), _text(d["version"]), _text(d["path"]))
                 for d in info["distributions"]]
        prefix = None if info.get("prefix") is None else _text(info["prefix"])
        markers = info.get("markers")
        if markers is not None:
            markers = {_text(key): _text(value) for key, value in dict(markers).items()}
        # (what the report's cache fingerprints: env/introcache.fingerprint stats each one)
        for folder in info.get("sys_path", []):
            _text(folder)
        if info.get("user_site") is not None:
            _text(info["user_site"])
    except (ValueError, KeyError, TypeError) as exc:
        raise TargetError(f"target interpreter {inscript.brief(python)} returned an unreadable "
                          f"report ({exc})") \
            from None
    if not sites:
        raise TargetError(f"target interpreter {inscript.brief(python)} has no site-packages "
                          "folder")
    return Target(sites, _index(dists), python=python,
                  python_version=str(info.get("python_version")), prefix=prefix,
                  markers=markers)


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    raise TypeError(f"expected a string, got {type(value).__name__}")


def from_site_packages(folder: Path) -> Target:
    """A target that is only a folder: an unpacked image, a mounted root."""
    from importlib import metadata

    if not folder.is_dir():
        raise TargetError(f"--site-packages {folder} is not a folder")
    dists = []
    for dist in metadata.distributions(path=[str(folder)]):
        path = getattr(dist, "_path", None)
        info = headers(path) if path is not None else None  # (dist.metadata: the whole file,
        name = info["Name"] if info else None                # parsed at every use)
        if info is None or not name:
            continue
        dists.append(_distribution(name, info["Version"], str(path)))
    return Target((folder,), _index(dists))
