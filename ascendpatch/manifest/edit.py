"""Comment-preserving edits of manifest YAML: find the place with PyYAML's node positions
(yaml.compose), splice text there, and re-validate the whole file before it is written.
(A load-and-dump round trip would drop every comment of the catalog.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ascendpatch.errors import InvalidInputError
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


def add_variant(path: Path, artifact_id: str, variant: dict[str, Any]) -> None:
    text = path.read_text(encoding="utf-8")
    node = _artifact_node(yaml.compose(text), artifact_id)
    variants = _mapping_get(node, "variants") if node is not None else None
    if not isinstance(variants, yaml.SequenceNode) or not variants.value:
        raise InvalidInputError(f"{path}: artifact {artifact_id} has no 'variants' list to "
                                "extend")
    indent = variants.value[0].start_mark.column - 2
    block = _block([variant], indent)
    write_checked(path, _insert_at_line(text, _after_sequence(variants), block))


def put_artifact(path: Path, artifact: dict[str, Any], manifest_name: str) -> str:
    """Add (or replace, by id) an artifact; creates the manifest when it does not exist."""
    if not path.exists():
        doc = {"name": manifest_name, "extends": ["default"], "artifacts": [artifact]}
        write_checked(path, yaml.safe_dump(doc, sort_keys=False, width=100))
        return "created"
    text = path.read_text(encoding="utf-8")
    root = yaml.compose(text)
    existing = _artifact_node(root, str(artifact["id"]))
    if existing is not None:
        lines = text.splitlines(keepends=True)
        start = existing.start_mark.line
        end = existing.end_mark.line if existing.end_mark.column == 0 else \
            existing.end_mark.line + 1
        indent = existing.start_mark.column - 2
        new = "".join(lines[:start]) + _block([artifact], indent) + "".join(lines[end:])
        write_checked(path, new)
        return "updated"
    artifacts = _mapping_get(root, "artifacts") if isinstance(root, yaml.MappingNode) else None
    if isinstance(artifacts, yaml.SequenceNode) and artifacts.value:
        indent = artifacts.value[0].start_mark.column - 2
        write_checked(path, _insert_at_line(text, _after_sequence(artifacts),
                                            _block([artifact], indent)))
    else:
        write_checked(path, text.rstrip("\n") + "\nartifacts:\n" + _block([artifact], 2))
    return "added"


def write_checked(path: Path, text: str) -> None:
    """Validate the edited manifest in a sibling temp file, then replace atomically."""
    probe = path.with_name(f".{path.stem}.check{path.suffix}")
    probe.write_text(text, encoding="utf-8")
    try:
        loader.load(str(probe))
    finally:
        probe.unlink()
    atomic.write_atomic(path, text.encode("utf-8"))
