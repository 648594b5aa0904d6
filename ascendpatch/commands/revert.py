"""``ascendpatch revert [ID...]``: restore byte-identical originals."""

from __future__ import annotations

from argparse import ArgumentParser, Namespace

from ascendpatch import progress
from ascendpatch.commands import context
from ascendpatch.commands.context import Context, writing
from ascendpatch.pipeline.engine import revert_all
from ascendpatch.pipeline.planner import prepare, select
from ascendpatch.results import CommandResult, pending_exit_code
from ascendpatch.shell import cliargs


def run(ctx: Context, ids: list[str], *, dry_run: bool = False) -> CommandResult:
    artifacts = select(ctx.manifest, ids, ctx.enabled_extra)
    if not ids:  # revert whatever is applied, enabled or not
        artifacts = list(ctx.manifest.artifacts)
    prepared = prepare(artifacts, ctx.target, ctx.env, required=bool(ids))
    with writing(ctx, dry_run=dry_run) as session:  # undone in reverse order, listed in order
        results = tuple(reversed(progress.stream(revert_all(prepared, session.store,
                                                            dry_run=dry_run))))
    command = "revert --dry-run" if dry_run else "revert"
    code = pending_exit_code(results) if dry_run else None
    return CommandResult(command, results, tuple(session.notes), exit_code_override=code,
                         streamed=True, has_recap=True)


def from_args(args: Namespace) -> CommandResult:
    return run(context.from_args(args), args.ids, dry_run=args.dry_run)


def configure(p: ArgumentParser) -> None:
    cliargs.ids(p, "artifact ids from the manifest (default: every applied artifact)")
    p.add_argument("--dry-run", action="store_true",
                   help="show what would be restored; exit 1 if anything would")


COMMAND = cliargs.CommandSpec(
    name="revert",
    help="restore the original files",
    description=("Restore byte-identical originals from backups (or by reversing the patch and "
                 "checking against the wheel's RECORD). Ends with the same recap as apply."),
    example="ascendpatch --python ./ascendpatch-sandbox/bin/python revert --dry-run",
    run=from_args, configure=configure,
)
