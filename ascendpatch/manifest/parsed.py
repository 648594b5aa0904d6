"""A manifest's YAML, parsed once: its parse kept between runs, holding none of its words.

Every command that loads a manifest parses its YAML, and importing PyYAML alone is about 10 ms
of a start that takes 0.1 s (a refused ``install``: a tenth of what ascendpatch spends before
uv starts). What a text parses to depends on the text and the parser only, so once a manifest
has loaded and passed validation, the shape of its document is kept in ascendpatch's own cache
(``manifests/``, one file per manifest path); a later run that reads the same file takes it and
never imports PyYAML.

The kept file holds no character of the manifest. Each key and value is kept as where it is in
the text (an offset and a length: a string as it appears there, a number as Python spells it),
looked for only inside the content of the very nodes that made it (the parser's marks, without
an anchor, a tag, quotes or a block scalar's header line and its comment), so that a place
never points into another value or a comment; the run that takes it slices them from the text
it has just read. A string folded from several lines is kept once, in a word table, as its
words' places and the spaces, tabs and line breaks between them; true, false and null are kept
as themselves. (A one-letter string or a small number is one object wherever it occurs, so its
place may be another node's with the same value: that two short values are equal is all it
tells.) A secret
in a manifest (an ``env`` token, an ``--api-key`` in ``launch``, a password anywhere) never
reaches the cache, nor does a digest of the text (a short secret could be guessed from one):
the file is known unchanged by its stat, as the target's cached report is
(env/introcache.py). A value that is not in its node's text as itself (an escape such as
``\u00e9``, ``0x1f``, ``1.0e+3``, a date) means the document is not kept.

A kept parse is taken only while:

- the manifest's stat (device, inode, size, mtime, ctime) is the one it was kept with, and it
  was kept only when that stat was settled before the read (the racy-git rule,
  ascendpatch/stamps.py): a same-size edit in the same timestamp tick is read again;
- the parser is the same: the stats of ascendpatch's ``yamlparse.py`` and this module, and of
  every file of the PyYAML package (found without importing it; an upgrade is another parser).

Anything else, a kept file of any other shape, or anything at all going wrong while it is read
or written, means the text is parsed again: the kept parse only saves time. The cache is read
and written only where its root already exists (a command run with another user's HOME,
``sudo -E``, creates nothing there) and passes cachedir's checks, quietly. Not kept: a text over
1 MiB or starting with a byte order mark (libyaml's marks are one character short after it), a
document of more than MAX_KEPT_NODES places written out (each alias's again), and a kept parse
over four times its text (64 KiB at least: past that, parsing is the quicker way). Strings come
back made once each, shared where aliases repeat them, as PyYAML's are; a mapping or list that
aliases repeat comes back as copies (nothing in ascendpatch changes a document in place).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ascendpatch import cachedir, catalog
from ascendpatch.env.introcache import checksums
from ascendpatch.stamps import racy, stat_of
from ascendpatch.untrusted import load_json

MAX_DEPTH = 64  # no manifest needs more; deeper input is refused before anything recurses
FORMAT = 4
MAX_KEPT_TEXT = 1 << 20  # the bundled manifests are a few KB
MAX_KEPT_NODES = 1 << 20  # values the kept document writes out (aliases repeat theirs)
_MISSING = object()
_WHITE = re.compile(r"(\s+)")
_SPACING = " \t\n"  # the white space a folded string is kept with as itself

Stat = list[int]
# id(value) -> (the value, {(start, end) of each node that made it: None}): yamlparse's marks
Spans = dict[int, tuple[object, dict[tuple[int, int], None]]]


def too_deep(document: object) -> str | None:
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


class Reading:
    """A manifest's document, and :meth:`keep`, which keeps its parse for the next run: called
    once the manifest has passed validation (an invalid one leaves nothing behind)."""

    __slots__ = ("_keep", "document")

    def __init__(self, document: object, keep: Callable[[], None] | None = None) -> None:
        self.document = document
        self._keep = keep

    def keep(self) -> None:
        if self._keep is not None:
            self._keep()
            self._keep = None


def read(text: str, path: Path, info: os.stat_result, since: int) -> Reading:
    """The document the YAML ``text`` holds, read from ``path`` (``info``: the fstat of the
    very file read, by a read that started at ``since``, ``time.time_ns``): the kept parse
    when there is one for this file as it is, else the parser's. Malformed or too deep:
    ManifestError, as the parser says."""
    stat = [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
    place = _place(path)
    if place is not None:
        kept = _load(place[0], stat, place[1], text)
        if kept is not _MISSING:
            return Reading(kept)
    from ascendpatch.manifest import yamlparse

    if (place is None or len(text) > MAX_KEPT_TEXT or text.startswith("\ufeff")
            or racy(info.st_mtime_ns, info.st_ctime_ns, since)):
        return Reading(yamlparse.parse(text, path))  # (after a BOM, libyaml's marks are short)
    spans: Spans = {}
    document = yamlparse.parse(text, path, spans)
    where, parser = place
    return Reading(document, lambda: _save(where, stat, parser, text, document, spans))


def _place(path: Path) -> tuple[Path, list[Any]] | None:
    """Where the kept parse of ``path`` goes, and the parser's identity; None when there is no
    cache root yet (nothing is created for this cache alone), no home folder to find it by, or
    no parser's files to tell it by."""
    try:
        root = catalog.cache_dir()
        if not root.is_dir():
            return None
        parser = parser_stats()
        return (root / "manifests" / f"{checksums(str(path.absolute()))}.json",
                parser) if parser is not None else None
    except (OSError, RuntimeError, ValueError):  # (no HOME and no passwd entry: RuntimeError)
        return None


def parser_stats() -> list[Any] | None:
    """The parser's identity: the stats of ascendpatch's yamlparse.py and this module, and of
    every file of the PyYAML package (found without importing it), or None when they cannot
    be told."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("yaml")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    package = Path(spec.origin).parent
    try:
        theirs = sorted(entry.name for entry in os.scandir(package)
                        if entry.name != "__pycache__")
    except OSError:
        return None
    here = Path(__file__).parent
    found = [[p.name, stat_of(p)] for p in (here / "yamlparse.py", here / "parsed.py",
                                            *(package / name for name in theirs))]
    return None if any(stat is None for _, stat in found) else found


class _NotKept(Exception):
    """The document cannot be kept as places in its text."""


class _Places:
    """Where each value of a document is in its text: searched for only inside the text of
    the very nodes that made it (the parser's marks, yamlparse.Spans), so a place never
    points into another value (a short value found inside a secret would tell its letters).
    Each value is placed once (aliases repeat its place); a string folded from several lines
    goes to the word table once, as its words' places and the white space between them."""

    def __init__(self, text: str, spans: Spans) -> None:
        self.text = text
        self.spans = spans
        self.placed: dict[int, tuple[object, Any]] = {}
        self.table: list[list[Any]] = []
        self.nodes = MAX_KEPT_NODES

    def node(self, value: object) -> Any:
        self.nodes -= 1
        if self.nodes < 0:
            raise _NotKept
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, list):
            return ["l", [self.node(item) for item in value]]
        if isinstance(value, dict):
            return ["m", [[self.node(k), self.node(v)] for k, v in value.items()]]
        placed = self.placed.get(id(value))
        if placed is None:
            placed = self.placed[id(value)] = (value, self.scalar(value))
        return placed[1]

    def scalar(self, value: object) -> Any:
        if isinstance(value, str):
            tag, spelling = "s", value
        elif isinstance(value, int):
            tag, spelling = "i", str(value)  # (ValueError past 4300 digits: not kept)
        elif isinstance(value, float) and math.isfinite(value):
            tag, spelling = "f", repr(value)
        else:
            raise _NotKept  # a date, bytes, a set, inf: not in the text as itself
        made = self.spans.get(id(value))
        if made is None or made[0] is not value:
            raise _NotKept
        for start, end in made[1]:
            at = self.text.find(spelling, start, end)
            if at >= 0:
                return [tag, at, len(spelling)]
        if tag == "s":
            for start, end in made[1]:
                parts = self.words(spelling, start, end)
                if parts is not None:
                    self.table.append(parts)
                    return ["w", len(self.table) - 1]
        raise _NotKept

    def words(self, value: str, start: int, end: int) -> list[Any] | None:
        """``value``'s words, each where it is, in order, between ``start`` and ``end``, and
        the white space between them as itself; None when a word is not there."""
        parts: list[Any] = []
        for part in _WHITE.split(value):
            if not part:
                continue
            if part.isspace():
                if part.strip(_SPACING):  # (\x1f, \u3000: only from an escape)
                    return None
                parts.append(part)
                continue
            at = self.text.find(part, start, end)
            if at < 0:
                return None
            parts.append([at, len(part)])
            start = at + len(part)
        self.nodes -= len(parts)
        if self.nodes < 0:
            raise _NotKept
        return parts


def encoded(document: object, text: str, spans: Spans) -> dict[str, Any] | None:
    """``document`` as places in ``text`` (module doc), or None when it cannot be kept so."""
    try:
        places = _Places(text, spans)
        return {"document": places.node(document), "words": places.table}
    except (_NotKept, RecursionError, ValueError):
        return None


def decoded(kept: Any, text: str) -> object:
    """The document the places of ``kept`` (:func:`encoded`'s) name in ``text``; ValueError
    (or TypeError, IndexError, KeyError) for one of any other shape."""
    words = kept["words"]
    if type(words) is not list:
        raise ValueError("no word table")
    return _Spelling(text, words).node(kept["document"])


class _Spelling:
    """The values places name in a text; each string made once (what aliases repeat, the
    document repeats as one object, as PyYAML's does: never a copy per reference)."""

    def __init__(self, text: str, words: list[Any]) -> None:
        self.text = text
        self.words = words
        self.made: dict[Any, str] = {}
        # characters made: a real document makes its text's once at most (aliases share)
        self.budget = _kept_bound(text)

    def _made(self, key: Any, made: str) -> str:
        self.budget -= len(made)
        if self.budget < 0:
            raise ValueError("places that spell more than the text holds")
        self.made[key] = made
        return made

    def place(self, at: Any, length: Any) -> str:
        if type(at) is not int or type(length) is not int or not \
                0 <= at <= at + length <= len(self.text):
            raise ValueError("a place outside the text")
        key = (at, length)
        made = self.made.get(key)
        if made is None:
            made = self._made(key, self.text[at:at + length])
        return made

    def folded(self, index: Any) -> str:
        if type(index) is not int or index < 0:
            raise ValueError("not a word")
        made = self.made.get(index)
        if made is None:
            parts = [self.part(part) for part in self.words[index]]
            if sum(map(len, parts)) > self.budget:  # (before the join makes them one string)
                raise ValueError("places that spell more than the text holds")
            made = self._made(index, "".join(parts))
        return made

    def part(self, part: Any) -> str:
        if isinstance(part, str):
            if not part or part.strip(_SPACING):
                raise ValueError("a word kept as itself")
            return part
        at, length = part
        return self.place(at, length)

    def node(self, node: Any) -> object:
        if node is None or type(node) is bool:
            return node
        tag = node[0]
        if tag in ("s", "i", "f"):
            if len(node) != 3:
                raise ValueError("not a place")
            spelling = self.place(node[1], node[2])
            if tag == "s":
                return spelling
            number = int(spelling) if tag == "i" else float(spelling)
            if (str if tag == "i" else repr)(number) != spelling:
                raise ValueError("not a number as Python spells it")
            return number
        if len(node) != 2:
            raise ValueError("an unknown node")
        if tag == "w":
            return self.folded(node[1])
        if tag == "l":
            return [self.node(item) for item in node[1]]
        if tag == "m":
            pairs = [(self.node(k), self.node(v)) for k, v in node[1]]
            if any(type(k) in (list, dict) for k, _ in pairs):
                raise ValueError("a key that is not a scalar")
            return dict(pairs)
        raise ValueError("an unknown node")


def _load(where: Path, stat: Stat, parser: list[Any], text: str) -> object:
    """The kept document, or _MISSING. Anything at all going wrong means the text is parsed
    again: the kept parse only saves time."""
    try:
        raw = cachedir.read(where, quiet=True)
        if raw is None or len(raw) > _kept_bound(text):
            return _MISSING
        # (each document level is three JSON levels: ["m", [[key, value], ...]])
        kept = load_json(raw, "a kept manifest parse", 3 * MAX_DEPTH + 6)
        if (type(kept) is not dict or kept.get("format") != FORMAT
                or kept.get("stat") != stat or kept.get("parser") != parser):
            return _MISSING
        document = decoded(kept, text)
        return document if too_deep(document) is None else _MISSING
    except Exception:  # (MemoryError, OverflowError, anything: the text is parsed instead)
        return _MISSING


def _kept_bound(text: str) -> int:
    """The most a kept parse of ``text`` may take: more, and parsing it is the quicker way
    (a text of one-letter words: a dozen bytes of places each)."""
    return max(4 * len(text), 64 << 10)


def _save(where: Path, stat: Stat, parser: list[Any], text: str, document: object,
          spans: Spans) -> None:
    try:
        places = encoded(document, text, spans)
        if places is None:
            return
        import json

        payload = json.dumps({"format": FORMAT, "stat": stat, "parser": parser, **places},
                             separators=(",", ":")).encode()
        if len(payload) <= _kept_bound(text):
            cachedir.write(where, payload, quiet=True)
    except Exception:  # (the kept parse only saves time: never a failure)
        return
