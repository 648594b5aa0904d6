"""Snapshots: a versioned JSON record of an environment, and the comparison of two of them."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ascendpatch import __version__
from ascendpatch.env.target import Distribution, Target
from ascendpatch.errors import InvalidInputError
from ascendpatch.inspect.audit import StatCache, hash_files
from ascendpatch.manifest.model import Manifest
from ascendpatch.paths import NotRegularFileError, read_regular, shown
from ascendpatch.results import ArtifactResult, Hint, Phrase
from ascendpatch.untrusted import NotJsonError, Shape, UntrustedDocumentError, load_json

SNAPSHOT_KIND = "ascendpatch-snapshot"
SNAPSHOT_FORMAT = 1


def _read(dist: Distribution, name: str) -> str | None:
    try:
        return (dist.metadata_dir / name).read_text(encoding="utf-8").strip()
    except OSError:
        return None


def describe_distribution(dist: Distribution) -> dict[str, Any]:
    direct = _read(dist, "direct_url.json")
    return {"name": dist.display_name, "version": dist.version,
            "installer": _read(dist, "INSTALLER"),
            "requested": (dist.metadata_dir / "REQUESTED").exists(),
            "direct_url": json.loads(direct) if direct else None}


def tracked(manifest: Manifest, target: Target, all_files: bool) -> list[Distribution]:
    if all_files:
        return list(target.distributions.values())
    names = {canonicalize_name(p.name) for p in manifest.stack.packages}
    names |= {canonicalize_name(n) for n in manifest.protected}
    names |= {canonicalize_name(a.distribution) for a in manifest.artifacts if a.distribution}
    return [d for d in target.distributions.values() if d.name in names]


def file_key(target: Target, path: Path) -> str:
    """How a snapshot names a file: relative to the target's root, else its absolute path."""
    return path.relative_to(target.root).as_posix() if path.is_relative_to(target.root) \
        else str(path)


@dataclass
class ArtifactRecord:
    """What a snapshot says of the artifacts: each one's status and the files it acts on
    (named as ``files`` names them)."""

    states: dict[str, str] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)

    def add(self, target: Target, item: ArtifactResult, folder: Path | None) -> None:
        self.states[item.id] = item.status.value
        if folder is not None:
            self.files[item.id] = sorted(file_key(target, folder / f.path) for f in item.files)


def take(target: Target, manifest: Manifest, artifacts: ArtifactRecord,
         all_files: bool = False) -> dict[str, Any]:
    items = []
    for dist in tracked(manifest, target, all_files):
        for rel, rec in dist.record.items():
            if rec.sha256 is None:  # RECORD itself and .pyc files: they churn, not state
                continue
            path = dist.location / rel
            items.append((file_key(target, path), str(path), rec.size))
    cache = StatCache(target.root)
    files, sizes = hash_files(items, cache, 2)
    cache.save()
    return {
        "kind": SNAPSHOT_KIND, "format": SNAPSHOT_FORMAT,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tool": f"ascendpatch {__version__}", "manifest": manifest.name,
        "target": {"python": str(target.python) if target.python else None,
                   "python_version": target.python_version, "prefix": target.prefix,
                   "site_packages": [str(p) for p in target.site_packages]},
        "distributions": {d.name: describe_distribution(d)
                          for d in sorted(target.distributions.values(), key=lambda d: d.name)},
        "artifacts": artifacts.states,
        "artifact_files": artifacts.files,
        "files": dict(sorted(files.items())),
        "sizes": dict(sorted(sizes.items())),  # so that diff can say S.5 as audit does
        "all_files": all_files,
    }


@dataclass(frozen=True)
class Wording:
    """How a reader of snapshots words the ways a file is none: each is part of that command's
    output (diff and audit --baseline fail with a fix; fleet lists the hosts it skipped).
    Fields: ``{path}``, ``{exc}``, ``{found}`` (the document's format), ``{wanted}``,
    ``{problem}`` (where the document does not fit the schema, and how)."""

    unreadable: str
    not_json: str
    foreign: str
    other_format: str
    invalid: str
    fix: str | None = None


READ_FIX = Phrase("create one with '", Hint(("snapshot", "-o", "FILE")), "'")
DIFF_WORDING = Wording(unreadable="snapshot {path} cannot be read ({exc})",
                       not_json="{path} is not an ascendpatch snapshot (not JSON)",
                       foreign="{path} is not an ascendpatch snapshot",
                       other_format="snapshot {path} has format {found}; this ascendpatch "
                                    "reads format {wanted}",
                       invalid="snapshot {path} is not valid: {problem}", fix=READ_FIX)
MAX_BYTES = 64 << 20  # an --all-files snapshot of a 20,000-file image is about 3 MB
SHAPE = Shape.from_data("snapshot.schema.json")


def load(path: Path, wording: Wording = DIFF_WORDING) -> dict[str, Any]:
    """The snapshot document in ``path``, checked to be one of the format this version reads
    and to fit ``ascendpatch/data/snapshot.schema.json``: the one reader of snapshot files
    (diff, audit --baseline, fleet), which come from other hosts. A FIFO or device, a file of
    more than MAX_BYTES, JSON nested deeper than untrusted.MAX_DEPTH or of another shape is
    refused with one InvalidInputError, worded by the command."""
    name = shown(path)
    try:
        text = read_regular(path, MAX_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError, NotRegularFileError) as exc:
        raise InvalidInputError(wording.unreadable.format(path=name, exc=exc)) from None
    try:
        doc = load_json(text, name)
    except NotJsonError as exc:
        raise InvalidInputError(wording.not_json.format(path=name, exc=exc.detail),
                                fix=wording.fix) from None
    except UntrustedDocumentError as exc:
        raise InvalidInputError(str(exc), fix=wording.fix) from None
    if not isinstance(doc, dict) or doc.get("kind") != SNAPSHOT_KIND:
        raise InvalidInputError(wording.foreign.format(path=name), fix=wording.fix)
    if doc.get("format") != SNAPSHOT_FORMAT:
        raise InvalidInputError(wording.other_format.format(
            path=name, found=repr(doc.get("format"))[:40], wanted=SNAPSHOT_FORMAT))
    problem = SHAPE.problem(doc)
    if problem is not None:
        raise InvalidInputError(wording.invalid.format(path=name, problem=problem),
                                fix=wording.fix)
    return doc


def _order(old: str, new: str) -> str:
    try:
        return "upgraded" if Version(new) > Version(old) else "downgraded"
    except InvalidVersion:
        return "changed"


def package_changes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(change, package, text) for packages added, removed, upgraded or downgraded."""
    changes = []
    for name in sorted(set(old) | set(new)):
        if name not in new:
            changes.append(("removed", name, f"{name} {old[name]['version']} removed"))
        elif name not in old:
            changes.append(("added", name, f"{name} {new[name]['version']} added"))
        elif old[name]["version"] != new[name]["version"]:
            kind = _order(old[name]["version"], new[name]["version"])
            changes.append((kind, name, f"{name} {kind}: {old[name]['version']} -> "
                                        f"{new[name]['version']}"))
    return changes


def file_changes(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[tuple[str, str]], int]:
    """(code, path) for files that differ, with the codes `audit` uses ("S.5", "..5",
    "missing", "added"), and how many files were left out because only one side recorded them.

    A default snapshot records the manifest's distributions, an ``--all-files`` one every
    distribution: only what both recorded is compared. A file that the narrower snapshot has
    and the ``--all-files`` one lacks is really gone (or new); a file only the ``--all-files``
    one has was simply not recorded by the other, and is counted, not reported."""
    files_a, files_b = old["files"], new["files"]
    sizes_a, sizes_b = old.get("sizes", {}), new.get("sizes", {})
    wide_a, wide_b = bool(old.get("all_files")), bool(new.get("all_files"))
    changes: list[tuple[str, str]] = []
    skipped = 0
    for rel in sorted(set(files_a) | set(files_b)):
        if rel not in files_b:
            if wide_a and not wide_b:
                skipped += 1
            else:
                changes.append(("missing", rel))
        elif rel not in files_a:
            if wide_b and not wide_a:
                skipped += 1
            else:
                changes.append(("added", rel))
        elif files_a[rel] != files_b[rel]:
            size_a, size_b = sizes_a.get(rel), sizes_b.get(rel)
            sized = size_a is not None and size_b is not None and size_a != size_b
            changes.append(("S.5" if sized else "..5", rel))
    return changes, skipped
