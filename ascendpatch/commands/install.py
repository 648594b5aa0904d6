"""``ascendpatch install [REQ...] [--dry-run] [--wheelhouse DIR] [--offline] [--lock FILE]``.

Never replaces the image's torch / torch_npu: it computes pip's full change set first
(``--dry-run --report`` diffed against what is installed), refuses when a protected package
would change (naming the requirement chain), installs with a constraints file pinning every
protected package to its installed version, installs the manifest's ``no_deps`` packages with
``--no-deps`` (reporting what they leave unmet), then checks every pin.
"""

from __future__ import annotations

import tempfile
from argparse import Namespace
from collections.abc import Sequence
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ascendpatch.commands import context
from ascendpatch.commands.context import Context, locked
from ascendpatch.env import pipadapter, pipdiff, stackcheck
from ascendpatch.env.pipadapter import ONLINE, Source
from ascendpatch.env.target import Target, from_python
from ascendpatch.errors import InvalidInputError
from ascendpatch.inspect.checks.pins import pin_check
from ascendpatch.results import CheckResult, CommandResult, Level


def _parse(reqs: Sequence[str]) -> list[Requirement]:
    parsed = []
    for raw in reqs:
        try:
            parsed.append(Requirement(raw))
        except InvalidRequirement as exc:
            raise InvalidInputError(f"requirement {raw!r} is not valid PEP 508 ({exc})") from None
    return parsed


def _satisfied(req: Requirement, target: Target) -> bool:
    dist = target.get(req.name)
    return dist is not None and dist.satisfies(req.specifier)


def wanted(ctx: Context, reqs: Sequence[str]) -> list[Requirement]:
    """The user's requirements plus every stack pin that is not met yet (protected excluded:
    the image provides them, and `verify` reports a mismatch)."""
    protected = {canonicalize_name(p) for p in ctx.manifest.protected}
    out = _parse(reqs)
    for pin in ctx.manifest.stack.packages:
        req = Requirement(f"{pin.name}{pin.specifier}")
        if canonicalize_name(pin.name) not in protected and not _satisfied(req, ctx.target):
            out.append(req)
    return out


def _refusals(ctx: Context, report: dict[str, object], markers: dict[str, str]) \
        -> list[CheckResult]:
    changes = pipdiff.change_set(report, ctx.target)
    protected = {canonicalize_name(p) for p in ctx.manifest.protected}
    refusals = []
    for change in changes:
        if change.name not in protected:
            continue
        links = pipdiff.chain(report, change.name, markers)
        path = " -> ".join(links)
        top = links[0].split()[0] if len(links) > 1 else "the requesting package"
        refusals.append(CheckResult(
            f"refused:{change.name}", "install", Level.FAIL,
            f"refused: {path} would {change.describe()}; {change.name} is protected (the "
            f"image's NPU stack is built for {change.old or 'what the image ships'}); nothing "
            f"was changed; fix: pin a version of the requesting package that accepts the "
            f"installed {change.name}, or list {top} under the manifest's no_deps (installed "
            f"with pip --no-deps)"))
    return refusals


def _plan_lines(changes: list[pipdiff.PackageChange], dry_run: bool) -> list[CheckResult]:
    verb = "would" if dry_run else "will"
    return [CheckResult(f"plan:{c.name}", "install", Level.WARN if dry_run else Level.OK,
                        f"{verb} {c.describe()}") for c in changes]


def run(ctx: Context, reqs: Sequence[str], *, dry_run: bool = False, source: Source = ONLINE,
        lock: Path | None = None) -> CommandResult:
    target = ctx.target
    markers = dict(target.markers or {})
    no_deps = {str(canonicalize_name(n)) for n in ctx.manifest.no_deps}
    # A lock already holds the stack's pins, hashed: only the user's REQs come on top of it.
    requested = _parse(reqs) if lock is not None else wanted(ctx, reqs)
    normal = [str(r) for r in requested if canonicalize_name(r.name) not in no_deps]
    loose = [str(r) for r in requested if canonicalize_name(r.name) in no_deps]
    lock_args = ["-r", str(lock), "--require-hashes"] if lock is not None else []
    source.args()  # bad --offline / --wheelhouse -> exit 2 before anything runs
    if lock is None:  # the stack's own pins must agree before pip resolves for minutes
        pinned = {str(canonicalize_name(p.name)) for p in ctx.manifest.stack.packages}
        due = [str(canonicalize_name(r.name)) for r in requested
               if canonicalize_name(r.name) in pinned]
        found = stackcheck.conflicts(ctx.manifest, target, source, only=due) if due else []
        if found:
            command = "install --dry-run" if dry_run else "install"
            return CommandResult(command, tuple(stackcheck.conflict_results(
                found, "install", "nothing was changed")))
    with locked(ctx) as session, tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "protected-constraints.txt"
        constraints.write_text(pipdiff.constraints(target, ctx.manifest.protected))
        changes: list[pipdiff.PackageChange] = []
        if normal or lock_args:
            report = pipadapter.dry_run_report(target, [*lock_args, *normal], source,
                                               env=ctx.env)
            refusals = _refusals(ctx, report, markers)
            if refusals:
                return CommandResult("install", tuple(refusals), tuple(session.notes))
            changes += pipdiff.change_set(report, target)
        if loose:
            report = pipadapter.dry_run_report(target, loose, source, ["--no-deps"], env=ctx.env)
            changes += pipdiff.change_set(report, target)
        if dry_run:
            lines = _plan_lines(changes, True) or [CheckResult(
                "plan", "install", Level.OK, "nothing to install: every pin is met")]
            return CommandResult("install --dry-run", tuple(lines), tuple(session.notes),
                                 exit_code_override=1 if changes else 0)
        extra = ["-c", str(constraints)]
        if normal or lock_args:
            pipadapter.install(target, [*lock_args, *normal], source, extra, env=ctx.env)
        if loose:
            pipadapter.install(target, loose, source, [*extra, "--no-deps"], env=ctx.env)
    after = from_python(target.python) if target.python else target
    lines = _plan_lines(changes, False) + _final_checks(ctx, after, requested, no_deps, markers)
    if not changes:
        lines.insert(0, CheckResult("install", "install", Level.OK,
                                    f"nothing to install: the pins of manifest "
                                    f"{ctx.manifest.name} are met"))
    return CommandResult("install", tuple(lines), tuple(session.notes))


def _final_checks(ctx: Context, after: Target, requested: list[Requirement],
                  no_deps: set[str], markers: dict[str, str]) -> list[CheckResult]:
    """Afterwards: one line per pin and requirement, and what --no-deps packages leave unmet."""
    lines = [pin_check(pin, after) for pin in ctx.manifest.stack.packages]
    pinned = {canonicalize_name(p.name) for p in ctx.manifest.stack.packages}
    for req in requested:
        name = canonicalize_name(req.name)
        dist = after.get(name)
        if name in pinned:
            continue
        ok = _satisfied(req, after)
        text = (f"{name} {dist.version} installed ({req})" if ok and dist else
                f"{req} is not satisfied after installing")
        lines.append(CheckResult(f"req:{name}", "install", Level.OK if ok else Level.FAIL,
                                 text))
        if name in no_deps and dist is not None:
            missing = pipdiff.unmet(dist.metadata.get_all("Requires-Dist") or [], after,
                                        markers)
            if missing:
                lines.append(CheckResult(
                    f"unmet:{name}", "install", Level.WARN,
                    f"{name} was installed with --no-deps (manifest no_deps: its dependencies "
                    f"would replace the image's NPU stack); unmet: {', '.join(missing)}",
                    data={"unmet": missing}))
    return lines


def from_args(args: Namespace) -> CommandResult:
    return run(context.from_args(args), args.reqs, dry_run=args.dry_run,
               source=context.source_from_args(args), lock=args.lock)
