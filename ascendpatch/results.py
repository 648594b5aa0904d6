"""Frozen result objects: what commands return and the one renderer turns into text or JSON.

Items carry data, not lines: a level and status, the subject (id, kind or check), what was
found (message, details, diff) and what to do about it (fix). ascendpatch/shell/output.py
alone turns them into "[FAIL] ...; fix: ..." lines, rich text or JSON. A message, fix or note
that suggests a command holds it as a :class:`Hint` inside a :class:`Phrase`, so the renderer
can repeat the ``--python`` / ``--manifest`` this run was given."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ascendpatch.errors import EXIT_OK, EXIT_PROBLEMS
from ascendpatch.pipeline.filestate import FileState


class Status(str, enum.Enum):
    APPLIED = "applied"
    ALREADY_APPLIED = "already-applied"
    SKIPPED = "skipped"
    PARTIAL = "partial"
    CONFLICT = "conflict"
    FAILED = "failed"
    REVERTED = "reverted"
    NOT_APPLIED = "not-applied"
    PENDING = "pending"  # plan / --dry-run: a change the real run would make


# What a run changed, or (PENDING) would change: the recap's "changed" and, with PENDING, the
# "changes pending" exit code of plan / --dry-run.
CHANGES = frozenset({Status.APPLIED, Status.REVERTED, Status.PENDING})


class FileChange(str, enum.Enum):
    """A file's state after a write that the kind no longer lists (``FileResult.state``
    holds a FileState's text or this)."""

    REMOVED = "removed"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Hint:
    """A command line to suggest, without the program name: ``Hint(("apply", aid))``.

    Only the renderer words it: as ``ascendpatch apply ID`` plus the options that pointed this
    run at its target and manifest (``shell.cliargs.REACH`` says which commands take the
    target options). Elements are shown joined by spaces, so a placeholder such as
    ``"<serve log>"`` is one element."""

    argv: tuple[str, ...]
    # Another program's command line the argv follows (the target's own pip: ``python -m
    # pip``): shown as it is, shell-quoted, never with ascendpatch's options.
    runner: tuple[str, ...] = ()

    def words(self, program: str = "ascendpatch") -> str:
        if self.runner:
            import shlex

            return shlex.join((*self.runner, *self.argv))
        return " ".join((program, *self.argv))


class Phrase(str):
    """Text with hints in it, built where the message is made: ``Phrase("run: ", Hint(...))``.

    As a str it reads as for a plain ``ascendpatch`` run, so it goes wherever text goes
    (exceptions, comparisons, logs); ``parts`` keep the hints for the renderer. Adding text to
    a Phrase keeps its parts; an f-string does not, so build messages with hints from parts."""

    parts: tuple[str | Hint, ...]

    def __new__(cls, *parts: str | Hint) -> Phrase:
        flat: list[str | Hint] = []
        for part in parts:
            flat.extend(part.parts if isinstance(part, Phrase) else (part,))
        self = super().__new__(cls, "".join(p if isinstance(p, str) else p.words() for p in flat))
        self.parts = tuple(flat)
        return self

    def __add__(self, other: str) -> Phrase:
        return Phrase(self, other)

    def __radd__(self, other: str) -> Phrase:
        return Phrase(other, self)


class Level(str, enum.Enum):
    OK = "OK"
    SKIP = "SKIP"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True)
class FileResult:
    path: str
    state: FileState | FileChange
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


class Tone(enum.Enum):
    """How a table cell reads, named by meaning; output.py alone maps a tone to a colour."""

    GOOD = "good"
    QUIET = "quiet"  # fine, nothing to do (not needed)
    CAUTION = "caution"
    BAD = "bad"
    ABSENT = "absent"  # no data (a host without a snapshot)

    @classmethod
    def of(cls, level: Level) -> Tone:
        return {Level.OK: cls.GOOD, Level.SKIP: cls.QUIET, Level.WARN: cls.CAUTION,
                Level.FAIL: cls.BAD}[level]


@dataclass(frozen=True)
class Cell:
    text: str
    tone: Tone | None = None


@dataclass(frozen=True)
class Table:
    """A payload's grid for terminals. ``stands_in``: on a terminal it replaces the OK lines
    and the summary (catalog-check), and a pipe gets those instead; otherwise it is printed
    after the lines on any stream (fleet-report)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    stands_in: bool = False
    right: frozenset[int] = frozenset()  # indices of right-justified columns


class Payload(Protocol):
    """What a command returns besides its items (catalog matrix, fleet rows, audit counts)."""

    def json(self) -> dict[str, object]:
        """The top-level keys this payload adds to the --json envelope."""

    def table(self) -> Table | None:
        """The terminal table, if the payload has one."""


@dataclass(frozen=True)
class CommandResult:
    command: str
    results: tuple[Item, ...]
    notes: tuple[str, ...] = ()  # things the run did on the side (recovery), shown as [WARN]
    summary: str = ""
    exit_code_override: int | None = None
    body: Payload | None = None  # the command's typed payload (its JSON keys, its table)
    payload: str | None = None  # `-o -`: the document itself goes to stdout, the lines to stderr
    show_diff: bool = False  # plan, apply --diff: details and diffs shown for every item
    show_files: bool = False  # status: each artifact's files and their states, in text too
    streamed: bool = False  # each item went to progress.item when it became final
    has_recap: bool = False  # apply / revert: the ok/changed/skipped/failed counts are shown

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
        if item.status in CHANGES:
            return "changed"
        if item.status is Status.SKIPPED:
            return "skipped"
    elif item.level is Level.SKIP:
        return "skipped"
    return "ok"


# The JSON "status" of a check (verify, audit, ...), so that every item has one.
CHECK_STATUS = {Level.OK: "ok", Level.SKIP: "skipped", Level.WARN: "warning",
                Level.FAIL: "failed"}

PENDING = frozenset({Status.PENDING})


def pending_exit_code(results: Sequence[Item], pending: frozenset[Status] = PENDING) -> int:
    """plan / --dry-run / status: 1 when anything is not in the desired state (pip-tools style):
    the "changes pending" exit code is 1, the same as "problems found". ``pending``: the
    statuses that mean a change is due (status adds NOT_APPLIED: apply would change it)."""
    bad = any(r.level is Level.FAIL or (isinstance(r, ArtifactResult) and r.status in pending)
              for r in results)
    return EXIT_PROBLEMS if bad else EXIT_OK
