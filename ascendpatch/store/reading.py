"""A reader's session on a target, without the writer's machinery.

Read-only commands (audit, status, verify, ...) hold the target lock shared, check the state
folder's layout, and refuse while an interrupted writer's journal is there. None of that needs
the transaction, backups or garbage collection that :mod:`.ledger` loads for writers, so a
reader that has no store of its own (audit) imports only this: the journal's own check runs
(importing the writer's modules) only when a journal is there, which is rare and then decides
the command's outcome. :meth:`.ledger.LedgerStore.session` uses the same code for its readers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ascendpatch.errors import RefusedError, StateError
from ascendpatch.store.lock import target_lock

STATE_DIR = ".ascendpatch"
JOURNAL = "journal.json"
BACKUPS = "backups"


def check_layout(state: Path) -> None:
    """Refuse a state folder (or its backups folder) that is a link or not a folder."""
    for folder in (state, state / BACKUPS):
        if folder.is_symlink():
            raise RefusedError(f"{folder} is a symlink; ascendpatch does not follow it",
                               fix=f"remove the link ({folder}); nothing was changed")
        if folder.exists() and not folder.is_dir():
            raise StateError(f"{folder} is not a folder",
                             fix=f"move it aside (mv {folder} {folder}.bad) and run again")


@contextmanager
def read_session(root: Path, timeout: float, on_wait: Callable[[str], None] | None = None,
                 refuse_interrupted: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold ``root``'s lock shared (a live writer finishes first), check the state folder,
    and, when a journal is there, raise what ``refuse_interrupted`` (default: the ledger
    store's own check) raises: RecoveryNeeded, or StateError for a journal of the wrong
    shape. A writer holds the lock exclusively, so no journal appears meanwhile."""
    with target_lock(root, timeout, on_wait, shared=True):
        state = root / STATE_DIR
        check_layout(state)
        if os.path.lexists(state / JOURNAL):
            if refuse_interrupted is None:
                from ascendpatch.store.ledger import LedgerStore

                refuse_interrupted = LedgerStore(root).refuse_interrupted
            refuse_interrupted()
        yield
