"""The protocol every artifact kind satisfies, and the per-file plan it returns.

A kind only *reads*: it looks at the target's current files and says, per file, what state
it is in, what the file should hold once applied (``desired``) and what it held before
(``original``), where it can know. The engine decides what to write and does it through
:mod:`ascendpatch.store`. Adding a kind = one module with a class like these + one line in
``kinds/__init__.py``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

from ascendpatch.env.target import Distribution
from ascendpatch.errors import RefusedError, UnsafePathError
from ascendpatch.filestate import FileState
from ascendpatch.manifest.model import Artifact, Variant
from ascendpatch.paths import safe_join
from ascendpatch.store.ledger import STATE_DIR


@dataclass(frozen=True)
class Content:
    """File content that may be unknown: ``known`` False means we cannot tell it."""

    data: bytes | None  # None: the file is (or should be) absent
    known: bool = True
    link: str | None = None  # the file is (or should be) a symlink to this relative target
    mode: int | None = None  # permission bits to give a file this content creates


UNKNOWN = Content(None, known=False)


@dataclass(frozen=True)
class FileFinding:
    rel: str  # relative to the distribution's location
    path: Path
    state: FileState
    current: bytes | None
    desired: Content
    original: Content
    detail: str = ""
    forceable: bool = False  # --force may overwrite this conflict with ``desired``
    prune_to: Path | None = None  # when removed (revert), remove emptied folders up to here
    # Why ``original`` may not be restored without a ledger record proving ascendpatch wrote
    # the current content (None: content alone is proof enough).
    revert_refusal: str | None = None


@dataclass(frozen=True)
class ArtifactSite:
    artifact: Artifact
    variant: Variant
    dist: Distribution | None
    root: Path
    source: Path | None
    env: dict[str, str] = field(default_factory=dict)

    def path(self, rel: str) -> Path:
        origin = f"artifact {self.artifact.id}"
        path = safe_join(self.root, rel, origin=origin)
        inside = Path(os.path.realpath(path)).relative_to(os.path.realpath(self.root)).parts
        if STATE_DIR in PurePosixPath(rel).parts or STATE_DIR in inside:
            raise UnsafePathError(f"{origin}: path {rel!r} is inside ascendpatch's own state "
                                  f"folder {STATE_DIR}/; a patch may not change it")
        return path

    def read(self, rel: str) -> tuple[Path, bytes | None]:
        """The file's bytes (None: absent). A FIFO, device or folder where a patched file
        should be is refused: opening it without O_NONBLOCK would hang every command."""
        path = self.path(rel)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except FileNotFoundError:
            return path, None
        except IsADirectoryError:
            fd = None
        if fd is None or not stat.S_ISREG(os.fstat(fd).st_mode):
            if fd is not None:
                os.close(fd)
            raise RefusedError(
                f"artifact {self.artifact.id}: {path} is not a regular file (a folder, FIFO "
                "or device); nothing was changed",
                fix=f"move it aside (mv {path} {path}.bad) and reinstall the package that "
                    "ships it")
        with os.fdopen(fd, "rb") as handle:
            return path, handle.read()

    def record_sha256(self, rel: str) -> str | None:
        if self.dist is None:
            return None
        entry = self.dist.record.get(rel)
        return entry.sha256 if entry else None


class Kind(Protocol):
    name: str
    needs_distribution: bool
    # True when each file stands on its own (a cache fixer): a mix of done and not-done files
    # is then simply completed; False for a patch, where a half-applied state means trouble.
    independent_files: bool

    def prepare(self, site: ArtifactSite) -> None:
        """Validate sources and target paths; raise InvalidInputError. Writes nothing."""

    def inspect(self, site: ArtifactSite) -> list[FileFinding]:
        """The state of every file this artifact owns."""
