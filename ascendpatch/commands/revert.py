"""``ascendpatch revert [ID...]``: restore byte-identical originals."""

from __future__ import annotations

from argparse import Namespace

from ascendpatch import progress
from ascendpatch.commands import context
from ascendpatch.commands.context import Context, locked
from ascendpatch.engine import revert_all
from ascendpatch.planner import prepare, select
from ascendpatch.results import CommandResult, pending_exit_code


def run(ctx: Context, ids: list[str], *, dry_run: bool = False) -> CommandResult:
    artifacts = select(ctx.manifest, ids, ctx.enabled_extra)
    if not ids:  # revert whatever is applied, enabled or not
        artifacts = list(ctx.manifest.artifacts)
    prepared = prepare(artifacts, ctx.target, ctx.env, required=bool(ids))
    with locked(ctx) as session:  # undone in reverse order of application, listed in order
        results = tuple(reversed(progress.stream(revert_all(prepared, session.store,
                                                            dry_run=dry_run))))
    command = "revert --dry-run" if dry_run else "revert"
    code = pending_exit_code(results) if dry_run else None
    return CommandResult(command, results, tuple(session.notes), exit_code_override=code,
                         streamed=True, has_recap=True)


def from_args(args: Namespace) -> CommandResult:
    return run(context.from_args(args), args.ids, dry_run=args.dry_run)
