"""Stack pins: each pinned package (and Python, CANN) against what is installed."""

from __future__ import annotations

import contextlib

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ascendpatch.env import standins
from ascendpatch.env.target import Target
from ascendpatch.inspect.checks import cann
from ascendpatch.inspect.checks.base import CheckContext
from ascendpatch.manifest.model import Manifest, PackagePin
from ascendpatch.results import CheckResult, Hint, Level, Phrase


def pin_check(pin: PackagePin, target: Target) -> CheckResult:
    dist = target.get(pin.name)
    why = f" ({pin.reason.strip()})" if pin.reason else ""
    if dist is None:
        return CheckResult(f"pin:{pin.name}", "pin", Level.FAIL,
                           f"{pin.name} is not installed; the stack pins {pin.name}"
                           f"{pin.specifier}{why}", fix=Phrase(Hint(("install",))))
    if dist.satisfies(pin.specifier):
        label = standins.LABEL if standins.is_standin(dist.metadata_dir) else ""
        return CheckResult(f"pin:{pin.name}", "pin", Level.OK,
                           f"{pin.name} {dist.version} matches {pin.specifier or 'any'}{label}")
    return CheckResult(f"pin:{pin.name}", "pin", Level.FAIL,
                       f"{pin.name} {dist.version} does not match {pin.specifier}{why}",
                       fix=Phrase(Hint(("install",)), f" (installs {pin.name}{pin.specifier})"))


def _python_check(spec: str, target: Target) -> CheckResult:
    if target.python_version is None:
        return CheckResult("pin:python", "pin", Level.SKIP,
                           "Python version not checked (a --site-packages target has no "
                           "interpreter)")
    ok = SpecifierSet(spec).contains(Version(target.python_version), prereleases=True)
    return CheckResult("pin:python", "pin", Level.OK if ok else Level.FAIL,
                       f"Python {target.python_version} {'matches' if ok else 'does not match'} "
                       f"{spec}", fix="" if ok else "use the image's own interpreter (--python)")


def _cann_check(spec: str, found: str | None) -> CheckResult:
    if found is None:
        return CheckResult("pin:cann", "pin", Level.WARN,
                           f"CANN version not found (the stack wants {spec}); source "
                           "/usr/local/Ascend/ascend-toolkit/set_env.sh to check it")
    wanted = _loose(spec.lstrip("=<>!~ "))
    ok = _loose(found) == wanted or _loose(found).startswith(wanted + ".")
    return CheckResult("pin:cann", "pin", Level.OK if ok else Level.FAIL,
                       f"CANN {found} {'matches' if ok else 'does not match'} {spec}")


def _loose(version: str) -> str:
    try:
        return str(Version(version))
    except InvalidVersion:
        return version.lower()


def check(manifest: Manifest, target: Target, cann_version: str | None) -> list[CheckResult]:
    results = [pin_check(pin, target) for pin in manifest.stack.packages]
    if manifest.stack.python:
        with contextlib.suppress(InvalidSpecifier, InvalidVersion):
            results.append(_python_check(manifest.stack.python, target))
    if manifest.stack.cann:
        results.append(_cann_check(manifest.stack.cann, cann_version))
    return results


class PinsCheck:
    name = "pins"

    def run(self, ctx: CheckContext) -> list[CheckResult]:
        found = cann.cann_version(ctx.env) if ctx.target.python is not None else None
        return check(ctx.manifest, ctx.target, found)
