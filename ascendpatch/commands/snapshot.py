"""``ascendpatch snapshot -o FILE [--all-files]``."""

from __future__ import annotations

import json
from argparse import ArgumentParser, Namespace
from pathlib import Path

from ascendpatch.commands import context
from ascendpatch.commands.context import Context
from ascendpatch.errors import InvalidInputError
from ascendpatch.inspect import snapshot
from ascendpatch.kinds.base import ArtifactSite
from ascendpatch.pipeline.engine import status_of
from ascendpatch.pipeline.planner import evaluate, prepare
from ascendpatch.results import CheckResult, CommandResult, Level
from ascendpatch.shell import cliargs
from ascendpatch.store import atomic
from ascendpatch.store.ledger import LedgerStore


def artifact_states(ctx: Context, store: LedgerStore) -> snapshot.ArtifactRecord:
    """Each artifact's status, and the files it acts on (so fleet-report can tell a hand edit
    of an applied patch's own file)."""
    ledger = store.load_ledger()
    prepared = prepare(list(ctx.manifest.artifacts), ctx.target, ctx.env, required=False)
    record = snapshot.ArtifactRecord()
    for artifact, site in prepared:
        item = status_of(evaluate(artifact, site), ledger, store)
        folder = site.root if isinstance(site, ArtifactSite) else None
        record.add(ctx.target, item, folder)
    return record


def check_output(output: Path) -> None:
    """Refuse, before any work, an output that is a folder or lies in a missing folder."""
    if output.is_dir():
        raise InvalidInputError(f"-o {output} is a folder, not a file",
                                fix=f"give a file name, e.g. -o {output / 'snapshot.json'}")
    if not output.parent.is_dir():
        raise InvalidInputError(f"-o {output}: the folder {output.parent} does not exist",
                                fix=f"create it first (mkdir -p {output.parent})")


def run(ctx: Context, output: Path, *, all_files: bool = False) -> CommandResult:
    check_output(output)
    # The reader's lock, as audit, status and verify take it: a live apply finishes first, so
    # a half-written state is never recorded (and an interrupted one is refused).
    with context.shared(ctx) as session:
        doc = snapshot.take(ctx.target, ctx.manifest, artifact_states(ctx, session.store),
                            all_files)
    body = json.dumps(doc, indent=1) + "\n"
    if str(output) != "-":
        atomic.write_atomic(output, body.encode())
    text = (f"snapshot of {ctx.target.describe()} written to "
            f"{'stdout' if str(output) == '-' else output} "
            f"({len(doc['distributions'])} distributions, {len(doc['files'])} files hashed)")
    return CommandResult("snapshot", (CheckResult("snapshot", "snapshot", Level.OK, text),),
                         payload=body if str(output) == "-" else None)


def from_args(args: Namespace) -> CommandResult:
    check_output(args.output)  # before the target is inspected
    return run(context.from_args(args), args.output, all_files=args.all_files)


def configure(p: ArgumentParser) -> None:
    p.add_argument("-o", "--output", type=cliargs.output_file, required=True, metavar="FILE",
                   help="where to write the JSON snapshot ('-' for stdout)")
    p.add_argument("--all-files", action="store_true",
                   help="hash every installed file, not only the stack's packages")


COMMAND = cliargs.CommandSpec(
    name="snapshot",
    help="write a JSON record of the target",
    description="Write a JSON record of the target (distributions, artifact states, hashes).",
    example="ascendpatch --python ./ascendpatch-sandbox/bin/python snapshot -o before.json",
    run=from_args, configure=configure,
)
