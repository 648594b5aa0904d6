"""``ascendpatch verify [--no-probes] [--device]``: read-only, one line per check; after an
image rebuild, it says exactly what is wrong and what to run. ``--device`` (opt-in) runs the
fused top-k/top-p operator once on the NPU against the installed fallback."""

from __future__ import annotations

from argparse import ArgumentParser, Namespace
from pathlib import Path

from ascendpatch import cliargs, progress
from ascendpatch.commands import context
from ascendpatch.commands.context import Context
from ascendpatch.engine import status_of
from ascendpatch.env import standins
from ascendpatch.errors import InvalidInputError
from ascendpatch.inspect.checks import cann, deps, envvars, pins, plugins, probes, smoothquant
from ascendpatch.planner import evaluate, prepare, select
from ascendpatch.results import ArtifactResult, CheckResult, CommandResult, Level, Status


def _artifact_check(item: ArtifactResult) -> CheckResult:
    level = item.level
    if item.status is Status.NOT_APPLIED:
        level = Level.FAIL  # verify: anything not in the desired state is a failure
    return CheckResult(f"artifact:{item.id}", "artifact", level, item.message, item.details,
                       fix=item.fix)


def _artifacts(ctx: Context) -> tuple[list[CheckResult], set[str]]:
    store = ctx.store
    results: list[CheckResult] = []
    if store.journal_path.exists():
        results.append(CheckResult("state:journal", "artifact", Level.FAIL,
                                   f"an interrupted run left {store.journal_path}",
                                   fix="ascendpatch status (as a user who can write the "
                                       "target) rolls it back"))
    ledger = store.load_ledger()
    wanted = {a.id for a in select(ctx.manifest, [], ctx.enabled_extra)}
    # Every artifact is looked at: an optional one (SmoothQuant) counts once it is in place.
    prepared = prepare(list(ctx.manifest.artifacts), ctx.target, ctx.env, required=False)
    applied: set[str] = set()
    for artifact, kctx in prepared:
        item = status_of(evaluate(artifact, kctx), ledger, store)
        if item.status is Status.ALREADY_APPLIED:
            applied.add(item.id)
        if artifact.id in wanted or item.status is Status.ALREADY_APPLIED:
            results.append(_artifact_check(item))
    return results, applied


def _host_checks(ctx: Context, applied: set[str], no_probes: bool,
                 probe_timeout: float, device: bool = False) -> list[CheckResult]:
    results: list[CheckResult] = []
    if standins.is_sandbox(ctx.target.prefix):
        results.append(CheckResult("cann", "cann", Level.SKIP,
                                   "sandbox (simulated NPU stack): there is no CANN / ATB "
                                   "environment to check on this host"))
    else:
        results += cann.check(ctx.env)
    if no_probes:
        results.append(CheckResult("probe", "probe", Level.SKIP,
                                   "operator probes skipped (--no-probes)"))
    else:
        with progress.task("operator probes in the target interpreter"):
            results += probes.check(ctx.target, applied, probe_timeout, device)
    return results + envvars.expected(ctx.manifest, ctx.env)


def _model_checks(ctx: Context, applied: set[str], npu_stack: bool,
                  serve_log: Path | None) -> list[CheckResult]:
    """Adapters registered, SmoothQuant whole (both halves or neither), the serve log."""
    target, manifest = ctx.target, ctx.manifest
    results: list[CheckResult] = []
    in_place = [a for a in manifest.artifacts if a.id in applied]
    if target.python is not None:
        results += plugins.check(target.python, in_place, npu_stack, ctx.env)
    smooth = [a for a in manifest.artifacts if a.options.get("scales_env")]
    for artifact in smooth:
        enabled = artifact.enabled or artifact.id in ctx.enabled_extra
        results += smoothquant.check(artifact, artifact.id in applied, enabled, target.python,
                                     ctx.env)
    if serve_log is not None:
        try:
            text = serve_log.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise InvalidInputError(f"--serve-log {serve_log} cannot be read ({exc})") from None
        if any(a.id in applied for a in smooth):
            results.append(smoothquant.check_serve_log(text, manifest.tp_size))
    return results


def run(ctx: Context, *, no_probes: bool = False, serve_log: Path | None = None,
        probe_timeout: float = probes.PROBE_TIMEOUT, device: bool = False) -> CommandResult:
    target, manifest, env = ctx.target, ctx.manifest, ctx.env
    has_python = target.python is not None
    results: list[CheckResult] = []
    results += pins.check(manifest, target, cann.cann_version(env) if has_python else None)
    with context.shared(ctx):  # a live apply finishes first: no half-written state as drift
        artifact_results, applied = _artifacts(ctx)
    results += artifact_results
    results += deps.check(manifest, target)
    if not has_python:
        results.append(CheckResult("host", "env", Level.SKIP,
                                   "CANN environment, operator probes and environment variables "
                                   "are checked for --python targets (this host's shell)"))
    else:
        results += _host_checks(ctx, applied, no_probes, probe_timeout, device)
    npu_stack = any(r.id == "probe:import" and r.level is Level.OK for r in results) and \
        not standins.is_sandbox(target.prefix)
    results += _model_checks(ctx, applied, npu_stack, serve_log)
    in_play = [a for a in manifest.artifacts if a.enabled or a.id in ctx.enabled_extra
               or a.id in applied]
    results += envvars.required(in_play, env) if has_python else []
    failed = sum(1 for r in results if r.level is Level.FAIL)
    simulated = " (sandbox: the NPU stack is simulated)" if standins.is_sandbox(target.prefix) \
        else ""
    summary = (f"verify: {failed} problem(s) on {target.describe()}{simulated}" if failed else
               f"verify: {target.describe()} is in the state manifest {manifest.name} "
               f"describes{simulated}")
    return CommandResult("verify", tuple(results), summary=summary)


def from_args(args: Namespace) -> CommandResult:
    return run(context.from_args(args), no_probes=args.no_probes, serve_log=args.serve_log,
               probe_timeout=args.probe_timeout, device=args.device)


def configure(p: ArgumentParser) -> None:
    p.add_argument("--no-probes", action="store_true",
                   help="skip the operator probes (no subprocess of the target)")
    p.add_argument("--probe-timeout", type=cliargs.seconds, default=120.0, metavar="SECONDS",
                   help="how long the operator probe subprocess may run (default 120)")
    p.add_argument("--device", action="store_true",
                   help="also run the fused top-k/top-p operator once on the NPU and compare "
                        "the tokens it keeps with the fallback's")
    p.add_argument("--serve-log", type=cliargs.path, metavar="FILE",
                   help="also check a vLLM serve log for the markers the manifest needs")
    cliargs.with_option(p, "also expect this optional artifact to be applied")


COMMAND = cliargs.CommandSpec(
    name="verify",
    help="read-only check of pins, patches, dependencies, probes, env",
    description=("Read-only: stack pins, artifact states, dependency consistency, operator "
                 "probes, CANN / ATB environment and required env vars. Exit 1 on any [FAIL]."),
    example="ascendpatch --python ./ascendpatch-sandbox/bin/python verify --no-probes",
    run=from_args, configure=configure,
)
