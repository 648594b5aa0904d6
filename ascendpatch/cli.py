"""The thin CLI: parse arguments, call the command's handler, render, exit.

Argument definitions live in cliargs.py; each command module turns parsed arguments into a call
of its typed ``run`` (``from_args``). This module imports almost nothing at start-up so that
``ascendpatch --version`` stays fast, and it is the one error boundary: expected errors exit
with their code and a one-line message, bugs exit 3 with a log, Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ascendpatch import __version__, cliargs
from ascendpatch.errors import (
    EXIT_INTERRUPTED,
    EXIT_UNEXPECTED,
    EXIT_USAGE,
    AscendpatchError,
)

if TYPE_CHECKING:
    from ascendpatch.results import CommandResult


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"[FAIL] {self.prog}: {message}\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ascendpatch",
                     description="Patch and install manager for vllm-ascend environments.")
    parser.add_argument("--version", action="version", version=f"ascendpatch {__version__}")
    cliargs.global_options(parser, suppress=False)
    common = _Parser(add_help=False)
    cliargs.global_options(common, suppress=True)
    source = _Parser(add_help=False)
    cliargs.source_options(source)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for command in cliargs.COMMANDS:
        parents = [common, source] if command.source else [common]
        child = sub.add_parser(command.name, parents=parents, help=command.help)
        command.configure(child)
        child.set_defaults(handler=command.handler)
    return parser


def _dispatch(args: argparse.Namespace) -> CommandResult:
    module, _, function = str(args.handler).partition(":")
    handler = getattr(importlib.import_module(module), function)
    result: CommandResult = handler(args)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    as_json: bool = args.json
    color: str = args.color
    try:
        result = _dispatch(args)
    except AscendpatchError as exc:
        from ascendpatch import output

        output.error(str(exc), command=args.command, exit_code=exc.exit_code, as_json=as_json,
                     color=color)
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write(f"[FAIL] {_interrupted(args.command)}\n")
        return EXIT_INTERRUPTED
    except Exception as exc:  # the error boundary: a bug, not a user error
        from ascendpatch import crashlog, output

        log = crashlog.write(exc, argv if argv is not None else sys.argv[1:])
        output.error(f"unexpected error: {type(exc).__name__}: {exc}", command=args.command,
                     exit_code=EXIT_UNEXPECTED, as_json=as_json, color=color, log_path=log)
        return EXIT_UNEXPECTED
    from ascendpatch import output

    try:
        output.render(result, as_json=as_json, color=color, show_diff=args.command == "plan")
        sys.stdout.flush()
    except BrokenPipeError:  # `ascendpatch status | head -1`: the reader has gone; be quiet
        _silence_stdout()
    return result.exit_code


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (captured in tests)
        pass
    finally:
        os.close(devnull)


def _interrupted(command: str) -> str:
    """Ctrl-C: say what really happened. After a commit point the change is in place."""
    state = sys.modules.get("ascendpatch.store.state")
    committed: list[str] = list(getattr(state, "COMMITTED", []))
    if not committed:
        return "interrupted; any change in progress was rolled back"
    verb = {"apply": "applied", "revert": "reverted"}.get(command, "written")
    return (f"interrupted after the commit point: {'; '.join(committed)} {verb} in full, not "
            f"rolled back; run 'ascendpatch status' to see every artifact's state")
