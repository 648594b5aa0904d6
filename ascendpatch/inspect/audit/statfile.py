"""The stat cache's file: what a repeat audit reads before its first stat, laid out so that
reading it costs next to nothing.

Format 3 kept each file as a JSON list ``[size, mtime_ns, inode, ctime_ns, digest]`` in an
object keyed by path; format 4 packed the numbers in base64 columns inside the JSON (2.4 MB
for bench/run.py's 15,080 files). Parsing that JSON and building a 15k-entry dict from it took
20-30 ms of a 145 ms repeat audit there, more than the audit's own work beside its stats.
Format 5 is a binary file:

- a first line, :data:`MAGIC` (the format's name and number);
- a second line, the header: one JSON object holding everything but the files' entries (the
  target, when its audit started, the orphan walks, the last full audit's summary) and the
  sizes of what follows;
- the paths (``os.fsencode``\\ d, NUL-separated: no path holds a NUL), the digests (RECORD
  form, ASCII, NUL-separated), then four columns of little-endian 64-bit integers, one number
  per file each: size, mtime_ns, inode, ctime_ns (signed, but the inode: an overlayfs inode can
  use all 64 bits).

:func:`load` splits the file into :class:`Columns` (one ``bytes.split`` of the paths, four
``array.frombytes``, the digests checked where they lie: about 4 ms for bench/run.py's 15,080
files, against 20-30 ms for format 4 on the same machine and day); the repeat audit walks
them as they are (:meth:`Columns.rows`, paths as bytes, which ``os.stat`` takes without
encoding them again), and only an audit that has to look a file up builds the dict
(:meth:`Columns.entries`).

The cache folder is ascendpatch's own (cachedir), yet what it holds is still checked: a file of
any other shape, a header of another type, sections whose sizes do not add up to the file's,
columns of other lengths, a path named twice, are no cache at all (the audit then hashes
everything, as on a first run), never a crash nor a wrong answer. An entry that cannot be
written (a number out of its column's range, a path that is not a file system name, a digest
that is not ASCII, a NUL) is left out: that file is hashed again next time, and the file keeps
no summary (``partial``), so no repeat audit answers without it.
"""

from __future__ import annotations

import array
import json
import os
import sys
from collections.abc import Iterator, Mapping
from operator import itemgetter
from typing import Any

Entry = tuple[int, int, int, int, str]  # size, mtime_ns, inode, ctime_ns, digest (RECORD form)
Row = tuple[bytes, int, int, int, int]  # path (fsencoded), size, mtime_ns, inode, ctime_ns

FORMAT = 5
MAGIC = b"ascendpatch stat cache 5\n"
_SIGNED, _UNSIGNED = "q", "Q"
_LIMITS = {_SIGNED: (-(2**63), 2**63 - 1), _UNSIGNED: (0, 2**64 - 1)}
_WORD = 8  # bytes per packed number
_NUMBERS = (_SIGNED, _SIGNED, _UNSIGNED, _SIGNED)  # size, mtime_ns, inode, ctime_ns
_SEP = b"\0"
_ENCODING = sys.getfilesystemencoding()  # what os.fsencode uses, with surrogateescape


def _packed(code: str, values: Iterator[int]) -> bytes:
    column = array.array(code, values)  # OverflowError: a value out of the column's range
    if sys.byteorder == "big":
        column.byteswap()
    return column.tobytes()


def _unpacked(code: str, data: bytes) -> array.array[int]:
    column = array.array(code)
    column.frombytes(data)
    if sys.byteorder == "big":
        column.byteswap()
    return column


def _fits(key: str, entry: Entry) -> bool:
    """Whether the entry can be written: its numbers fit their columns (a stat of a hostile
    file system may not), its path is a file system name, its digest ASCII, neither with a
    NUL."""
    if not all(_LIMITS[code][0] <= number <= _LIMITS[code][1]
               for code, number in zip(_NUMBERS, entry[:4], strict=True)):
        return False
    try:
        return _SEP not in os.fsencode(key) and entry[4].isascii() and "\0" not in entry[4]
    except UnicodeError:
        return False


def _sections(entries: Mapping[str, Entry]) -> tuple[int, list[bytes]]:
    """Raises OverflowError, UnicodeError or ValueError when some entry cannot be written.
    Each section is made by one C call over all entries (15,080 in 3 ms)."""
    values = entries.values()
    keys = "\0".join(entries).encode(_ENCODING, "surrogateescape")
    digests = "\0".join(map(itemgetter(4), values)).encode("ascii")
    separators = max(len(entries) - 1, 0)
    if keys.count(_SEP) != separators or digests.count(_SEP) != separators:
        raise ValueError("a path or digest holds a NUL")
    numbers = [_packed(code, map(itemgetter(i), values)) for i, code in enumerate(_NUMBERS)]
    return len(entries), [keys, digests, *numbers]


def dump(header: Mapping[str, Any], entries: Mapping[str, Entry],
         partial: Mapping[str, Any] | None = None) -> bytes:
    """The cache file holding ``header`` (a JSON object) and ``entries`` (those that can be
    written, see :func:`_fits`). ``partial``: the header written instead when some entry was
    left out (the stat cache's keeps no summary then: a repeat audit that answered from it
    would never look at the file left out)."""
    try:  # every entry is checked in C; one by one only when one cannot be written
        count, sections = _sections(entries)
    except (OverflowError, UnicodeError, ValueError):
        count, sections = _sections({k: e for k, e in entries.items() if _fits(k, e)})
        header = header if partial is None or count == len(entries) else partial
    head = dict(header, count=count, keys=len(sections[0]), digests=len(sections[1]))
    line = json.dumps(head, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    return b"".join((MAGIC, line, b"\n", *sections))


class Columns:
    """The files' entries as :func:`load` found them: parallel columns, checked for length."""

    def __init__(self, keys: list[bytes], digests: bytes,
                 numbers: list[array.array[int]]) -> None:
        """``digests``: their section as it is (ASCII, NUL-separated, as many as ``keys``),
        split only by :meth:`entries`; ``numbers``: the four columns, in :data:`Entry`'s
        order."""
        self.keys, self.numbers = keys, numbers
        self._digests = digests

    def __len__(self) -> int:
        return len(self.keys)

    def rows(self) -> Iterator[Row]:
        """(path as bytes, size, mtime_ns, inode, ctime_ns) of every file, in the file's
        order; nothing decoded."""
        return zip(self.keys, *self.numbers, strict=True)

    def entries(self) -> dict[str, Entry]:
        """The columns as the path -> :data:`Entry` dict the audit looks files up in."""
        digests = self._digests.decode("ascii").split("\0") if self.keys else []
        keys = _SEP.join(self.keys).decode(_ENCODING, "surrogateescape").split("\0") \
            if self.keys else []
        return dict(zip(keys, zip(*self.numbers, digests, strict=True), strict=True))


def _split(blob: bytes, count: int) -> list[bytes]:
    parts = blob.split(_SEP) if count else ([] if not blob else [blob])
    if len(parts) != count:
        raise ValueError("the stat cache's columns differ in length")
    if len(set(parts)) != count:  # (dump writes each path once: 1 ms for 15k)
        raise ValueError("the stat cache names a file twice")
    return parts


def _checked_text(blob: bytes, count: int) -> bytes:
    """``count`` ASCII texts, NUL-separated (checked in C, without splitting them)."""
    if not blob.isascii():
        raise ValueError("the stat cache's digests are not ASCII")
    if (blob.count(_SEP) + 1 if count else len(blob)) != count:
        raise ValueError("the stat cache's columns differ in length")
    return blob


def load(data: bytes) -> tuple[dict[str, Any], Columns]:
    """The header and the columns of a file :func:`dump` wrote; ValueError, TypeError or
    KeyError for anything else (another format, a header that is not an object, sections whose
    sizes do not add up to the file's, columns of other lengths, a path named twice)."""
    if not data.startswith(MAGIC):
        raise ValueError("not a stat cache of format 5")
    end = data.find(b"\n", len(MAGIC))
    if end < 0:
        raise ValueError("the stat cache's header is cut")
    try:
        header = json.loads(data[len(MAGIC):end])
    except RecursionError as exc:  # a header nested thousands deep
        raise ValueError("the stat cache's header is nested too deep") from exc
    if not isinstance(header, dict):
        raise TypeError("the stat cache's header must be an object")
    count, keys_size, digests_size = header["count"], header["keys"], header["digests"]
    if not all(type(n) is int and n >= 0 for n in (count, keys_size, digests_size)):
        raise TypeError("the stat cache's sizes must be whole numbers")
    start = end + 1
    at = start + keys_size + digests_size
    column = _WORD * count
    if len(data) != at + len(_NUMBERS) * column:
        raise ValueError("the stat cache's sections do not add up to its size")
    keys = _split(data[start:start + keys_size], count)
    digests = _checked_text(data[start + keys_size:at], count)
    numbers = [_unpacked(code, data[at + i * column:at + (i + 1) * column])
               for i, code in enumerate(_NUMBERS)]
    return header, Columns(keys, digests, numbers)
