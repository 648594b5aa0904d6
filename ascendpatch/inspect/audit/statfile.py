"""The stat cache's file entries, packed: what a repeat audit reads before its first stat.

Format 3 kept each file as a JSON list ``[size, mtime_ns, inode, ctime_ns, digest]`` in an
object keyed by path: 15,080 files made 2.6 MB that took 9.7 ms to parse and 11.8 ms to write
(bench/run.py's environment), a tenth of a repeat audit. Format 4 keeps three parallel
columns: the paths (a JSON list), the digests (a JSON list, RECORD form) and the numbers,
packed as little-endian 64-bit integers in base64 (``stats``: size, mtime_ns, ctime_ns, signed;
``inodes``: unsigned, since an overlayfs inode can use all 64 bits): 2.3 ms to parse, 5 ms to
write. A file's entry is ``(size, mtime_ns, inode, ctime_ns, digest)``.

The cache folder is ascendpatch's own (cachedir), yet what it holds is still checked: columns of
any other shape or length are no cache at all (the audit then hashes everything, as on a
first run), never a crash nor a wrong answer.
"""

from __future__ import annotations

import array
import binascii
import sys
from collections.abc import Mapping
from typing import Any

Entry = tuple[int, int, int, int, str]  # size, mtime_ns, inode, ctime_ns, digest (RECORD form)

_SIGNED, _UNSIGNED = "q", "Q"
_LIMITS = {_SIGNED: (-(2**63), 2**63 - 1), _UNSIGNED: (0, 2**64 - 1)}


def _packed(code: str, values: list[int]) -> str:
    column = array.array(code, values)
    if sys.byteorder == "big":
        column.byteswap()
    return binascii.b2a_base64(column.tobytes(), newline=False).decode("ascii")


def _unpacked(code: str, text: Any) -> array.array[int]:
    if not isinstance(text, str):
        raise TypeError("a packed column must be a string")
    column = array.array(code)
    column.frombytes(binascii.a2b_base64(text))  # ValueError: not base64, or a partial item
    if sys.byteorder == "big":
        column.byteswap()
    return column


def _fits(entry: Entry) -> bool:
    """Whether the entry's numbers fit their columns (a stat of a hostile file system may
    not: such a file is simply not cached, and hashed again next time)."""
    low, high = _LIMITS[_SIGNED]
    return low <= entry[0] <= high and low <= entry[1] <= high and low <= entry[3] <= high \
        and 0 <= entry[2] <= _LIMITS[_UNSIGNED][1]


def _columns(entries: Mapping[str, Entry]) -> tuple[list[str], list[str], str, str]:
    """Raises OverflowError when some number does not fit its column."""
    values = entries.values()
    stats = [n for size, mtime, _ino, ctime, _digest in values for n in (size, mtime, ctime)]
    return (list(entries), [entry[4] for entry in values], _packed(_SIGNED, stats),
            _packed(_UNSIGNED, [entry[2] for entry in values]))


def encode(entries: Mapping[str, Entry]) -> dict[str, Any]:
    """The JSON object holding ``entries`` (those whose numbers fit)."""
    try:  # every number is checked by array, in C; one by one only when one is out of range
        keys, digests, stats, inodes = _columns(entries)
    except OverflowError:
        keys, digests, stats, inodes = _columns({k: e for k, e in entries.items() if _fits(e)})
    return {"keys": keys, "digests": digests, "stats": stats, "inodes": inodes}


def decode(doc: Any) -> dict[str, Entry]:
    """The entries of a JSON object :func:`encode` wrote; ValueError or TypeError for anything
    else (a wrong type, a column of another length, a value that is not a path or digest)."""
    if not isinstance(doc, dict):
        raise TypeError("the files must be an object")
    keys, digests = doc["keys"], doc["digests"]
    if not (isinstance(keys, list) and isinstance(digests, list)):
        raise TypeError("keys and digests must be lists")
    stats, inodes = _unpacked(_SIGNED, doc["stats"]), _unpacked(_UNSIGNED, doc["inodes"])
    count = len(keys)
    if len(digests) != count or len(inodes) != count or len(stats) != 3 * count:
        raise ValueError("the stat cache's columns differ in length")
    "".join(keys), "".join(digests)  # TypeError unless every one is a string (in C: 0.1 ms)
    numbers = zip(stats[0::3], stats[1::3], inodes, stats[2::3], digests, strict=True)
    return dict(zip(keys, numbers, strict=True))
