"""A manifest's YAML, parsed once: its parse kept between runs, holding none of its words.

Every command that loads a manifest parses its YAML, and importing PyYAML alone is about 10 ms
of a start that takes 0.1 s (a refused ``install``: a tenth of what ascendpatch spends before
uv starts). What a text parses to depends on the text and the parser only, so once a manifest
has loaded and passed validation, the shape of its document is kept in ascendpatch's own cache
(``manifests/``, one file per manifest path); a later run that reads the same file takes it and
never imports PyYAML.

The kept file holds no character of the manifest. Each key and value is kept as where it is in
the text (an offset and a length: a string as it appears there, a number as its canonical
spelling does), and the run that takes it slices them from the text it has just read; only
true, false and null are kept as themselves. A secret in a manifest (an ``env`` token, an
``--api-key`` in ``launch``, a password anywhere) never reaches the cache, nor does a digest of
the text (a short secret could be guessed from one): the file is known unchanged by its stat,
as the target's cached report is (env/introcache.py). A string over several lines, folded
into one, is kept as its words' places and the white space between them; a value that is not
in the text as itself (an escape, ``1e3``, a date) means the document is not kept.

A kept parse is taken only while:

- the manifest's stat (device, inode, size, mtime, ctime) is the one it was kept with, and it
  was kept only when that stat was settled before the read (the racy-git rule,
  ascendpatch/stamps.py): a same-size edit in the same timestamp tick is read again;
- the parser is the same: the stats of ascendpatch's ``yamlparse.py`` and this module, and of
  every file of the PyYAML package (found without importing it; an upgrade is another parser).

Anything else, or a kept file of any other shape, means the text is parsed again. The cache is
read and written only where its root already exists (a command run with another user's HOME,
``sudo -E``, creates nothing there) and passes cachedir's checks, quietly: it only saves time.
A text over 1 MiB, or whose document would take more than MAX_KEPT_NODES values written out
(each alias's value again), is not kept. Anchors shared between places come back as copies
(nothing in ascendpatch changes a document in place).
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
from ascendpatch.stamps import racy
from ascendpatch.untrusted import UntrustedDocumentError, load_json

MAX_DEPTH = 64  # no manifest needs more; deeper input is refused before anything recurses
FORMAT = 2
MAX_KEPT_TEXT = 1 << 20  # the bundled manifests are a few KB
MAX_KEPT_NODES = 1 << 20  # values the kept document writes out (aliases repeat theirs)
MAX_SCAN = 64 << 20  # characters of the text looked through to find where values are
_MISSING = object()
_WHITE = re.compile(r"(\s+)")

Stat = list[int]


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

    document = yamlparse.parse(text, path)
    if place is None or len(text) > MAX_KEPT_TEXT or racy(info.st_mtime_ns,
                                                          info.st_ctime_ns, since):
        return Reading(document)
    where, parser = place
    return Reading(document, lambda: _save(where, stat, parser, text, document))


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


def _stat(path: Path) -> list[Any] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [path.name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


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
        theirs = sorted(entry.name for entry in os.scandir(package))
    except OSError:
        return None
    here = Path(__file__).parent
    found = [_stat(p) for p in (here / "yamlparse.py", here / "parsed.py",
                                *(package / name for name in theirs))]
    return None if any(s is None for s in found) else found


class _NotKept(Exception):
    """The document cannot be kept as places in its text."""


class _Places:
    """Where each value of a document is in its text (str.find, once per distinct spelling,
    within MAX_SCAN characters and MAX_KEPT_NODES values)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.found: dict[str, int] = {}
        self.scan = MAX_SCAN
        self.nodes = MAX_KEPT_NODES

    def spelt(self, tag: str, spelling: str) -> list[Any]:
        at = self.found.get(spelling)
        if at is None:
            at = self.text.find(spelling)
            self.scan -= (at if at >= 0 else len(self.text)) + len(spelling)
            if at < 0 or self.scan < 0:
                raise _NotKept
            self.found[spelling] = at
        return [tag, at, len(spelling)]

    def words(self, value: str) -> list[Any]:
        """A string not in the text as a whole (a plain or quoted scalar over several lines,
        folded into one): its words, each where it is in the text, and the white space
        between them as itself (white space only: no word of the text)."""
        parts: list[Any] = []
        for part in _WHITE.split(value):
            if part and not part.isspace():
                parts.append(self.spelt("s", part)[1:])
            elif part:
                parts.append(part)
        self.nodes -= len(parts)  # (each written out again wherever an alias repeats it)
        if self.nodes < 0:
            raise _NotKept
        return ["w", parts]

    def node(self, value: object) -> Any:
        self.nodes -= 1
        if self.nodes < 0:
            raise _NotKept
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return self.spelt("s", value)
            except _NotKept:
                return self.words(value)
        if isinstance(value, int):
            return self.spelt("i", str(value))
        if isinstance(value, float) and math.isfinite(value):
            return self.spelt("f", repr(value))
        if isinstance(value, list):
            return ["l", [self.node(item) for item in value]]
        if isinstance(value, dict):
            return ["m", [[self.node(k), self.node(v)] for k, v in value.items()]]
        raise _NotKept  # a date, bytes, a set: not in the text as itself


def encoded(document: object, text: str) -> Any | None:
    """``document`` as places in ``text`` (module doc), or None when it cannot be kept so."""
    try:
        return _Places(text).node(document)
    except (_NotKept, RecursionError):
        return None


def decoded(node: Any, text: str) -> object:
    """The document the places ``node`` name in ``text``; ValueError (or TypeError,
    IndexError, KeyError) for a node of any other shape."""
    return _Spelling(text).node(node)


class _Spelling:
    """The values places name in a text; each string made once (what aliases repeat, the
    document repeats as one object, as PyYAML's does: never a copy per reference)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.made: dict[Any, str] = {}

    def place(self, at: Any, length: Any) -> str:
        if type(at) is not int or type(length) is not int or not \
                0 <= at <= at + length <= len(self.text):
            raise ValueError("a place outside the text")
        key = (at, length)
        made = self.made.get(key)
        if made is None:
            made = self.made[key] = self.text[at:at + length]
        return made

    def words(self, parts: list[Any]) -> str:
        key = tuple(part if isinstance(part, str) else tuple(part) for part in parts)
        made = self.made.get(key)
        if made is None:
            made = self.made[key] = "".join(self.part(part) for part in parts)
        return made

    def part(self, part: Any) -> str:
        if isinstance(part, str):
            if not part.isspace():
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
            if not math.isfinite(number):
                raise ValueError("not a finite number")
            return number
        if len(node) != 2:
            raise ValueError("an unknown node")
        if tag == "w":
            return self.words(node[1])
        if tag == "l":
            return [self.node(item) for item in node[1]]
        if tag == "m":
            pairs = [(self.node(k), self.node(v)) for k, v in node[1]]
            if any(type(k) in (list, dict) for k, _ in pairs):
                raise ValueError("a key that is not a scalar")
            return dict(pairs)
        raise ValueError("an unknown node")


def _load(where: Path, stat: Stat, parser: list[Any], text: str) -> object:
    raw = cachedir.read(where, quiet=True)
    if raw is None:
        return _MISSING
    try:  # (each document level is three JSON levels: ["m", [[key, value], ...]])
        kept = load_json(raw, "a kept manifest parse", 3 * MAX_DEPTH + 6)
        if (type(kept) is not dict or kept.get("format") != FORMAT
                or kept.get("stat") != stat or kept.get("parser") != parser):
            return _MISSING
        document = decoded(kept["document"], text)
    except (UntrustedDocumentError, ValueError, TypeError, IndexError, KeyError,
            RecursionError):
        return _MISSING
    return document if too_deep(document) is None else _MISSING


def _save(where: Path, stat: Stat, parser: list[Any], text: str, document: object) -> None:
    places = encoded(document, text)
    if places is None:
        return
    import json

    payload = json.dumps({"format": FORMAT, "stat": stat, "parser": parser,
                          "document": places}, separators=(",", ":"))
    cachedir.write(where, payload.encode(), quiet=True)
