"""Comment-preserving edits of manifest YAML: find the place with PyYAML's node positions
(yaml.compose), splice text there, and re-validate the whole file before it is written.
(A load-and-dump round trip would drop every comment of the catalog.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ascendpatch.errors import InvalidInputError, ManifestError, RefusedError
from ascendpatch.manifest import loader
from ascendpatch.store import atomic


def _mapping_get(node: yaml.MappingNode, key: str) -> yaml.Node | None:
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            assert isinstance(v, yaml.Node)
            return v
    return None


def _artifact_node(root: yaml.Node | None, artifact_id: str) -> yaml.MappingNode | None:
    if not isinstance(root, yaml.MappingNode):
        return None
    artifacts = _mapping_get(root, "artifacts")
    if not isinstance(artifacts, yaml.SequenceNode):
        return None
    for item in artifacts.value:
        ident = _mapping_get(item, "id") if isinstance(item, yaml.MappingNode) else None
        if isinstance(ident, yaml.ScalarNode) and ident.value == artifact_id:
            assert isinstance(item, yaml.MappingNode)
            return item
    return None


def _block(doc: dict[str, Any] | list[Any], indent: int) -> str:
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100)
    lines = text.rstrip("\n").splitlines()
    return "\n".join(" " * indent + line for line in lines) + "\n"


def _insert_at_line(text: str, line: int, block: str) -> str:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return "".join(lines[:line]) + block + "".join(lines[line:])


def _after_sequence(seq: yaml.SequenceNode) -> int:
    """The line after the sequence's last item (end marks point at the next token)."""
    end = seq.value[-1].end_mark
    line: int = end.line if end.column == 0 else end.line + 1
    return line


def _existing(path: Path) -> str:
    """The manifest's text, after the loader checked it (malformed YAML: a one-line error)."""
    loader.read_document(path)
    return path.read_text(encoding="utf-8")


def add_variant(path: Path, artifact_id: str, variant: dict[str, Any]) -> str:
    """The manifest text with ``variant`` appended to the artifact's variants (validated)."""
    text = _existing(path)
    node = _artifact_node(yaml.compose(text), artifact_id)
    variants = _mapping_get(node, "variants") if node is not None else None
    if not isinstance(variants, yaml.SequenceNode) or not variants.value:
        raise InvalidInputError(f"{path}: artifact {artifact_id} has no 'variants' list to "
                                "extend")
    indent = variants.value[0].start_mark.column - 2
    block = _block([variant], indent)
    return checked(path, _insert_at_line(text, _after_sequence(variants), block))


def put_artifact(path: Path, artifact: dict[str, Any], manifest_name: str) -> tuple[str, str]:
    """(text, verb): the manifest with the artifact added or replaced by id, or a new manifest
    holding it; validated, not written."""
    if not path.exists():
        doc = {"name": manifest_name, "extends": ["default"], "artifacts": [artifact]}
        return checked(path, yaml.safe_dump(doc, sort_keys=False, width=100)), "created"
    text = _existing(path)
    root = yaml.compose(text)
    existing = _artifact_node(root, str(artifact["id"]))
    if existing is not None:
        lines = text.splitlines(keepends=True)
        start = existing.start_mark.line
        end = existing.end_mark.line if existing.end_mark.column == 0 else \
            existing.end_mark.line + 1
        indent = existing.start_mark.column - 2
        new = "".join(lines[:start]) + _block([artifact], indent) + "".join(lines[end:])
        return checked(path, new), "updated"
    artifacts = _mapping_get(root, "artifacts") if isinstance(root, yaml.MappingNode) else None
    if isinstance(artifacts, yaml.SequenceNode) and artifacts.value:
        indent = artifacts.value[0].start_mark.column - 2
        new = _insert_at_line(text, _after_sequence(artifacts), _block([artifact], indent))
    else:
        new = text.rstrip("\n") + "\nartifacts:\n" + _block([artifact], 2)
    return checked(path, new), "added"


def checked(path: Path, text: str) -> str:
    """``text`` once it validates as the manifest at ``path`` (a sibling probe file, so that
    relative sources and extends resolve as they will); problems name ``path`` itself."""
    probe = path.with_name(f".{path.stem}.check{path.suffix}")
    probe.write_text(text, encoding="utf-8")
    try:
        loader.load(str(probe))
    except ManifestError as exc:
        raise ManifestError([p.replace(str(probe), str(path)) for p in exc.problems]) from None
    finally:
        probe.unlink()
    return text


def write_with_patch(manifest: Path, text: str, patch: Path, patch_text: str) -> None:
    """Write a patch and the manifest entry that names it, both or neither."""
    existed = patch.read_bytes() if patch.exists() else None
    try:
        atomic.write_atomic(patch, patch_text.encode("utf-8"))
        try:
            atomic.write_atomic(manifest, text.encode("utf-8"))
        except BaseException:
            if existed is None:
                atomic.remove(patch)
            else:
                atomic.write_atomic(patch, existed)
            raise
    except OSError as exc:
        raise RefusedError(f"cannot write {patch} and {manifest} ({exc}); neither was changed",
                           fix="run where the manifest and patch folders are writable") from None
