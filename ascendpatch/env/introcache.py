"""The target interpreter's report, cached so that an unchanged target runs nothing.

Introspection starts the target interpreter (tens of milliseconds, more on a loaded host). Its
report depends only on the interpreter, the folders on its ``sys.path``, the ``.pth`` files in
its site folders, the user site folder, a few environment variables, the kernel (the PEP 508
markers) and the script itself. The cache keeps the report with a fingerprint of all of these
(stat results, mtime and ctime; ctime cannot be set back from user space) and is used only
while the fingerprint is unchanged: installing or removing a distribution changes the mtime of
the folder that holds its ``.dist-info``.

A stat proves nothing about a change made while the interpreter was reporting, or in the same
timestamp tick (the "racy git" rule, ascendpatch/stamps.py): a distribution
installed between the report and the fingerprint would be missing from a report whose
fingerprint already shows it. So a report is cached only when nothing it was derived from
changed safely before the interpreter started (:func:`save`'s ``since``); else the next run
asks the interpreter again.

Kept in ascendpatch's own cache folder (never in the target; one that fails cachedir's check is
not used), one file per interpreter path.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Any

from ascendpatch import cachedir, catalog
from ascendpatch.stamps import is_stat, racy, stat_of

# On a cold run this module decides whether the target interpreter must start at all, so what
# it imports is waited for before that start; on a warm one, install's reading of pip's
# settings waits for it (shell/cliargs._prefetch). So no hashlib (OpenSSL's libcrypto: 10 ms,
# 30 ms with a cold page cache): the script and the path are told apart by zlib's checksums
# (what they guard against is a change, not an adversary: both are ascendpatch's own); json
# only where a cache file exists or is written.
FORMAT = 3
_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONUSERBASE", "PYTHONSAFEPATH",
        "PYTHONPLATLIBDIR", "HOME")


def cache_path(python: Path) -> Path:
    """One file per interpreter path, named by two checksums of it (zlib: no hashlib before
    the start); the file names the path it is for, and another's is never used (:func:`load`)."""
    return catalog.cache_dir() / "introspect" / f"{checksums(os.path.abspath(python))}.json"


def checksums(text: str | bytes) -> str:
    """Two zlib checksums of ``text`` (a path or a script: encoded as file names are), as one
    16-digit name. They tell a change, not an adversary; they load no OpenSSL."""
    data = os.fsencode(text)
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def pth_files(folder: str) -> list[Any]:
    """The ``.pth`` files of ``folder`` (run by site at every start), each with its stat,
    sorted by name."""
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".pth"))
    except (OSError, ValueError):  # (ValueError: a NUL in a path a cache file names)
        return []
    return [[name, stat_of(os.path.join(folder, name))] for name in names]


def _stats(fingerprinted: list[Any]) -> list[list[int]]:
    """Every stat in a :func:`fingerprint`, by its shape there (stamps.is_stat)."""
    found: list[list[int]] = []
    for item in fingerprinted:
        if is_stat(item):
            found.append(item)
        elif isinstance(item, list):
            found.extend(_stats(item))
    return found


def settled(fingerprinted: list[Any], since: int) -> bool:
    """Whether every stat of the fingerprint is safely older than ``since`` (``time.time_ns``
    before the interpreter started): none could hide a change made while it reported."""
    return not any(racy(st[0], st[1], since) for st in _stats(fingerprinted))


def fingerprint(python: Path, script: str, info: dict[str, Any]) -> list[Any]:
    """Everything the report in ``info`` was derived from, as it stands now."""
    path = os.path.abspath(python)
    folders = list(dict.fromkeys([*info.get("sys_path", []), *info.get("site_packages", [])]))
    user_site = info.get("user_site")
    uname = os.uname()
    return [
        FORMAT, checksums(script),
        stat_of(path, follow=False), stat_of(path),
        [os.environ.get(name) for name in _ENV],
        [uname.release, uname.version, uname.machine],
        [[folder, stat_of(folder)] for folder in folders],
        [[folder, pth_files(folder)] for folder in info.get("site_packages", [])],
        [user_site, stat_of(user_site) if isinstance(user_site, str) else None],
    ]


def load(python: Path, script: str) -> dict[str, Any] | None:
    """The cached report, or None when there is none or anything it depends on changed."""
    raw = cachedir.read(cache_path(python))
    if raw is None:
        return None
    import json

    try:
        doc = json.loads(raw)
        info = doc["info"]
        if doc.get("python") != os.path.abspath(python) or not isinstance(info, dict):
            return None
        # a JSON round trip turns the fingerprint's tuples into lists, as stored
        if doc["fingerprint"] != json.loads(json.dumps(fingerprint(python, script, info))):
            return None
        return info
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save(python: Path, script: str, info: dict[str, Any], since: int) -> None:
    """Cache ``info``, the report of an interpreter started at ``since`` (``time.time_ns``),
    unless something it was derived from changed too recently to tell (:func:`settled`)."""
    fingerprinted = fingerprint(python, script, info)
    if not settled(fingerprinted, since):
        return
    import json

    doc = {"python": os.path.abspath(python), "fingerprint": fingerprinted, "info": info}
    cachedir.write(cache_path(python), json.dumps(doc, separators=(",", ":")).encode())
