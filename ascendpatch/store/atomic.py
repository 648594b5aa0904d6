"""Atomic file replacement: temp file in the same folder, fsync, os.replace, fsync the folder."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

TEMP_SUFFIX = ".ascendpatch-tmp"


def temp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}{TEMP_SUFFIX}")


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace ``path`` with ``data``; readers see the old or the new file, never a mix."""
    tmp = temp_path(path)
    if mode is None:
        mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
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
    fsync_dir(path.parent)


def remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
        fsync_dir(path.parent)


def drop_bytecode(path: Path) -> None:
    """Remove cached bytecode of a changed ``.py`` file.

    Python revalidates timestamp pycs by mtime and size, which a same-size edit within one
    second can fool, and never revalidates ``unchecked-hash`` pycs: removing them is the only
    way to be sure the interpreter runs the new source.
    """
    if path.suffix != ".py":
        return
    cache = path.parent / "__pycache__"
    if not cache.is_dir():
        return
    for pyc in cache.glob(f"{path.stem}.*.pyc"):
        with contextlib.suppress(FileNotFoundError):
            pyc.unlink()


def symlink_atomic(path: Path, target: str) -> None:
    """Make ``path`` a symlink to ``target`` atomically (link a temp name, then os.replace)."""
    tmp = temp_path(path)
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    tmp.symlink_to(target)
    os.replace(tmp, path)
    fsync_dir(path.parent)


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
