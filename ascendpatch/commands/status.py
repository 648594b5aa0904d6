"""``ascendpatch status``: each artifact and file with its state, read-only."""

from __future__ import annotations

from argparse import Namespace

from ascendpatch.commands import context
from ascendpatch.commands.context import Context, reading
from ascendpatch.engine import status_of
from ascendpatch.planner import evaluate, prepare, select
from ascendpatch.results import CommandResult, pending_exit_code


def run(ctx: Context, ids: list[str]) -> CommandResult:
    prepared = prepare(select(ctx.manifest, ids, ctx.enabled_extra), ctx.target, ctx.env)
    with reading(ctx) as session:
        ledger = session.store.load_ledger()
        results = tuple(status_of(evaluate(a, k), ledger, session.store) for a, k in prepared)
    summary = f"target: {ctx.target.describe()}; manifest: {ctx.manifest.name}"
    return CommandResult("status", results, tuple(session.notes), summary=summary,
                         exit_code_override=pending_exit_code(results))


def from_args(args: Namespace) -> CommandResult:
    return run(context.from_args(args), args.ids)
