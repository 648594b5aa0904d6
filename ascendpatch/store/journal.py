"""The journal: what makes a transaction all-or-nothing, even when the process is killed.

A transaction: back up every original; write the journal (atomically); replace each file
atomically; write the new ledger; delete the journal (the commit point). A run killed at any
instant leaves either no journal (nothing changed, or everything done) or a complete journal,
from which the next run restores every file and the ledger to their state before.

The journal's format on disk is a contract with runs of older versions that were killed::

    {"format": 2, "ledger_before": <the ledger's text, or null>,
     "files": [{"path", "before", "after", "prune_to", "made_dirs"}, ...]}

paths relative to the target (absolute in another tree a kind writes into), digests sha256.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascendpatch.errors import StateError, UnsafePathError, WriteFaultError
from ascendpatch.hashing import sha256_bytes, sha256_file
from ascendpatch.results import Hint, Phrase
from ascendpatch.store import atomic, crash
from ascendpatch.store.backups import Backups
from ascendpatch.store.ledgerformat import (
    Ledger,
    digest,
    ledger_json,
    parse_ledger,
    read_state_file,
)
from ascendpatch.store.root import Roots
from ascendpatch.untrusted import load_json

JOURNAL_FORMAT = 2  # 2: paths relative to the target, created folders listed
# Faults of the file system, not of ascendpatch: one line and exit 1, never a traceback.
FAULTS = {errno.ENOSPC: "free space on the file system holding {root} and run again",
          errno.EDQUOT: "free space (disk quota) for {root} and run again",
          errno.EROFS: "{root} is on a read-only file system: remount it read-write (or "
                       "rebuild the image with the change) and run again",
          errno.EACCES: "run as a user who can write {root}",
          errno.EPERM: "run as a user who can write {root} (check for immutable files)"}


@dataclass(frozen=True)
class Change:
    """Make ``path`` hold ``after`` (None: remove it); it holds ``before`` now (None: absent)."""

    path: Path
    before: bytes | None
    after: bytes | None
    link: str | None = None  # make ``path`` a symlink to this (``after``: what it resolves to)
    prune_to: Path | None = None  # on removal, also remove emptied folders up to this one
    mode: int | None = None  # permission bits for a file this change creates (None: keep/0644)


@dataclass(frozen=True)
class Entry:
    """One journal entry, validated."""

    path: Path
    before: str | None
    after: str | None
    prune_to: Path | None
    made_dirs: tuple[Path, ...]


def fault(exc: OSError, root: Path, *, changed: bool, journal: Path | None = None) \
        -> WriteFaultError | None:
    """A one-line error for a file-system fault (None: not one of those, a real bug)."""
    if exc.errno not in FAULTS:
        return None
    where = exc.filename or root
    reason = os.strerror(exc.errno)
    state = ("nothing was changed" if not changed else
             f"the change is half done and the journal {journal} keeps it undoable "
             f"(the next ascendpatch run as a user who can write rolls it back)")
    return WriteFaultError(f"cannot write {where}: {reason}; {state}",
                           fix=FAULTS[exc.errno].format(root=root))


class Transaction:
    """Commits changes through the journal ``path`` and rolls back what a killed run left.

    ``ledger``: the ledger file; ``load_ledger`` and ``check_layout``: the store's own
    (validated) reading of it and check of its folders, which recovery relies on;
    ``temp_folders``: the state folders whose temp files a killed run may have left."""

    def __init__(self, path: Path, *, ledger: Path, roots: Roots, backups: Backups,
                 load_ledger: Callable[[], Ledger], check_layout: Callable[[], None],
                 temp_folders: Sequence[Path]) -> None:
        self.path = path
        self.ledger = ledger
        self.roots = roots
        self.root = roots.target.path
        self.backups = backups
        self.load_ledger = load_ledger
        self.check_layout = check_layout
        self.temp_folders = tuple(temp_folders)

    # ------------------------------------------------------------------ writing
    def commit(self, changes: Sequence[Change], update: Callable[[Ledger], Ledger],
               keep: Sequence[bytes] = ()) -> None:
        """Apply ``changes`` and the ledger ``update``; a file-system fault rolls back and
        raises a one-line WriteFaultError."""
        journal_written = False
        try:
            ledger_before = self._ledger_text()
            entries = [self._entry_of(c) for c in changes]
            for entry in entries:  # the guard recovery applies, now: a journal this run
                self._entry(entry, f"change of {entry['path']}")  # writes, it can read back
            with atomic.deferred_sync():  # every backup on disk before the journal
                for change in changes:  # as private as the original (mode, owner)
                    self.backups.store(change.before, like=change.path)
                for data in keep:
                    self.backups.store(data)
            crash.point()
            atomic.write_atomic(self.path, json.dumps(
                {"format": JOURNAL_FORMAT, "ledger_before": ledger_before,
                 "files": entries}).encode(), root=self.root)
            journal_written = True
            self._replace_all(changes, update)
            atomic.remove(self.path, root=self.root)  # the commit point
        except OSError as exc:
            changed = journal_written and self.path.exists()
            raise fault(exc, self.root, changed=changed, journal=self.path) or exc from None

    def _replace_all(self, changes: Sequence[Change], update: Callable[[Ledger], Ledger]) \
            -> None:
        try:
            crash.point()
            with atomic.deferred_sync():  # every file on disk before the ledger and the commit
                for change in changes:
                    self._replace(change)
            new_ledger = update(self.load_ledger())
            atomic.write_atomic(self.ledger, ledger_json(new_ledger), root=self.root)
            crash.point()
        except BaseException:
            self.recover()
            raise

    def _entry_of(self, change: Change) -> dict[str, Any]:
        before = sha256_bytes(change.before) if change.before is not None else None
        after = sha256_bytes(change.after) if change.after is not None else None
        stop = self.roots.root_of(change.path)
        made = atomic.missing_parents(change.path, stop) if change.after is not None else []
        rel = self.roots.rel
        return {"path": rel(change.path), "before": before, "after": after,
                "prune_to": rel(change.prune_to) if change.prune_to else None,
                "made_dirs": [rel(d) for d in made]}

    def _replace(self, change: Change) -> None:
        # Every write and removal reaches its folder from the root without following links
        # (Root.open_dir): a folder swapped for a symlink after the guard looked is refused.
        root = self.roots.root_of(change.path)
        atomic.drop_bytecode(change.path, root)
        if change.after is None:
            atomic.remove(change.path, root=root)
            if change.prune_to is not None:
                atomic.prune_empty(change.path.parent, change.prune_to)
        elif change.link is not None:
            os.close(atomic.open_dir(change.path.parent, root, create=True))
            atomic.symlink_atomic(change.path, change.link, root=root)
        else:
            os.close(atomic.open_dir(change.path.parent, root, create=True))
            destination = self.roots.destination(change.path)
            atomic.write_atomic(destination, change.after, mode=change.mode,
                                root=self.roots.root_of(destination))
            if destination != change.path:
                atomic.drop_bytecode(destination, self.roots.root_of(destination))
        atomic.drop_bytecode(change.path, root)
        crash.point()

    def _ledger_text(self) -> str | None:
        raw = read_state_file(self.ledger)
        return raw.decode("utf-8", "surrogateescape") if raw is not None else None

    # ------------------------------------------------------------------ recovery
    def load(self) -> tuple[str | None, list[Entry]] | None:
        """The journal, validated; None when there is none (or it was unreadable JSON, which
        an atomic write cannot produce: it is then discarded)."""
        doc = self._read()
        if doc is None:
            if self.path.is_file():  # unreadable JSON: discarded
                atomic.remove(self.path, root=self.root)
            return None
        return self._checked(doc)

    def pending(self) -> bool:
        """A journal is there (one of the wrong shape raises StateError, as for a writer);
        reads only, for the commands that never recover."""
        doc = self._read()
        if doc is None:
            return False
        self._checked(doc)
        return True

    def _read(self) -> object | None:
        """The journal's JSON; None when there is none or it is not JSON at all (which an
        atomic write cannot produce: a writer discards it)."""
        raw = read_state_file(self.path)
        if raw is None:
            return None
        try:  # (too deep to be ours, or not UTF-8: not a journal a writer left either)
            doc: object = load_json(raw.decode("utf-8"), f"journal {self.path}")
        except ValueError:
            return None
        return doc

    def _checked(self, doc: object) -> tuple[str | None, list[Entry]]:
        origin = f"journal {self.path}"
        try:
            return self._parse(doc, origin)
        except (ValueError, UnsafePathError) as exc:
            raise StateError(
                f"{origin} is not an ascendpatch journal ({exc}); nothing was changed",
                fix=Phrase(f"if no ascendpatch run is active, move it aside (mv {self.path} "
                           f"{self.path}.bad) and check the files with '", Hint(("status",)),
                           "'")) \
                from None

    def _parse(self, doc: object, origin: str) -> tuple[str | None, list[Entry]]:
        if not isinstance(doc, dict) or doc.get("format") not in (1, JOURNAL_FORMAT) or \
                not isinstance(doc.get("files"), list):
            raise ValueError("expected {'format': 2, 'ledger_before': ..., 'files': [...]}")
        ledger_before = doc.get("ledger_before")
        if ledger_before is not None and not isinstance(ledger_before, str):
            raise ValueError("ledger_before: expected a string or null")
        if ledger_before is not None:
            parse_ledger(load_json(ledger_before, "its ledger_before"), self.roots,
                         self.ledger)
        return ledger_before, [self._entry(e, origin) for e in doc["files"]]

    def _entry(self, entry: object, origin: str) -> Entry:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise ValueError(f"entry {entry!r:.80}: expected a mapping with a 'path'")
        path = self.roots.guard(entry["path"], origin=origin)
        before = digest(entry.get("before"), "before")
        after = digest(entry.get("after"), "after")
        prune_to = None
        if (raw := entry.get("prune_to")) is not None:
            prune_to = self._parent(raw, path, origin, f"prune_to {raw!r}", entry["path"])
        made = tuple(self._parent(raw, path, origin, f"made_dirs: {raw!r}", entry["path"])
                     for raw in entry.get("made_dirs") or [])
        return Entry(path, before, after, prune_to, made)

    def _parent(self, raw: object, path: Path, origin: str, what: str, of: str) -> Path:
        """A folder named by an entry: guarded, and a parent of the entry's ``path``."""
        folder = self.roots.guard(raw, origin=origin)
        if folder not in path.parents:
            raise ValueError(f"{what} is not a parent of {of!r}")
        return folder

    def recover(self) -> str | None:
        """Undo an interrupted transaction; returns a note when there was one."""
        self.check_layout()
        journal = self.load()
        if journal is None:
            self.clean_temp_files()
            return None
        ledger_before, entries = journal
        # Undo in reverse order: where one path has several entries (before -> mid, mid ->
        # final), the last change is undone first and the file ends at its first 'before'.
        outcomes = [self._restore(entry) for entry in reversed(entries)][::-1]
        if ledger_before is None:
            atomic.remove(self.ledger, root=self.root)
        else:
            atomic.write_atomic(self.ledger, ledger_before.encode(
                "utf-8", "surrogateescape"), root=self.root)
        atomic.remove(self.path, root=self.root)
        self.clean_temp_files(e.path for e in entries)
        return _recovered_note(entries, outcomes)

    def _restore(self, entry: Entry) -> str:
        """'restored', 'same' (nothing to do) or 'lost' (the backup is gone)."""
        path = entry.path
        atomic.drop_bytecode(path, self.roots.root_of(path))
        if entry.before is None:  # the run created it: remove whatever entry is there (even
            if path.is_symlink() or path.exists():  # a link whose blob was not written yet)
                atomic.remove(path, root=self.roots.root_of(path))
            for folder in entry.made_dirs:
                with contextlib.suppress(OSError):
                    folder.rmdir()
            if entry.prune_to is not None:
                atomic.prune_empty(path.parent, entry.prune_to)
            return "restored"
        current = sha256_file(path) if path.is_file() else None
        if current == entry.before:
            return "same"
        data = self.backups.read(entry.before)
        if data is None:
            return "lost"
        destination = self.roots.destination(path)
        atomic.write_atomic(destination, data, root=self.roots.root_of(destination))
        return "restored"

    def needs_recovery(self) -> bool:
        """A journal, or temp files a killed run left in the state folder."""
        if self.path.exists() or self.path.is_symlink():
            return True
        return any(folder.is_dir() and not folder.is_symlink() and
                   any(folder.glob(f"*{atomic.TEMP_SUFFIX}"))
                   for folder in self.temp_folders)

    def clean_temp_files(self, paths: Iterable[Path] = ()) -> None:
        for folder in dict.fromkeys(path.parent for path in paths):
            for tmp in folder.glob(atomic.TEMP_GLOB) if folder.is_dir() else ():
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
        for folder in self.temp_folders:
            if folder.is_dir() and not folder.is_symlink():
                for tmp in folder.glob(f"*{atomic.TEMP_SUFFIX}"):
                    with contextlib.suppress(FileNotFoundError):
                        tmp.unlink()


def _recovered_note(entries: Sequence[Entry], outcomes: Sequence[str]) -> str:
    changed = sum(1 for o in outcomes if o == "restored")
    lost = [str(e.path) for e, o in zip(entries, outcomes, strict=True) if o == "lost"]
    note = (f"recovered an interrupted run: rolled back {changed} of "
            f"{len(outcomes)} file(s) to their state before it")
    if lost:
        return Phrase(note, f"; {len(lost)} file(s) kept as they are because their backups "
                      f"are gone ({', '.join(lost[:3])}{', ...' if len(lost) > 3 else ''}): '",
                      Hint(("revert",)), "' checks the reverse patch against RECORD")
    return note
