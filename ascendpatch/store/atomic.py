"""Atomic file replacement: temp file in the same folder, fsync, os.replace, fsync the folder.

Inside :func:`deferred_sync` (a transaction's batch of backups, or of replacements) those
fsyncs wait for the end of the batch, which issues them all at once from a few threads: the
file system commits concurrent fsyncs together, where 700 in a row (a 226-file catalog) cost
seconds of waiting. The caller's ordering stays: nothing after the batch starts before every
file and folder of it is on disk.

Temp files get unpredictable names and are created with ``O_EXCL | O_NOFOLLOW`` (``mkstemp``):
a symlink or file planted where a temp file will go is never followed or truncated. A temp
name is never derived from the file's own name: it has a fixed length (33 bytes), so a file
whose name is already NAME_MAX (255 bytes) long still gets one.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from ascendpatch.errors import RefusedError
from ascendpatch.store.root import Root, open_unlinked

TEMP_SUFFIX = ".ascendpatch-tmp"
_T = TypeVar("_T")


def temp_name() -> str:
    """A fresh, unpredictable temp name of fixed length, whatever the file is called."""
    import secrets  # (here: random and its kin load only when something is written)

    return f".{secrets.token_hex(8)}{TEMP_SUFFIX}"


# Every temp file in a folder (the name does not say which file a temp file was for).
TEMP_GLOB = f".*{TEMP_SUFFIX}"

_SYNC_THREADS = 16
# The batch of deferred_sync, while one is open: folder -> names of files written in it.
_pending: dict[str, set[str]] | None = None


@contextlib.contextmanager
def deferred_sync() -> Iterator[None]:
    """Writes and removals inside skip their fsyncs; leaving (without an exception) fsyncs
    every file written and every folder changed, concurrently, and returns once all are on
    disk (an OSError of any is raised). After an exception nothing is synced: the caller
    rolls back, and its own writes sync as usual."""
    global _pending
    if _pending is not None:  # nested: the outer batch syncs
        yield
        return
    batch: dict[str, set[str]] = {}
    _pending = batch
    try:
        yield
    finally:
        _pending = None
    sync_all(batch.items())


def sync_all(batch: Iterable[tuple[str, set[str]]]) -> None:
    """fsync each file (by name in its folder, never through a link) and each folder."""
    jobs = [(folder, name) for folder, names in batch for name in (*names, None)]
    if not jobs:
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(_SYNC_THREADS, len(jobs))) as pool:
        errors = [e for e in pool.map(_sync_one, jobs) if e is not None]
    if errors:
        raise errors[0]


def _sync_one(job: tuple[str, str | None]) -> OSError | None:
    folder, name = job
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        if name is not None:  # a file: opened read-only in its folder, never followed
            dfd, fd = fd, -1
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                             dir_fd=dfd)
            finally:
                os.close(dfd)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except FileNotFoundError:
        return None  # gone since (a later change of the batch removed it): nothing to sync
    except OSError as exc:
        exc.filename = exc.filename or f"{folder}/{name or ''}".rstrip("/")
        return exc
    return None


def _synced(fd: int, folder: Path, name: str | None) -> None:
    """fsync ``fd`` now, or leave it to the open batch (``name``: a file; None: a folder)."""
    if _pending is None:
        os.fsync(fd)
        return
    names = _pending.setdefault(str(folder), set())
    if name is not None:
        names.add(name)


@contextlib.contextmanager
def _named(folder: Path, whole: Path | None = None) -> Iterator[None]:
    """Calls relative to a folder descriptor report bare names: give faults the full path
    (``folder / name``, or ``whole``), so the one-line message names the file."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc.filename, str) and not Path(exc.filename).is_absolute():
            exc.filename = str(whole or folder / exc.filename)
        raise


def open_dir(folder: Path, root: Path | None = None, *, create: bool = False,
             unlinked: bool = False) -> int:
    """A descriptor of ``folder``. With ``root``: reached through :meth:`Root.open_dir`, never
    following a link out of ``root``. ``unlinked``: reached from ``/`` through no link at all
    (:func:`~ascendpatch.store.root.open_unlinked`). ``create``: make missing folders (as
    ``mkdir -p``)."""
    with _named(folder, folder):
        if unlinked:
            return open_unlinked(folder, create=create)
        if root is not None:
            return Root(root).open_dir(folder, create=create)
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def write_atomic(path: Path, data: bytes, mode: int | None = None, *,
                 root: Path | None = None, owner: tuple[int, int] | None = None,
                 unlinked: bool = False, durable: bool = True) -> None:
    with _named(path.parent):
        _write_atomic(path, data, mode, root, owner, unlinked, durable)


def _write_atomic(path: Path, data: bytes, mode: int | None, root: Path | None,
                  owner: tuple[int, int] | None, unlinked: bool = False,
                  durable: bool = True) -> None:
    """Replace ``path`` with ``data``; readers see the old or the new file, never a mix.

    The temp file is created ``O_EXCL | O_NOFOLLOW`` under an unpredictable name in the
    destination folder (mode 0600 until it is complete), and removed again when anything
    fails (a full disk leaves no debris). ``root``: the tree ``path`` must stay in; its folder
    is reached without following links (see :func:`open_dir`). ``owner``: (uid, gid) the file
    gets before its mode (a backup keeps its original's). ``unlinked``: the folder is reached
    from ``/`` through no link at all, so a folder on the way that another uid controls cannot
    be swapped for a link between a caller's check and this write. ``durable=False``: still
    atomic, but neither the file nor its folder is fsynced (a cache, whose reader takes a file
    cut by a crash for no cache: ascendpatch's cache files, cachedir.write)."""
    dfd = open_dir(path.parent, root, unlinked=unlinked)
    try:
        if mode is None:
            try:
                mode = os.stat(path.name, dir_fd=dfd, follow_symlinks=False).st_mode & 0o7777
            except FileNotFoundError:
                mode = 0o644
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with _replacing(dfd, path, lambda tmp: os.open(tmp, flags, 0o600, dir_fd=dfd),
                        sync=durable) as fd:
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                if owner is not None:
                    os.fchown(fd, *owner)
                os.fchmod(fd, mode)
                if _pending is None and durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
    finally:
        os.close(dfd)


@contextlib.contextmanager
def _replacing(dfd: int, path: Path, create: Callable[[str], _T], *, link: bool = False,
               sync: bool = True) -> Iterator[_T]:
    """A temp entry beside ``name`` in the folder ``dfd``, under an unpredictable name, made by
    ``create(temp name)``, which must fail with FileExistsError when the name is taken (and so
    never follow or reuse what is there); the with-body finishes it; then it replaces ``name``
    (os.replace) and the folder is fsynced. When anything fails the temp entry is removed: a
    failure (a full disk) leaves no debris. ``link``: the entry is a symlink (no data of its
    own to sync). ``sync=False``: the folder is not fsynced."""
    name = path.name
    while True:
        tmp = temp_name()
        try:
            made = create(tmp)
            break
        except FileExistsError:
            continue
    try:
        yield made
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise
    if sync:
        _synced(dfd, path.parent, None if link else name)


def remove(path: Path, *, root: Path | None = None) -> None:
    with _named(path.parent):
        _remove(path, root)


def _remove(path: Path, root: Path | None) -> None:
    try:
        dfd = open_dir(path.parent, root)
    except FileNotFoundError:
        return
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.name, dir_fd=dfd)
            _synced(dfd, path.parent, None)
    finally:
        os.close(dfd)


def drop_bytecode(path: Path, root: Path | None = None) -> None:
    """Remove cached bytecode of a changed ``.py`` file.

    Python revalidates timestamp pycs by mtime and size, which a same-size edit within one
    second can fool, and never revalidates ``unchecked-hash`` pycs: removing them is the only
    way to be sure the interpreter runs the new source. A symlinked ``__pycache__`` is refused:
    removal never leaves the folder the file lives in. ``root``: the folder is reached from it
    without following links (see :func:`open_dir`), like every write.
    """
    if path.suffix != ".py":
        return
    check_bytecode_folder(path)
    with _named(path.parent):
        try:
            folder = open_dir(path.parent, root)
        except FileNotFoundError:
            return
        try:
            try:
                cache = os.open("__pycache__", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW |
                                os.O_CLOEXEC, dir_fd=folder)
            except (FileNotFoundError, NotADirectoryError):
                return
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
                check_bytecode_folder(path)  # swapped for a link since: refused
                raise
            try:
                for name in os.listdir(cache):  # noqa: PTH208 (a folder descriptor)
                    if name.startswith(f"{path.stem}.") and name.endswith(".pyc"):
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(name, dir_fd=cache)  # a link named like a pyc: the link
            finally:                                       # goes, never what it points to
                os.close(cache)
        finally:
            os.close(folder)


def check_bytecode_folder(path: Path) -> Path:
    """The ``__pycache__`` beside ``path``; a symlinked one is refused (RefusedError)."""
    cache = path.parent / "__pycache__"
    if cache.is_symlink():
        raise RefusedError(f"{cache} is a symlink; ascendpatch does not follow it",
                           fix=f"remove the link ({cache}) and run again")
    return cache


def symlink_atomic(path: Path, target: str, *, root: Path | None = None) -> None:
    """Make ``path`` a symlink to ``target`` atomically (link a fresh name, then os.replace)."""
    with _named(path.parent):
        _symlink_atomic(path, target, root)


def _symlink_atomic(path: Path, target: str, root: Path | None) -> None:
    dfd = open_dir(path.parent, root)
    try:
        # os.symlink fails (never follows) when the name exists
        with _replacing(dfd, path, lambda tmp: os.symlink(target, tmp, dir_fd=dfd), link=True):
            pass  # a link is complete once made
    finally:
        os.close(dfd)


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
