"""``ascendpatch install [REQ...] [--dry-run] [--wheelhouse DIR] [--offline] [--lock FILE]``.

Never replaces the image's torch / torch_npu. Plan, then do:
1. resolve: the stack's own pins must agree, then pip's ``--dry-run --report`` of each step
   (the requirements, then the manifest's ``no_deps`` packages with ``--no-deps``);
2. plan (``env/pipdiff.py``, pure): the reports diffed against what is installed, the
   protected packages they would change (with the requirement chain), what the ``--no-deps``
   packages would leave unmet, the constraints pinning every protected package;
3. ``--dry-run`` shows the plan; a plan that changes a protected package is refused; otherwise
   ``env/pipinstall.py`` executes it under the constraints file;
4. re-check: every pin and requirement against what is installed afterwards.
"""

from __future__ import annotations

import tempfile
from argparse import ArgumentParser, Namespace
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ascendpatch import paths, progress
from ascendpatch.commands import context
from ascendpatch.commands.context import Context, locked
from ascendpatch.env import lockfile, pipadapter, pipdiff, pipinstall, resolver, stackcheck
from ascendpatch.env.pipadapter import ONLINE, Source
from ascendpatch.env.reqs import parse as parse_requirement
from ascendpatch.env.resolver import Mode
from ascendpatch.env.target import Target
from ascendpatch.errors import AscendpatchError
from ascendpatch.results import CheckResult, CommandResult, Level
from ascendpatch.shell import cliargs


def _parse(reqs: Sequence[str]) -> list[Requirement]:
    return [parse_requirement(raw) for raw in reqs]


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


def run(ctx: Context, reqs: Sequence[str], *, dry_run: bool = False, source: Source = ONLINE,
        lock: Path | None = None, mode: Mode = Mode.AUTO) -> CommandResult:
    """Resolve (pip's report), plan (pure), then show the plan, refuse it, or execute it and
    re-check what is installed."""
    # A lock already holds the stack's pins, hashed: only the user's REQs come on top of it.
    requested = _parse(reqs) if lock is not None else wanted(ctx, reqs)
    with tempfile.TemporaryDirectory() as tmp:  # private (0700): the lock's copy lives here
        copy, loose = lockfile.take(lock, Path(tmp)) if lock is not None else (None, [])
        source.args()  # bad --offline / --wheelhouse -> exit 2 before anything runs
        found = _stack_conflicts(ctx, requested, source) if lock is None else []
        if found:
            return CommandResult("install --dry-run" if dry_run else "install", tuple(
                stackcheck.conflict_results(found, "install", "nothing was changed")))
        loose_file = str(lockfile.write_requirements(loose, Path(tmp))) if loose else None
        steps = pipdiff.steps_for(requested, ctx.manifest.no_deps,
                                  str(copy) if copy is not None else None, loose_file)
        choice = resolver.choose(mode, ctx.target, ctx.env)
        try:
            return _planned(ctx, steps, requested, dry_run=dry_run, source=source,
                            choice=choice)
        except AscendpatchError as exc:
            if copy is not None and lock is not None:  # pip names the copy, gone after this
                exc.message = exc.message.replace(str(copy), paths.shown(lock))
            raise


def _planned(ctx: Context, steps: Sequence[pipdiff.PipStep], requested: list[Requirement], *,
             dry_run: bool, source: Source, choice: resolver.Choice) -> CommandResult:
    used = resolver.Used(choice)
    with locked(ctx) as session:
        plan = pipdiff.plan(_resolve(ctx, steps, source, choice), ctx.target,
                            ctx.manifest.protected)
        if plan.refused:
            return CommandResult("install", _refusal_lines(plan), tuple(session.notes),
                                 body=used)
        if dry_run:
            return CommandResult("install --dry-run", _dry_run_lines(plan),
                                 tuple(session.notes), body=used,
                                 exit_code_override=0 if plan.nothing_to_do else 1)
        after = pipinstall.execute(plan, ctx.target, source, env=ctx.env)
    lines = _change_lines(plan, dry_run=False) + _recheck(ctx, after, requested, plan)
    if plan.nothing_to_do:
        lines.insert(0, CheckResult("install", "install", Level.OK,
                                    f"nothing to install: the pins of manifest "
                                    f"{ctx.manifest.name} are met"))
    return CommandResult("install", tuple(lines), tuple(session.notes), body=used)


def _stack_conflicts(ctx: Context, requested: list[Requirement], source: Source) \
        -> list[stackcheck.Conflict]:
    """The stack's own pins must agree before pip resolves for minutes."""
    pinned = {str(canonicalize_name(p.name)) for p in ctx.manifest.stack.packages}
    due = [str(canonicalize_name(r.name)) for r in requested
           if canonicalize_name(r.name) in pinned]
    return stackcheck.conflicts(ctx.manifest, ctx.target, source, only=due) if due else []


def _resolve(ctx: Context, steps: Sequence[pipdiff.PipStep], source: Source,
             choice: resolver.Choice) -> list[tuple[pipdiff.PipStep, dict[str, Any]]]:
    """The resolution of every step (pip's ``--dry-run --report``, or uv's in that format):
    nothing is changed."""
    return [(step, _report(ctx, step, source, choice)) for step in steps]


def _report(ctx: Context, step: pipdiff.PipStep, source: Source, choice: resolver.Choice) \
        -> dict[str, Any]:
    # --require-hashes (a lock): uv wants a hash even for what is installed already, pip
    # does not, so a lock's plan is always pip's
    if choice.name == "uv" and "--require-hashes" not in step.args:
        try:
            return resolver.dry_run_report(choice, ctx.target, step.args, source, step.options)
        except resolver.MetadataUnavailable as exc:
            progress.notice(f"uv's plan needs wheel metadata ({exc}); resolving with pip")
    return pipadapter.dry_run_report(ctx.target, step.args, source, step.options, env=ctx.env)


def _change_data(change: pipdiff.PackageChange) -> dict[str, object]:
    return {"package": change.name, "action": change.action.value, "installed": change.old,
            "new": change.new}


def _refusal_lines(plan: pipdiff.InstallPlan) -> tuple[CheckResult, ...]:
    lines = []
    for refusal in plan.refusals:
        change = refusal.change
        top = refusal.requester or "the requesting package"
        lines.append(CheckResult(
            f"refused:{change.name}", "install", Level.FAIL,
            f"refused: {' -> '.join(refusal.chain)} would {change.describe()}; {change.name} "
            f"is protected (the image's NPU stack is built for "
            f"{change.old or 'what the image ships'}); nothing was changed",
            data={**_change_data(change), "chain": list(refusal.chain)},
            fix=f"pin a version of the requesting package that accepts the installed "
                f"{change.name}, or list {top} under the manifest's no_deps (installed with pip "
                f"--no-deps)"))
    return tuple(lines)


def _change_lines(plan: pipdiff.InstallPlan, *, dry_run: bool) -> list[CheckResult]:
    verb = "would" if dry_run else "will"
    return [CheckResult(f"plan:{c.name}", "install", Level.WARN if dry_run else Level.OK,
                        f"{verb} {c.describe()}", data=_change_data(c)) for c in plan.changes]


def _dry_run_lines(plan: pipdiff.InstallPlan) -> tuple[CheckResult, ...]:
    """The plan as it stands: each change, and what each --no-deps package would leave unmet."""
    if plan.nothing_to_do:
        return (CheckResult("plan", "install", Level.OK, "nothing to install: every pin is met"),)
    unmet = [CheckResult(f"unmet:{u.name}", "install", Level.WARN,
                         f"{u.name} would be installed with --no-deps ({_NO_DEPS_WHY}); unmet: "
                         f"{', '.join(u.missing)}", data={"unmet": list(u.missing)})
             for u in plan.unmet]
    return (*_change_lines(plan, dry_run=True), *unmet)


_NO_DEPS_WHY = "manifest no_deps: its dependencies would replace the image's NPU stack"


def _recheck(ctx: Context, after: Target, requested: list[Requirement],
             plan: pipdiff.InstallPlan) -> list[CheckResult]:
    """Afterwards: one line per pin and requirement, and what --no-deps packages leave unmet."""
    from ascendpatch.inspect.checks.pins import pin_check  # (after an install only)

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
    return lines + _unmet_after(ctx, after, plan)


def _unmet_after(ctx: Context, after: Target, plan: pipdiff.InstallPlan) -> list[CheckResult]:
    """What each package the plan installed with --no-deps (manifest no_deps, requested, pinned
    or from the lock) leaves unmet."""
    no_deps = {str(canonicalize_name(n)) for n in ctx.manifest.no_deps}
    markers = dict(ctx.target.markers or {})
    lines = []
    for name in sorted({c.name for c in plan.changes} & no_deps):
        dist = after.get(name)
        missing = pipdiff.unmet(dist.metadata.get_all("Requires-Dist") or [],
                                pipdiff.installed_versions(after), markers) if dist else []
        if missing:
            lines.append(CheckResult(
                f"unmet:{name}", "install", Level.WARN,
                f"{name} was installed with --no-deps ({_NO_DEPS_WHY}); unmet: "
                f"{', '.join(missing)}", data={"unmet": missing}))
    return lines


def from_args(args: Namespace) -> CommandResult:
    return run(context.from_args(args), args.reqs, dry_run=args.dry_run,
               source=context.source_from_args(args), lock=args.lock,
               mode=Mode(args.resolver))


def configure(p: ArgumentParser) -> None:
    p.add_argument("reqs", nargs="*", metavar="REQ",
                   help="extra requirements to install with the stack's pins (pip syntax)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the change set; exit 1 if it is not empty")
    p.add_argument("--lock", type=cliargs.path, metavar="FILE",
                   help="install a lock written by 'ascendpatch lock' (--require-hashes)")
    cliargs.resolver_option(p, "the plan's resolution (pip install --dry-run --report, or uv pip "
                           "install --dry-run)")


COMMAND = cliargs.CommandSpec(
    name="install",
    help="install the stack's pins and REQs without touching torch",
    description=("Install the manifest's pins and REQs with the target's pip; refuses when "
                 "torch, torch-npu or another protected package would change. --dry-run exits 1 "
                 "when the change set is not empty."),
    example="ascendpatch --python ./ascendpatch-sandbox/bin/python install --dry-run",
    run=from_args, configure=configure, source=True,
)
