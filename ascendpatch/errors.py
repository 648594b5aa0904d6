"""The one exception hierarchy. Every user-facing failure names the thing and the fix.

Exit codes (see README): 0 desired state, 1 problems found or refused, 2 invalid input or
usage (nothing changed), 3 unexpected error, 130 interrupted.
"""

from __future__ import annotations

from collections.abc import Sequence

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_UNEXPECTED = 3
EXIT_INTERRUPTED = 130


class AscendpatchError(Exception):
    """Base class of every expected failure. ``str(err)`` is a one-line message."""

    exit_code = EXIT_PROBLEMS
    details: tuple[str, ...] = ()  # more lines, each shown under the message (one per problem)

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        if self.fix:
            return f"{self.message}; fix: {self.fix}"
        return self.message


class InvalidInputError(AscendpatchError):
    """Bad input (usage, manifest, patch file, path): nothing was changed."""

    exit_code = EXIT_USAGE


MAX_PROBLEM_CHARS = 500  # one problem line (a key path 64 levels deep still fits)
MAX_PROBLEMS_SHOWN = 50  # lines under the message; the rest are counted


class ManifestError(InvalidInputError):
    """A manifest failed to load or validate. Carries every problem found: the message is
    the first, ``details`` the others (all at once, so an author fixes them in one go)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = [_cut(p) for p in problems]
        head = self.problems[0] if self.problems else "invalid manifest"
        more = f" (+{len(problems) - 1} more problems)" if len(problems) > 1 else ""
        super().__init__(head + more)
        self.details = shown_problems(self.problems[1:])


def shown_problems(problems: Sequence[str]) -> tuple[str, ...]:
    """At most MAX_PROBLEMS_SHOWN problems, then how many more there are."""
    rest = len(problems) - MAX_PROBLEMS_SHOWN
    return tuple(problems[:MAX_PROBLEMS_SHOWN]) + ((f"... and {rest} more",) if rest > 0 else ())


def _cut(problem: str) -> str:
    return problem if len(problem) <= MAX_PROBLEM_CHARS else \
        problem[:MAX_PROBLEM_CHARS - 3] + "..."


class PatchFormatError(InvalidInputError):
    """A patch file is not a well-formed unified diff."""


class UnsafePathError(InvalidInputError):
    """A path from a manifest or patch would leave the target tree."""


class TargetError(InvalidInputError):
    """The target environment could not be found or inspected."""


class LockTimeoutError(AscendpatchError):
    """Another ascendpatch run holds the target's lock."""


class RefusedError(AscendpatchError):
    """An operation was refused because it would damage the target."""


class RecoveryNeeded(AscendpatchError):
    """A read-only command found an interrupted run's journal: it never rolls one back
    (that rewrites target files), it says which command does."""


class StateError(InvalidInputError):
    """ascendpatch's own state (journal, ledger, backups) has a shape it did not write."""


class WriteFaultError(AscendpatchError):
    """The file system refused a write (disk full, read-only, no permission); nothing changed."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C after a commit point: ``committed`` stays in place (the store's session says
    what it committed), so the message must not promise a rollback."""

    def __init__(self, committed: Sequence[str]) -> None:
        super().__init__(*committed)
        self.committed = tuple(committed)
