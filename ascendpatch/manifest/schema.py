"""A small declarative schema: describe the shape once, collect *every* problem with its path.

Problems read ``manifests/x.yaml: artifacts[2].targets: expected a list of strings, got int``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

Check = Callable[[Any], "str | None"]


@dataclass(frozen=True)
class Str:
    check: Check | None = None
    pattern: str | None = None  # a regular expression the whole value matches (JSON Schema too)
    what: str = ""  # the pattern in words, for the problem: "is not <what>"


@dataclass(frozen=True)
class Bool:
    pass


@dataclass(frozen=True)
class Int:
    pass


@dataclass(frozen=True)
class ListOf:
    item: Schema


@dataclass(frozen=True)
class MapOf:
    """A mapping with free keys (checked by ``key``) and values of one shape."""

    value: Schema
    key: Check | None = None


@dataclass(frozen=True)
class Obj:
    """A mapping with known keys; unknown keys are errors."""

    fields: dict[str, Schema]
    required: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class OneOf:
    """Either shape; the problems of the last one are reported when none fits."""

    options: tuple[Schema, ...]


@dataclass(frozen=True)
class AnyValue:
    pass


Schema = Str | Bool | Int | ListOf | MapOf | Obj | OneOf | AnyValue


def _type_name(value: object) -> str:
    return {dict: "mapping", list: "list", str: "string", bool: "boolean", int: "integer",
            float: "number", type(None): "null"}.get(type(value), type(value).__name__)


def _join(path: str, key: str) -> str:
    return f"{path}.{_key(key)}" if path else _key(key)


_PLAIN_KEY = re.compile(r"[\w-]{1,60}", re.ASCII)  # no ".": a.b is a path
SHOWN = 60  # characters of a value or key a problem quotes


def _key(key: str) -> str:
    """A key as a key path shows it: plain names as they are, anything else (spaces, newlines,
    control characters, a 10,000-character key) quoted and cut, so a path stays one line."""
    return key if _PLAIN_KEY.fullmatch(key) else shown(key)


def shown(value: object) -> str:
    """``value``'s repr on one line, at most about SHOWN characters (problems quote values a
    manifest's author wrote: a megabyte of text must not become a megabyte of message); a
    string cut short is the repr of its start, then "..."."""
    text = repr(value)
    if len(text) <= SHOWN or not isinstance(value, str):
        return text if len(text) <= SHOWN else text[:SHOWN] + "..."
    cut = value[:SHOWN]
    while len(repr(cut)) > SHOWN:  # escapes (\x08, \U000101fe) take up to 10 characters
        cut = cut[:len(cut) * 3 // 4]
    return repr(cut) + "..."


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'description'?"`` for the choice nearest ``word`` (difflib's ratio of
    at least 0.6), else ``""``: a suffix for the problem that names ``word``."""
    import difflib  # (only when a word is wrong)

    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def validate(value: object, schema: Schema, path: str = "") -> list[str]:
    """Every problem in ``value`` as ``"<path>: <what is wrong>"``; empty when it fits."""
    where = path or "(top level)"
    if isinstance(schema, AnyValue):
        return []
    if isinstance(schema, Str):
        if not isinstance(value, str):
            return [f"{where}: expected a string, got {_type_name(value)}"]
        problem = schema.check(value) if schema.check else None
        if problem is None and schema.pattern is not None and \
                not re.fullmatch(schema.pattern, value):
            problem = f"{shown(value)} is not {schema.what or 'of the form ' + schema.pattern}"
        return [f"{where}: {problem}"] if problem else []
    if isinstance(schema, Bool):
        ok = isinstance(value, bool)
        return [] if ok else [f"{where}: expected true or false, got {_type_name(value)}"]
    if isinstance(schema, Int):
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{where}: expected an integer, got {_type_name(value)}"]
    if isinstance(schema, ListOf):
        return _validate_list(value, schema, path, where)
    if isinstance(schema, MapOf):
        return _validate_map(value, schema, path, where)
    if isinstance(schema, Obj):
        return _validate_obj(value, schema, path, where)
    return _validate_one_of(value, schema, path)


_PY_TYPES: dict[type, type] = {Str: str, Bool: bool, Int: int, ListOf: list, MapOf: dict,
                               Obj: dict}


def _validate_one_of(value: object, schema: OneOf, path: str) -> list[str]:
    """Report the problems of the alternative whose type fits the value (the user's intent)."""
    fitting: list[str] | None = None
    for option in schema.options:
        problems = validate(value, option, path)
        if not problems:
            return []
        if fitting is None and isinstance(value, _PY_TYPES.get(type(option), object)):
            fitting = problems
    if fitting is not None:
        return fitting
    kinds = " or ".join(sorted({_PY_TYPES[type(o)].__name__ for o in schema.options
                                if type(o) in _PY_TYPES}))
    return [f"{path or '(top level)'}: expected {kinds}, got {_type_name(value)}"]


def _validate_list(value: object, schema: ListOf, path: str, where: str) -> list[str]:
    if not isinstance(value, list):
        return [f"{where}: expected a list, got {_type_name(value)}"]
    problems: list[str] = []
    for index, item in enumerate(value):
        problems += validate(item, schema.item, f"{path}[{index}]")
    return problems


def _validate_map(value: object, schema: MapOf, path: str, where: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: expected a mapping, got {_type_name(value)}"]
    problems: list[str] = []
    for key, item in value.items():
        if not isinstance(key, str):
            problems.append(f"{where}: key {shown(key)} must be a string")
            continue
        key_problem = schema.key(key) if schema.key else None
        if key_problem:
            problems.append(f"{_join(path, key)}: {key_problem}")
        problems += validate(item, schema.value, _join(path, key))
    return problems


def _validate_obj(value: object, schema: Obj, path: str, where: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: expected a mapping, got {_type_name(value)}"]
    problems: list[str] = []
    for key in value:
        if key not in schema.fields:
            known = ", ".join(sorted(schema.fields))
            hint = did_you_mean(key, schema.fields) if isinstance(key, str) else ""
            problems.append(f"{_join(path, str(key))}: unknown key{hint} (known keys: {known})")
    for key in sorted(schema.required - set(value)):
        problems.append(f"{_join(path, key)}: required key is missing")
    for key, sub in schema.fields.items():
        if key in value:
            problems += validate(value[key], sub, _join(path, key))
    return problems


# --------------------------------------------------------------------------- checks

_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEX = re.compile(r"^[0-9a-f]{64}$")
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def specifier(text: str) -> str | None:
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        return f"{shown(text)} is not a valid PEP 440 version specifier (e.g. '>=0.18.0,<0.19')"
    return None


def identifier(text: str) -> str | None:
    if _ID.match(text):
        return None
    return f"{shown(text)} is not a valid id (lower-case letters, digits, '.', '_', '-')"


def env_name(text: str) -> str | None:
    return None if _ENV.match(text) else f"{shown(text)} is not a valid environment variable name"


def sha256_hex(text: str) -> str | None:
    return None if _HEX.match(text) else f"{shown(text)} is not a 64-digit lower-case hex sha256"


def requirement(text: str) -> str | None:
    # (imported here: packaging's markers load logging, platform and sysconfig, which a
    # manifest without stack.from_metadata never needs: 8 ms of every status and apply)
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(text)
    except InvalidRequirement:
        return f"{shown(text)} is not a valid PEP 508 requirement (e.g. 'vllm-ascend==0.23.0')"
    return None


def dotted_name(text: str) -> str | None:
    if _DOTTED.match(text):
        return None
    return f"{shown(text)} is not a dotted Python name (e.g. 'torch_npu.npu_top_k_top_p')"
