"""Backups: every original a transaction replaces, kept content-addressed under its sha256.

A backup's name is its digest, so reading one back is checking it: bytes that no longer hash
to their name count as lost, never as the original.

A backup is as private as its original: the backups folder is 0700 (an original may hold a
secret, a ``serve.env`` with ``HF_TOKEN``), and each backup keeps its original's permission
bits and, when ascendpatch runs as root, its owner.
"""

from __future__ import annotations

import os
from pathlib import Path

from ascendpatch.errors import StateError
from ascendpatch.hashing import sha256_bytes
from ascendpatch.paths import NotRegularFileError, open_regular
from ascendpatch.store import atomic
from ascendpatch.store.ledgerformat import SHA256


class Backups:
    """The backups folder ``folder`` of the target ``root``; ``ledger``: the ledger that names
    the backups (a bad name is its fault, and the fix names it)."""

    def __init__(self, folder: Path, root: Path, *, ledger: Path) -> None:
        self.folder = folder
        self.root = root
        self.ledger = ledger

    def path(self, digest: str) -> Path:
        if not SHA256.match(digest):
            raise StateError(f"backup name {digest!r} is not a sha256 digest",
                             fix=f"move {self.ledger} aside")
        return self.folder / digest

    def read(self, digest: str | None) -> bytes | None:
        """A backup's bytes, only when they still hash to their name (lost: None)."""
        if digest is None:
            return None
        try:
            handle, _info = open_regular(self.path(digest), follow_links=False)
        except (OSError, NotRegularFileError):
            return None
        with handle:
            data = handle.read()
        return data if sha256_bytes(data) == digest else None

    def make_folder(self) -> None:
        """Create the backups folder (and the state folder above it) if missing; either way
        the backups folder ends 0700, also one an older version made 0755."""
        fd = atomic.open_dir(self.folder, self.root, create=True)
        try:
            if os.fstat(fd).st_mode & 0o077:
                os.fchmod(fd, PRIVATE)
        finally:
            os.close(fd)

    def store(self, data: bytes | None, like: Path | None = None) -> None:
        """Keep ``data`` (None: nothing to keep) with the mode and owner of ``like``, the file
        it was read from (None: 0600, the running user's); a backup already there is not
        rewritten."""
        if data is None:
            return
        digest = sha256_bytes(data)
        if self.read(digest) is None:
            mode, owner = _mode_and_owner(like)
            atomic.write_atomic(self.path(digest), data, mode=mode, root=self.root, owner=owner)


PRIVATE = 0o700


def _mode_and_owner(like: Path | None) -> tuple[int, tuple[int, int] | None]:
    """The permission bits (no setuid, setgid or sticky bit) of ``like``, and its owner when
    this process may give a file away (root); 0600 and no owner when it cannot be read."""
    try:
        info = like.stat() if like is not None else None
    except OSError:
        info = None
    if info is None:
        return 0o600, None
    owner = (info.st_uid, info.st_gid) if os.geteuid() == 0 else None
    return (info.st_mode & 0o777) | 0o600, owner  # the owner can always read it back
