"""Backups: every original a transaction replaces, kept content-addressed under its sha256.

A backup's name is its digest, so reading one back is checking it: bytes that no longer hash
to their name count as lost, never as the original.
"""

from __future__ import annotations

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

    def store(self, data: bytes | None) -> None:
        """Keep ``data`` (None: nothing to keep); a backup already there is not rewritten."""
        if data is None:
            return
        digest = sha256_bytes(data)
        if self.read(digest) is None:
            atomic.write_atomic(self.path(digest), data, mode=0o644, root=self.root)
