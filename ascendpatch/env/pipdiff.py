"""pip's report diffed against the target, and the InstallPlan built from it (pure).

pip's ``--dry-run --report`` lists only what it would install; the replacements come from
diffing that list against what the target has. :func:`plan` turns
the reports of an install's pip steps into one frozen :class:`InstallPlan`: every change, the
protected packages it would touch (each with the requirement chain that pulls it in, and so
the reason it is refused), what the ``--no-deps`` packages would leave unmet, and the
constraints that pin the protected packages. Like pip-tools' ``sync.diff``, nothing here runs
a process, prints or writes: the executor (``env/pipinstall.py``) does.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ascendpatch.env.reqs import applicable
from ascendpatch.env.target import Target


class ChangeAction(str, enum.Enum):
    """What pip would do to one distribution; the value is the word output and --json use."""

    INSTALL = "install"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    REPLACE = "replace"  # same version, other build (local label) or unparsable versions
    REINSTALL = "reinstall"


@dataclass(frozen=True)
class PackageChange:
    """What pip would do to one distribution of the target."""

    name: str  # canonical
    action: ChangeAction
    old: str | None
    new: str

    def describe(self) -> str:
        if self.old is None:
            return f"install {self.name} {self.new}"
        return f"{self.action.value} {self.name} {self.old} -> {self.new}"


@dataclass(frozen=True)
class PipStep:
    """One ``pip install`` of the plan: its requirement arguments, with or without deps."""

    args: tuple[str, ...]  # requirements, after "-r LOCK --require-hashes" when locked
    no_deps: bool = False

    @property
    def options(self) -> tuple[str, ...]:
        return ("--no-deps",) if self.no_deps else ()


@dataclass(frozen=True)
class Refusal:
    """A protected package the plan would change, and the chain of requirements to it."""

    change: PackageChange
    chain: tuple[str, ...]  # ("chain-top 1.0", "chain-mid 1.0", "torch 2.5.0")

    @property
    def requester(self) -> str | None:
        """The requested package at the top of the chain (None: it was requested itself)."""
        return self.chain[0].split()[0] if len(self.chain) > 1 else None


@dataclass(frozen=True)
class Unmet:
    """A ``--no-deps`` package and its requirements nothing would satisfy after the plan."""

    name: str
    missing: tuple[str, ...]


@dataclass(frozen=True)
class InstallPlan:
    """Everything an install would do, decided before anything runs."""

    steps: tuple[PipStep, ...]  # only those with something to install
    changes: tuple[PackageChange, ...]
    refusals: tuple[Refusal, ...]
    unmet: tuple[Unmet, ...]
    constraints: str  # the constraints file: every installed protected package, pinned

    @property
    def refused(self) -> bool:
        return bool(self.refusals)

    @property
    def nothing_to_do(self) -> bool:
        return not self.changes


def steps_for(requested: Iterable[Requirement], no_deps: Iterable[str],
              lock: str | None = None, locked_loose: str | None = None) \
        -> tuple[PipStep, ...]:
    """The pip steps of an install: the resolved requirements (and the lock, hashed), then the
    manifest's ``no_deps`` packages with ``--no-deps`` (``locked_loose``: the lock's own, as a
    hashed requirements file)."""
    loose_names = {canonicalize_name(n) for n in no_deps}
    wanted = list(requested)
    normal = tuple(str(r) for r in wanted if canonicalize_name(r.name) not in loose_names)
    loose = tuple(str(r) for r in wanted if canonicalize_name(r.name) in loose_names)
    locked = ("-r", lock, "--require-hashes") if lock is not None else ()
    steps = []
    if normal or locked:
        steps.append(PipStep((*locked, *normal)))
    if loose or locked_loose:
        hashed = ("-r", locked_loose, "--require-hashes") if locked_loose else ()
        steps.append(PipStep((*hashed, *loose), no_deps=True))
    return tuple(steps)


def plan(reports: Sequence[tuple[PipStep, Mapping[str, Any]]], target: Target,
         protected: Iterable[str]) -> InstallPlan:
    """The plan of an install from pip's report of each step, against ``target`` as it is.

    A protected package changed by a step that resolves dependencies is refused; a
    ``--no-deps`` step changes only the packages it names, so it is checked for what it leaves
    unmet instead (against the target with every planned change made).
    """
    markers = dict(target.markers or {})
    guarded = {str(canonicalize_name(p)) for p in protected}
    changes: list[PackageChange] = []
    refusals: list[Refusal] = []
    for step, report in reports:
        found = change_set(report, target)
        changes += found
        if not step.no_deps:
            refusals += [Refusal(c, tuple(chain(report, c.name, markers))) for c in found
                         if c.name in guarded]
    after = _versions_after(target, changes)
    unmet = [_unmet_after(report, after, markers) for step, report in reports if step.no_deps]
    return InstallPlan(
        steps=tuple(step for step, report in reports if report.get("install")),
        changes=tuple(changes), refusals=tuple(refusals),
        unmet=tuple(u for found in unmet for u in found),
        constraints=constraints(target, protected))


def _versions_after(target: Target, changes: Iterable[PackageChange]) -> dict[str, str]:
    versions = installed_versions(target)
    versions.update({c.name: c.new for c in changes})
    return versions


def _unmet_after(report: Mapping[str, Any], versions: Mapping[str, str],
                 markers: Mapping[str, str]) -> list[Unmet]:
    found = []
    for item in report.get("install", []):
        meta = item["metadata"]
        missing = unmet(meta.get("requires_dist") or [], versions, markers)
        if missing:
            found.append(Unmet(str(canonicalize_name(meta["name"])), tuple(missing)))
    return found


def _action(old: str, new: str) -> ChangeAction:
    try:
        old_v, new_v = Version(old), Version(new)
    except InvalidVersion:
        return ChangeAction.REPLACE
    if new_v == old_v:
        return ChangeAction.REINSTALL if old == new else ChangeAction.REPLACE
    if new_v.public == old_v.public:
        return ChangeAction.REPLACE  # same release, other local label: 2.10.0+cpu vs 2.10.0
    return ChangeAction.UPGRADE if new_v > old_v else ChangeAction.DOWNGRADE


def change_set(report: Mapping[str, Any], target: Target) -> list[PackageChange]:
    changes = []
    for item in report.get("install", []):
        meta = item["metadata"]
        name = canonicalize_name(meta["name"])
        installed = target.get(name)
        old = installed.version if installed else None
        action = ChangeAction.INSTALL if old is None else _action(old, meta["version"])
        changes.append(PackageChange(name, action, old, meta["version"]))
    return changes


def _requires(meta: Mapping[str, Any], markers: Mapping[str, str]) -> Iterable[str]:
    for req in applicable(meta.get("requires_dist") or [], markers):
        yield str(canonicalize_name(req.name))


def chain(report: Mapping[str, Any], package: str, markers: Mapping[str, str]) -> list[str]:
    """The requirement chain from a requested package to ``package``: ["a 1.0", "b 2.0", ...]."""
    items: dict[str, Any] = {str(canonicalize_name(i["metadata"]["name"])): i
                             for i in report.get("install", [])}
    starts = [name for name, item in items.items() if item.get("requested")]
    target = str(canonicalize_name(package))
    parents: dict[str, str | None] = {name: None for name in starts}
    queue = deque(starts)
    while queue:
        name = queue.popleft()
        if name == target:
            break
        for dep in _requires(items[name]["metadata"], markers):
            if dep in items and dep not in parents:
                parents[dep] = name
                queue.append(dep)
    if target not in parents:
        return [f"{target} {items[target]['metadata']['version']}"] if target in items else []
    path = []
    node: str | None = target
    while node is not None:
        path.append(f"{node} {items[node]['metadata']['version']}")
        node = parents[node]
    return list(reversed(path))


def constraints(target: Target, protected: Iterable[str]) -> str:
    """Pin every installed protected package to exactly what it is (local labels included)."""
    lines = []
    for name in sorted({canonicalize_name(p) for p in protected}):
        dist = target.get(name)
        if dist is not None:
            lines.append(f"{name}=={dist.version}")
    return "".join(f"{line}\n" for line in lines)


def installed_versions(target: Target) -> dict[str, str]:
    """Canonical name -> version of every distribution of ``target``."""
    return {name: dist.version for name, dist in target.distributions.items()}


def unmet(requirements: Iterable[str], versions: Mapping[str, str],
          markers: Mapping[str, str]) -> list[str]:
    """Requirements (of a --no-deps package) that none of ``versions`` satisfies (PEP 440,
    admitting pre-releases and local labels, as Distribution.satisfies does)."""
    missing = []
    for req in applicable(requirements, markers):
        version = versions.get(canonicalize_name(req.name))
        if version is None or not _contains(req, version):
            missing.append(str(req))
    return missing


def _contains(req: Requirement, version: str) -> bool:
    try:
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False
