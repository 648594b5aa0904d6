"""Dependency consistency like `pip check`, with the manifest's accepted conflicts shown apart.

Markers are evaluated in the *target's* PEP 508 environment (reported by the introspection
script), so a requirement for another Python or platform is not a false alarm.
"""

from __future__ import annotations

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ascendpatch.env import standins
from ascendpatch.env.reqs import applicable
from ascendpatch.env.target import Distribution, Target
from ascendpatch.inspect.checks.base import CheckContext
from ascendpatch.manifest.model import Manifest
from ascendpatch.results import CheckResult, Level


def _accepted(manifest: Manifest, package: str, req: Requirement) -> str | None:
    for rule in manifest.accepted_conflicts:
        if canonicalize_name(rule["package"]) != package:
            continue
        if canonicalize_name(Requirement(rule["requirement"]).name) == canonicalize_name(req.name):
            return rule["reason"]
    return None


def check(manifest: Manifest, target: Target) -> list[CheckResult]:
    problems: list[CheckResult] = []
    for dist in sorted(target.distributions.values(), key=lambda d: d.name):
        missing: list[str] = []
        for req in applicable(dist.metadata.get_all("Requires-Dist") or [], target.markers):
            problem = _problem(target, dist, req)
            if problem is None:
                continue
            reason = _accepted(manifest, dist.name, req)
            if reason is not None:
                problems.append(CheckResult(f"deps:{dist.name}:{req.name}", "dependencies",
                                            Level.OK, f"accepted: {problem} ({reason})"))
            elif target.get(req.name) is None:
                missing.append(str(req))
            else:
                problems.append(CheckResult(f"deps:{dist.name}:{req.name}", "dependencies",
                                            Level.FAIL, problem))
        if missing:
            problems.append(CheckResult(
                f"deps:{dist.name}:missing", "dependencies", Level.FAIL,
                f"{dist.name} {dist.version} requires {len(missing)} package(s) that are not "
                f"installed: {', '.join(missing)}", data={"missing": missing}))
    if not any(p.level is Level.FAIL for p in problems):
        fake = sum(1 for d in target.distributions.values() if standins.is_standin(d.metadata_dir))
        note = f", {fake} of them stand-ins (simulated)" if fake else ""
        problems.insert(0, CheckResult("deps", "dependencies", Level.OK,
                                       f"dependencies consistent ({len(target.distributions)} "
                                       f"distributions{note})"))
    return problems


def _problem(target: Target, dist: Distribution, req: Requirement) -> str | None:
    dep = target.get(req.name)
    who = f"{dist.name} {dist.version}"
    if dep is None:
        return f"{who} requires {req}, which is not installed"
    if not dep.satisfies(req.specifier):
        return f"{who} requires {req}, but {dep.name} {dep.version} is installed"
    return None


class DepsCheck:
    name = "dependencies"

    def run(self, ctx: CheckContext) -> list[CheckResult]:
        return check(ctx.manifest, ctx.target)
