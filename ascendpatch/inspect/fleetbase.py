"""The fleet's baseline: what each host's snapshot says, the reference it is compared with
(a given snapshot, or the hosts' majority per package, per artifact and per file), and each
host's files against it (``file_drift``, with the diff lines that name package and sha256).

The majority rule, also for tiny fleets:

* a value is the baseline's when more hosts have it than any other value (for a key that
  fewer than half the hosts have, the baseline lacks it without a vote);
* when two values or more tie for the most hosts, the key is ``SPLIT``: no host can be called
  as the baseline on it by a coin flip, so every host is flagged for it (two hosts that
  differ in a file both drift, and ``--baseline`` decides which is right);
* a fleet of one host is its own majority: each of its files is compared with itself, so a
  single healthy host is as the baseline (exit 0);
* the files of a package version that only one host of several has are not compared
  (amber: there is nothing to compare them with).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from packaging.utils import canonicalize_name

from ascendpatch.results import Level

ABSENT = "absent"
# A key whose majority is a tie. The cells test for it before they compare values, so a node
# whose snapshot spells this very text is flagged on that key like every other host.
SPLIT = "\0split"

Group = tuple[str, str]  # (owning package, its version); ("", "") for files of no package


@dataclass(frozen=True)
class HostSnapshot:
    host: str
    source: str
    packages: dict[str, str]
    artifacts: dict[str, str]
    files: dict[str, str]
    created: str = ""  # when the node took it (its own clock: untrusted)
    artifact_files: dict[str, tuple[str, ...]] = field(default_factory=dict)  # id -> files


@dataclass(frozen=True)
class Cell:
    check: str
    level: Level
    value: str
    expected: str
    detail: str


@dataclass(frozen=True)
class Baseline:
    source: str  # "majority of N hosts" or the file
    packages: dict[str, str]  # ABSENT when most hosts lack it, SPLIT on a tie
    artifacts: dict[str, str]
    files: dict[Group, dict[str, str]]  # per owner version: path -> sha256 (ABSENT: not there)
    comparable: frozenset[Group]  # groups with a reference (in majority mode: >= 2 hosts)


def majority(values: Iterable[str]) -> str:
    """The value most of ``values`` are; SPLIT when two or more tie for the most."""
    counts = Counter(values)
    best = max(counts.values())
    winners = [v for v, n in counts.items() if n == best]
    return winners[0] if len(winners) == 1 else SPLIT


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

    def group_of(self, rel: str, host: HostSnapshot) -> Group:
        owner = self.of(rel)
        version = host.packages.get(owner)
        return (owner, version) if version is not None else ("", "")

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
                members = out.setdefault(self.group_of(rel, host), {})
                head, sep, _ = rel.partition("/")
                prefix = head + "/" if sep else None
            members[rel] = digest
        return out


def group_of_host(host: HostSnapshot, group: Group) -> bool:
    return group == ("", "") or host.packages.get(group[0]) == group[1]


def _vote(maps: list[dict[str, str]]) -> dict[str, str]:
    """Per key, the value most hosts have (SPLIT on a tie); a key fewer than half the hosts
    have is absent from the baseline without a vote (linear in what the hosts hold)."""
    present = Counter(k for m in maps for k in m)
    return {k: majority(m.get(k, ABSENT) for m in maps) for k in sorted(present)
            if present[k] * 2 >= len(maps)}


def _vote_files(maps: list[dict[str, str]]) -> dict[str, str]:
    """Most hosts share one exact set of files: when more than half do, that set is the
    per-file majority too, found without a vote per file."""
    if len(maps) == 1:
        return maps[0]
    prints = [hash(tuple(m.items())) for m in maps]
    common, count = Counter(prints).most_common(1)[0]
    if count * 2 > len(maps):
        return dict(maps[prints.index(common)])
    return _vote(maps)


def majority_baseline(hosts: Sequence[HostSnapshot], owners: Owners | None = None) -> Baseline:
    owners = owners or Owners()
    grouped = [owners.groups(h) for h in hosts]
    holders: dict[Group, list[int]] = {("", ""): list(range(len(hosts)))}
    for index, host in enumerate(hosts):  # the hosts of each owner version (group_of_host)
        for name, version in host.packages.items():
            holders.setdefault((name, version), []).append(index)
    every = {g for groups in grouped for g in groups}
    per_group = {g: [grouped[i].get(g, {}) for i in holders.get(g, ())] for g in every}
    files = {g: _vote_files(maps) for g, maps in per_group.items()}
    # one host's files are compared with others of its version; a fleet of one, with itself
    comparable = frozenset(g for g, maps in per_group.items()
                           if len(maps) >= 2 or len(hosts) == 1)
    return Baseline(f"majority of {len(hosts)} host(s)",
                    _vote([h.packages for h in hosts]), _vote([h.artifacts for h in hosts]),
                    files, comparable)


def baseline_from(snapshot: HostSnapshot, owners: Owners | None = None) -> Baseline:
    files = (owners or Owners()).groups(snapshot)
    return Baseline(snapshot.source, dict(snapshot.packages), dict(snapshot.artifacts), files,
                    frozenset(files))


class FileDiff(NamedTuple):
    kind: str  # modified | missing | added | split (no majority among the hosts of its group)
    rel: str
    group: Group
    want: str  # the baseline's sha256 (ABSENT, SPLIT)
    have: str  # this host's (ABSENT)


@dataclass(frozen=True)
class FileDrift:
    changes: tuple[FileDiff, ...]
    unchecked: tuple[Group, ...]  # owner versions no other host (or the baseline) has


def _group_changes(group: Group, have: dict[str, str], want: dict[str, str]) -> list[FileDiff]:
    changes = []
    for rel, digest in want.items():
        got = have.get(rel, ABSENT)
        if digest == SPLIT:
            changes.append(FileDiff("split", rel, group, digest, got))
        elif got != digest:
            kind = "missing" if got == ABSENT else "added" if digest == ABSENT else "modified"
            changes.append(FileDiff(kind, rel, group, digest, got))
    changes.extend(FileDiff("added", rel, group, ABSENT, d) for rel, d in have.items()
                   if rel not in want)
    return changes


def file_drift(host: HostSnapshot, base: Baseline, owners: Owners) -> FileDrift:
    """Each file against the baseline of the same package version (another version's bytes
    differ by design: that is a version outlier, not drift)."""
    changes: list[FileDiff] = []
    unchecked: list[Group] = []
    grouped = owners.groups(host)
    groups = set(grouped) | {g for g in base.comparable if group_of_host(host, g)}
    for group in sorted(groups):
        if group not in base.comparable:
            unchecked.append(group)
            continue
        have, want = grouped.get(group, {}), base.files.get(group, {})
        if have != want:
            changes += _group_changes(group, have, want)
    return FileDrift(tuple(sorted(changes, key=lambda c: c.rel)), tuple(unchecked))


def _owner(group: Group) -> str:
    return " ".join(group) if group[0] else "no package"


def _digest(value: str) -> str:
    return f"sha256 {value}" if value else "sha256 unknown (the node could not read it)"


def file_lines(change: FileDiff) -> list[str]:
    """``-`` the baseline's file, ``+`` this host's, each with its package and sha256."""
    where = f"file {change.rel} [{_owner(change.group)}]"
    if change.kind == "split":
        shown_here = _digest(change.have) if change.have != ABSENT else "absent"
        return [f"+{where} {shown_here} (split: no majority among the hosts at "
                f"{_owner(change.group)})"]
    lines = [] if change.want == ABSENT else [f"-{where} {_digest(change.want)}"]
    if change.have != ABSENT:
        lines.append(f"+{where} {_digest(change.have)} ({change.kind})")
    else:
        lines[-1] += " (missing)"
    return lines
