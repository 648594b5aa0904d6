"""The ledger's format: what ``ledger.json`` holds, read back as data and never as orders.

``{"format": 1, "artifacts": {artifact id: {path relative to the target: record}}}``, one
record per file: sha256 before and after, the backup's name, the time. Every path goes
through the store's guard (:class:`ascendpatch.store.root.Roots`), every digest must be a
sha256, and a file of the wrong shape stops the command with exit 2, naming the fix.
"""

from __future__ import annotations

import errno
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ascendpatch.errors import StateError, UnsafePathError
from ascendpatch.paths import NotRegularFileError, open_regular
from ascendpatch.results import Hint, Phrase
from ascendpatch.store.root import Roots
from ascendpatch.untrusted import load_json

LEDGER_FORMAT = 1
SHA256 = re.compile(r"^[0-9a-f]{64}$")
_STATE_FILE_LIMIT = 256 << 20
_LEDGER_KEYS = frozenset({"sha256_before", "sha256_after", "backup", "time"})


@dataclass(frozen=True)
class LedgerFile:
    sha256_before: str | None
    sha256_after: str | None
    backup: str | None
    time: str


Ledger = dict[str, dict[str, LedgerFile]]  # artifact id -> path (relative to root) -> record


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def read_state_file(path: Path) -> bytes | None:
    """Bytes of a state file; None when absent. Never follows a link, never blocks on a
    FIFO, never reads a directory or a device."""
    try:
        handle, info = open_regular(path, follow_links=False)
    except FileNotFoundError:
        return None
    except NotRegularFileError as exc:
        what = "a folder" if exc.is_folder else "not a regular file"
        raise StateError(f"{path} is {what}, not an ascendpatch state file",
                         fix=f"move it aside (mv {path} {path}.bad) and run again") from None
    except OSError as exc:
        raise _unreadable(path, exc) from None
    with handle:  # bounded: a file that grew since the fstat is read no further
        fits = info.st_size <= _STATE_FILE_LIMIT
        data = handle.read(_STATE_FILE_LIMIT + 1) if fits else b""
    if not fits or len(data) > _STATE_FILE_LIMIT:
        raise StateError(f"{path} is too large, not an ascendpatch state file",
                         fix=f"move it aside (mv {path} {path}.bad) and run again")
    return data


def _unreadable(path: Path, exc: OSError) -> StateError:
    if exc.errno == errno.ELOOP:
        return StateError(f"{path} is a symlink, not an ascendpatch state file",
                          fix=f"remove it (rm {path}) and run again")
    if exc.errno == errno.EISDIR:
        return StateError(f"{path} is a folder, not an ascendpatch state file",
                          fix=f"move it aside (mv {path} {path}.bad) and run again")
    return StateError(f"{path} cannot be read ({exc.strerror})",
                      fix="run as a user who can read the target")


def load_ledger(path: Path, roots: Roots) -> Ledger:
    """The ledger at ``path``, validated; empty when there is none."""
    raw = read_state_file(path)
    if raw is None:
        return {}
    try:
        return parse_ledger(load_json(raw.decode("utf-8"), f"ledger {path}"), roots, path)
    except UnsafePathError as exc:  # (the guard's own words, without its fix: this one's)
        raise StateError(f"ledger {path} names a file this run cannot place ({exc.message})",
                         fix=Phrase("run with the manifest and the environment "
                                    "($HF_HUB_CACHE, $HF_HOME, $MODEL_DIR) of the apply that "
                                    "wrote it; if it is not ascendpatch's, move it aside (mv "
                                    f"{path} {path}.bad) and '", Hint(("status",)),
                                    "' judges every file by its content")) from None
    except ValueError as exc:  # (not JSON, too deep, not UTF-8, not a ledger's shape)
        raise StateError(f"ledger {path} is not an ascendpatch ledger ({exc})",
                         fix=Phrase(f"move it aside (mv {path} {path}.bad); '", Hint(("status",)),
                                    "' then judges every file by its content")) from None


def parse_ledger(doc: object, roots: Roots, path: Path) -> Ledger:
    """A ledger document (read from ``path``) as records; ValueError when it is not one."""
    if not isinstance(doc, dict) or not isinstance(doc.get("artifacts", {}), dict):
        raise ValueError("expected {'format': 1, 'artifacts': {...}}")
    ledger: Ledger = {}
    for aid, files in doc.get("artifacts", {}).items():
        if not isinstance(files, dict):
            raise ValueError(f"artifact {aid!r}: expected a mapping of files")
        records: dict[str, LedgerFile] = {}
        for rel, rec in files.items():
            records[rel] = _record(aid, rel, rec)
            roots.guard(rel, origin=f"ledger {path}")
        ledger[str(aid)] = records
    return ledger


def _record(aid: object, rel: object, rec: object) -> LedgerFile:
    if not isinstance(rec, dict) or set(rec) != _LEDGER_KEYS:
        raise ValueError(f"{aid}/{rel}: expected the keys {', '.join(sorted(_LEDGER_KEYS))}")
    for key in ("sha256_before", "sha256_after", "backup"):
        digest(rec[key], f"{aid}/{rel}.{key}")
    if not isinstance(rec["time"], str):
        raise ValueError(f"{aid}/{rel}.time: expected a string")
    return LedgerFile(**rec)


def digest(value: object, where: str) -> str | None:
    """``value`` when it is a sha256 digest (or None); ValueError otherwise."""
    if value is None:
        return None
    if not isinstance(value, str) or not SHA256.match(value):
        raise ValueError(f"{where}: {value!r:.80} is not a sha256 digest")
    return value


def ledger_json(ledger: Ledger) -> bytes:
    doc = {"format": LEDGER_FORMAT,
           "artifacts": {aid: {rel: rec.__dict__ for rel, rec in sorted(files.items())}
                         for aid, files in sorted(ledger.items())}}
    return json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")
