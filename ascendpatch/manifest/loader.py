"""Load manifests: safe YAML, then validation (every problem at once: :mod:`validate`),
``extends:``, bundled names."""

from __future__ import annotations

import gc
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ascendpatch import catalog
from ascendpatch.errors import InvalidInputError, ManifestError
from ascendpatch.manifest import validate
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
from ascendpatch.paths import NotRegularFileError, read_regular
from ascendpatch.results import Hint, Phrase

DEFAULT_MANIFEST = "default"
MAX_DEPTH = 64  # no manifest needs more; deeper input is refused before anything recurses
# Values that aliases may add beyond the document's own: ``<<: *defaults`` in every artifact
# needs a few thousand; a 1 KB "billion laughs" of nested aliases would need 10^9 (and took
# minutes of schema walking, exponential in the nesting).
MAX_ALIAS_VALUES = 100_000
MAX_MANIFEST_BYTES = 128 << 20  # (the bundled ones are a few KB; 60 MB still loads)
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe loading, with libyaml's C parser when PyYAML has it (a 60 MB manifest in seconds
    instead of minutes), and a duplicate key is an error, never "last wins"."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # unhashable: the base class names it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"duplicate key {key!r} (each key may appear once)", key_node.start_mark)
        result: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return result

    def get_single_data(self) -> Any:
        """The document, once its node graph is known not to expand past its own size by
        more than MAX_ALIAS_VALUES through aliases (nothing is constructed before)."""
        node = self.get_single_node()
        if node is None:
            return None
        problem = _alias_problem(node)
        if problem is not None:
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark)
        return self.construct_document(node)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _alias_problem(root: yaml.Node) -> str | None:
    """Why aliases make the node graph too big to construct (each node's expanded size,
    computed once: linear in the distinct nodes), or None."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_done:
            open_nodes.discard(id(node))
            sizes[id(node)] = min(1 + sum(sizes[id(c)] for c in children), 1 << 40)
            continue
        if id(node) in open_nodes:
            return "an alias refers to a value that contains it"
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    if sizes[id(root)] - len(sizes) > MAX_ALIAS_VALUES:
        return (f"aliases expand it by more than {MAX_ALIAS_VALUES} values; a manifest never "
                "needs that")
    return None


def _too_deep(document: object) -> str | None:
    """The path of the first value nested deeper than MAX_DEPTH (iterative: no recursion)."""
    stack: list[tuple[object, int, str]] = [(document, 0, "")]
    while stack:
        value, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            return where or "(top level)"
        if isinstance(value, dict):
            stack.extend((v, depth + 1, f"{where}.{k}" if where else str(k))
                         for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, depth + 1, f"{where}[{i}]") for i, v in enumerate(value))
    return None


def parse_yaml(text: str, path: Path) -> object:
    """Safe YAML (C parser when available) with duplicate keys and deep nesting refused."""
    collecting = gc.isenabled()
    gc.disable()  # millions of new containers, no cycles: the collector only costs time here
    try:
        document = yaml.load(text, Loader=_Loader)  # _Loader is a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise ManifestError([f"{path}: malformed YAML{where}: {problem}"]) from None
    except RecursionError:
        document = None
        deep: str | None = "(too deep to locate)"
    else:
        deep = _too_deep(document)
    finally:
        if collecting:
            gc.enable()
    if deep is not None:
        raise ManifestError([f"{path}: {deep}: nested more than {MAX_DEPTH} levels deep; "
                             "a manifest never needs that"])
    return document


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
    try:  # a regular file (a FIFO would hang every command), of at most MAX_MANIFEST_BYTES
        text = read_regular(path, MAX_MANIFEST_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError, NotRegularFileError) as exc:
        raise ManifestError([f"{path}: cannot read ({exc})"]) from None
    document = parse_yaml(text, path)
    if not isinstance(document, dict):
        raise ManifestError([f"{path}: (top level): expected a mapping of keys, got "
                             f"{type(document).__name__}"])
    problems = validate.problems(document)
    if problems:
        raise ManifestError([f"{path}: {p}" for p in problems])
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
