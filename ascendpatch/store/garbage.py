"""Garbage collection: backups that no ledger record refers to any more are deleted.

It runs after the commit point, so it must never touch anything but backups: the folder is
reached from the target without following links and only backup-shaped names (sha256) are
ever deleted, even when ``backups/`` was swapped for a link to another folder.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Set

from ascendpatch.store import atomic
from ascendpatch.store.backups import Backups
from ascendpatch.store.ledgerformat import SHA256, Ledger


def referenced(ledger: Ledger) -> set[str]:
    """The backups a ledger still needs."""
    return {rec.backup for files in ledger.values() for rec in files.values() if rec.backup}


def collect(backups: Backups, keep: Set[str]) -> None:
    """Delete every backup in ``backups`` whose name is not in ``keep``."""
    try:
        fd = atomic.open_dir(backups.folder, backups.root)
    except FileNotFoundError:
        return
    try:
        for name in os.listdir(fd):  # noqa: PTH208 (a folder descriptor, not a path)
            if name not in keep and SHA256.match(name):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=fd)
    finally:
        os.close(fd)
