"""Frozen result objects: what commands return and the one renderer turns into text or JSON."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from ascendpatch.errors import EXIT_OK, EXIT_PROBLEMS


class Status(str, enum.Enum):
    APPLIED = "applied"
    ALREADY_APPLIED = "already-applied"
    SKIPPED = "skipped"
    PARTIAL = "partial"
    CONFLICT = "conflict"
    FAILED = "failed"
    REVERTED = "reverted"
    NOT_APPLIED = "not-applied"


class Level(str, enum.Enum):
    OK = "OK"
    SKIP = "SKIP"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True)
class FileResult:
    path: str
    state: str
    sha256_before: str | None
    sha256_after: str | None


@dataclass(frozen=True)
class ArtifactResult:
    id: str
    kind: str
    status: Status
    level: Level
    message: str
    files: tuple[FileResult, ...] = ()
    diff: str = ""  # unified diff of the change, for `plan`
    details: tuple[str, ...] = ()  # extra lines (hunk reports, nearest code)


@dataclass(frozen=True)
class CheckResult:
    """One line of `verify` / `audit`: a check that is not an artifact (pins, probes, env)."""

    id: str
    check: str  # pin, artifact, dependencies, probe, cann, env, audit, ...
    level: Level
    message: str
    details: tuple[str, ...] = ()
    data: dict[str, object] = field(default_factory=dict)


Item = ArtifactResult | CheckResult


@dataclass(frozen=True)
class CommandResult:
    command: str
    results: tuple[Item, ...]
    notes: tuple[str, ...] = ()  # things the run did on the side (recovery), shown as [WARN]
    summary: str = ""
    exit_code_override: int | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(r.level is not Level.FAIL for r in self.results)

    @property
    def exit_code(self) -> int:
        if self.exit_code_override is not None:
            return self.exit_code_override
        return EXIT_OK if self.ok else EXIT_PROBLEMS


def pending_exit_code(results: Sequence[Item]) -> int:
    """plan / --dry-run / status: 1 when anything is not in the desired state (pip-tools style)."""
    bad = any(r.level is Level.FAIL or (isinstance(r, ArtifactResult) and
                                        r.status is Status.NOT_APPLIED) for r in results)
    return EXIT_PROBLEMS if bad else EXIT_OK
