"""Kind ``env-file``: set or remove one ``KEY=value`` in a dotenv file.

For a model package's serve environment (``${MODEL_DIR}/serve.env``, say): ``options.file``
names the file (``${VAR}`` expanded; relative to the manifest), ``options.key`` the variable,
and either ``options.value`` (set it) or ``options.remove: true`` (remove its line).

Only the line that defines the key changes; every other line, comment and line ending stays
byte for byte. Setting appends a line when the key is absent (with the file's line ending) and
creates the file when it is missing. The key already set to *another* value is a conflict
(someone chose it): ``--force`` overwrites it, a backup is kept. A file that defines the key
twice, or a line for it that cannot be read (no ``=``, an unclosed quote), is refused: which
one counts would be a guess. Values are written so that python-dotenv, ``bash`` ``source``
and ``docker --env-file`` read the same text: plain when safe, else in single quotes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ascendpatch.errors import InvalidInputError, RefusedError
from ascendpatch.filestate import FileState
from ascendpatch.kinds.base import UNKNOWN, ArtifactSite, BaseKind, Content, FileFinding
from ascendpatch.manifest import schema as s
from ascendpatch.manifest.model import Artifact, resolve_path

_KEY = r"[A-Za-z_][A-Za-z0-9_]*"
_PLAIN = re.compile(r"[A-Za-z0-9_./:,@%+=-]*")  # needs no quotes in any reader
_LINE = re.compile(rb"[^\n]*\n|[^\n]+")


@dataclass(frozen=True)
class EnvOptions:
    file: Path
    key: str
    value: str | None  # None: remove the key's line


def _options(artifact: Artifact, env: Mapping[str, str]) -> EnvOptions:
    options = artifact.options
    where = f"artifact {artifact.id}: options"
    if not isinstance(options.get("file"), str) or not isinstance(options.get("key"), str):
        raise InvalidInputError(f"{where}.file and options.key are required (kind env-file)")
    remove, value = options.get("remove", False), options.get("value")
    if (value is None) != bool(remove):
        raise InvalidInputError(f"{where}: give either 'value' (set the key) or "
                                "'remove: true' (remove it), exactly one")
    if value is not None and ("'" in value or "\\" in value or
                              any(ord(c) < 32 or c == "\x7f" for c in value)):
        raise InvalidInputError(f"{where}.value {value!r}: a quote, backslash or control "
                                "character is read differently by each dotenv reader",
                                fix="write the value without them")
    return EnvOptions(resolve_path(artifact, options["file"], env, "options.file"),
                      options["key"], value)


def _render(value: str) -> str:
    return value if _PLAIN.fullmatch(value) else f"'{value}'"


@dataclass(frozen=True)
class _Line:
    """The one line that defines the key: its index, bytes and what it says."""

    index: int
    prefix: str  # indentation and `export `
    value: str
    suffix: str  # an inline comment after the value, kept as it is


def _parse_value(rest: str) -> tuple[str, str] | None:
    """(value, trailing comment) of the text after ``=``; None when it cannot be read."""
    text = rest.lstrip(" \t")
    if text[:1] in ("'", '"'):
        quote = text[0]
        end = text.find(quote, 1)
        while quote == '"' and end > 0 and text[end - 1] == "\\":
            end = text.find(quote, end + 1)
        if end < 0:
            return None  # unclosed quote, or a value that spans lines
        tail = text[end + 1:]
        if tail.strip(" \t") and not re.match(r"[ \t]+#", tail):
            return None
        body = text[1:end]
        if quote == '"':
            body = re.sub(r'\\([\\"])', r"\1", body)
        return body, tail
    comment = re.search(r"[ \t]+#", text)
    value = text[:comment.start()] if comment else text
    return value.rstrip(" \t"), text[comment.start():] if comment else ""


def _find(path: Path, lines: list[bytes], key: str) -> _Line | None:
    pattern = re.compile(rf"^([ \t]*(?:export[ \t]+)?){re.escape(key)}[ \t]*(=?)(.*)$")
    found: list[tuple[int, re.Match[str]]] = []
    for index, raw in enumerate(lines):
        match = pattern.match(raw.decode("utf-8", "surrogateescape").rstrip("\r\n"))
        if match:
            found.append((index, match))
    if len(found) > 1:
        numbers = ", ".join(str(i + 1) for i, _ in found)
        raise RefusedError(f"{path}: {key} is defined {len(found)} times (lines {numbers}); "
                           "which one counts is a guess, nothing was changed",
                           fix=f"keep one {key}= line in {path} and run again")
    if not found:
        return None
    index, match = found[0]
    parsed = _parse_value(match.group(3)) if match.group(2) else None
    if parsed is None:
        raise RefusedError(f"{path} line {index + 1}: the {key} line cannot be read (no '=' "
                           "or an unclosed quote); nothing was changed",
                           fix=f"write it as {key}=value on one line in {path} and run again")
    return _Line(index, match.group(1), parsed[0], parsed[1])


def _eol(lines: list[bytes]) -> bytes:
    crlf = sum(line.endswith(b"\r\n") for line in lines)
    return b"\r\n" if crlf * 2 > len(lines) else b"\n"


def _line_bytes(prefix: str, key: str, value: str, suffix: str, eol: bytes) -> bytes:
    return f"{prefix}{key}={_render(value)}{suffix}".encode("utf-8", "surrogateescape") + eol


def _ending(line: bytes) -> bytes:
    return b"\r\n" if line.endswith(b"\r\n") else b"\n" if line.endswith(b"\n") else b""


def _finding(opts: EnvOptions, path: Path, current: bytes | None) -> FileFinding:
    name = path.name
    if current is None:
        if opts.value is None:
            return FileFinding(name, path, FileState.APPLIED, None, Content(None), UNKNOWN,
                               f"{path}: absent, so {opts.key} is not set")
        new = _line_bytes("", opts.key, opts.value, "", b"\n")
        return FileFinding(name, path, FileState.PRISTINE, None, Content(new), Content(None),
                           f"{path}: missing; will be created with {opts.key}")
    lines = _LINE.findall(current)
    line = _find(path, lines, opts.key)
    if opts.value is None:
        if line is None:
            return FileFinding(name, path, FileState.APPLIED, current, Content(current),
                               UNKNOWN, f"{path}: {opts.key} is not set")
        rest = b"".join(lines[:line.index] + lines[line.index + 1:])
        return FileFinding(name, path, FileState.PRISTINE, current, Content(rest),
                           Content(current), f"{path}: line {line.index + 1} sets "
                           f"{opts.key}; will be removed")
    if line is None:
        eol = _eol(lines)
        head = current if current.endswith(b"\n") or not current else current + eol
        new = head + _line_bytes("", opts.key, opts.value, "", eol)
        return FileFinding(name, path, FileState.PRISTINE, current, Content(new),
                           Content(current), f"{path}: {opts.key} is not set; will be added")
    if line.value == opts.value:
        return FileFinding(name, path, FileState.APPLIED, current, Content(current), UNKNOWN,
                           f"{path}: {opts.key}={opts.value}")
    old = lines[line.index]
    replaced = list(lines)
    replaced[line.index] = _line_bytes(line.prefix, opts.key, opts.value, line.suffix,
                                       _ending(old))
    return FileFinding(name, path, FileState.CONFLICT, current, Content(b"".join(replaced)),
                       Content(current), f"{path} line {line.index + 1}: {opts.key} is "
                       f"{line.value!r}, not {opts.value!r}", forceable=True)


class EnvFileKind(BaseKind):
    name = "env-file"
    needs_distribution = False  # the file belongs to a model package, not to a wheel
    options_schema = s.Obj({
        "file": s.Str(),  # the dotenv file; ${VAR} expanded, relative to the manifest
        "key": s.Str(pattern=_KEY, what="a variable name (letters, digits, '_')"),
        "value": s.Str(),  # set the key to this
        "remove": s.Bool(),  # or remove the key's line
    }, frozenset({"file", "key"}))

    def root_for(self, artifact: Artifact, env: Mapping[str, str]) -> Path:
        return _options(artifact, env).file.parent.absolute()

    def prepare(self, site: ArtifactSite) -> None:
        opts = _options(site.artifact, site.env)
        if not site.root.is_dir():
            raise InvalidInputError(f"artifact {site.artifact.id}: folder {site.root} of "
                                    f"{opts.file.name} does not exist",
                                    fix="point options.file (or the variable it uses, e.g. "
                                        "MODEL_DIR) at the model package's folder")
        site.path(opts.file.name)

    def inspect(self, site: ArtifactSite) -> list[FileFinding]:
        opts = _options(site.artifact, site.env)
        path, current = site.read(opts.file.name)
        return [_finding(opts, path, current)]
