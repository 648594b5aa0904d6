"""Load manifests: safe YAML, then validation (every problem at once: :mod:`validate`),
``extends:``, bundled names."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ascendpatch import catalog
from ascendpatch.errors import InvalidInputError, ManifestError
from ascendpatch.manifest import parsed, validate
from ascendpatch.manifest.model import (
    Artifact,
    FileHashes,
    Manifest,
    PackagePin,
    Stack,
    Variant,
    resolve_path,
)
from ascendpatch.manifest.needed import Condition
from ascendpatch.paths import NotRegularFileError, read_regular_with_stat
from ascendpatch.results import Hint, Phrase

DEFAULT_MANIFEST = "default"
MAX_MANIFEST_BYTES = 128 << 20  # (the bundled ones are a few KB; 60 MB still loads)


def resolve_name(name_or_path: str) -> Path:
    """A bundled manifest name (``default``) or a path to a YAML file."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        if not candidate.is_file():
            raise InvalidInputError(f"manifest file {candidate} does not exist")
        return candidate
    bundled = catalog.manifests_dir() / f"{name_or_path}.yaml"
    if not bundled.is_file():
        known = ", ".join(bundled_names()) or "none"
        raise InvalidInputError(f"no bundled manifest named {name_or_path!r} (bundled: {known})",
                                fix=Phrase("run '", Hint(("manifests",)),
                                           "' or pass a path to a YAML file"))
    return bundled


def bundled_names() -> list[str]:
    folder = catalog.manifests_dir()
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def read_document(path: Path) -> dict[str, Any]:
    since = time.time_ns()
    try:  # a regular file (a FIFO would hang every command), of at most MAX_MANIFEST_BYTES
        data, info = read_regular_with_stat(path, MAX_MANIFEST_BYTES)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError, NotRegularFileError) as exc:
        raise ManifestError([f"{path}: cannot read ({exc})"]) from None
    reading = parsed.read(text, path, info, since)
    document = reading.document
    if not isinstance(document, dict):
        raise ManifestError([f"{path}: (top level): expected a mapping of keys, got "
                             f"{type(document).__name__}"])
    problems = validate.problems(document)
    if problems:
        raise ManifestError([f"{path}: {p}" for p in problems])
    reading.keep()  # (a manifest that loads: an invalid one leaves nothing behind)
    return document


def load(name_or_path: str = DEFAULT_MANIFEST) -> Manifest:
    return _load(resolve_name(name_or_path), ())


def _load(path: Path, chain: tuple[Path, ...]) -> Manifest:
    real = path.resolve()
    if real in chain:
        cycle = " -> ".join(str(p) for p in (*chain, real))
        raise ManifestError([f"{path}: extends: cycle {cycle}"])
    document = read_document(path)
    parents = [_load(_parent_path(path, ref), (*chain, real)) for ref in
               document.get("extends") or []]
    own = _build(document, path)
    for parent in reversed(parents):
        own = _merge(parent, own)
    return own


def _parent_path(child: Path, ref: str) -> Path:
    local = child.parent / ref
    if local.suffix in (".yaml", ".yml") and local.is_file():
        return local
    sibling = child.parent / f"{ref}.yaml"
    if sibling.is_file():
        return sibling
    return resolve_name(ref)


def _build(document: Mapping[str, Any], path: Path) -> Manifest:
    stack_doc = document.get("stack") or {}
    pins = tuple(_pin(name, value) for name, value in (stack_doc.get("packages") or {}).items())
    return Manifest(
        name=document["name"],
        path=path,
        description=document.get("description", ""),
        stack=Stack(python=stack_doc.get("python"), cann=stack_doc.get("cann"), packages=pins,
                    from_metadata=stack_doc.get("from_metadata")),
        protected=tuple(document.get("protected") or ()),
        no_deps=tuple(document.get("no_deps") or ()),
        artifacts=tuple(_artifact(a, path) for a in document.get("artifacts") or ()),
        env=dict(document.get("env") or {}),
        launch=dict(document.get("launch") or {}),
        target=dict(document.get("target") or {}),
        accepted_conflicts=tuple(document.get("accepted_conflicts") or ()),
        extends=tuple(document.get("extends") or ()),
        log_rules=tuple(document.get("log_rules") or ()),
    )


def _pin(name: str, value: str | Mapping[str, str]) -> PackagePin:
    if isinstance(value, str):
        return PackagePin(name, value)
    return PackagePin(name, value["version"], value.get("reason", ""))


def _variant(doc: Mapping[str, Any]) -> Variant:
    hashes = {rel: FileHashes(tuple(h.get("before", ())), tuple(h.get("after", ())))
              for rel, h in (doc.get("sha256") or {}).items()}
    return Variant(versions=doc.get("versions"), source=doc.get("source"),
                   targets=tuple(doc.get("targets") or ()), sha256=hashes)


def _artifact(doc: Mapping[str, Any], origin: Path) -> Artifact:
    variants = tuple(_variant(v) for v in doc["variants"]) if "variants" in doc else (
        _variant(doc),)
    not_needed = doc.get("not_needed")
    needed_if = doc.get("needed_if")
    return Artifact(
        id=doc["id"], title=doc["title"], kind=doc["kind"],
        distribution=doc.get("distribution"), variants=variants,
        enabled=doc.get("enabled", True),
        not_needed=(not_needed["versions"], not_needed["reason"]) if not_needed else None,
        needed_if=Condition(needed_if["file"], tuple(needed_if["calls_unguarded"]))
        if needed_if else None,
        description=doc.get("description", ""), options=dict(doc.get("options") or {}),
        manifest_dir=origin.parent, origin=origin,
    )


def _merge(parent: Manifest, child: Manifest) -> Manifest:
    """Layer ``child`` on ``parent``: child keys win; artifacts with the same id are replaced."""
    pins = {p.name: p for p in parent.stack.packages}
    pins.update({p.name: p for p in child.stack.packages})
    artifacts = {a.id: a for a in parent.artifacts}
    artifacts.update({a.id: a for a in child.artifacts})
    return Manifest(
        name=child.name, path=child.path, description=child.description or parent.description,
        stack=Stack(python=child.stack.python or parent.stack.python,
                    cann=child.stack.cann or parent.stack.cann, packages=tuple(pins.values()),
                    from_metadata=child.stack.from_metadata),
        protected=_union(parent.protected, child.protected),
        no_deps=_union(parent.no_deps, child.no_deps),
        artifacts=tuple(artifacts.values()),
        env={**parent.env, **child.env}, launch={**parent.launch, **child.launch},
        target={**parent.target, **child.target},
        accepted_conflicts=parent.accepted_conflicts + child.accepted_conflicts,
        extends=child.extends,
        log_rules=parent.log_rules + child.log_rules,
    )


def _union(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*first, *second)))


def resolve_source(artifact: Artifact, raw: str, env: Mapping[str, str]) -> Path:
    """Expand ``${VAR}`` (e.g. ${MODEL_DIR}) and resolve relative to the manifest's folder."""
    return resolve_path(artifact, raw, env, "source")
