"""``ascendpatch apply [ID...] [--dry-run] [--force] [--diff]``."""

from __future__ import annotations

from argparse import Namespace

from ascendpatch import progress
from ascendpatch.commands import context
from ascendpatch.commands.context import Context, locked
from ascendpatch.engine import execute
from ascendpatch.planner import prepare, select
from ascendpatch.results import CommandResult, pending_exit_code


def run(ctx: Context, ids: list[str], *, dry_run: bool = False, force: bool = False,
        diff: bool = False) -> CommandResult:
    """``diff``: also keep the unified diff of what was applied (apply --diff, like Ansible)."""
    artifacts = select(ctx.manifest, ids, ctx.enabled_extra)
    prepared = prepare(artifacts, ctx.target, ctx.env)  # every bad input raises before writing
    with locked(ctx) as session:
        found = progress.stream(execute(prepared, session.store, force=force, dry_run=dry_run,
                                        diff=diff), show_diff=diff)
    order = {artifact.id: index for index, (artifact, _) in enumerate(prepared)}
    results = tuple(sorted(found, key=lambda r: order[r.id]))  # shown as final; kept in order
    command = "apply --dry-run" if dry_run else "apply"
    code = pending_exit_code(results) if dry_run else None
    return CommandResult(command, results, tuple(session.notes), exit_code_override=code,
                         show_diff=diff, streamed=True, has_recap=True)


def from_args(args: Namespace) -> CommandResult:
    return run(context.from_args(args), args.ids, dry_run=args.dry_run, force=args.force,
               diff=args.diff)
