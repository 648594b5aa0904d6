"""A manifest's YAML, parsed once: kept between runs while its text and the parser are the same.

Every command that loads a manifest parses its YAML, and importing PyYAML alone is about 10 ms
of a start that takes 0.1 s (a refused ``install``: a tenth of what ascendpatch spends before
uv starts). What a text parses to depends on the text and the parser only, so the parse is
kept in ascendpatch's own cache (``manifests/``, one file per manifest path), with the SHA-256
of the text and the stats of the parser's files (ascendpatch's ``yamlparse.py`` and PyYAML's
``__init__.py``: an upgrade of either is another parser). A later run that reads the very same
text takes the kept document and never imports PyYAML; any other text, or a kept file of any
other shape, is parsed again. The folder passes cachedir's checks (this user's alone); one that
fails them is not used, without a word: the cache only saves time.

What is kept:

- only what JSON holds exactly: mappings with string keys, lists, strings, whole numbers,
  finite numbers, true / false and null (a YAML date or binary is parsed every run), from a
  text of at most 1 MiB, nested at most MAX_DEPTH deep;
- nothing that may be a secret, which must not outlive the file it was read from (a manifest
  on a secret mount, a build's): a manifest with values it hands to processes or writes into
  files (``env``, ``launch``, an artifact's ``options``: HF_TOKEN, ``--api-key``, an env-file
  value) is parsed every run, as is one holding any key or value the rule of pip's kept
  settings flags (redact.may_be_credential: a secret-looking name, a ``@``, a ``?``, URL
  user-info, a ``NAME=value``, a token-like segment of a URL's path).
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

from ascendpatch import cachedir, catalog, redact
from ascendpatch.env.introcache import checksums
from ascendpatch.untrusted import UntrustedDocumentError, load_json

MAX_DEPTH = 64  # no manifest needs more; deeper input is refused before anything recurses
FORMAT = 1
MAX_KEPT_TEXT = 1 << 20  # the bundled manifests are a few KB
# where a manifest holds values it hands to processes or writes into files: never kept
HANDED_ON = frozenset({"env", "launch", "options"})
_SCALARS = (str, int, float, bool, type(None))
_MISSING = object()


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


def document(text: str, path: Path) -> object:
    """The document the YAML ``text`` (read from ``path``) holds: the kept parse of this very
    text by this very parser when there is one, else the parser's (kept for the next run when
    it may be). Malformed or too deep: ManifestError, as the parser says."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    parser = parser_stats()
    where = cache_path(path)
    if parser is not None:
        kept = _load(where, digest, parser)
        if kept is not _MISSING:
            return kept
    from ascendpatch.manifest import yamlparse

    parsed = yamlparse.parse(text, path)
    if parser is not None and len(text) <= MAX_KEPT_TEXT and keepable(parsed):
        _save(where, digest, parser, parsed)
    return parsed


def cache_path(path: Path) -> Path:
    """One file per manifest path, named by checksums of the absolute path (what they tell
    apart is a change of name; the text's own SHA-256 is inside)."""
    return catalog.cache_dir() / "manifests" / f"{checksums(str(path.absolute()))}.json"


def _stat(path: str) -> list[int] | None:
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def parser_stats() -> list[list[int]] | None:
    """The parser's identity: the stats of ascendpatch's yamlparse.py and PyYAML's
    ``__init__.py`` (found without importing it), or None when either cannot be told."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("yaml")
    except (ImportError, ValueError):
        return None
    origin = spec.origin if spec is not None else None
    ours = _stat(str(Path(__file__).with_name("yamlparse.py")))
    theirs = _stat(origin) if origin else None
    return [ours, theirs] if ours is not None and theirs is not None else None


def keepable(doc: object) -> bool:
    """Whether JSON holds ``doc`` exactly and nothing in it may be a secret (module doc)."""
    stack: list[tuple[object, str]] = [(doc, "")]
    while stack:
        value, name = stack.pop()
        if type(value) is dict:
            for key, item in value.items():
                if (type(key) is not str or redact.may_be_credential("", key)
                        or (key in HANDED_ON and item not in (None, {}, []))):
                    return False
                stack.append((item, key))
        elif type(value) is list:
            stack.extend((item, name) for item in value)
        elif type(value) not in _SCALARS or not _plain_scalar(name, value):
            return False
    return True


def _plain_scalar(name: str, value: object) -> bool:
    if type(value) is float:
        return math.isfinite(value)
    if value is None or redact.is_secret(name):
        return value is None
    return not (type(value) is str and redact.may_be_credential(name, value))


def _exact(doc: object) -> bool:
    """Whether a kept document is of JSON's exact types with finite numbers (it was written so;
    a file of another shape is parsed again)."""
    stack = [doc]
    while stack:
        value = stack.pop()
        if type(value) is dict:
            stack.extend(value.values())
        elif type(value) is list:
            stack.extend(value)
        elif type(value) is float and not math.isfinite(value):
            return False
    return True


def _load(where: Path, digest: str, parser: list[list[int]]) -> object:
    raw = cachedir.read(where, quiet=True)
    if raw is None:
        return _MISSING
    try:
        kept = load_json(raw, "a kept manifest", MAX_DEPTH + 2)
    except UntrustedDocumentError:
        return _MISSING
    if (type(kept) is not dict or kept.get("format") != FORMAT
            or kept.get("sha256") != digest or kept.get("parser") != parser
            or "document" not in kept):
        return _MISSING
    found = kept["document"]
    return found if too_deep(found) is None and _exact(found) else _MISSING


def _save(where: Path, digest: str, parser: list[list[int]], doc: Any) -> None:
    import json

    try:
        payload = json.dumps({"format": FORMAT, "sha256": digest, "parser": parser,
                              "document": doc}, allow_nan=False, separators=(",", ":"))
    except (ValueError, RecursionError):
        return
    cachedir.write(where, payload.encode(), quiet=True)
