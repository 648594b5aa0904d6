"""``ascendpatch verify [--no-probes] [--device] [--prometheus FILE]``: read-only, one line per
check; after an image rebuild, it says exactly what is wrong and what to run. ``--device``
(opt-in) runs the fused top-k/top-p operator once on the NPU against the installed fallback.
``--prometheus FILE`` also writes what it found as gauges for node_exporter's textfile
collector (:mod:`ascendpatch.inspect.promfile`; the path is checked before any work)."""

from __future__ import annotations

from argparse import ArgumentParser, Namespace
from pathlib import Path

from ascendpatch import progress
from ascendpatch.commands import context
from ascendpatch.commands.context import Context
from ascendpatch.env import standins
from ascendpatch.errors import InvalidInputError
from ascendpatch.inspect.checks import probes
from ascendpatch.inspect.checks.base import ArtifactFacts, CheckContext, ProbeOutcome
from ascendpatch.inspect.checks.registry import CHECKS
from ascendpatch.pipeline.engine import status_of
from ascendpatch.pipeline.planner import evaluate, prepare, select
from ascendpatch.results import ArtifactResult, CommandResult, Level, Status
from ascendpatch.shell import cliargs


def _artifacts(ctx: Context) -> ArtifactFacts:
    store = ctx.store
    journal = store.journal_path if store.journal_path.exists() else None
    ledger = store.load_ledger()
    wanted = {a.id for a in select(ctx.manifest, [], ctx.enabled_extra)}
    # Every artifact is looked at: an optional one (SmoothQuant) counts once it is in place.
    prepared = prepare(list(ctx.manifest.artifacts), ctx.target, ctx.env, required=False)
    shown: list[ArtifactResult] = []
    applied: set[str] = set()
    for artifact, site in prepared:
        item = status_of(evaluate(artifact, site), ledger, store)
        if item.status is Status.ALREADY_APPLIED:
            applied.add(item.id)
        if artifact.id in wanted or item.status is Status.ALREADY_APPLIED:
            shown.append(item)
    return ArtifactFacts(journal, tuple(shown), frozenset(applied))


def _serve_log(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InvalidInputError(f"--serve-log {path} cannot be read ({exc})") from None


def _probe(ctx: Context, timeout: float, device: bool) -> ProbeOutcome:
    with progress.task("operator probes in the target interpreter"):
        return probes.probe(ctx.target, timeout, device)


def facts(ctx: Context, *, no_probes: bool = False, serve_log: Path | None = None,
          probe_timeout: float = probes.PROBE_TIMEOUT, device: bool = False) -> CheckContext:
    """What the checks share, each found once: the artifacts' state, the probe's answer."""
    log = _serve_log(serve_log)
    with context.shared(ctx):  # a live apply finishes first: no half-written state as drift
        artifacts = _artifacts(ctx)
    run_probe = ctx.target.python is not None and not no_probes
    probe = _probe(ctx, probe_timeout, device) if run_probe else None
    return CheckContext(ctx.target, ctx.manifest, ctx.env, ctx.enabled_extra, artifacts, probe,
                        standins.is_sandbox(ctx.target.prefix), device, log)


def run(ctx: Context, *, no_probes: bool = False, serve_log: Path | None = None,
        probe_timeout: float = probes.PROBE_TIMEOUT, device: bool = False,
        prometheus: Path | None = None) -> CommandResult:
    if prometheus is not None:
        from ascendpatch.inspect import promfile  # (with the fleet model: only when asked for;
                                                  # bound for the write below too)

        promfile.check_path(prometheus)
    shared = facts(ctx, no_probes=no_probes, serve_log=serve_log, probe_timeout=probe_timeout,
                   device=device)
    results = tuple(result for check in CHECKS for result in check.run(shared))
    if prometheus is not None:
        promfile.write(prometheus, promfile.verify_families(ctx.manifest.name,
                                                            shared.artifacts.shown, results))
    failed = sum(1 for r in results if r.level is Level.FAIL)
    target, manifest = ctx.target, ctx.manifest
    simulated = " (sandbox: the NPU stack is simulated)" if shared.sandbox else ""
    summary = (f"verify: {failed} problem(s) on {target.describe()}{simulated}" if failed else
               f"verify: {target.describe()} is in the state manifest {manifest.name} "
               f"describes{simulated}")
    return CommandResult("verify", results, summary=summary)


def from_args(args: Namespace) -> CommandResult:
    if args.prometheus is not None:
        from ascendpatch.inspect import promfile

        promfile.check_path(args.prometheus)  # before the target is inspected
    return run(context.from_args(args), no_probes=args.no_probes, serve_log=args.serve_log,
               probe_timeout=args.probe_timeout, device=args.device,
               prometheus=args.prometheus)


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
    p.add_argument("--prometheus", type=cliargs.path, metavar="FILE",
                   help="also write the findings as gauges in a Prometheus textfile (for "
                        "node_exporter's textfile collector), atomically")
    cliargs.with_option(p, "also expect this optional artifact to be applied")


COMMAND = cliargs.CommandSpec(
    name="verify",
    help="read-only check of pins, patches, dependencies, probes, env",
    description=("Read-only: stack pins, artifact states, dependency consistency, operator "
                 "probes, CANN / ATB environment and required env vars. Exit 1 on any [FAIL]."),
    example="ascendpatch --python ./ascendpatch-sandbox/bin/python verify --no-probes",
    run=from_args, configure=configure,
)
