"""``ascendpatch verify [--no-probes]``: read-only, one line per check; after an image rebuild,
it says exactly what is wrong and what to run."""

from __future__ import annotations

from ascendpatch.checks import cann, deps, envvars, pins, probes
from ascendpatch.commands import sandbox
from ascendpatch.commands.context import Context
from ascendpatch.engine import status_of
from ascendpatch.planner import evaluate, prepare, select
from ascendpatch.results import ArtifactResult, CheckResult, CommandResult, Level, Status


def _artifact_check(item: ArtifactResult) -> CheckResult:
    level = item.level
    if item.status is Status.NOT_APPLIED:
        level = Level.FAIL  # verify: anything not in the desired state is a failure
    return CheckResult(f"artifact:{item.id}", "artifact", level, item.message, item.details)


def _artifacts(ctx: Context) -> tuple[list[CheckResult], set[str]]:
    store = ctx.store
    results: list[CheckResult] = []
    if store.journal_path.exists():
        results.append(CheckResult("state:journal", "artifact", Level.FAIL,
                                   f"an interrupted run left {store.journal_path}; fix: "
                                   "ascendpatch status (as a user who can write the target) "
                                   "rolls it back"))
    ledger = store.load_ledger()
    prepared = prepare(select(ctx.manifest, [], ctx.enabled_extra), ctx.target, ctx.env,
                       required=False)
    applied: set[str] = set()
    for artifact, kctx in prepared:
        item = status_of(evaluate(artifact, kctx), ledger, store)
        if item.status is Status.ALREADY_APPLIED:
            applied.add(item.id)
        results.append(_artifact_check(item))
    return results, applied


def _host_checks(ctx: Context, applied: set[str], no_probes: bool,
                 probe_timeout: float) -> list[CheckResult]:
    results: list[CheckResult] = []
    if sandbox.is_sandbox(ctx.target.prefix):
        results.append(CheckResult("cann", "cann", Level.SKIP,
                                   "sandbox (simulated NPU stack): there is no CANN / ATB "
                                   "environment to check on this host"))
    else:
        results += cann.check(ctx.env)
    if no_probes:
        results.append(CheckResult("probe", "probe", Level.SKIP,
                                   "operator probes skipped (--no-probes)"))
    else:
        results += probes.check(ctx.target, applied, probe_timeout)
    return results + envvars.expected(ctx.manifest, ctx.env)


def run(ctx: Context, *, no_probes: bool = False,
        probe_timeout: float = probes.PROBE_TIMEOUT) -> CommandResult:
    target, manifest, env = ctx.target, ctx.manifest, ctx.env
    has_python = target.python is not None
    results: list[CheckResult] = []
    results += pins.check(manifest, target, cann.cann_version(env) if has_python else None)
    artifact_results, applied = _artifacts(ctx)
    results += artifact_results
    results += deps.check(manifest, target)
    if not has_python:
        results.append(CheckResult("host", "env", Level.SKIP,
                                   "CANN environment, operator probes and environment variables "
                                   "are checked for --python targets (this host's shell)"))
    else:
        results += _host_checks(ctx, applied, no_probes, probe_timeout)
    in_play = [a for a in manifest.artifacts if a.enabled or a.id in ctx.enabled_extra
               or a.id in applied]
    results += envvars.required(in_play, env) if has_python else []
    failed = sum(1 for r in results if r.level is Level.FAIL)
    summary = (f"verify: {failed} problem(s) on {target.describe()}" if failed else
               f"verify: {target.describe()} is in the state manifest {manifest.name} describes")
    return CommandResult("verify", tuple(results), summary=summary)
