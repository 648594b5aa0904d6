"""``ascendpatch revert [ID...]``: restore byte-identical originals."""

from __future__ import annotations

from argparse import Namespace

from ascendpatch import progress
from ascendpatch.commands import context
from ascendpatch.commands.context import Context, locked
from ascendpatch.engine import revert_artifact
from ascendpatch.planner import evaluate, prepare, select
from ascendpatch.results import ArtifactResult, CommandResult, pending_exit_code


def run(ctx: Context, ids: list[str], *, dry_run: bool = False) -> CommandResult:
    artifacts = select(ctx.manifest, ids, ctx.enabled_extra)
    if not ids:  # revert whatever is applied, enabled or not
        artifacts = list(ctx.manifest.artifacts)
    prepared = prepare(artifacts, ctx.target, ctx.env, required=bool(ids))
    results: list[ArtifactResult] = []
    with locked(ctx) as session:
        for artifact, kctx in reversed(prepared):  # undo in reverse order of application
            ledger = session.store.load_ledger()
            results.append(revert_artifact(evaluate(artifact, kctx), session.store, ledger,
                                       dry_run=dry_run))
            progress.item(results[-1])
    command = "revert --dry-run" if dry_run else "revert"
    code = pending_exit_code(results) if dry_run else None
    return CommandResult(command, tuple(reversed(results)), tuple(session.notes),
                         exit_code_override=code)


def from_args(args: Namespace) -> CommandResult:
    return run(context.from_args(args), args.ids, dry_run=args.dry_run)
