"""A fleet's drift: many hosts' snapshots against one baseline (given, or the majority).

Pure comparison, no printing and no writing: ``commands/fleet_report.py`` calls it and the
renderers (``output.py`` for the terminal, ``fleethtml.py`` for the page) show the result.

A host is named by its snapshot's file name without ``.json`` (the Ansible role fetches each
node's snapshot as ``<inventory_hostname>.json``). Each host gets one cell per check:

* ``pkg:NAME``       the installed version against the baseline's (stack pins, and every
                     package whose version is not the same on all hosts);
* ``artifact:ID``    the artifact's status against the baseline's;
* ``files``          how many hashed files differ from the baseline (modified, missing, added).

Levels: ``OK`` as the baseline. ``WARN`` (amber, a host that is an *outlier*): its stack
differs (another version, a package more or less), an artifact is in another healthy state, or
the baseline's own artifact status is unhealthy. ``FAIL`` (red, a host that *drifted*): an
artifact not applied where the baseline has it, or a file changed against the hosts at the
same package version.

What one host can add is bounded, since a node's snapshot is untrusted: a package or artifact
column that only one host differs in counts against that host, which adds at most
``MAX_HOST_COLUMNS`` of them (the rest are counted in its drift and named in a warning);
``MAX_NAMES`` names and ``MAX_DIFF_LINES`` diff lines are shown per host. So a node that claims
20,000 invented packages costs the report what 20 columns and its own lines cost.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from ascendpatch.errors import InvalidInputError
from ascendpatch.inspect import snapshot
from ascendpatch.paths import shown
from ascendpatch.results import Level

HEALTHY_ARTIFACT = ("already-applied", "applied", "skipped")
ABSENT = "absent"
# Packages whose version is always a column when present (the stack the catalog pins).
STACK = ("vllm-ascend", "vllm", "torch", "torch-npu", "transformers")
MAX_HOST_COLUMNS = 20  # columns that one host alone may add (as many as a real outlier needs)
MAX_NAMES = 5  # owner versions named in one "not compared" cell
MAX_DIFF_LINES = 200  # diff lines kept per host (its drift counts them all)


class HostStatus(str, enum.Enum):
    """A host against the baseline: OUTLIER is amber only, DRIFT something red, MISSING no
    readable snapshot. The values are what --json and the HTML page show."""

    OK = "ok"
    OUTLIER = "outlier"
    DRIFT = "drift"
    MISSING = "missing"


@dataclass(frozen=True)
class HostSnapshot:
    host: str
    source: str
    packages: dict[str, str]
    artifacts: dict[str, str]
    files: dict[str, str]


Group = tuple[str, str]  # (owning package, its version); ("", "") for files of no package


@dataclass(frozen=True)
class Baseline:
    source: str  # "majority of N hosts" or the file
    packages: dict[str, str]  # ABSENT when most hosts lack it
    artifacts: dict[str, str]
    files: dict[Group, dict[str, str]]  # per owner version: path -> sha256 (ABSENT: not there)
    comparable: frozenset[Group]  # groups with a reference (in majority mode: >= 2 hosts)


@dataclass(frozen=True)
class Cell:
    check: str
    level: Level
    value: str
    expected: str
    detail: str


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
    except (KeyError, TypeError, AttributeError) as exc:
        raise InvalidInputError(f"{source} is an incomplete snapshot (no {exc})") from None
    return HostSnapshot(host, source, packages, artifacts, files)


def read(path: Path, intern: Interner | None = None) -> HostSnapshot:
    return parse(snapshot.load(path, WORDING), shown(path), host_name(path), intern)


def duplicate_hosts(paths: Sequence[Path]) -> dict[str, list[str]]:
    """Host names given by more than one snapshot file (which one is true is not ours to pick)."""
    by_host: dict[str, list[str]] = {}
    for path in paths:
        by_host.setdefault(host_name(path), []).append(shown(path))
    return {h: files for h, files in by_host.items() if len(files) > 1}


def _majority(values: Iterable[str]) -> str:
    counts = Counter(values)
    best = max(counts.values())
    return min(v for v, n in counts.items() if n == best)  # ties: the smallest, stable


@dataclass
class Owners:
    """Which package a hashed file belongs to, from its top-level name (cached per name)."""

    cache: dict[str, str] = field(default_factory=dict)
    memo: dict[str, dict[Group, dict[str, str]]] = field(default_factory=dict)

    def of(self, rel: str) -> str:
        top = rel.partition("/")[0]
        owner = self.cache.get(top)
        if owner is None:
            stem = top.removesuffix(".py")
            if stem.endswith((".dist-info", ".data")):
                stem = stem.rsplit(".", 1)[0].split("-", 1)[0]
            owner = self.cache[top] = canonicalize_name(stem)
        return owner

    def groups(self, host: HostSnapshot) -> dict[Group, dict[str, str]]:
        key = f"{host.host}\0{host.source}"
        if key not in self.memo:
            self.memo[key] = self._group(host)
        return self.memo[key]

    def _group(self, host: HostSnapshot) -> dict[Group, dict[str, str]]:
        out: dict[Group, dict[str, str]] = {}
        prefix: str | None = None  # files come sorted: one lookup per top-level folder
        members: dict[str, str] = {}
        for rel, digest in host.files.items():
            if prefix is None or not rel.startswith(prefix):
                owner = self.of(rel)
                version = host.packages.get(owner)
                members = out.setdefault((owner, version) if version is not None else ("", ""),
                                         {})
                head, sep, _ = rel.partition("/")
                prefix = head + "/" if sep else None
            members[rel] = digest
        return out


def _group_of_host(host: HostSnapshot, group: Group) -> bool:
    return group == ("", "") or host.packages.get(group[0]) == group[1]


def majority_baseline(hosts: Sequence[HostSnapshot], owners: Owners | None = None) -> Baseline:
    owners = owners or Owners()

    def vote(maps: list[dict[str, str]]) -> dict[str, str]:
        """Per key, the value most hosts have; a key fewer than half the hosts have is
        absent from the baseline without a vote (linear in what the hosts hold)."""
        present = Counter(k for m in maps for k in m)
        return {k: _majority(m.get(k, ABSENT) for m in maps) for k in sorted(present)
                if present[k] * 2 >= len(maps)}

    def vote_files(maps: list[dict[str, str]]) -> dict[str, str]:
        """Most hosts share one exact set of files: when more than half do, that set is the
        per-file majority too, found without a vote per file."""
        prints = [hash(tuple(m.items())) for m in maps]
        common, count = Counter(prints).most_common(1)[0]
        if count * 2 > len(maps):
            return dict(maps[prints.index(common)])
        return vote(maps)

    grouped = [owners.groups(h) for h in hosts]
    holders: dict[Group, list[int]] = {("", ""): list(range(len(hosts)))}
    for index, host in enumerate(hosts):  # the hosts of each owner version (_group_of_host)
        for name, version in host.packages.items():
            holders.setdefault((name, version), []).append(index)
    every = {g for groups in grouped for g in groups}
    per_group = {g: [grouped[i].get(g, {}) for i in holders.get(g, ())] for g in every}
    files = {g: vote_files(maps) if len(maps) > 1 else maps[0] for g, maps in per_group.items()}
    comparable = frozenset(g for g, maps in per_group.items() if len(maps) >= 2)
    return Baseline(f"majority of {len(hosts)} host(s)",
                    vote([h.packages for h in hosts]), vote([h.artifacts for h in hosts]),
                    files, comparable)


def baseline_from(snapshot: HostSnapshot, owners: Owners | None = None) -> Baseline:
    files = (owners or Owners()).groups(snapshot)
    return Baseline(snapshot.source, dict(snapshot.packages), dict(snapshot.artifacts), files,
                    frozenset(files))


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
    return Columns((*sorted(chosen, key=_column_order), "files"), hidden)


def _column_order(check: str) -> tuple[int, int, str]:
    kind, name = check.split(":", 1)
    if kind == "artifact":
        return 2, 0, name
    return (0, STACK.index(name), name) if name in STACK else (1, 0, name)


def _package_cell(check: str, host: HostSnapshot, base: Baseline) -> Cell:
    name = check.removeprefix("pkg:")
    have, want = host.packages.get(name, ABSENT), base.packages.get(name, ABSENT)
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


def _artifact_cell(check: str, host: HostSnapshot, base: Baseline) -> Cell:
    aid = check.removeprefix("artifact:")
    have, want = host.artifacts.get(aid, ABSENT), base.artifacts.get(aid, ABSENT)
    healthy = have in HEALTHY_ARTIFACT
    if have != want:
        level = Level.WARN if healthy else Level.FAIL
        return Cell(check, level, have, want, f"{aid}: {have}; the baseline is {want}")
    if not healthy and want != ABSENT:
        return Cell(check, Level.WARN, have, want,
                    f"{aid}: {have}, as the baseline, which is itself not applied")
    return Cell(check, Level.OK, have, want, f"{aid}: {have}, as the baseline")


@dataclass(frozen=True)
class FileDrift:
    changes: tuple[tuple[str, str], ...]  # (modified|missing|added, path)
    unchecked: tuple[Group, ...]  # owner versions no other host (or the baseline) has


def file_drift(host: HostSnapshot, base: Baseline, owners: Owners) -> FileDrift:
    """Each file against the baseline of the same package version (another version's bytes
    differ by design: that is a version outlier, not drift)."""
    changes: list[tuple[str, str]] = []
    unchecked: list[Group] = []
    grouped = owners.groups(host)
    groups = set(grouped) | {g for g in base.comparable if _group_of_host(host, g)}
    for group in sorted(groups):
        if group not in base.comparable:
            unchecked.append(group)
            continue
        have, want = grouped.get(group, {}), base.files.get(group, {})
        if have == want:
            continue
        for rel, digest in want.items():
            got = have.get(rel, ABSENT)
            if got != digest:
                changes.append(("missing" if got == ABSENT else
                                "added" if digest == ABSENT else "modified", rel))
        changes.extend(("added", rel) for rel in have if rel not in want)
    return FileDrift(tuple(sorted(changes, key=lambda c: c[1])), tuple(unchecked))


def _files_cell(drift: FileDrift) -> Cell:
    changes = drift.changes
    if changes:
        counts = Counter(kind for kind, _ in changes)
        text = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        first = "; ".join(f"{kind} {rel}" for kind, rel in changes[:3])
        more = f" (+{len(changes) - 3} more)" if len(changes) > 3 else ""
        return Cell("files", Level.FAIL, str(len(changes)), "0", f"{text}: {first}{more}")
    if drift.unchecked:
        beyond = len(drift.unchecked) - MAX_NAMES
        names = ", ".join(f"{o} {v}" for o, v in drift.unchecked[:MAX_NAMES]) + (
            f" and {beyond} more" if beyond > 0 else "")
        return Cell("files", Level.WARN, "?", "0",
                    f"not compared: no other host has {names}")
    return Cell("files", Level.OK, "0", "0", "every hashed file as the baseline")


def _diff_lines(cells: Sequence[Cell], drift: FileDrift) -> tuple[str, ...]:
    lines: list[str] = []
    for cell in cells:
        if cell.level is Level.OK or cell.check == "files":
            continue
        kind, label = cell.check.split(":", 1)
        if cell.expected != ABSENT:
            lines.append(f"-{kind} {label} {cell.expected}")
        if cell.value != ABSENT:
            lines.append(f"+{kind} {label} {cell.value}")
    for kind, rel in drift.changes:
        lines.append(f"{'-' if kind == 'missing' else '+'}file {rel} ({kind})")
    return tuple(lines)


def compare(host: HostSnapshot, base: Baseline, cols: Sequence[str],
            owners: Owners | None = None, hidden: int = 0) -> HostRow:
    """``hidden``: how many packages and artifacts this host differs in that have no column
    (beyond what one host may add): counted in its drift, named in its last diff line."""
    drift = file_drift(host, base, owners or Owners())
    cells: list[Cell] = []
    for check in cols:
        if check.startswith("pkg:"):
            cells.append(_package_cell(check, host, base))
        elif check.startswith("artifact:"):
            cells.append(_artifact_cell(check, host, base))
        else:
            cells.append(_files_cell(drift))
    # (every package or artifact that differs has a column or is counted in ``hidden``)
    count = sum(1 for c in cells if c.level is not Level.OK and c.check != "files")
    count += len(drift.changes) + hidden
    levels = {c.level for c in cells} | ({Level.WARN} if hidden else set())
    status = (HostStatus.DRIFT if Level.FAIL in levels else
              HostStatus.OUTLIER if Level.WARN in levels else HostStatus.OK)
    return HostRow(host.host, status, tuple(cells), count,
                   _bounded(_diff_lines(cells, drift), hidden), host.source, hidden=hidden)


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
          warnings: Sequence[str] = (), owners: Owners | None = None) -> FleetReport:
    owners = owners or Owners()
    cols = columns(hosts, base)
    rows = [compare(h, base, cols.checks, owners, cols.hidden.get(h.host, 0)) for h in hosts]
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
                     "packages": {k: v for k, v in base.packages.items() if v != ABSENT},
                     "artifacts": {k: v for k, v in base.artifacts.items() if v != ABSENT},
                     "files": sum(len(f) for f in base.files.values())},
        "columns": list(report.columns),
        "hosts": [{"host": r.host, "status": r.status.value, "drift": r.drift, "source": r.source,
                   "reason": r.reason, "diff": list(r.diff),
                   "cells": [{"check": c.check, "level": c.level.value, "value": c.value,
                              "expected": c.expected, "detail": c.detail} for c in r.cells]}
                  for r in report.rows],
        "drifted": [r.host for r in report.drifted],
        "outliers": [r.host for r in report.outliers],
        "missing": [r.host for r in report.missing],
        "warnings": list(report.warnings),
    }
