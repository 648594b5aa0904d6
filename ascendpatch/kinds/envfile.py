"""Kind ``env-file``: set or remove one ``KEY=value`` in a dotenv file.

For a model package's serve environment (``${MODEL_DIR}/serve.env``, say): ``options.file``
names the file (``${VAR}`` expanded; relative to the manifest), ``options.key`` the variable,
and either ``options.value`` (set it) or ``options.remove: true`` (remove its line).

Only the line that defines the key changes; every other line, comment and line ending stays
byte for byte. Setting appends a line when the key is absent (with the file's line ending) and
creates the file when it is missing. The key already set to *another* value is a conflict
(someone chose it): ``--force`` overwrites it, a backup is kept. A file that defines the key
twice, or a line for it that cannot be read (no ``=``, an unclosed quote), is refused: which
one counts would be a guess. The file is read with python-dotenv's own parser, entry by
entry: a key matches exactly (``MODEL`` is not ``MODEL_DIR``), a quoted value spanning lines
is one entry (a line inside it is its text, never a definition), and a line the parser cannot
read refuses the whole file, because after it bash and dotenv disagree about which line
belongs to which variable. A secret-named key (ascendpatch.redact) never shows its value in
a message. Values are written so that python-dotenv, ``bash`` ``source``
and ``docker --env-file`` read the same text: plain when safe, else in single quotes.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from dotenv.parser import Binding, Reader, parse_stream, parse_value
from dotenv.parser import Error as ParseError

from ascendpatch import redact
from ascendpatch.errors import InvalidInputError, RefusedError
from ascendpatch.kinds.base import UNKNOWN, ArtifactSite, BaseKind, Content, FileFinding
from ascendpatch.manifest import schema as s
from ascendpatch.manifest.model import Artifact, resolve_path
from ascendpatch.pipeline.filestate import FileState

_KEY = r"[A-Za-z_][A-Za-z0-9_]*"
_PLAIN = re.compile(r"[A-Za-z0-9_./:,@%+=-]*")  # needs no quotes in any reader


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
    """The one entry that defines the key: where it sits in the file's text (a quoted value
    may span lines), its line number and what it says."""

    start: int  # offset of the entry's own line (its indentation)
    end: int  # offset just past the entry, its line ending included
    number: int  # 1-based line of the key
    lead: str  # indentation and `export `
    value: str  # as python-dotenv reads it
    suffix: str  # an inline comment and the line ending, kept as they are


def _entries(text: str) -> Iterator[tuple[int, Binding]]:
    """Every entry of the file with its offset, read by python-dotenv's own parser: one
    entry per variable, a multi-line quoted value included (its inner lines are no entries)."""
    offset = 1 if text.startswith("\ufeff") else 0  # the parser drops a BOM
    for binding in parse_stream(io.StringIO(text)):
        yield offset, binding
        offset += len(binding.original.string)


def _unreadable(path: Path, key: str, number: int) -> RefusedError:
    return RefusedError(f"{path} line {number}: the {key} line cannot be read (no '=' or an "
                        "unclosed quote); nothing was changed",
                        fix=f"write it as {key}=value on one line in {path} and run again")


def _value_end(rest: str, after_blank: bool) -> int:
    """Where the value ends in ``rest`` (the text after ``=`` and its blanks), as dotenv
    reads it: past the closing quote, or before an inline comment / the line's end."""
    if rest[:1] in ("'", '"'):
        reader = Reader(io.StringIO(rest))
        parse_value(reader)
        return reader.position.chars
    body = re.match(r"[^\r\n]*", rest)
    line = body.group(0) if body else ""
    if after_blank and line.startswith("#"):
        return 0  # `KEY= # comment`: an empty value
    comment = re.search(r"[ \t]+#", line)
    return comment.start() if comment else len(line.rstrip(" \t"))


def _entry_line(path: Path, key: str, offset: int, binding: Binding) -> _Line:
    original = binding.original.string
    blank = re.match(r"\s*", original)
    start = original.rfind("\n", 0, blank.end() if blank else 0) + 1
    number = binding.original.line + original.count("\n", 0, start)
    head = re.match(rf"([ \t]*(?:export[ \t]+)?){re.escape(key)}[ \t]*=([ \t]*)",
                    original[start:])
    if binding.value is None or head is None:
        raise _unreadable(path, key, number)
    rest = original[start + head.end():]
    try:
        cut = _value_end(rest, bool(head.group(2)))
    except ParseError:
        raise _unreadable(path, key, number) from None
    # `KEY= # comment`: the blanks before the comment belong to it (else `KEY=1#` reads "1#")
    suffix = (head.group(2) if cut == 0 and rest.startswith("#") else "") + rest[cut:]
    return _Line(offset + start, offset + len(original), number, head.group(1),
                 binding.value, suffix)


def _find(path: Path, text: str, key: str) -> _Line | None:
    """The entry that sets ``key``, matched exactly (``MODEL`` is not ``MODEL_DIR``). A line
    the parser cannot read refuses the file: which lines belong to which variable after it
    (an unclosed quote) differs between readers."""
    found: list[_Line] = []
    for offset, binding in _entries(text):
        if binding.error:
            number = binding.original.line
            if re.match(rf"\s*(?:export[ \t]+)?{re.escape(key)}[ \t]*=", binding.original.string):
                raise _unreadable(path, key, number)
            raise RefusedError(f"{path} line {number}: this line cannot be read (an unclosed "
                               "quote?), so which lines belong to which variable differs "
                               "between readers; nothing was changed",
                               fix=f"close the quote on line {number} of {path} and run again")
        if binding.key == key:
            found.append(_entry_line(path, key, offset, binding))
    if len(found) > 1:
        numbers = ", ".join(str(line.number) for line in found)
        raise RefusedError(f"{path}: {key} is defined {len(found)} times (lines {numbers}); "
                           "which one counts is a guess, nothing was changed",
                           fix=f"keep one {key}= line in {path} and run again")
    return found[0] if found else None


def _eol(text: str) -> str:
    lines = text.splitlines(keepends=True)
    crlf = sum(line.endswith("\r\n") for line in lines)
    return "\r\n" if crlf * 2 > len(lines) else "\n"


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _finding(opts: EnvOptions, path: Path, current: bytes | None) -> FileFinding:
    name = path.name
    if current is None:
        if opts.value is None:
            return FileFinding(name, path, FileState.APPLIED, None, Content(None), UNKNOWN,
                               f"{path}: absent, so {opts.key} is not set")
        new = _encode(f"{opts.key}={_render(opts.value)}\n")
        return FileFinding(name, path, FileState.PRISTINE, None, Content(new), Content(None),
                           f"{path}: missing; will be created with {opts.key}")
    text = current.decode("utf-8", "surrogateescape")
    line = _find(path, text, opts.key)
    if opts.value is None:
        if line is None:
            return FileFinding(name, path, FileState.APPLIED, current, Content(current),
                               UNKNOWN, f"{path}: {opts.key} is not set")
        rest = _encode(text[:line.start] + text[line.end:])
        return FileFinding(name, path, FileState.PRISTINE, current, Content(rest),
                           Content(current), f"{path}: line {line.number} sets "
                           f"{opts.key}; will be removed")
    if line is None:
        head = text if text.endswith("\n") or not text else text + _eol(text)
        new = _encode(head + f"{opts.key}={_render(opts.value)}{_eol(text)}")
        return FileFinding(name, path, FileState.PRISTINE, current, Content(new),
                           Content(current), f"{path}: {opts.key} is not set; will be added")
    if line.value == opts.value:
        return FileFinding(name, path, FileState.APPLIED, current, Content(current), UNKNOWN,
                           f"{path}: {opts.key}={redact.shown(opts.key, opts.value)}")
    replaced = _encode(text[:line.start] + f"{line.lead}{opts.key}={_render(opts.value)}"
                       f"{line.suffix}" + text[line.end:])
    conflict = _differs(opts.key, line.value, opts.value)
    return FileFinding(name, path, FileState.CONFLICT, current, Content(replaced),
                       Content(current), f"{path} line {line.number}: {conflict}",
                       forceable=True)


def _differs(key: str, found: str, wanted: str) -> str:
    """The conflict in words; a secret-named key shows neither value (ascendpatch.redact)."""
    if redact.is_secret(key):
        return f"{key} is set to another value than the manifest's (values hidden)"
    return f"{key} is {found!r}, not {wanted!r}"


# `NAME=` opening a line the parser cannot read: all after `=` counts as the value
_BROKEN_ENTRY = re.compile(rf"(?m)^([ \t]*(?:export[ \t]+)?({_KEY})[ \t]*=)[^\r\n]*")


def masked(text: str) -> str:
    """``text`` with the value of every secret-named entry (ascendpatch.redact, on the
    dotenv key) replaced by ``***``, a value spanning lines included; the rest byte for byte.
    A secret-named line the parser cannot read is masked from its ``=`` to the line's end."""
    out: list[str] = []
    for _offset, binding in _entries(text):
        original = binding.original.string
        if binding.error or binding.key is None:
            out.append(_BROKEN_ENTRY.sub(
                lambda m: m[1] + redact.MASK if redact.is_secret(m[2]) else m[0], original))
            continue
        if not redact.is_secret(binding.key) or not binding.value:
            out.append(original)  # an empty value hides nothing
            continue
        try:
            line = _entry_line(Path(), binding.key, 0, binding)
        except RefusedError:
            out.append(_BROKEN_ENTRY.sub(lambda m: m[1] + redact.MASK, original))
            continue
        out.append(f"{original[:line.start]}{line.lead}{binding.key}={redact.MASK}"
                   f"{line.suffix}")
    return "".join(out)


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

    def for_display(self, data: bytes) -> bytes:
        return _encode(masked(data.decode("utf-8", "surrogateescape")))
