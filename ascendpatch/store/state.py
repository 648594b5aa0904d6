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
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascendpatch.errors import AscendpatchError, RefusedError
from ascendpatch.hashing import sha256_bytes, sha256_file
from ascendpatch.store import atomic, crash
from ascendpatch.store.lock import target_lock

STATE_DIR = ".ascendpatch"
LEDGER_FORMAT = 1


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


Ledger = dict[str, dict[str, LedgerFile]]  # artifact id -> path (relative to root) -> record


class StateStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / STATE_DIR

    # ------------------------------------------------------------------ reading
    @property
    def journal_path(self) -> Path:
        return self.dir / "journal.json"

    @property
    def ledger_path(self) -> Path:
        return self.dir / "ledger.json"

    def backup_path(self, digest: str) -> Path:
        return self.dir / "backups" / digest

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def abs(self, rel: str) -> Path:
        return Path(rel) if Path(rel).is_absolute() else self.root / rel

    def load_ledger(self) -> Ledger:
        try:
            raw = json.loads(self.ledger_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise AscendpatchError(f"ledger {self.ledger_path} is unreadable ({exc})",
                                   fix="move it aside; run 'ascendpatch status' to rebuild "
                                       "the picture from file contents") from None
        return {aid: {rel: LedgerFile(**rec) for rel, rec in files.items()}
                for aid, files in raw.get("artifacts", {}).items()}

    def read_backup(self, digest: str | None) -> bytes | None:
        """A backup's bytes, only when they still hash to their name."""
        if digest is None:
            return None
        try:
            data = self.backup_path(digest).read_bytes()
        except OSError:
            return None
        return data if sha256_bytes(data) == digest else None

    # ------------------------------------------------------------------ locking
    @contextmanager
    def session(self, timeout: float, on_wait: Callable[[str], None] | None = None,
                notes: list[str] | None = None) -> Iterator[None]:
        """Hold the target lock; first undo whatever an interrupted run left."""
        with target_lock(self.root, timeout, on_wait):
            recovered = self.recover()
            if recovered and notes is not None:
                notes.append(recovered)
            yield

    def writable(self) -> bool:
        probe = self.dir if self.dir.exists() else self.root
        return probe.exists() and _can_write(probe)

    def _ensure_dir(self) -> None:
        try:
            (self.dir / "backups").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RefusedError(f"cannot create the state folder {self.dir} ({exc})",
                               fix="run as a user who can write the target's site-packages") \
                from None

    # ------------------------------------------------------------------ writing
    def commit(self, changes: Sequence[Change], update: Callable[[Ledger], Ledger],
               keep: Sequence[bytes] = ()) -> None:
        """Apply all ``changes`` and the ledger ``update`` as one transaction.

        ``keep``: more contents to back up first (the pristine originals revert will need).
        """
        self._ensure_dir()
        ledger_before = self._ledger_text()
        entries = [self._journal_entry(c) for c in changes]
        for data in [*(c.before for c in changes), *keep]:
            self._store_backup(data)
        crash.point()
        atomic.write_atomic(self.journal_path, json.dumps(
            {"format": 1, "ledger_before": ledger_before, "files": entries}).encode())
        try:
            crash.point()
            for change in changes:
                self._replace(change)
            new_ledger = update(self.load_ledger())
            atomic.write_atomic(self.ledger_path, _ledger_json(new_ledger))
            crash.point()
        except BaseException:
            self.recover()
            raise
        atomic.remove(self.journal_path)
        self._collect_garbage()

    def _journal_entry(self, change: Change) -> dict[str, Any]:
        before = sha256_bytes(change.before) if change.before is not None else None
        after = sha256_bytes(change.after) if change.after is not None else None
        return {"path": str(change.path), "before": before, "after": after,
                "prune_to": str(change.prune_to) if change.prune_to else None}

    def _store_backup(self, data: bytes | None) -> None:
        if data is None:
            return
        digest = sha256_bytes(data)
        if self.read_backup(digest) is None:
            atomic.write_atomic(self.backup_path(digest), data, mode=0o644)

    def _replace(self, change: Change) -> None:
        atomic.drop_bytecode(change.path)
        if change.after is None:
            atomic.remove(change.path)
            if change.prune_to is not None:
                atomic.prune_empty(change.path.parent, change.prune_to)
        elif change.link is not None:
            change.path.parent.mkdir(parents=True, exist_ok=True)
            atomic.symlink_atomic(change.path, change.link)
        else:
            change.path.parent.mkdir(parents=True, exist_ok=True)
            atomic.write_atomic(change.path, change.after, mode=change.mode)
        atomic.drop_bytecode(change.path)
        crash.point()

    def _ledger_text(self) -> str | None:
        try:
            return self.ledger_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    # ------------------------------------------------------------------ recovery
    def recover(self) -> str | None:
        """Undo an interrupted transaction; returns a note when there was one."""
        try:
            journal = json.loads(self.journal_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            self._clean_temp_files()
            return None
        except ValueError:
            atomic.remove(self.journal_path)  # written atomically: cannot be partial; be safe
            return f"discarded an unreadable journal in {self.dir}"
        restored = [self._restore(entry) for entry in journal["files"]]
        ledger_before = journal.get("ledger_before")
        if ledger_before is None:
            atomic.remove(self.ledger_path)
        else:
            atomic.write_atomic(self.ledger_path, ledger_before.encode("utf-8"))
        atomic.remove(self.journal_path)
        self._clean_temp_files(Path(e["path"]) for e in journal["files"])
        changed = sum(restored)
        return (f"recovered an interrupted run: rolled back {changed} of "
                f"{len(restored)} file(s) to their state before it")

    def _restore(self, entry: dict[str, Any]) -> bool:
        path = Path(entry["path"])
        before = entry["before"]
        atomic.drop_bytecode(path)
        if before is None:  # the run created it: remove whatever entry is there (even a link
            if not (path.is_symlink() or path.exists()):  # whose blob was not written yet)
                return False
            atomic.remove(path)
            if entry.get("prune_to"):
                atomic.prune_empty(path.parent, Path(entry["prune_to"]))
            return True
        current = sha256_file(path) if path.is_file() else None
        if current == before:
            return False
        data = self.read_backup(before)
        if data is None:
            raise AscendpatchError(
                f"cannot roll back {path}: its backup {self.backup_path(before)} is missing",
                fix="reinstall the package that owns this file (pip install --force-reinstall "
                    "--no-deps <package>==<version>)")
        atomic.write_atomic(path, data)
        return True

    def _clean_temp_files(self, paths: Iterator[Path] | None = None) -> None:
        for path in paths or ():
            with contextlib.suppress(FileNotFoundError):
                atomic.temp_path(path).unlink()
        for tmp in self.dir.glob(f"**/*{atomic.TEMP_SUFFIX}") if self.dir.is_dir() else ():
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def _collect_garbage(self) -> None:
        """Delete backups that no ledger entry refers to any more."""
        referenced = {rec.backup for files in self.load_ledger().values()
                      for rec in files.values() if rec.backup}
        folder = self.dir / "backups"
        for blob in folder.iterdir() if folder.is_dir() else ():
            if blob.name not in referenced and not blob.name.endswith(atomic.TEMP_SUFFIX):
                with contextlib.suppress(FileNotFoundError):
                    blob.unlink()


def _can_write(path: Path) -> bool:
    import os

    return os.access(path, os.W_OK)


def _ledger_json(ledger: Ledger) -> bytes:
    doc = {"format": LEDGER_FORMAT,
           "artifacts": {aid: {rel: rec.__dict__ for rel, rec in sorted(files.items())}
                         for aid, files in sorted(ledger.items())}}
    return json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
