"""The target's own state: ledger, backups and journal, kept beside the files they describe.

Layout, in the target's first site-packages folder (so it vanishes with an image rebuild,
exactly as the patched files do)::

    .ascendpatch/ledger.json     artifact -> file -> sha256 before / after, backup, time
    .ascendpatch/backups/<sha>   every original, content-addressed
    .ascendpatch/journal.json    present only while a transaction runs

:class:`LedgerStore` is what the engine and the commands face, and the one way to write a
target: it holds the lock, checks the state folder, and hands each job to its module: the
path guard (:mod:`.root`), the ledger's format (:mod:`.ledgerformat`), the transaction and its
journal (:mod:`.journal`), backups (:mod:`.backups`) and garbage collection (:mod:`.garbage`).

State files are data, not orders: every path read from the journal or the ledger goes through
the same guard as a patch's paths, every digest must be a sha256, and a file of the wrong
shape stops the command with exit 2, naming the file and the fix.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ascendpatch.errors import (
    Interrupted,
    RecoveryNeeded,
    RefusedError,
    StateError,
    UnsafePathError,
)
from ascendpatch.results import Hint, Phrase
from ascendpatch.store import atomic, crash, garbage
from ascendpatch.store.backups import Backups
from ascendpatch.store.journal import Change, Transaction, fault
from ascendpatch.store.ledgerformat import Ledger, LedgerFile, load_ledger, now
from ascendpatch.store.lock import target_lock
from ascendpatch.store.reading import BACKUPS, JOURNAL, STATE_DIR, check_layout, read_session
from ascendpatch.store.root import Roots

__all__ = ["STATE_DIR", "Change", "Ledger", "LedgerFile", "LedgerStore", "now"]


class LedgerStore:
    def __init__(self, root: Path, extra_roots: Sequence[Path] = ()) -> None:
        self.root = root
        self.dir = root / STATE_DIR
        # Trees besides the target that kinds write into (the Hugging Face cache): a path
        # from the state files may lie in one of these, nowhere else.
        self.extra_roots = tuple(extra_roots)
        self.roots = Roots(root, self.extra_roots, state=self.dir)
        self.backups = Backups(self.dir / BACKUPS, root, ledger=self.ledger_path)
        # The lambdas look the methods up on each call: a test may replace them on the store.
        self.transaction = Transaction(
            self.dir / JOURNAL, ledger=self.ledger_path, roots=self.roots,
            backups=self.backups, load_ledger=lambda: self.load_ledger(),
            check_layout=lambda: self.check_layout(), temp_folders=(self.dir, self.backups.folder))
        # What this store committed (for the Ctrl-C message: "applied", not "rolled back").
        self.committed: list[str] = []

    # ------------------------------------------------------------------ reading
    @property
    def journal_path(self) -> Path:
        return self.transaction.path

    @property
    def ledger_path(self) -> Path:
        return self.dir / "ledger.json"

    def backup_path(self, digest: str) -> Path:
        return self.backups.path(digest)

    def rel(self, path: Path) -> str:
        return self.roots.rel(path)

    def abs(self, rel: str) -> Path:
        return self.roots.guard(rel, origin=str(self.ledger_path))

    def check_layout(self) -> None:
        """Refuse a state folder (or backups folder) that is a link or not a folder."""
        check_layout(self.dir)

    def load_ledger(self) -> Ledger:
        self.check_layout()
        return load_ledger(self.ledger_path, self.roots)

    def read_backup(self, digest: str | None) -> bytes | None:
        """A backup's bytes, only when they still hash to their name (lost: None)."""
        return self.backups.read(digest)

    # ------------------------------------------------------------------ locking
    @contextmanager
    def session(self, timeout: float, on_wait: Callable[[str], None] | None = None,
                notes: list[str] | None = None, *, shared: bool = False) -> Iterator[None]:
        """Hold the target lock; an exclusive holder (a writer) first undoes what an
        interrupted run left.

        ``shared``: a reader's lock, held while a writer holds none. A reader never recovers
        (that rewrites target files): it refuses with :class:`RecoveryNeeded` while a journal
        is there, since the files are then half changed. Ctrl-C after a commit leaves as
        :class:`Interrupted`, naming what was committed."""
        if shared:  # (a reader commits nothing, so Ctrl-C needs no words of its own)
            with read_session(self.root, timeout, on_wait, self.refuse_interrupted):
                yield
            return
        with target_lock(self.root, timeout, on_wait):
            self.check_layout()
            recovered = self._recover_on_entry()
            if recovered and notes is not None:
                notes.append(recovered)
            try:
                yield
            except KeyboardInterrupt as exc:
                if self.committed:  # after a commit point: that change stays, say so
                    raise Interrupted(tuple(self.committed)) from exc
                raise

    def refuse_interrupted(self) -> None:
        """Raise RecoveryNeeded when an interrupted run's journal is there (StateError when
        it is not a journal ascendpatch wrote)."""
        journal = self.journal_path
        if self.transaction.pending():
            raise RecoveryNeeded(
                f"an interrupted run needs recovery: its journal {journal} is still there "
                "and the files it names are half changed; this command only reads, and "
                "changed nothing",
                fix=Phrase("run '", Hint(("apply",)), "' (or '", Hint(("revert",)),
                           "') as a user who can write the target; it rolls the interrupted "
                           "run back first"))

    def _recover_on_entry(self) -> str | None:
        try:
            return self.recover()
        except OSError as exc:
            raise fault(exc, self.root, changed=True, journal=self.journal_path) or exc \
                from None

    def _ensure_dir(self) -> None:
        self.check_layout()
        try:
            self.backups.make_folder()
        except OSError as exc:
            raise fault(exc, self.root, changed=False) or RefusedError(
                f"cannot create the state folder {self.dir} ({exc})",
                fix="run as a user who can write the target's site-packages") from None
        self.check_layout()

    # ------------------------------------------------------------------ writing
    def commit(self, changes: Sequence[Change], update: Callable[[Ledger], Ledger],
               keep: Sequence[bytes] = ()) -> str:
        """Apply all ``changes`` and the ledger ``update`` as one transaction; what was
        committed, in words (also kept in ``committed``).

        ``keep``: more contents to back up first (the pristine originals revert will need).
        A file-system fault (disk full, read-only, no permission) rolls back and raises a
        one-line WriteFaultError.
        """
        self._ensure_dir()
        self.load_ledger()  # a ledger of the wrong shape stops here, before anything is written
        for change in changes:  # so does a symlinked __pycache__ beside any file of the run
            atomic.check_bytecode_folder(change.path)  # (or an outward link it writes through)
            if change.after is not None and change.link is None:
                atomic.check_bytecode_folder(self.roots.destination(change.path))
        self.transaction.commit(changes, update, keep)
        self.committed.append(f"{len(changes)} file(s) in {self.root}")
        crash.point()
        # Neither a full disk nor a refused (swapped) backups folder undoes a committed change.
        with contextlib.suppress(OSError, RefusedError, UnsafePathError, StateError):
            garbage.collect(self.backups, garbage.referenced(self.load_ledger()))
        return self.committed[-1]

    # ------------------------------------------------------------------ recovery
    def recover(self) -> str | None:
        """Undo an interrupted transaction; returns a note when there was one."""
        return self.transaction.recover()

    def needs_recovery(self) -> bool:
        """A journal, or temp files a killed run left in the state folder."""
        return self.transaction.needs_recovery()
