"""A fleet's drift: many hosts' snapshots against one baseline (given, or the majority).

Pure comparison, no printing and no writing: ``commands/fleet_report.py`` calls it and the
renderers (``output.py`` for the terminal, ``fleethtml.py`` for the page) show the result.

A host is named by its snapshot's file name without ``.json`` (the Ansible role fetches each
node's snapshot as ``<inventory_hostname>.json``). Each host gets one cell per check:

* ``pkg:NAME``       the installed version against the baseline's (stack pins, and every
                     package whose version is not the same on all hosts);
* ``artifact:ID``    the artifact's status against the baseline's;
* ``files``          how many hashed files differ from the baseline (modified, missing, added);
* ``age``            how old the snapshot is (its ``created`` time against now).

Levels: ``OK`` as the baseline. ``WARN`` (amber, a host that is an *outlier*): its stack
differs (another version, a package more or less), an artifact is in another healthy state, or
the baseline's own artifact status is unhealthy. ``FAIL`` (red, a host that *drifted*): an
artifact not applied where the baseline has it, an artifact whose own file changed (a hand
edit that leaves the patch applied), or a file changed against the hosts at the same package
version. A snapshot older than ``stale_after`` (or of no known age) makes its host *stale*,
never healthy: what it says may no longer be true. How the majority is decided, also for
fleets of one, two or three hosts, is in :mod:`ascendpatch.inspect.fleetbase`.

What one host can add is bounded, since a node's snapshot is untrusted: a package or artifact
column that only one host differs in counts against that host, which adds at most
``MAX_HOST_COLUMNS`` of them (the rest are counted in its drift and named in a warning);
``MAX_NAMES`` names and ``MAX_DIFF_LINES`` diff lines are shown per host. So a node that claims
20,000 invented packages costs the report what 20 columns and its own lines cost.
"""

from __future__ import annotations

import enum
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ascendpatch.errors import InvalidInputError
from ascendpatch.inspect import fleetage, snapshot
from ascendpatch.inspect.fleetbase import (
    ABSENT,
    SPLIT,
    Baseline,
    Cell,
    FileDrift,
    HostSnapshot,
    Owners,
    baseline_from,
    file_drift,
    file_lines,
    majority_baseline,
)
from ascendpatch.paths import shown
from ascendpatch.results import Level

__all__ = ["ABSENT", "SPLIT", "Baseline", "HostSnapshot", "Owners", "baseline_from",
           "file_drift", "majority_baseline"]

HEALTHY_ARTIFACT = ("already-applied", "applied", "skipped")
FILES, AGE = "files", "age"
# Packages whose version is always a column when present (the stack the catalog pins).
STACK = ("vllm-ascend", "vllm", "torch", "torch-npu", "transformers")
MAX_HOST_COLUMNS = 20  # columns that one host alone may add (as many as a real outlier needs)
MAX_NAMES = 5  # owner versions named in one "not compared" cell
MAX_DIFF_LINES = 200  # diff lines kept per host (its drift counts them all)


class HostStatus(str, enum.Enum):
    """A host against the baseline: OUTLIER is amber only, DRIFT something red, STALE a
    snapshot too old (or of no known age) to vouch for the host, MISSING no readable snapshot.
    The values are what --json and the HTML page show."""

    OK = "ok"
    OUTLIER = "outlier"
    DRIFT = "drift"
    STALE = "stale"
    MISSING = "missing"


@dataclass(frozen=True)
class HostRow:
    host: str
    status: HostStatus
    cells: tuple[Cell, ...] = ()
    drift: int = 0
    diff: tuple[str, ...] = ()  # "-baseline" / "+host" lines
    source: str = ""
    reason: str = ""  # why a host is missing
    hidden: int = 0  # differences beyond the MAX_HOST_COLUMNS columns this host could add
    created: str = ""  # when its snapshot was taken, as the snapshot says
    age: float | None = None  # its age in seconds at the report (None: unknown)


@dataclass(frozen=True)
class FleetReport:
    columns: tuple[str, ...]
    rows: tuple[HostRow, ...]
    baseline: Baseline
    warnings: tuple[str, ...] = ()

    @property
    def drifted(self) -> tuple[HostRow, ...]:
        return tuple(r for r in self.rows if r.status is HostStatus.DRIFT)

    @property
    def outliers(self) -> tuple[HostRow, ...]:
        return tuple(r for r in self.rows if r.status is HostStatus.OUTLIER)

    @property
    def missing(self) -> tuple[HostRow, ...]:
        return tuple(r for r in self.rows if r.status is HostStatus.MISSING)

    @property
    def stale(self) -> tuple[HostRow, ...]:
        return tuple(r for r in self.rows if r.status is HostStatus.STALE)


@dataclass
class Interner:
    """File paths and hashes repeat across hosts: keep one string object for each."""

    seen: dict[str, str] = field(default_factory=dict)

    def __call__(self, text: str) -> str:
        return self.seen.setdefault(text, text)


def host_name(path: Path) -> str:
    """The file name without ``.json``, as text (bytes that are not UTF-8 as ``\\xff``)."""
    name = shown(path.name)
    for suffix in (".json", ".snapshot"):
        name = name.removesuffix(suffix)
    return name


WORDING = snapshot.Wording(unreadable="{path} cannot be read ({exc})",
                           not_json="{path} is not valid JSON (truncated? {exc})",
                           foreign="{path} is not an ascendpatch snapshot (foreign JSON)",
                           other_format="{path} is a snapshot of format {found}; this "
                                        "ascendpatch reads format {wanted}",
                           invalid="{path} is not a valid snapshot ({problem})")


def parse(doc: dict[str, Any], source: str, host: str, intern: Interner | None = None) \
        -> HostSnapshot:
    """A snapshot document as a HostSnapshot; InvalidInputError names what is missing."""
    intern = intern or Interner()
    try:
        packages = {intern(str(name)): intern(str(d["version"]))
                    for name, d in doc["distributions"].items()}
        artifacts = {intern(str(k)): intern(str(v)) for k, v in doc["artifacts"].items()}
        files = doc["files"]  # (hot: 500 hosts x 600 files; taken as json made it)
        if not isinstance(files, dict):
            raise TypeError("files")
        owned = {intern(str(k)): tuple(map(str, v))
                 for k, v in doc.get("artifact_files", {}).items()}
    except (KeyError, TypeError, AttributeError) as exc:
        raise InvalidInputError(f"{source} is an incomplete snapshot (no {exc})") from None
    return HostSnapshot(host, source, packages, artifacts, files, str(doc.get("created", "")),
                        owned)


def read(path: Path, intern: Interner | None = None) -> HostSnapshot:
    return parse(snapshot.load(path, WORDING), shown(path), host_name(path), intern)


def duplicate_hosts(paths: Sequence[Path]) -> dict[str, list[str]]:
    """Host names given by more than one snapshot file (which one is true is not ours to pick)."""
    by_host: dict[str, list[str]] = {}
    for path in paths:
        by_host.setdefault(host_name(path), []).append(shown(path))
    return {h: files for h, files in by_host.items() if len(files) > 1}


@dataclass(frozen=True)
class Columns:
    checks: tuple[str, ...]
    hidden: dict[str, int]  # host -> the columns it alone differs in beyond MAX_HOST_COLUMNS


def _differing(have: dict[str, str], want: dict[str, str]) -> Iterator[str]:
    """The names whose value in ``have`` is not the one in ``want`` (ABSENT when missing)."""
    yield from (n for n, v in have.items() if want.get(n, ABSENT) != v)
    yield from (n for n, v in want.items() if v != ABSENT and n not in have)


def columns(hosts: Sequence[HostSnapshot], base: Baseline) -> Columns:
    """The stack's packages and the baseline's artifacts, always; then each package or
    artifact some host differs in: those that two hosts or more differ in, all; those that
    one host alone differs in, at most MAX_HOST_COLUMNS per host (the others hidden)."""
    differ: dict[str, list[str]] = {}
    for host in hosts:
        for prefix, have, want in (("pkg:", host.packages, base.packages),
                                   ("artifact:", host.artifacts, base.artifacts)):
            for name in _differing(have, want):
                differ.setdefault(prefix + name, []).append(host.host)
    chosen = {f"pkg:{n}" for n in STACK
              if base.packages.get(n, ABSENT) != ABSENT or any(n in h.packages for h in hosts)}
    chosen |= {f"artifact:{a}" for a, status in base.artifacts.items() if status != ABSENT}
    alone: dict[str, list[str]] = {}
    for check, who in differ.items():
        if check not in chosen and len(who) == 1:
            alone.setdefault(who[0], []).append(check)
        else:
            chosen.add(check)
    hidden: dict[str, int] = {}
    for name, checks in alone.items():
        checks.sort(key=_column_order)
        chosen.update(checks[:MAX_HOST_COLUMNS])
        if len(checks) > MAX_HOST_COLUMNS:
            hidden[name] = len(checks) - MAX_HOST_COLUMNS
    return Columns((*sorted(chosen, key=_column_order), FILES, AGE), hidden)


def _column_order(check: str) -> tuple[int, int, str]:
    kind, name = check.split(":", 1)
    if kind == "artifact":
        return 2, 0, name
    return (0, STACK.index(name), name) if name in STACK else (1, 0, name)


def _package_cell(check: str, host: HostSnapshot, base: Baseline) -> Cell:
    name = check.removeprefix("pkg:")
    have, want = host.packages.get(name, ABSENT), base.packages.get(name, ABSENT)
    if want == SPLIT:
        return Cell(check, Level.WARN, have, want, f"{name} {have}: the hosts are split, no "
                                                   "version is the majority's (pass --baseline)")
    if have == want:
        return Cell(check, Level.OK, have, want, f"{name} {have}, as the baseline")
    if want == ABSENT:
        return Cell(check, Level.WARN, have, want,
                    f"{name} {have} is installed here; the baseline does not have it")
    if have == ABSENT:  # (another release of the stack requires other packages)
        return Cell(check, Level.WARN, have, want, f"{name} is not installed; the baseline "
                                                   f"has {want}")
    return Cell(check, Level.WARN, have, want, f"{name} {have}: a version outlier (the "
                                               f"baseline has {want})")


def _artifact_cell(check: str, host: HostSnapshot, base: Baseline,
                   drift: FileDrift) -> Cell:
    cell = _artifact_state_cell(check, host, base)
    aid = check.removeprefix("artifact:")
    files = set(host.artifact_files.get(aid, ()))
    own = [c for c in drift.changes if c.rel in files] if files else []
    if cell.level is Level.FAIL or not own:
        return cell
    more = f" (+{len(own) - 1} more)" if len(own) > 1 else ""
    return Cell(check, Level.FAIL, cell.value, cell.expected,
                f"{aid}: {cell.value}, but its file {own[0].rel}{more} is {own[0].kind} "
                "against the hosts at the same version (a hand edit?)")


def _artifact_state_cell(check: str, host: HostSnapshot, base: Baseline) -> Cell:
    aid = check.removeprefix("artifact:")
    have, want = host.artifacts.get(aid, ABSENT), base.artifacts.get(aid, ABSENT)
    healthy = have in HEALTHY_ARTIFACT
    if want == SPLIT:
        return Cell(check, Level.WARN if healthy else Level.FAIL, have, want,
                    f"{aid}: {have}; the hosts are split, no state is the majority's")
    if have != want:
        level = Level.WARN if healthy else Level.FAIL
        return Cell(check, level, have, want, f"{aid}: {have}; the baseline is {want}")
    if not healthy and want != ABSENT:
        return Cell(check, Level.WARN, have, want,
                    f"{aid}: {have}, as the baseline, which is itself not applied")
    return Cell(check, Level.OK, have, want, f"{aid}: {have}, as the baseline")


def _files_cell(drift: FileDrift) -> Cell:
    changes = drift.changes
    if changes:
        counts = Counter(c.kind for c in changes)
        text = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        first = ", ".join(c.rel for c in changes[:3])
        more = f" (+{len(changes) - 3} more)" if len(changes) > 3 else ""
        return Cell(FILES, Level.FAIL, str(len(changes)), "0", f"files: {text}: {first}{more}")
    if drift.unchecked:
        beyond = len(drift.unchecked) - MAX_NAMES
        names = ", ".join(f"{o} {v}" for o, v in drift.unchecked[:MAX_NAMES]) + (
            f" and {beyond} more" if beyond > 0 else "")
        return Cell(FILES, Level.WARN, "?", "0",
                    f"files not compared: no other host has {names}")
    return Cell(FILES, Level.OK, "0", "0", "every hashed file as the baseline")


def _diff_lines(cells: Sequence[Cell], drift: FileDrift) -> tuple[str, ...]:
    lines: list[str] = []
    for cell in cells:
        if cell.level is Level.OK or cell.check in (FILES, AGE):
            continue
        kind, label = cell.check.split(":", 1)
        if cell.expected not in (ABSENT, SPLIT):
            lines.append(f"-{kind} {label} {cell.expected}")
        if cell.value != ABSENT:
            lines.append(f"+{kind} {label} {cell.value}")
    for change in drift.changes:
        lines += file_lines(change)
    return tuple(lines)


def compare(host: HostSnapshot, base: Baseline, cols: Sequence[str],
            owners: Owners | None = None, hidden: int = 0,
            age: fleetage.Age | None = None) -> HostRow:
    """``hidden``: how many packages and artifacts this host differs in that have no column
    (beyond what one host may add): counted in its drift, named in its last diff line.
    ``age``: how old its snapshot is against the threshold (None: age not judged)."""
    drift = file_drift(host, base, owners or Owners())
    cells: list[Cell] = []
    for check in cols:
        if check.startswith("pkg:"):
            cells.append(_package_cell(check, host, base))
        elif check.startswith("artifact:"):
            cells.append(_artifact_cell(check, host, base, drift))
        elif check == AGE:
            cells.append((age or fleetage.judge(host.created, time.time(), None)).cell(AGE))
        else:
            cells.append(_files_cell(drift))
    # (every package or artifact that differs has a column or is counted in ``hidden``)
    count = sum(1 for c in cells if c.level is not Level.OK and c.check not in (FILES, AGE))
    count += len(drift.changes) + hidden
    levels = {c.level for c in cells if c.check != AGE} | ({Level.WARN} if hidden else set())
    stale = any(c.check == AGE and c.level is not Level.OK for c in cells)
    status = (HostStatus.DRIFT if Level.FAIL in levels else HostStatus.STALE if stale else
              HostStatus.OUTLIER if Level.WARN in levels else HostStatus.OK)
    return HostRow(host.host, status, tuple(cells), count,
                   _bounded(_diff_lines(cells, drift), hidden), host.source, hidden=hidden,
                   created=host.created, age=age.seconds if age is not None else None)


def _bounded(lines: tuple[str, ...], hidden: int) -> tuple[str, ...]:
    kept = lines[:MAX_DIFF_LINES]
    if len(lines) > MAX_DIFF_LINES:
        kept += (f"... {len(lines) - MAX_DIFF_LINES} more line(s), not shown",)
    if hidden:
        kept += (f"... {hidden} more package(s) or artifact(s) differ, without a column (one "
                 f"host adds at most {MAX_HOST_COLUMNS})",)
    return kept


def missing_row(host: str, reason: str, source: str = "") -> HostRow:
    return HostRow(host, HostStatus.MISSING, source=source, reason=reason)


def build(hosts: Sequence[HostSnapshot], base: Baseline, missing: Sequence[HostRow] = (),
          warnings: Sequence[str] = (), owners: Owners | None = None, *,
          stale_after: float | None = None, now: float | None = None) -> FleetReport:
    """``stale_after``: seconds after which a snapshot is stale (None: never); ``now``: the
    time ages are counted to (default: the clock)."""
    owners = owners or Owners()
    cols = columns(hosts, base)
    when = time.time() if now is None else now
    rows = [compare(h, base, cols.checks, owners, cols.hidden.get(h.host, 0),
                    fleetage.judge(h.created, when, stale_after)) for h in hosts]
    rows += list(missing)
    rows.sort(key=lambda r: r.host)
    bounded = [f"{host} differs in {count} more package(s) or artifact(s) than the "
               f"{MAX_HOST_COLUMNS} columns one host may add: they are counted in its drift, "
               "not shown" for host, count in sorted(cols.hidden.items())]
    return FleetReport(cols.checks, tuple(rows), base, (*warnings, *bounded))


def to_json(report: FleetReport) -> dict[str, Any]:
    """The report as plain data: what --json prints and what the HTML page embeds."""
    base = report.baseline
    return {
        "baseline": {"source": base.source,
                     "packages": {k: _text(v) for k, v in base.packages.items() if v != ABSENT},
                     "artifacts": {k: _text(v) for k, v in base.artifacts.items()
                                   if v != ABSENT},
                     "files": sum(len(f) for f in base.files.values())},
        "columns": list(report.columns),
        "hosts": [{"host": r.host, "status": r.status.value, "drift": r.drift, "source": r.source,
                   "reason": r.reason, "diff": list(r.diff), "created": r.created,
                   "cells": [{"check": c.check, "level": c.level.value, "value": c.value,
                              "expected": _text(c.expected), "detail": c.detail}
                             for c in r.cells]}
                  for r in report.rows],
        "drifted": [r.host for r in report.drifted],
        "outliers": [r.host for r in report.outliers],
        "stale": [r.host for r in report.stale],
        "missing": [r.host for r in report.missing],
        "warnings": list(report.warnings),
    }


def _text(value: str) -> str:
    return "split (no majority)" if value == SPLIT else value
