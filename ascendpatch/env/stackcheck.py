"""Before a long resolution: do the stack's own pins agree with each other?

pip reads the metadata of the pinned releases only (``--no-deps --dry-run --report``, with
HTTP range requests where the index allows them), then every requirement that two of them (or
the manifest) put on one package is intersected and checked against the releases on the
index. vllm-ascend 0.18.0 needs ``opencv-python-headless<=4.11.0.86`` and vllm 0.18.0 needs
``>=4.13.0``: that is said in seconds, in plain words, instead of after minutes of
backtracking and a traceback.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ascendpatch import cachedir, catalog
from ascendpatch.env import pipadapter, pipconfig, pipindex, reqs
from ascendpatch.env.pipadapter import PipError, Source
from ascendpatch.env.reqs import applicable
from ascendpatch.env.target import Target
from ascendpatch.manifest.model import Manifest
from ascendpatch.results import CheckResult, Level

MANIFEST = "the manifest"


@dataclass(frozen=True)
class Conflict:
    package: str
    needs: tuple[tuple[str, str], ...]  # (who, specifier)

    def describe(self) -> str:
        return " and ".join(f"{who} needs {self.package}{spec}" for who, spec in self.needs)

    @property
    def parties(self) -> list[str]:
        return [who for who, _spec in self.needs if who != MANIFEST]


def _cache_key(target: Target, pins: Sequence[str], source: Source) -> str | None:
    """Released metadata never changes: exact pins are read once per index and target."""
    for pin in pins:
        specs = list(Requirement(pin).specifier)
        if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
            return None
    try:  # the pip settings the uv choice read too (read once): no pip run of its own
        settings = pipconfig.read(pipconfig.reader(target), "install")
    except pipconfig.Untranslatable:
        return None  # pip's own run then says what is wrong
    text = json.dumps([sorted(pins), pipconfig.identity(settings), str(source.wheelhouse),
                       source.offline, target.markers, str(target.python)], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def report(target: Target, pins: Sequence[str], source: Source) -> dict[str, Any]:
    """pip's report of ``pins`` without their dependencies (metadata, and the index's hashes
    in ``download_info``), cached for exact pins."""
    return _stored_report(target, pins, source)


def stack_pins(manifest: Manifest, only: Sequence[str] | None = None) -> list[str]:
    """The stack's pins the pre-flight reads (protected ones left to the image)."""
    protected = {str(canonicalize_name(p)) for p in manifest.protected}
    return [f"{canonicalize_name(p.name)}{p.specifier}" for p in manifest.stack.packages
            if canonicalize_name(p.name) not in protected
            and (only is None or canonicalize_name(p.name) in only)]


def _stored_report(target: Target, pins: Sequence[str], source: Source) -> dict[str, Any]:
    key = _cache_key(target, pins, source)
    cached = catalog.cache_dir() / "stackcheck" / f"{key}.json" if key else None
    raw = cachedir.read(cached) if cached is not None else None
    with contextlib.suppress(ValueError):
        doc = json.loads(raw) if raw is not None else None
        if isinstance(doc, dict):
            return doc
    fresh = _pip_report(target, pins, source)
    if cached is not None:
        cachedir.write(cached, json.dumps(fresh).encode())
    return fresh


def _pip_report(target: Target, pins: Sequence[str], source: Source) -> dict[str, Any]:
    assert target.python is not None
    base = ["--python", str(target.python), "install", "--dry-run", "--quiet", "--no-deps",
            "--ignore-installed", "--only-binary", ":all:", "--report", "-",
            "--disable-pip-version-check", *source.args()]
    proc = pipadapter.run_pip([*base, "--use-feature", "fast-deps", *pins])
    if proc.returncode != 0 and "fast-deps" in proc.stderr:  # a pip without the feature
        proc = pipadapter.run_pip([*base, *pins])
    if proc.returncode != 0:
        why = pipadapter.explain(proc.stderr).replace("no release on", "no wheel on")
        found = _MISSING.search(proc.stderr)
        more, fix = _no_wheel(target, found.group(1), source) if found else ("", _FIX)
        raise PipError(f"cannot read the metadata of the stack's pins from wheels ({why}){more}"
                       "; ascendpatch installs wheels only", fix=fix)
    report = json.loads(proc.stdout)
    assert isinstance(report, dict)
    return report


_MISSING = re.compile(r"No matching distribution found for (\S+)")
_FIX = "put the missing wheel in a wheelhouse (--wheelhouse DIR) or fix the pin in the manifest"


def _no_wheel(target: Target, pin: str, source: Source) -> tuple[str, str]:
    """Why a pin has no wheel (the index has only its sdist, or no such release at all) and
    the fix for that case, from ``pip index versions --pre`` (every release, sdists too)."""
    try:
        req = Requirement(pin)
    except InvalidRequirement:
        return "", _FIX
    exact = [s.version for s in req.specifier if s.operator == "=="]
    proc = pipadapter.run_pip(["--python", str(target.python), "index", "versions", "--pre",
                               "--disable-pip-version-check", *source.args(), req.name])
    listed = re.search(r"^Available versions: (.*)$", proc.stdout, re.MULTILINE)
    versions = [v.strip() for v in listed.group(1).split(",")] if listed else []
    if not exact or proc.returncode != 0:
        return "", _FIX
    if exact[0] in versions:
        return (f"; the index has only an sdist of {req.name} {exact[0]}, which builds only "
                f"where its NPU toolchain (CANN) is installed",
                f"build the wheel on such a host (pip wheel --no-deps {req.name}=={exact[0]} -w "
                f"DIR) and pass --wheelhouse DIR, or pin a release with a wheel")
    return (f"; the index has no release {exact[0]} of {req.name} at all",
            f"pin a release of {req.name} the index has, or put its wheel in a wheelhouse "
            f"(--wheelhouse DIR)")


def _requirements(report: Mapping[str, Any], pins: Mapping[str, str], skip: set[str],
                  markers: Mapping[str, str] | None) -> dict[str, list[tuple[str, str]]]:
    needs: dict[str, list[tuple[str, str]]] = {}
    for name, spec in pins.items():
        needs.setdefault(name, []).append((MANIFEST, spec))
    for item in report.get("install", []):
        meta = item["metadata"]
        if canonicalize_name(meta["name"]) in skip:  # installed with --no-deps
            continue
        who = f"{canonicalize_name(meta['name'])} {meta['version']}"
        for req in applicable(meta.get("requires_dist") or [], markers):
            needs.setdefault(str(canonicalize_name(req.name)), []).append((who, str(req.specifier)))
    return needs


def _boundaries(specs: list[str]) -> list[Version]:
    out = []
    for spec in specs:
        for item in SpecifierSet(spec):
            try:
                out.append(Version(item.version.replace("*", "0")))
            except InvalidVersion:
                continue
    return out


def _candidates(name: str, source: Source) -> list[Version]:
    if not source.offline:
        return pipindex.versions(name)  # pip's: yanked releases are not among them
    from ascendpatch.env import releases  # (its archive readers: only for a wheelhouse)

    folder = source.wheelhouse
    files = [p.name for p in folder.iterdir()] if folder and folder.is_dir() else []
    return releases.versions_in(name, files)


def conflicts(manifest: Manifest, target: Target, source: Source,
              only: Sequence[str] | None = None,
              pins_report: Mapping[str, Any] | None = None) -> list[Conflict]:
    """Packages that no release on the index can give to every party of the stack.

    ``only``: the pins that will be installed (install skips those already met);
    ``pins_report``: :func:`report` of :func:`stack_pins`, when the caller has it."""
    pins = {str(canonicalize_name(p.name)): p.specifier for p in manifest.stack.packages}
    wanted = stack_pins(manifest, only)
    if not wanted:
        return []
    found_report = pins_report if pins_report is not None else report(target, wanted, source)
    skip = {str(canonicalize_name(n)) for n in manifest.no_deps}
    found = []
    for name, needs in _requirements(found_report, pins, skip, target.markers).items():
        specs = [spec for _who, spec in needs if spec]
        if len(specs) < 2:
            continue
        combined = SpecifierSet(",".join(specs))
        exact = reqs.exact_version(combined)
        if exact is not None:  # an exact pin: only that release can do (no index lookup)
            if combined.contains(exact, prereleases=True):
                continue
        elif any(combined.contains(v, prereleases=True) for v in _boundaries(specs)):
            continue  # a version every party accepts exists (no index lookup needed)
        elif any(combined.contains(v, prereleases=True) for v in _candidates(name, source)):
            continue
        parties = [(who, spec) for who, spec in needs if spec]
        others = {spec for who, spec in parties if who != MANIFEST}
        kept = [(who, spec) for who, spec in parties if who != MANIFEST or spec not in others]
        found.append(Conflict(name, tuple(kept)))
    return found


def advice(conflict: Conflict) -> str:
    parties = conflict.parties
    if len(parties) >= 2:
        names = [p.split()[0] for p in parties]
        return (f"pin releases of {' and '.join(names)} that agree, or list one of them under "
                f"the manifest's no_deps (ascendpatch installs it with pip --no-deps and "
                f"reports what it leaves unmet)")
    return f"change the manifest's pin of {conflict.package} to what {parties[0]} accepts" \
        if parties else f"fix the manifest's pins of {conflict.package}"

def conflict_results(found: list[Conflict], check: str, outcome: str) \
        -> list[CheckResult]:
    return [CheckResult(f"conflict:{c.package}", check, Level.FAIL,
                        f"conflict: {c.describe()}; no release of {c.package} on the index "
                        f"satisfies {'both' if len(c.needs) == 2 else 'them all'}; {outcome}",
                        data={"package": c.package,
                              "needs": [{"by": who, "specifier": spec} for who, spec in c.needs]},
                        fix=advice(c))
            for c in found]
