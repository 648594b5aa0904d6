"""The target's own state: ledger, backups and journal, kept beside the files they describe.

Layout, in the target's first site-packages folder (so it vanishes with an image rebuild,
exactly as the patched files do)::

    .ascendpatch/ledger.json     artifact -> file -> sha256 before / after, backup, time
    .ascendpatch/backups/<sha>   every original, content-addressed
    .ascendpatch/journal.json    present only while a transaction runs

A transaction: back up every original; write the journal (atomically); replace each file
atomically; write the new ledger; delete the journal (the commit point). A run killed at any
instant leaves either no journal (nothing changed, or everything done) or a complete journal,
from which the next run restores every file and the ledger to their state before.

State files are data, not orders: every path read from the journal or the ledger goes through
the same guard as a patch's paths (:mod:`ascendpatch.store.root`), every digest must be a sha256,
and a file of the wrong shape stops the command with exit 2, naming the file and the fix.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascendpatch.errors import (
    RefusedError,
    StateError,
    UnsafePathError,
    WriteFaultError,
)
from ascendpatch.hashing import sha256_bytes, sha256_file
from ascendpatch.store import atomic, crash
from ascendpatch.store.lock import target_lock
from ascendpatch.store.root import Roots

STATE_DIR = ".ascendpatch"
LEDGER_FORMAT = 1
JOURNAL_FORMAT = 2  # 2: paths relative to the target, created folders listed
_STATE_FILE_LIMIT = 256 << 20
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_LEDGER_KEYS = frozenset({"sha256_before", "sha256_after", "backup", "time"})
# Faults of the file system, not of ascendpatch: one line and exit 1, never a traceback.
FAULTS = {errno.ENOSPC: "free space on the file system holding {root} and run again",
          errno.EDQUOT: "free space (disk quota) for {root} and run again",
          errno.EROFS: "{root} is on a read-only file system: remount it read-write (or "
                       "rebuild the image with the change) and run again",
          errno.EACCES: "run as a user who can write {root}",
          errno.EPERM: "run as a user who can write {root} (check for immutable files)"}

# What this process committed (for the Ctrl-C message: "applied", not "rolled back").
COMMITTED: list[str] = []


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
class LedgerFile:
    sha256_before: str | None
    sha256_after: str | None
    backup: str | None
    time: str


@dataclass(frozen=True)
class _Entry:
    """One journal entry, validated."""

    path: Path
    before: str | None
    after: str | None
    prune_to: Path | None
    made_dirs: tuple[Path, ...]


Ledger = dict[str, dict[str, LedgerFile]]  # artifact id -> path (relative to root) -> record


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


class LedgerStore:
    def __init__(self, root: Path, extra_roots: Sequence[Path] = ()) -> None:
        self.root = root
        self.dir = root / STATE_DIR
        # Trees besides the target that kinds write into (the Hugging Face cache): a path
        # from the state files may lie in one of these, nowhere else.
        self.extra_roots = tuple(extra_roots)
        self.roots = Roots(root, self.extra_roots, state=self.dir)

    # ------------------------------------------------------------------ reading
    @property
    def journal_path(self) -> Path:
        return self.dir / "journal.json"

    @property
    def ledger_path(self) -> Path:
        return self.dir / "ledger.json"

    def backup_path(self, digest: str) -> Path:
        if not _SHA256.match(digest):
            raise StateError(f"backup name {digest!r} is not a sha256 digest",
                             fix=f"move {self.ledger_path} aside")
        return self.dir / "backups" / digest

    def rel(self, path: Path) -> str:
        return self.roots.rel(path)

    def abs(self, rel: str) -> Path:
        return self.guard(rel, origin=str(self.ledger_path))

    def guard(self, raw: str, *, origin: str) -> Path:
        return self.roots.guard(raw, origin=origin)

    def check_layout(self) -> None:
        """Refuse a state folder (or backups folder) that is a link or not a folder."""
        for folder in (self.dir, self.dir / "backups"):
            if folder.is_symlink():
                raise RefusedError(f"{folder} is a symlink; ascendpatch does not follow it",
                                   fix=f"remove the link ({folder}); nothing was changed")
            if folder.exists() and not folder.is_dir():
                raise StateError(f"{folder} is not a folder",
                                 fix=f"move it aside (mv {folder} {folder}.bad) and run again")

    def read_state_file(self, path: Path) -> bytes | None:
        """Bytes of a state file; None when absent. Never follows a link, never blocks on a
        FIFO, never reads a directory or a device."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise StateError(f"{path} is a symlink, not an ascendpatch state file",
                                 fix=f"remove it (rm {path}) and run again") from None
            if exc.errno == errno.EISDIR:
                raise StateError(f"{path} is a folder, not an ascendpatch state file",
                                 fix=f"move it aside (mv {path} {path}.bad) and run "
                                     "again") from None
            raise StateError(f"{path} cannot be read ({exc.strerror})",
                             fix="run as a user who can read the target") from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _STATE_FILE_LIMIT:
            os.close(fd)
            what = "a folder" if stat.S_ISDIR(info.st_mode) else (
                "not a regular file" if not stat.S_ISREG(info.st_mode) else "too large")
            raise StateError(f"{path} is {what}, not an ascendpatch state file",
                             fix=f"move it aside (mv {path} {path}.bad) and run again")
        with os.fdopen(fd, "rb") as handle:
            return handle.read()

    def load_ledger(self) -> Ledger:
        self.check_layout()
        raw = self.read_state_file(self.ledger_path)
        if raw is None:
            return {}
        try:
            return self._parse_ledger(json.loads(raw.decode("utf-8")))
        except (ValueError, UnsafePathError) as exc:
            raise StateError(f"ledger {self.ledger_path} is not an ascendpatch ledger ({exc})",
                             fix=f"move it aside (mv {self.ledger_path} {self.ledger_path}.bad); "
                                 "'ascendpatch status' then judges every file by its "
                                 "content") from None

    def _parse_ledger(self, doc: object) -> Ledger:
        if not isinstance(doc, dict) or not isinstance(doc.get("artifacts", {}), dict):
            raise ValueError("expected {'format': 1, 'artifacts': {...}}")
        ledger: Ledger = {}
        for aid, files in doc.get("artifacts", {}).items():
            if not isinstance(files, dict):
                raise ValueError(f"artifact {aid!r}: expected a mapping of files")
            records: dict[str, LedgerFile] = {}
            for rel, rec in files.items():
                if not isinstance(rec, dict) or set(rec) != _LEDGER_KEYS:
                    raise ValueError(f"{aid}/{rel}: expected the keys "
                                     f"{', '.join(sorted(_LEDGER_KEYS))}")
                for key in ("sha256_before", "sha256_after", "backup"):
                    _digest(rec[key], f"{aid}/{rel}.{key}")
                if not isinstance(rec["time"], str):
                    raise ValueError(f"{aid}/{rel}.time: expected a string")
                self.guard(rel, origin=f"ledger {self.ledger_path}")
                records[rel] = LedgerFile(**rec)
            ledger[str(aid)] = records
        return ledger

    def read_backup(self, digest: str | None) -> bytes | None:
        """A backup's bytes, only when they still hash to their name (lost: None)."""
        if digest is None:
            return None
        path = self.backup_path(digest)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
        return data if sha256_bytes(data) == digest else None

    # ------------------------------------------------------------------ locking
    @contextmanager
    def session(self, timeout: float, on_wait: Callable[[str], None] | None = None,
                notes: list[str] | None = None, *, shared: bool = False,
                tolerate_faults: bool = False) -> Iterator[None]:
        """Hold the target lock; an exclusive holder first undoes what an interrupted run left.

        ``shared``: a reader's lock (no recovery), held while a writer holds none.
        ``tolerate_faults``: a recovery the file system refuses (disk full) becomes a note."""
        with target_lock(self.root, timeout, on_wait, shared=shared):
            self.check_layout()
            if not shared:
                try:
                    recovered = self.recover()
                except OSError as exc:
                    problem = fault(exc, self.root, changed=True, journal=self.journal_path)
                    if problem is None or not tolerate_faults:
                        raise problem or exc from None
                    recovered = (f"an interrupted run left {self.journal_path} and rolling it "
                                 f"back failed ({problem.message}); the files are shown as "
                                 f"they are; fix: {problem.fix}")
                if recovered and notes is not None:
                    notes.append(recovered)
            yield

    def writable(self) -> bool:
        probe = self.dir if self.dir.exists() else self.root
        return probe.exists() and os.access(probe, os.W_OK)

    def _ensure_dir(self) -> None:
        self.check_layout()
        try:
            os.close(atomic.open_dir(self.dir / "backups", self.root, create=True))
        except OSError as exc:
            raise fault(exc, self.root, changed=False) or RefusedError(
                f"cannot create the state folder {self.dir} ({exc})",
                fix="run as a user who can write the target's site-packages") from None
        self.check_layout()

    # ------------------------------------------------------------------ writing
    def commit(self, changes: Sequence[Change], update: Callable[[Ledger], Ledger],
               keep: Sequence[bytes] = ()) -> None:
        """Apply all ``changes`` and the ledger ``update`` as one transaction.

        ``keep``: more contents to back up first (the pristine originals revert will need).
        A file-system fault (disk full, read-only, no permission) rolls back and raises a
        one-line WriteFaultError.
        """
        self._ensure_dir()
        self.load_ledger()  # a ledger of the wrong shape stops here, before anything is written
        for change in changes:  # so does a symlinked __pycache__ beside any file of the run
            atomic.check_bytecode_folder(change.path)  # (or an outward link it writes through)
            if change.after is not None and change.link is None:
                atomic.check_bytecode_folder(self._destination(change.path))
        journal_written = False
        try:
            ledger_before = self._ledger_text()
            entries = [self._journal_entry(c) for c in changes]
            for data in [*(c.before for c in changes), *keep]:
                self._store_backup(data)
            crash.point()
            atomic.write_atomic(self.journal_path, json.dumps(
                {"format": JOURNAL_FORMAT, "ledger_before": ledger_before,
                 "files": entries}).encode(), root=self.root)
            journal_written = True
            try:
                crash.point()
                for change in changes:
                    self._replace(change)
                new_ledger = update(self.load_ledger())
                atomic.write_atomic(self.ledger_path, _ledger_json(new_ledger), root=self.root)
                crash.point()
            except BaseException:
                self.recover()
                raise
            atomic.remove(self.journal_path, root=self.root)  # the commit point
        except OSError as exc:
            changed = journal_written and self.journal_path.exists()
            raise fault(exc, self.root, changed=changed, journal=self.journal_path) or exc \
                from None
        COMMITTED.append(f"{len(changes)} file(s) in {self.root}")
        crash.point()
        # Neither a full disk nor a refused (swapped) backups folder undoes a committed change.
        with contextlib.suppress(OSError, RefusedError, UnsafePathError, StateError):
            self._collect_garbage()

    def _journal_entry(self, change: Change) -> dict[str, Any]:
        before = sha256_bytes(change.before) if change.before is not None else None
        after = sha256_bytes(change.after) if change.after is not None else None
        stop = self._root_of(change.path)
        made = atomic.missing_parents(change.path, stop) if change.after is not None else []
        return {"path": self.rel(change.path), "before": before, "after": after,
                "prune_to": self.rel(change.prune_to) if change.prune_to else None,
                "made_dirs": [self.rel(d) for d in made]}

    def _root_of(self, path: Path) -> Path:
        return self.roots.root_of(path)

    def _store_backup(self, data: bytes | None) -> None:
        if data is None:
            return
        digest = sha256_bytes(data)
        if self.read_backup(digest) is None:
            atomic.write_atomic(self.backup_path(digest), data, mode=0o644, root=self.root)

    def _destination(self, path: Path) -> Path:
        return self.roots.destination(path)

    def _replace(self, change: Change) -> None:
        # Every write and removal reaches its folder from the root without following links
        # (Root.open_dir): a folder swapped for a symlink after the guard looked is refused.
        root = self._root_of(change.path)
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
            destination = self._destination(change.path)
            atomic.write_atomic(destination, change.after, mode=change.mode,
                                root=self._root_of(destination))
            if destination != change.path:
                atomic.drop_bytecode(destination, self._root_of(destination))
        atomic.drop_bytecode(change.path, root)
        crash.point()

    def _ledger_text(self) -> str | None:
        raw = self.read_state_file(self.ledger_path)
        return raw.decode("utf-8", "surrogateescape") if raw is not None else None

    # ------------------------------------------------------------------ recovery
    def load_journal(self) -> tuple[str | None, list[_Entry]] | None:
        """The journal, validated; None when there is none (or it was unreadable JSON, which
        an atomic write cannot produce: it is then discarded)."""
        raw = self.read_state_file(self.journal_path)
        if raw is None:
            return None
        try:
            doc = json.loads(raw.decode("utf-8"))
        except ValueError:
            atomic.remove(self.journal_path, root=self.root)
            return None
        origin = f"journal {self.journal_path}"
        try:
            if not isinstance(doc, dict) or doc.get("format") not in (1, JOURNAL_FORMAT) or \
                    not isinstance(doc.get("files"), list):
                raise ValueError("expected {'format': 2, 'ledger_before': ..., 'files': [...]}")
            ledger_before = doc.get("ledger_before")
            if ledger_before is not None and not isinstance(ledger_before, str):
                raise ValueError("ledger_before: expected a string or null")
            if ledger_before is not None:
                self._parse_ledger(json.loads(ledger_before))
            return ledger_before, [self._entry(e, origin) for e in doc["files"]]
        except (ValueError, UnsafePathError) as exc:
            raise StateError(
                f"{origin} is not an ascendpatch journal ({exc}); nothing was changed",
                fix=f"if no ascendpatch run is active, move it aside (mv {self.journal_path} "
                    f"{self.journal_path}.bad) and check the files with 'ascendpatch status'") \
                from None

    def _entry(self, entry: object, origin: str) -> _Entry:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise ValueError(f"entry {entry!r:.80}: expected a mapping with a 'path'")
        path = self.guard(entry["path"], origin=origin)
        before = _digest(entry.get("before"), "before")
        after = _digest(entry.get("after"), "after")
        prune_to = None
        if entry.get("prune_to") is not None:
            prune_to = self.guard(entry["prune_to"], origin=origin)
            if prune_to not in path.parents:
                raise ValueError(f"prune_to {entry['prune_to']!r} is not a parent of "
                                 f"{entry['path']!r}")
        made = []
        for raw in entry.get("made_dirs") or []:
            folder = self.guard(raw, origin=origin)
            if folder not in path.parents:
                raise ValueError(f"made_dirs: {raw!r} is not a parent of {entry['path']!r}")
            made.append(folder)
        return _Entry(path, before, after, prune_to, tuple(made))

    def recover(self) -> str | None:
        """Undo an interrupted transaction; returns a note when there was one."""
        self.check_layout()
        journal = self.load_journal()
        if journal is None:
            self._clean_temp_files()
            return None
        ledger_before, entries = journal
        # Undo in reverse order: where one path has several entries (before -> mid, mid ->
        # final), the last change is undone first and the file ends at its first 'before'.
        outcomes = [self._restore(entry) for entry in reversed(entries)][::-1]
        if ledger_before is None:
            atomic.remove(self.ledger_path, root=self.root)
        else:
            atomic.write_atomic(self.ledger_path, ledger_before.encode(
                "utf-8", "surrogateescape"), root=self.root)
        atomic.remove(self.journal_path, root=self.root)
        self._clean_temp_files(e.path for e in entries)
        changed = sum(1 for o in outcomes if o == "restored")
        lost = [str(e.path) for e, o in zip(entries, outcomes, strict=True) if o == "lost"]
        note = (f"recovered an interrupted run: rolled back {changed} of "
                f"{len(outcomes)} file(s) to their state before it")
        if lost:
            note += (f"; {len(lost)} file(s) kept as they are because their backups are gone "
                     f"({', '.join(lost[:3])}{', ...' if len(lost) > 3 else ''}): "
                     "'ascendpatch revert' checks the reverse patch against RECORD")
        return note

    def _restore(self, entry: _Entry) -> str:
        """'restored', 'same' (nothing to do) or 'lost' (the backup is gone)."""
        path = entry.path
        atomic.drop_bytecode(path, self._root_of(path))
        if entry.before is None:  # the run created it: remove whatever entry is there (even
            if path.is_symlink() or path.exists():  # a link whose blob was not written yet)
                atomic.remove(path, root=self._root_of(path))
            for folder in entry.made_dirs:
                with contextlib.suppress(OSError):
                    folder.rmdir()
            if entry.prune_to is not None:
                atomic.prune_empty(path.parent, entry.prune_to)
            return "restored"
        current = sha256_file(path) if path.is_file() else None
        if current == entry.before:
            return "same"
        data = self.read_backup(entry.before)
        if data is None:
            return "lost"
        destination = self._destination(path)
        atomic.write_atomic(destination, data, root=self._root_of(destination))
        return "restored"

    def needs_recovery(self) -> bool:
        """A journal, or temp files a killed run left in the state folder."""
        if self.journal_path.exists() or self.journal_path.is_symlink():
            return True
        return any(folder.is_dir() and not folder.is_symlink() and
                   any(folder.glob(f"*{atomic.TEMP_SUFFIX}"))
                   for folder in (self.dir, self.dir / "backups"))

    def _clean_temp_files(self, paths: Iterable[Path] = ()) -> None:
        for path in paths:
            for tmp in path.parent.glob(atomic.temp_glob(path)) if path.parent.is_dir() else ():
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
        for folder in (self.dir, self.dir / "backups"):
            if folder.is_dir() and not folder.is_symlink():
                for tmp in folder.glob(f"*{atomic.TEMP_SUFFIX}"):
                    with contextlib.suppress(FileNotFoundError):
                        tmp.unlink()

    def _collect_garbage(self) -> None:
        """Delete backups that no ledger entry refers to any more. The folder is reached
        without following links and only backup-shaped names (sha256) are ever deleted."""
        referenced = {rec.backup for files in self.load_ledger().values()
                      for rec in files.values() if rec.backup}
        try:
            fd = atomic.open_dir(self.dir / "backups", self.root)
        except FileNotFoundError:
            return
        try:
            for name in os.listdir(fd):  # noqa: PTH208 (a folder descriptor, not a path)
                if name not in referenced and _SHA256.match(name):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)


def _digest(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _SHA256.match(value):
        raise ValueError(f"{where}: {value!r:.80} is not a sha256 digest")
    return value


def _ledger_json(ledger: Ledger) -> bytes:
    doc = {"format": LEDGER_FORMAT,
           "artifacts": {aid: {rel: rec.__dict__ for rel, rec in sorted(files.items())}
                         for aid, files in sorted(ledger.items())}}
    return json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

