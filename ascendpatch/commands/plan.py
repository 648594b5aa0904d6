"""``ascendpatch plan``: what apply would do, with the unified diff of each change."""

from __future__ import annotations

from argparse import ArgumentParser, Namespace

from ascendpatch.commands import context
from ascendpatch.commands.context import Context, shared
from ascendpatch.pipeline.engine import execute
from ascendpatch.pipeline.planner import prepare, select
from ascendpatch.results import CommandResult, pending_exit_code
from ascendpatch.shell import cliargs


def run(ctx: Context, ids: list[str], *, force: bool = False) -> CommandResult:
    prepared = prepare(select(ctx.manifest, ids, ctx.enabled_extra), ctx.target, ctx.env)
    with shared(ctx) as session:  # a dry run writes nothing: every result is final at once
        results = tuple(execute(prepared, session.store, force=force, dry_run=True))
    return CommandResult("plan", results, tuple(session.notes),
                         exit_code_override=pending_exit_code(results), show_diff=True)


def from_args(args: Namespace) -> CommandResult:
    return run(context.from_args(args), args.ids)


def configure(p: ArgumentParser) -> None:
    cliargs.ids(p)
    cliargs.with_option(p)


COMMAND = cliargs.CommandSpec(
    name="plan",
    help="what apply would do, with diffs",
    description=("What apply would do, with the unified diff of each change. Exit 1 when "
                 "changes are pending."),
    example="ascendpatch --python ./ascendpatch-sandbox/bin/python plan",
    run=from_args, configure=configure,
)
