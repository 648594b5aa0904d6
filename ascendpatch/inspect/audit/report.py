"""What an audit returns: its findings, its timings, and the changes ascendpatch expects."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Expected = Mapping[str, tuple[str, str]]
ExpectedSource = Expected | Callable[[], Expected]


@dataclass(frozen=True)
class AuditFinding:
    code: str  # rpm -V style: "S.5" size+digest, "..5" digest, "missing", "orphan"
    path: str  # relative to the target's site-packages
    package: str
    detail: str
    expected: bool = False  # changed as ascendpatch's ledger / manifest expects


@dataclass
class Timings:
    """Where a run's time went (seconds); the benchmark prints the critical path from these."""

    records: float = 0.0  # reading every RECORD
    stat: float = 0.0  # the stat pass and queueing files to hash (cold: queueing only)
    hash_wall: float = 0.0  # first file queued to last digest back
    largest_path: str = ""
    largest_bytes: int = 0
    largest_seconds: float = 0.0  # SHA-256 of the largest file hashed: the lower bound
    largest_cpu: float = 0.0  # the CPU time of that SHA-256 (the rest was spent waiting)
    largest_start: float = 0.0  # when that hash started, after audit() (or the hashing) began
    orphans: float = 0.0
    total: float = 0.0
    # with hashpool.PHASES_ENV set: the hashing threads' open / fstat / read+hash / close and
    # idle seconds (and call counts), summed over threads
    phases: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else
                    {p: round(t, 4) for p, t in v.items()} if isinstance(v, dict) else v)
                for k, v in vars(self).items()}


@dataclass
class AuditReport:
    findings: list[AuditFinding] = field(default_factory=list)
    files_checked: int = 0
    files_hashed: int = 0
    timings: Timings = field(default_factory=Timings)


class Wanted:
    """The expected changes, computed only when a file differs (loading them costs imports)."""

    def __init__(self, source: ExpectedSource) -> None:
        self.source = source
        self.value: Expected | None = None

    def get(self, rel: str) -> tuple[str, str] | None:
        if self.value is None:
            self.value = self.source() if callable(self.source) else self.source
        return self.value.get(rel)
