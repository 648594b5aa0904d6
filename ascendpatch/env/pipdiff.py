"""pip's report diffed against the target (pure): the change set pip would make, the protected
packages it would touch (with the requirement chain that pulls each one in), constraints.

pip's ``--report`` lists only what it would install; the replacements come from diffing that
list against what the target has (anchors-patching.md, B2).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ascendpatch.env.reqs import applicable
from ascendpatch.env.target import Target


@dataclass(frozen=True)
class PackageChange:
    name: str  # canonical
    action: str  # install | upgrade | downgrade | replace | reinstall
    old: str | None
    new: str

    def describe(self) -> str:
        if self.old is None:
            return f"install {self.name} {self.new}"
        return f"{self.action} {self.name} {self.old} -> {self.new}"


def _action(old: str, new: str) -> str:
    try:
        old_v, new_v = Version(old), Version(new)
    except InvalidVersion:
        return "replace"
    if new_v == old_v:
        return "reinstall" if old == new else "replace"
    if new_v.public == old_v.public:
        return "replace"  # same release, other local label: 2.10.0+cpu vs 2.10.0
    return "upgrade" if new_v > old_v else "downgrade"


def change_set(report: Mapping[str, Any], target: Target) -> list[PackageChange]:
    changes = []
    for item in report.get("install", []):
        meta = item["metadata"]
        name = canonicalize_name(meta["name"])
        installed = target.get(name)
        old = installed.version if installed else None
        action = "install" if old is None else _action(old, meta["version"])
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


def unmet(requirements: Iterable[str], target: Target, markers: Mapping[str, str]) -> list[str]:
    """Requirements (of a --no-deps package) that nothing installed satisfies."""
    missing = []
    for req in applicable(requirements, markers):
        dist = target.get(req.name)
        if dist is None or not dist.satisfies(req.specifier):
            missing.append(str(req))
    return missing
