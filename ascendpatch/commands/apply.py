"""``ascendpatch apply [ID...] [--dry-run] [--force]``."""

from __future__ import annotations

from argparse import Namespace

from ascendpatch import progress
from ascendpatch.commands import context
from ascendpatch.commands.context import Context, locked
from ascendpatch.engine import Batch, apply_plan
from ascendpatch.planner import evaluate, prepare, select
from ascendpatch.results import ArtifactResult, CommandResult, pending_exit_code


def run(ctx: Context, ids: list[str], *, dry_run: bool = False, force: bool = False) \
        -> CommandResult:
    artifacts = select(ctx.manifest, ids, ctx.enabled_extra)
    prepared = prepare(artifacts, ctx.target, ctx.env)  # every bad input raises before writing
    results: list[ArtifactResult] = []
    shown: set[int] = set()  # id()s of results already streamed
    waiting: set[int] = set()  # id()s of results waiting in the batch (not final yet)
    with locked(ctx) as session:
        batch = Batch(session.store)  # one transaction for the whole run (a catalog: < 1 s)
        for artifact, kctx in prepared:
            plan = evaluate(artifact, kctx)
            if batch.touches(plan):  # an earlier artifact shares a file: write it first,
                batch.flush(results)
                waiting.clear()
                plan = evaluate(artifact, kctx)  # then look again
            results.append(apply_plan(plan, session.store, force=force, dry_run=dry_run,
                                      batch=batch))
            if batch.touches(plan):
                waiting.add(id(results[-1]))
            _stream(results, shown, waiting)
        batch.flush(results)
        _stream(results, shown, set())
    command = "apply --dry-run" if dry_run else "apply"
    code = pending_exit_code(results) if dry_run else None
    return CommandResult(command, tuple(results), tuple(session.notes), exit_code_override=code)


def _stream(results: list[ArtifactResult], shown: set[int], waiting: set[int]) -> None:
    """Show each result as soon as it is final (a batched one once the batch is committed)."""
    for result in results:
        if id(result) not in shown and id(result) not in waiting:
            shown.add(id(result))
            progress.item(result)


def from_args(args: Namespace) -> CommandResult:
    return run(context.from_args(args), args.ids, dry_run=args.dry_run, force=args.force)
