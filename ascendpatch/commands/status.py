"""``ascendpatch status``: each artifact and file with its state, read-only."""

from __future__ import annotations

from argparse import Namespace
from dataclasses import replace

from ascendpatch.commands import context
from ascendpatch.commands.context import Context, shared
from ascendpatch.pipeline.engine import status_of
from ascendpatch.pipeline.planner import evaluate, prepare, select
from ascendpatch.results import (
    PENDING,
    ArtifactResult,
    CommandResult,
    Hint,
    Level,
    Phrase,
    Status,
    pending_exit_code,
)
from ascendpatch.shell import cliargs
from ascendpatch.store.ledger import Ledger, LedgerStore


def run(ctx: Context, ids: list[str]) -> CommandResult:
    prepared = prepare(select(ctx.manifest, ids, ctx.enabled_extra), ctx.target, ctx.env)
    with shared(ctx) as session:
        ledger = session.store.load_ledger()
        results = tuple(status_of(evaluate(a, k), ledger, session.store) for a, k in prepared)
        if not ids:
            results += tuple(_optional(ctx, ledger, session.store))
    summary = f"target: {ctx.target.describe()}; manifest: {ctx.manifest.name}"
    return CommandResult("status", results, tuple(session.notes), summary=summary,
                         exit_code_override=pending_exit_code(results, _DUE), show_files=True)


# An artifact that is not applied is a change `apply` would make: due, as a PENDING one.
_DUE = PENDING | {Status.NOT_APPLIED}


def _optional(ctx: Context, ledger: Ledger, store: LedgerStore) -> list[ArtifactResult]:
    """Optional artifacts not enabled (smoothquant, ...): listed, and shown applied if they are."""
    off = [a for a in ctx.manifest.artifacts if not a.enabled and a.id not in ctx.enabled_extra]
    shown = []
    for artifact, site in prepare(off, ctx.target, ctx.env, required=False):
        found = status_of(evaluate(artifact, site), ledger, store)
        if found.status is not Status.ALREADY_APPLIED:
            found = replace(found, status=Status.SKIPPED, level=Level.SKIP,
                            message=Phrase(f"{artifact.title}: optional, not enabled "
                                           f"({found.status.value}); enable: ",
                                           Hint(("apply", "--with", artifact.id))))
        shown.append(found)
    return shown


def from_args(args: Namespace) -> CommandResult:
    return run(context.from_args(args), args.ids)


COMMAND = cliargs.CommandSpec(
    name="status",
    help="each artifact and file's state",
    description=("Each artifact and file with its state: pristine, applied, partial or "
                 "conflict. Exit 1 when anything is not in the desired state."),
    example="ascendpatch --python ./ascendpatch-sandbox/bin/python status",
    run=from_args, configure=cliargs.ids,
)
