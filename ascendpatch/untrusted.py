"""Bounded readers of untrusted documents: what a node, a server or a target sends us.

A JSON document from a fleet node or an HTTP answer can be nested a hundred thousand deep
(json.loads then raises RecursionError, and any recursive walk of a deep but loadable document
does too). ``load_json`` turns every such input into one ``UntrustedDocumentError`` (a
ValueError, so a caller that already treats "not JSON" as bad input needs nothing more), after
which the document is known to be at most ``max_depth`` deep.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any, cast

MAX_DEPTH = 64  # far deeper than any document ascendpatch reads (snapshots: 5 levels)


class UntrustedDocumentError(ValueError):
    """The document is not one we can read safely; ``str()`` says why in one line."""


class NotJsonError(UntrustedDocumentError):
    """The document is not JSON at all; ``detail`` is the parser's own words."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


def depth_exceeds(doc: object, max_depth: int) -> bool:
    """Whether ``doc`` nests lists / dicts deeper than ``max_depth``: walked one level at a
    time, keeping only the containers of the next level (a leaf costs one type test)."""
    level: list[Any] = [doc] if type(doc) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            return True
        below: list[Any] = []
        for node in level:
            values = node.values() if type(node) is dict else node
            below += [v for v in values if type(v) in _CONTAINERS]
        level = below
    return False


_CONTAINERS = (dict, list)


def load_json(data: bytes | str, what: str, max_depth: int = MAX_DEPTH) -> object:
    """``data`` parsed as JSON, or UntrustedDocumentError naming ``what`` and the reason."""
    try:
        doc = json.loads(data)
    except RecursionError:
        raise UntrustedDocumentError(f"{what} is nested deeper than {max_depth} levels") \
            from None
    except UnicodeDecodeError:
        raise UntrustedDocumentError(f"{what} is not UTF-8 text") from None
    except ValueError as exc:
        raise NotJsonError(f"{what} is not JSON ({exc})", str(exc)) from None
    if depth_exceeds(doc, max_depth):
        raise UntrustedDocumentError(f"{what} is nested deeper than {max_depth} levels")
    return doc


# --------------------------------------------------------------------------- shapes

Problem = tuple[tuple[str | int, ...], str]  # where (keys, indexes from the top), what is wrong
_Check = Callable[[object], "Problem | None"]
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "integer": (int,),
    "number": (int, float), "boolean": (bool,), "null": (type(None),)}
_NAMES: dict[type, str] = {dict: "an object", list: "a list", str: "a string",
                           bool: "true or false", int: "an integer", float: "a number",
                           type(None): "null"}
_KEYWORDS = frozenset({"$schema", "title", "description", "type", "const", "pattern",
                       "maxLength", "minimum", "properties", "required", "additionalProperties",
                       "items"})
_ONE_CLASS = re.compile(r"\^(\[[^\]\\]+\])\*\$")  # a pattern "^[...]*$": one character class
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _type_name(value: object) -> str:
    return _NAMES.get(type(value), type(value).__name__)


def _where(path: tuple[str | int, ...]) -> str:
    """``files["a b.py"]``, ``target.site_packages[0]``: keys cut to 80 characters."""
    parts = [f".{key}" if isinstance(key, str) and _PLAIN_KEY.fullmatch(key) else
             f"[{json.dumps(key[:80] if isinstance(key, str) else key)}]" for key in path]
    return "".join(parts).lstrip(".") or "(top level)"


class Shape:
    """A JSON Schema of the few forms ascendpatch's documents need (``type``, ``const``,
    ``pattern``, ``maxLength``, ``minimum``, ``properties``, ``required``,
    ``additionalProperties``, ``items``), compiled once into checks that walk a document
    without recursion deeper than the schema's own and build no text unless something is
    wrong; a big map of plain values is checked at C speed. ``problem(doc)`` is the
    first place that does not fit, as one line (``files["a.py"]: expected a string, got a
    list``), or None. ``tests/test_untrusted.py`` checks it against the jsonschema library."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.check = _compile(schema)

    @classmethod
    def from_data(cls, name: str) -> Shape:
        """The schema ``ascendpatch/data/<name>``."""
        from importlib.resources import files

        return cls(json.loads(files("ascendpatch").joinpath(f"data/{name}").read_text()))

    def problem(self, doc: object) -> str | None:
        found = self.check(doc)
        if found is None:
            return None
        where, what = found
        return f"{_where(where)}: {what}"


def _compile(schema: Mapping[str, Any]) -> _Check:
    unknown = set(schema) - _KEYWORDS
    if unknown:
        raise ValueError(f"schema keywords this validator does not know: {sorted(unknown)}")
    leaf = _leaf(schema)
    if "properties" in schema or "additionalProperties" in schema or "required" in schema:
        return _object(schema, leaf)
    if "items" in schema:
        return _array(_compile(schema["items"]), leaf)
    return leaf


def _leaf(schema: Mapping[str, Any]) -> _Check:
    """type, const, pattern, maxLength and minimum: the checks of one value, not of what it
    holds."""
    named = schema.get("type")
    kinds = tuple(dict.fromkeys(t for n in ([named] if isinstance(named, str) else named or [])
                                for t in _TYPES[n]))
    wanted = " or ".join(_NAMES[t] for t in kinds)
    pattern = re.compile(schema["pattern"]).search if "pattern" in schema else None
    minimum = schema.get("minimum")
    longest = schema.get("maxLength")
    const = schema.get("const", _NOTHING)

    def check(value: object) -> Problem | None:
        if kinds and (not isinstance(value, kinds) or (
                isinstance(value, bool) and bool not in kinds)):
            return (), f"expected {wanted}, got {_type_name(value)}"
        if const is not _NOTHING and value != const:
            return (), f"expected {json.dumps(const)}"
        if pattern is not None and isinstance(value, str) and not pattern(value):
            return (), f"{value[:80]!r} is not of the form {schema['pattern']}"
        if longest is not None and isinstance(value, str) and len(value) > longest:
            return (), f"longer than {longest} characters"
        if minimum is not None and isinstance(value, int) and value < minimum:
            return (), f"{value} is below {minimum}"
        return None

    return check


_NOTHING = object()


def _unknown_key(_value: object) -> Problem:
    return (), "unknown key"


def _object(schema: Mapping[str, Any], leaf: _Check) -> _Check:
    fields = {key: _compile(sub) for key, sub in schema.get("properties", {}).items()}
    required = tuple(schema.get("required", ()))
    extra = schema.get("additionalProperties", True)
    others = _compile(extra) if isinstance(extra, dict) else \
        _unknown_key if extra is False else None
    fast = _all_fit(extra) if not fields and not required and isinstance(extra, dict) else None

    def check(value: object) -> Problem | None:
        found = leaf(value)
        if found is not None or not isinstance(value, dict):
            return found or ((), f"expected an object, got {_type_name(value)}")
        if fast is not None and fast(value.values()):
            return None  # (the common case of a big map, at C speed)
        for key in required:
            if key not in value:
                return (key,), "required key is missing"
        for key, item in value.items():
            sub = fields.get(key, others)
            if sub is None:
                continue
            found = sub(item)
            if found is not None:
                return (key, *found[0]), found[1]
        return None

    return check


def _all_fit(schema: Mapping[str, Any]) -> Callable[[Collection[object]], bool] | None:
    """For a map whose values are plain strings (with a pattern, a maxLength) or integers (with
    a minimum): a test of all its values at once, True when they all fit (False says only
    that the slow walk must find which one does not)."""
    if set(schema) - {"type", "pattern", "maxLength", "minimum", "description"}:
        return None
    if schema.get("type") == "string" and "minimum" not in schema:
        return _all_strings(schema.get("pattern"), schema.get("maxLength"))
    if schema.get("type") == "integer" and not {"pattern", "maxLength"} & set(schema):
        return _all_integers(schema.get("minimum"))
    return None


def _all_strings(pattern: str | None, longest: int | None) \
        -> Callable[[Collection[object]], bool]:
    """Joined, the values are type-checked in C (a non-string stops the join); a pattern of
    one class of ASCII characters (``^[0-9a-f]*$``) is then one ``bytes.translate`` of the
    joined text, any other is searched in each value."""
    one_class = _ONE_CLASS.fullmatch(pattern) if pattern is not None else None
    allowed = bytes(c for c in range(128) if one_class and re.fullmatch(one_class.group(1), chr(c)))
    each = re.compile(pattern).search if pattern is not None else None

    def strings(values: Collection[object]) -> bool:
        texts = cast("Collection[str]", values)
        try:
            joined = "".join(texts)
        except TypeError:  # not a string
            return False
        if one_class is not None:
            if not joined.isascii() or joined.encode("ascii").translate(None, allowed):
                return False  # (a character outside the class, or one to search for)
        elif each is not None and not all(map(each, texts)):
            return False
        return longest is None or max(map(len, texts), default=0) <= longest

    return strings


def _all_integers(least: int | None) -> Callable[[Collection[object]], bool]:
    def integers(values: Collection[object]) -> bool:
        if not set(map(type, values)) <= {int}:
            return False
        numbers = cast("Collection[int]", values)
        return least is None or min(numbers, default=least) >= least

    return integers


def _array(items: _Check, leaf: _Check) -> _Check:
    def check(value: object) -> Problem | None:
        found = leaf(value)
        if found is not None or not isinstance(value, list):
            return found or ((), f"expected a list, got {_type_name(value)}")
        for index, item in enumerate(value):
            found = items(item)
            if found is not None:
                return (index, *found[0]), found[1]
        return None

    return check
