"""Safe YAML, as ascendpatch reads it: PyYAML's safe loader (libyaml's C parser when PyYAML has
it), a duplicate key an error, aliases bounded, nesting bounded.

The one place PyYAML is imported to read a manifest or a rules file. A manifest whose text was
parsed before is taken from :mod:`ascendpatch.manifest.parsed` without importing this module:
importing PyYAML is about 10 ms of every command's start.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import yaml

from ascendpatch.errors import ManifestError
from ascendpatch.manifest.parsed import MAX_DEPTH, Spans, too_deep

# Values that aliases may add beyond the document's own: ``<<: *defaults`` in every artifact
# needs a few thousand; a 1 KB "billion laughs" of nested aliases would need 10^9 (and took
# minutes of schema walking, exponential in the nesting).
MAX_ALIAS_VALUES = 100_000
_MERGE_TAG = "tag:yaml.org,2002:merge"


def _content(text: str, node: yaml.ScalarNode) -> tuple[int, int]:
    """Where a scalar's own content is in ``text``: its node's marks without the anchor and
    the tag before it (``&a !tag``), a quoted scalar's quotes, and a block scalar's header
    line (``|`` or ``>`` and any comment after it), which hold none of its value."""
    start, end = node.start_mark.index, node.end_mark.index
    while start < end and text[start] in "&!":  # an anchor or a tag, then white space
        while start < end and not text[start].isspace():
            start += 1
        while start < end and text[start] in " \t\r\n":
            start += 1
    if node.style in ("'", '"'):
        return start + 1, max(start + 1, end - 1)
    if node.style in ("|", ">"):
        newline = text.find("\n", start, end)
        return (newline + 1 if newline >= 0 else end), end
    return start, end


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe loading, with libyaml's C parser when PyYAML has it (a 60 MB manifest in seconds
    instead of minutes), and a duplicate key is an error, never "last wins". ``spans``: for
    each scalar value made (by identity), the value and where its nodes are in the text (what
    manifest/parsed.py keeps a manifest's parse as)."""

    def __init__(self, stream: str, spans: Spans | None = None) -> None:
        super().__init__(stream)
        self.text = stream
        self.spans = spans  # (None: not recorded, a parse that will not be kept)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        data = super().construct_object(node, deep=deep)
        if self.spans is not None and isinstance(node, yaml.ScalarNode):
            found = self.spans.setdefault(id(data), (data, {}))
            if found[0] is data:  # (the value is held: its identity is never another's)
                found[1][_content(self.text, node)] = None
        return data

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


def parse(text: str, path: Path, spans: Spans | None = None) -> object:
    """Safe YAML (C parser when available) with duplicate keys and deep nesting refused;
    ``spans``, when given, filled with where each scalar value's nodes are in ``text``
    (_Loader.spans: what manifest/parsed.py keeps a parse as; a parse not to be kept, such
    as a rules file's or a 60 MB manifest's, records none)."""
    collecting = gc.isenabled()
    gc.disable()  # millions of new containers, no cycles: the collector only costs time here
    loader = _Loader(text, spans)
    try:
        document = loader.get_single_data()  # _Loader is a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise ManifestError([f"{path}: malformed YAML{where}: {problem}"]) from None
    except ValueError as exc:  # a whole number past Python's 4300 digits, a date past 9999
        raise ManifestError([f"{path}: malformed YAML: a value that cannot be read: "
                             f"{str(exc).split(';')[0]}"]) from None
    except RecursionError:
        document = None
        deep: str | None = "(too deep to locate)"
    else:
        deep = too_deep(document)
    finally:
        loader.dispose()
        if collecting:
            gc.enable()
    if deep is not None:
        raise ManifestError([f"{path}: {deep}: nested more than {MAX_DEPTH} levels deep; "
                             "a manifest never needs that"])
    return document
