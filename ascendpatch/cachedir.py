"""The one check every cache folder passes before ascendpatch reads, writes or runs from it.

ascendpatch runs as root on shared hosts and ``$ASCENDPATCH_CACHE`` (catalog.cache_dir) may
point anywhere. A cache folder another user can write lets them plant what a later run reads
(a release archive that decides ``catalog-check``'s verdict, a stack report) or executes (the
pip-tools venv of ``lock``). So a cache folder is used only when it and every folder from the
cache root down are real folders (no symbolic link) owned by the running user that no one else
can write; above the root, a folder others can write is accepted only with the sticky bit
(like /tmp). Missing folders are created 0700.

Where the check fails, a cache of data is not used this run: :func:`folder` says so in one
``[WARN]`` line (progress.notice) and hands out a fresh private folder instead, unless the cache
is the only source (``--offline``), which raises :class:`UnsafeCacheError`, as does
:func:`trusted`, for a cache whose content is executed: nothing is ever run from a cache that
fails the check.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from ascendpatch import catalog, progress
from ascendpatch.errors import AscendpatchError
from ascendpatch.paths import (
    NotRegularFileError,
    foreign_owner,
    open_regular,
    open_to_others,
    untrusted_on_the_way,
)

if TYPE_CHECKING:
    import tempfile

FIX = "chown/chmod it, or point ASCENDPATCH_CACHE at a folder of your own"
# The files a cache folder keeps: most are one file per path (a manifest's, an interpreter's,
# a stack's), and paths come and go (a manifest in a fresh temp folder each CI run): past this
# many, the least recently written go when another is written.
KEEP = 64

_stand_ins: dict[Path, tempfile.TemporaryDirectory[str]] = {}


class UnsafeCacheError(AscendpatchError):
    """A cache folder that others could have written, where only a trusted one will do."""


def _above(root: Path) -> str | None:
    """Why a folder above the cache root lets someone else replace the root, if one does."""
    found = untrusted_on_the_way(Path(os.path.realpath(root.parent)))
    return None if found is None else f"{found[0]} is {found[1]}"


def _own(path: Path) -> str | None:
    """Why ``path`` (created 0700 when missing) is not a folder of this user's alone."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a folder"
    why = foreign_owner(info, root_ok=False) or open_to_others(info)
    return None if why is None else f"{path} is {why}"


def problem(folder: Path) -> str | None:
    """None when ``folder`` (under the cache root; created 0700 when missing) passes the check;
    else why not, naming the folder at fault."""
    root = catalog.cache_dir().absolute()
    folder = folder.absolute()
    if folder != root and root not in folder.parents:
        return f"{folder} is not under the cache root {root}"
    chain = [root, *[root.joinpath(*folder.relative_to(root).parts[:i + 1])
                     for i in range(len(folder.relative_to(root).parts))]]
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        return _above(root) or next((why for path in chain if (why := _own(path))), None)
    except OSError as exc:
        return f"{exc.filename or folder}: {exc.strerror or exc}"


def usable(folder: Path) -> bool:
    """True when ``folder`` passes the check; else False, and the run says so once."""
    why = problem(folder)
    if why is not None:
        progress.notice(f"cache not used this run: {why}; fix: {FIX}")
    return why is None


def folder(*parts: str, only_source: bool = False) -> Path:
    """The cache folder ``<cache root>/<parts>`` when it passes the check; else (after one
    [WARN] line) a fresh private folder for this run only. ``only_source``: nothing but the
    cache can give what is looked for (--offline): a failed check is then an error."""
    path = catalog.cache_dir().joinpath(*parts)
    if only_source:
        return trusted(path, "--offline leaves no other place to look")
    if usable(path):
        return path
    if path not in _stand_ins:  # removed when the process ends
        import tempfile  # (only here: random and its kin are not every start-up's)

        _stand_ins[path] = tempfile.TemporaryDirectory(prefix="ascendpatch-cache-")
    return Path(_stand_ins[path].name)


def trusted(path: Path, why_needed: str) -> Path:
    """``path`` when it passes the check; else UnsafeCacheError naming it and the fix."""
    why = problem(path)
    if why is not None:
        raise UnsafeCacheError(f"cannot use the cache: {why}; {why_needed}", fix=FIX)
    return path


def trusted_tree(path: Path, why_needed: str) -> Path:
    """``path`` when it passes the check and nothing under it is a file or folder another
    user owns or can write (what is executed from it)."""
    trusted(path, why_needed)
    for folder_name, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            entry = Path(folder_name) / name
            info = os.lstat(entry)
            why = foreign_owner(info, root_ok=False) or (
                None if stat.S_ISLNK(info.st_mode) else open_to_others(info))
            if why is not None:
                raise UnsafeCacheError(f"cannot use the cache: {entry} is {why}; {why_needed}",
                                       fix=FIX)
    return path


def _passes(folder: Path, quiet: bool) -> bool:
    return problem(folder) is None if quiet else usable(folder)


def read(path: Path, *, quiet: bool = False) -> bytes | None:
    """A cache file's bytes when it and its folder are this user's alone, else None (and,
    for a folder that fails the check, one [WARN] line, unless ``quiet``: a cache that only
    saves time, whose loss the user need not hear of)."""
    if not _passes(path.parent, quiet):
        return None
    try:
        # never follows a link, never blocks on a FIFO planted where the cache goes
        handle, info = open_regular(path, follow_links=False)
    except (OSError, NotRegularFileError):
        return None
    with handle:
        return handle.read() if info.st_uid == os.geteuid() else None


def write(path: Path, payload: bytes, *, quiet: bool = False, keep: int = KEEP) -> None:
    """Best effort: a cache folder that cannot be written (or fails the check) gets no cache.
    The write goes through store.atomic, whose temp file is created in the same folder: a
    reader sees the old file or the new one. It is not fsynced (two fsyncs cost 20-30 ms of a
    0.6 s cold audit): a cache file a crash cuts is one its reader does not take (each checks
    what it reads), and the next run writes it again. The folder keeps at most ``keep``
    files. ``quiet``: as for :func:`read`."""
    if not _passes(path.parent, quiet):
        return
    # (imported here: reading a cache, as the parser's prefetch does, loads no store)
    from ascendpatch.store import atomic

    with contextlib.suppress(OSError):
        atomic.write_atomic(path, payload, mode=0o600, durable=False)
        _bounded(path.parent, path.name, keep)


def _bounded(folder: Path, written: str, keep: int) -> None:
    """``folder``'s least recently written cache files past ``keep`` removed, never
    ``written`` (the file just written). Only files of its kind go (:func:`_same_kind`): the
    cache root may be any folder (``$ASCENDPATCH_CACHE`` pointed at a checkout whose
    ``manifests/`` holds the user's YAML), and what is not a cache file is not ours to
    remove. Best effort: a file gone meanwhile is gone."""
    found = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name == written or not _same_kind(entry.name, written):
                continue
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() \
                        and stat.S_IMODE(info.st_mode) == 0o600:
                    found.append((info.st_mtime_ns, entry.name))
    for _, name in sorted(found)[:max(0, len(found) - (keep - 1))]:
        with contextlib.suppress(OSError):
            (folder / name).unlink()


def _same_kind(name: str, written: str) -> bool:
    """Whether ``name`` is a cache file as ``written`` is: a name of the same length and
    ending whose stem is a checksum in hex (never a temp file in flight: a dot name)."""
    stem, dot, rest = name.partition(".")
    return len(name) == len(written) and dot + rest == written[len(stem):] and is_hex(stem)


def is_hex(name: str) -> bool:
    """Whether ``name`` is a checksum in lowercase hex, as cache files and folders are named."""
    return name != "" and all(c in "0123456789abcdef" for c in name)


def remove(path: Path) -> None:
    """Best effort: a cache file gone (an older format's, say), in a folder that passes the
    check; a folder that fails it is left alone. (unlink never follows a link.)"""
    if not usable(path.parent):
        return
    with contextlib.suppress(OSError):
        path.unlink()
