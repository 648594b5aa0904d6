"""Atomic file replacement: temp file in the same folder, fsync, os.replace, fsync the folder.

Temp files get unpredictable names and are created with ``O_EXCL | O_NOFOLLOW`` (``mkstemp``):
a symlink or file planted where a temp file will go is never followed or truncated.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from pathlib import Path

from ascendpatch.errors import RefusedError

TEMP_SUFFIX = ".ascendpatch-tmp"


def temp_glob(path: Path) -> str:
    """The glob (in ``path.parent``) matching every temp file made for ``path``."""
    return f".{path.name}.*{TEMP_SUFFIX}"


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace ``path`` with ``data``; readers see the old or the new file, never a mix.

    The temp file is removed again when anything fails (a full disk leaves no debris)."""
    if mode is None:
        try:
            mode = path.lstat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise
    fsync_dir(path.parent)


def remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
        fsync_dir(path.parent)


def drop_bytecode(path: Path) -> None:
    """Remove cached bytecode of a changed ``.py`` file.

    Python revalidates timestamp pycs by mtime and size, which a same-size edit within one
    second can fool, and never revalidates ``unchecked-hash`` pycs: removing them is the only
    way to be sure the interpreter runs the new source. A symlinked ``__pycache__`` is refused:
    removal never leaves the folder the file lives in.
    """
    if path.suffix != ".py":
        return
    cache = path.parent / "__pycache__"
    if cache.is_symlink():
        raise RefusedError(f"{cache} is a symlink; ascendpatch does not follow it",
                           fix=f"remove the link ({cache}) and run again")
    if not cache.is_dir():
        return
    for pyc in cache.glob(f"{path.stem}.*.pyc"):
        with contextlib.suppress(FileNotFoundError):
            pyc.unlink()  # a link named like a pyc: the link goes, never what it points to


def symlink_atomic(path: Path, target: str) -> None:
    """Make ``path`` a symlink to ``target`` atomically (link a fresh name, then os.replace)."""
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}{TEMP_SUFFIX}")
        try:
            tmp.symlink_to(target)  # fails (never follows) when the name exists
            break
        except FileExistsError:
            continue
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def missing_parents(path: Path, stop: Path) -> list[Path]:
    """The folders between ``stop`` and ``path`` that do not exist yet, deepest first."""
    out = []
    current = path.parent
    while current != stop and stop in current.parents and not current.exists():
        out.append(current)
        current = current.parent
    return out


def prune_empty(folder: Path, stop: Path) -> None:
    """Remove ``folder`` and its parents while they are empty, never ``stop`` or above it."""
    stop = stop.resolve()
    current = folder
    while current.resolve() != stop and stop in current.resolve().parents:
        try:
            current.rmdir()
        except OSError:  # not empty (or gone): stop here
            return
        current = current.parent
