"""``ascendpatch apply [ID...] [--dry-run] [--force] [--diff]``."""

from __future__ import annotations

from argparse import ArgumentParser, Namespace

from ascendpatch import progress
from ascendpatch.commands import context
from ascendpatch.commands.context import Context, writing
from ascendpatch.pipeline.engine import execute
from ascendpatch.pipeline.planner import prepare, select
from ascendpatch.results import CommandResult, pending_exit_code
from ascendpatch.shell import cliargs


def run(ctx: Context, ids: list[str], *, dry_run: bool = False, force: bool = False,
        diff: bool = False) -> CommandResult:
    """``diff``: also keep the unified diff of what was applied (apply --diff, like Ansible)."""
    artifacts = select(ctx.manifest, ids, ctx.enabled_extra)
    prepared = prepare(artifacts, ctx.target, ctx.env)  # every bad input raises before writing
    with writing(ctx, dry_run=dry_run) as session:
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


def configure(p: ArgumentParser) -> None:
    cliargs.ids(p)
    p.add_argument("--dry-run", action="store_true",
                   help="show what would change; exit 1 if anything would")
    p.add_argument("--force", action="store_true",
                   help="drop-in / file / plugin artifacts: replace a file whose content is "
                        "not a known original (it is backed up first; 'revert' restores it); "
                        "diff artifacts: complete a partially applied patch. A diff conflict "
                        "(hunks match neither state) is never forced: reinstall the package or "
                        "port the patch")
    p.add_argument("--diff", action="store_true",
                   help="also print the unified diff of each change (with --dry-run: like "
                        "Ansible's --check --diff)")
    cliargs.with_option(p)


COMMAND = cliargs.CommandSpec(
    name="apply",
    help="apply artifacts (idempotent)",
    description=("Bring the selected artifacts to their applied state. Idempotent: a second run "
                 "changes zero bytes. Ends with a recap: ok=N changed=N skipped=N failed=N. "
                 "Exit 0 when everything is applied, 1 on a conflict or refusal (with "
                 "--dry-run: 1 when changes are pending)."),
    example="ascendpatch --python /usr/local/python3.12.13/bin/python3 apply --dry-run --diff",
    run=from_args, configure=configure,
)
