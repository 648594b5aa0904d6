"""Frozen result objects: what commands return and the one renderer turns into text or JSON.

Items carry data, not lines: a level and status, the subject (id, kind or check), what was
found (message, details, diff) and what to do about it (fix). ascendpatch/output.py alone turns
them into "[FAIL] ...; fix: ..." lines, rich text or JSON."""

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
    fix: str = ""  # what to do about it; output.py shows it after the message


@dataclass(frozen=True)
class CheckResult:
    """One line of `verify` / `audit`: a check that is not an artifact (pins, probes, env)."""

    id: str
    check: str  # pin, artifact, dependencies, probe, cann, env, audit, ...
    level: Level
    message: str
    details: tuple[str, ...] = ()
    data: dict[str, object] = field(default_factory=dict)
    fix: str = ""  # what to do about it; output.py shows it after the message


Item = ArtifactResult | CheckResult


@dataclass(frozen=True)
class CommandResult:
    command: str
    results: tuple[Item, ...]
    notes: tuple[str, ...] = ()  # things the run did on the side (recovery), shown as [WARN]
    summary: str = ""
    exit_code_override: int | None = None
    extra: dict[str, object] = field(default_factory=dict)
    payload: str | None = None  # `-o -`: the document itself goes to stdout, the lines to stderr
    show_diff: bool = False  # plan, apply --diff: details and diffs shown for every item

    @property
    def ok(self) -> bool:
        """True exactly when the exit code is 0 (JSON's "ok" never contradicts "exit_code")."""
        return self.exit_code == EXIT_OK

    @property
    def exit_code(self) -> int:
        if self.exit_code_override is not None:
            return self.exit_code_override
        failed = any(r.level is Level.FAIL for r in self.results)
        return EXIT_PROBLEMS if failed else EXIT_OK

    def recap(self) -> dict[str, int]:
        """Ansible-style counts for apply / revert: ok, changed, skipped, failed."""
        counts = {"ok": 0, "changed": 0, "skipped": 0, "failed": 0}
        for r in self.results:
            counts[_recap_key(r)] += 1
        return counts


def _recap_key(item: Item) -> str:
    if item.level is Level.FAIL:
        return "failed"
    if isinstance(item, ArtifactResult):
        if _changes(item):
            return "changed"
        if item.status is Status.SKIPPED:
            return "skipped"
    elif item.level is Level.SKIP:
        return "skipped"
    return "ok"


def _changes(item: ArtifactResult) -> bool:
    """Applied / reverted now, or (--dry-run, a WARN line) would be."""
    if item.level is Level.WARN:
        return item.status in (Status.NOT_APPLIED, Status.APPLIED)
    return item.status in (Status.APPLIED, Status.REVERTED)


# The JSON "status" of a check (verify, audit, ...), so that every item has one.
CHECK_STATUS = {Level.OK: "ok", Level.SKIP: "skipped", Level.WARN: "warning",
                Level.FAIL: "failed"}


def pending_exit_code(results: Sequence[Item]) -> int:
    """plan / --dry-run / status: 1 when anything is not in the desired state (pip-tools style):
    the "changes pending" exit code is 1, the same as "problems found"."""
    bad = any(r.level is Level.FAIL or (isinstance(r, ArtifactResult) and _changes(r))
              for r in results)
    return EXIT_PROBLEMS if bad else EXIT_OK
