"""``ascendpatch diff A.json B.json``: two snapshots compared (two nodes, or before/after)."""

from __future__ import annotations

from argparse import ArgumentParser, Namespace
from pathlib import Path

from ascendpatch.inspect import snapshot
from ascendpatch.results import CheckResult, CommandResult, Level
from ascendpatch.shell import cliargs


def diff(first: Path, second: Path) -> CommandResult:
    a, b = snapshot.load(first), snapshot.load(second)
    results: list[CheckResult] = []
    for change, name, text in snapshot.package_changes(a["distributions"], b["distributions"]):
        results.append(CheckResult(f"package:{name}", "diff", Level.FAIL, f"{change:<10} {text}"))
    for aid in sorted(set(a["artifacts"]) | set(b["artifacts"])):
        old, new = a["artifacts"].get(aid, "absent"), b["artifacts"].get(aid, "absent")
        if old != new:
            results.append(CheckResult(f"artifact:{aid}", "diff", Level.FAIL,
                                       f"artifact   {aid}: {old} -> {new}"))
    changes, skipped = snapshot.file_changes(a, b)
    for code, rel in changes:
        results.append(CheckResult(f"file:{rel}", "diff", Level.FAIL, f"{code:<10} {rel}",
                                   data={"code": code, "path": rel}))
    only = (f"; {skipped} file(s) recorded only by the --all-files snapshot were not compared"
            if skipped else "")
    summary = (f"diff: {first} and {second} describe the same environment{only}"
               if not results else
               f"diff: {len(results)} difference(s) between {first} and {second}{only}")
    return CommandResult("diff", tuple(results), summary=summary)


def from_args(args: Namespace) -> CommandResult:
    return diff(args.first, args.second)


def configure(p: ArgumentParser) -> None:
    p.add_argument("first", type=cliargs.path, metavar="A.json", help="the older snapshot")
    p.add_argument("second", type=cliargs.path, metavar="B.json", help="the newer snapshot")


COMMAND = cliargs.CommandSpec(
    name="diff",
    help="compare two snapshots",
    description=("Compare two snapshots (two nodes, or before/after an image rebuild). Exit 1 "
                 "when they differ."),
    example="ascendpatch diff before.json after.json",
    run=from_args, configure=configure,
)
