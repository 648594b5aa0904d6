"""``ascendpatch apply [ID...] [--dry-run] [--force] [--diff]``."""

from __future__ import annotations

from argparse import Namespace
from dataclasses import replace

from ascendpatch import progress
from ascendpatch.commands import context
from ascendpatch.commands.context import Context, locked
from ascendpatch.engine import Batch, apply_artifact, unified_diff
from ascendpatch.planner import evaluate, prepare, select
from ascendpatch.results import ArtifactResult, CommandResult, Status, pending_exit_code


def run(ctx: Context, ids: list[str], *, dry_run: bool = False, force: bool = False,
        diff: bool = False) -> CommandResult:
    """``diff``: also keep the unified diff of what was applied (apply --diff, like Ansible)."""
    artifacts = select(ctx.manifest, ids, ctx.enabled_extra)
    prepared = prepare(artifacts, ctx.target, ctx.env)  # every bad input raises before writing
    results: list[ArtifactResult] = []
    shown: set[int] = set()  # id()s of results already streamed
    waiting: set[int] = set()  # id()s of results waiting in the batch (not final yet)
    diffs: dict[str, str] = {}  # apply --diff: artifact id -> the change, shown once applied
    with locked(ctx) as session:
        batch = Batch(session.store)  # one transaction for the whole run (a catalog: < 1 s)
        for artifact, kctx in prepared:
            plan = evaluate(artifact, kctx)
            if batch.touches(plan):  # an earlier artifact shares a file: write it first,
                batch.flush(results)
                waiting.clear()
                plan = evaluate(artifact, kctx)  # then look again
            if diff and not dry_run and plan.skip is None:
                diffs[artifact.id] = unified_diff(plan)
            results.append(apply_artifact(plan, session.store, force=force, dry_run=dry_run,
                                      batch=batch))
            if batch.touches(plan):
                waiting.add(id(results[-1]))
            _stream(results, shown, waiting, diffs, diff)
        batch.flush(results)
        _stream(results, shown, set(), diffs, diff)
    command = "apply --dry-run" if dry_run else "apply"
    code = pending_exit_code(results) if dry_run else None
    return CommandResult(command, tuple(results), tuple(session.notes), exit_code_override=code,
                         show_diff=diff)


def _stream(results: list[ArtifactResult], shown: set[int], waiting: set[int],
            diffs: dict[str, str], show_diff: bool) -> None:
    """Show each result as soon as it is final (a batched one once the batch is committed)."""
    for index, result in enumerate(results):
        if id(result) in shown or id(result) in waiting:
            continue
        if result.status is Status.APPLIED and diffs.get(result.id):
            result = results[index] = replace(result, diff=diffs.pop(result.id))
        shown.add(id(result))
        progress.item(result, show_diff=show_diff)


def from_args(args: Namespace) -> CommandResult:
    return run(context.from_args(args), args.ids, dry_run=args.dry_run, force=args.force,
               diff=args.diff)
