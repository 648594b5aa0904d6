"""The form of a relative path from a manifest or a patch header (pure: no file system), and
the one way to open a file ascendpatch reads but does not own (a target's file, a log, a pid
file, a state or cache file) without hanging on what is planted there.

Where a relative path really leads (links resolved) is :class:`ascendpatch.store.root.Root`'s
job, which checks the form here first."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePath, PurePosixPath
from typing import BinaryIO

from ascendpatch.errors import UnsafePathError


def check_relative(rel: str, *, origin: str) -> PurePosixPath:
    """Validate the *form* of a relative path: no absolute paths, no '..', no NUL."""
    if not rel or "\0" in rel or "\\" in rel:
        fix = f"write it with forward slashes, {_RELATIVE}" if "\\" in rel else \
            f"name the file by its path {_RELATIVE}"
        raise UnsafePathError(f"{origin}: path {rel!r} is not a plain relative path", fix=fix)
    pure = PurePosixPath(rel)
    if pure.is_absolute() or rel.startswith("~"):
        raise UnsafePathError(f"{origin}: absolute path {rel!r} is not allowed",
                              fix=f"use a path {_RELATIVE}")
    if any(part == ".." for part in pure.parts):
        raise UnsafePathError(f"{origin}: path {rel!r} contains '..' and would leave the target",
                              fix=f"name the file without '..', by its path {_RELATIVE}")
    return pure


_RELATIVE = "relative to the distribution's install location (site-packages)"


# O_NONBLOCK: opening a FIFO for reading would wait for a writer; O_NOCTTY: a terminal device
# never becomes our controlling terminal.
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class NotRegularFileError(Exception):
    """The path holds a FIFO, a device, a folder or a socket, not a regular file."""

    def __init__(self, path: Path | str, mode: int) -> None:
        super().__init__(f"{path} is {describe_mode(mode)}, not a regular file")
        self.path = Path(path)
        self.mode = mode

    @property
    def is_folder(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def what(self) -> str:
        return describe_mode(self.mode)


def below(path: PurePath, top: PurePath) -> tuple[str, ...] | None:
    """The parts of ``path`` after ``top`` when ``top`` is ``path`` itself (``()``) or one of
    its ``parents``; None otherwise. ``top in path.parents``, compared by parts without making
    a Path of each parent (a catalog's apply asks this ~2,600 times). Not
    ``PurePath.is_relative_to``: from Python 3.12 that is ``top in path.parents`` again."""
    parts, head = path.parts, top.parts
    if parts[:len(head)] != head or path.anchor != top.anchor:  # ("." has no parts)
        return None
    return parts[len(head):]


def describe_mode(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a folder" if stat.S_ISDIR(mode) else "not a file"


def open_regular(path: Path | str, *, follow_links: bool = True) \
        -> tuple[BinaryIO, os.stat_result]:
    """``path`` opened for reading, with its fstat, only when it is a regular file: a FIFO or a
    device is refused before anything is read, so no command hangs on one (or reads /dev/zero
    forever). Raises what ``os.open`` raises (FileNotFoundError; with ``follow_links`` False,
    ELOOP for a symbolic link) and :class:`NotRegularFileError`."""
    fd = os.open(path, _READ_FLAGS | (0 if follow_links else os.O_NOFOLLOW))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFileError(path, info.st_mode)
        os.set_blocking(fd, True)  # a regular file: reads must not fail with EAGAIN (FUSE, NFS)
        return os.fdopen(fd, "rb"), info
    except BaseException:
        os.close(fd)
        raise


class FileTooLargeError(OSError):
    """A file we read but do not own is larger than its reader accepts."""

    def __init__(self, path: Path | str, limit: int) -> None:
        super().__init__(f"larger than {limit >> 20} MiB, more than any such file ascendpatch "
                         "writes")
        self.path, self.limit = Path(path), limit


def read_regular(path: Path | str, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (opened with :func:`open_regular`), at most
    ``limit`` of them: a larger file raises :class:`FileTooLargeError` (an OSError) after
    ``limit`` + 1 bytes, so a reader of untrusted files never holds more."""
    return read_regular_with_stat(path, limit)[0]


def read_regular_with_stat(path: Path | str, limit: int) -> tuple[bytes, os.stat_result]:
    """:func:`read_regular`, with the fstat of the very file read (who owns it, its mode:
    what a caller trusts or refuses, with no second open a swap could slip between)."""
    handle, info = open_regular(path)
    with handle:
        # as many bytes as fstat says (+1): read(limit + 1) would allocate the whole bound for
        # every small file (64 MiB per RECORD: 10 ms of an audit's 300); one that grew since,
        # or whose size the kernel does not report (procfs), is read on to the bound
        data = handle.read(min(info.st_size, limit) + 1)
        if info.st_size < len(data) <= limit:
            data += handle.read(limit + 1 - len(data))
    if len(data) > limit:
        raise FileTooLargeError(path, limit)
    return data, info


# ----------------------------------------------------------------- whose is it
# The one rule for "could another user have chosen this?" (ascendpatch runs as root on shared
# hosts): a file or folder is trusted when root or this (effective) user owns it and no one
# else can write it; a folder others can write passes only where its sticky bit is allowed
# (like /tmp: there only an entry's owner can rename or replace it). Each returns the reason
# as a clause for "{path} is {why}", or None.


def foreign_owner(info: os.stat_result, *, root_ok: bool = True) -> str | None:
    """Why this is another user's: owned by neither this user nor (``root_ok``) root."""
    me = os.geteuid()
    if info.st_uid == me or (root_ok and info.st_uid == 0):
        return None
    return f"owned by uid {info.st_uid}, not by this user (uid {me}){' or root' * root_ok}"


def open_to_others(info: os.stat_result, *, sticky_ok: bool = False) -> str | None:
    """Why others can write this: group or other write permission, unless ``sticky_ok`` and
    the sticky bit is set. (A symbolic link's own mode means nothing: not asked of one.)"""
    if info.st_mode & 0o022 and not (sticky_ok and info.st_mode & stat.S_ISVTX):
        return f"writable by other users (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def untrusted(info: os.stat_result, *, sticky_ok: bool = False) -> str | None:
    """Why a file or folder with this stat lets another user choose its content, if it does:
    :func:`foreign_owner` or :func:`open_to_others`."""
    return foreign_owner(info) or open_to_others(info, sticky_ok=sticky_ok)


def untrusted_on_the_way(folder: Path) -> tuple[Path, str] | None:
    """The first existing folder from ``folder`` up to ``/`` that lets another user choose
    what is below it (:func:`untrusted`, sticky folders allowed), and why; a folder that
    cannot be looked at is one too. None: every folder on the way is root's or ours."""
    for step in [folder, *folder.parents]:
        try:
            why = untrusted(step.stat(), sticky_ok=True)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return step, f"unreadable ({exc.strerror})"
        if why is not None:
            return step, why
    return None


def shown(path: Path | str) -> str:
    """A path as text that can always be printed, written to a page or encoded as UTF-8:
    bytes of the name that are not UTF-8 appear as ``\\xff`` (as ``ls -b`` shows them)."""
    text = os.fspath(path)
    try:
        raw = os.fsencode(text)
    except UnicodeEncodeError:  # a lone surrogate that came from no file name
        raw = str(text).encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")
