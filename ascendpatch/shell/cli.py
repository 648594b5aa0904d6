"""The thin CLI: parse arguments, call the command's handler, render, exit.

Each command module defines its arguments (shared ones: cliargs.py) and turns them into a call
of its typed ``run`` (``from_args``). This module imports almost nothing at start-up so that
``ascendpatch --version`` stays fast, and it is the one error boundary: expected errors exit
with their code and a one-line message, bugs exit 3 with a log, Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, NoReturn

from ascendpatch import __version__
from ascendpatch.errors import (
    EXIT_INTERRUPTED,
    EXIT_UNEXPECTED,
    EXIT_USAGE,
    AscendpatchError,
    Interrupted,
)
from ascendpatch.shell import cliargs, streams

if TYPE_CHECKING:
    from types import FrameType

    from _typeshed import SupportsWrite

    from ascendpatch.results import CommandResult
    from ascendpatch.shell.cliargs import Handler


class _Parser(argparse.ArgumentParser):
    json_errors = False  # set by main() when --json was given: usage errors as JSON too
    command_hint: str | None = None  # the command named on the line, for those JSON errors
    color = "auto"  # --color as given on the line (the usage error comes before parsing ends)

    def _check_value(self, action: argparse.Action, value: object) -> None:
        """argparse's check of a choice (a command name, --color), with the nearest choice
        named: ``invalid choice: 'staus'; did you mean 'status'? (choose from ...)``."""
        choices = action.choices
        if choices is None or value in choices or not isinstance(value, str):
            super()._check_value(action, value)
            return
        from ascendpatch.manifest.schema import did_you_mean

        names = [str(c) for c in choices]
        raise argparse.ArgumentError(action, f"invalid choice: {value!r}"
                                     f"{did_you_mean(value, names)} (choose from "
                                     f"{', '.join(map(repr, names))})")

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        """As Python 3.11's argparse prints (3.10's does not): ``--help`` into a pipe whose
        reader has gone, or a closed stream, is not a crash (exit 3 with a log on 3.10); into
        a full disk, it is said at the end (shell/streams.py)."""
        if not message:
            return
        with contextlib.suppress(AttributeError, OSError):  # (stdout: guarded, streams.py)
            (file or sys.stderr).write(message)

    def error(self, message: str) -> None:  # type: ignore[override]
        from ascendpatch.shell import output

        if not _Parser.json_errors:
            self.print_usage(sys.stderr)
        command = self.prog.split(" ", 1)[1] if " " in self.prog else _Parser.command_hint
        output.error(f"{self.prog}: {message}", command=command, exit_code=EXIT_USAGE,
                     as_json=_Parser.json_errors, color=_Parser.color)
        raise SystemExit(EXIT_USAGE)


def build_parser(lazy: bool = False, *, prefetch: bool = False) -> argparse.ArgumentParser:
    """The whole parser. ``lazy``: a command's own parser is built (its module imported) only
    when the command is named on the line, which is what main wants; otherwise every
    command's is built now (completion, tests). ``prefetch``: a target named by ``--python``
    starts being inspected as the command word is read (main only, which stops it if no
    command takes it: cliargs._prefetch)."""
    parser = _Parser(prog="ascendpatch",
                     description="Patch and install manager for vllm-ascend environments.",
                     epilog=cliargs.PRECEDENCE,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"ascendpatch {__version__}")
    cliargs.global_options(parser, suppress=False)
    common = _Parser(add_help=False)
    cliargs.global_options(common, suppress=True)
    source = _Parser(add_help=False)
    cliargs.source_options(source)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser,
                                action=cliargs.Commands)
    assert isinstance(sub, cliargs.Commands)
    sub.required = True
    sub.expect(cliargs.COMMANDS, common, source, prefetch=prefetch)
    if not lazy:
        sub.load_all()
    return parser


def _dispatch(args: argparse.Namespace) -> CommandResult:
    handler: Handler = args.handler
    return handler(args)


def _options(words: list[str]) -> list[str]:
    """The words before "--" (after it comes a command line, e.g. check-launch's)."""
    return words[:words.index("--")] if "--" in words else words


def _given_color(words: list[str]) -> str:
    """--color X / --color=X among the options, for messages written before parsing ends."""
    for index, word in enumerate(words):
        if word.startswith("--color="):
            return word.split("=", 1)[1]
        if word == "--color" and index + 1 < len(words):
            return words[index + 1]
    return "auto"


class _Run:
    """What the error boundary knows of this run, to word a failure the way it was asked for:
    guessed from the words until the parser is done, then as parsed. (A plain class: the
    dataclasses module would cost `--version` its start-up time.)"""

    def __init__(self, words: list[str]) -> None:
        self.words = words
        self.command: str | None = None
        self.as_json = False
        self.color = "auto"
        self.finished = False  # the command has returned: a Ctrl-C now stops only its output


def main(argv: Sequence[str] | None = None) -> int:
    """The one error boundary (as pre-commit's error_handler): parser, command and rendering
    alike. Expected errors exit with their code and one line, bugs 3 with a log, Ctrl-C 130."""
    run = _Run(sys.argv[1:] if argv is None else list(argv))
    try:
        try:
            with streams.guarded():
                code = _guarded(run)
        except SystemExit as exc:  # argparse: --help, --version, a usage error
            if exc.code is None or isinstance(exc.code, int):
                told = streams.said(exc.code or 0, run.color)  # (--help into a full disk)
                if told != (exc.code or 0):
                    raise SystemExit(told) from None
            raise
        return streams.said(code, run.color)
    except KeyboardInterrupt:  # a second Ctrl-C while the first was answered: at once, 130
        return EXIT_INTERRUPTED


def _guarded(run: _Run) -> int:
    try:
        return _main(run)
    except AscendpatchError as exc:
        return _fail(run, str(exc), exc.exit_code, details=exc.details)
    except KeyboardInterrupt as exc:
        streams.stop_waiting()  # (an output that stopped taking more held the run)
        if streams.began():  # stdout holds part of the results: a second document would
            run.as_json = False  # make it no JSON at all; the line goes to stderr
        return _fail(run, _interrupted(run, exc), EXIT_INTERRUPTED)
    except Exception as exc:  # a bug, not a user error
        from ascendpatch.shell import crashlog

        log = crashlog.write(exc, run.words)
        return _fail(run, f"unexpected error: {type(exc).__name__}: {exc}", EXIT_UNEXPECTED,
                     log)
    finally:
        _stop_unfinished()


def entry() -> NoReturn:
    """The console script and ``python -m ascendpatch``: :func:`main`, then the process ends
    as the interpreter would end it (the output flushed, the ``atexit`` handlers run:
    coverage's data, logging's flush, ``weakref.finalize``'s clean-ups such as a
    ``TemporaryDirectory`` left open) but without tearing its modules down one object at a
    time, which took 15-20 ms of every run here (bench/README, ninth round). Whenever that is
    not the same ending (a thread the interpreter would wait for, an output that cannot be
    flushed, an exit status that is not a number), or when ascendpatch is not the program but
    runs inside another's process (``python -m cProfile``, ``trace``, ``pdb``, ``coverage
    run``: :func:`_is_the_program`), the interpreter ends it as usual."""
    caller = sys._getframe(1)
    _standard_streams()
    streams.whole_writes()
    try:
        code = main()
    except SystemExit as exc:  # argparse: --help, --version, a usage error
        if exc.code is not None and not isinstance(exc.code, int):
            raise
        code = exc.code or 0
    if not _is_the_program(caller):
        raise SystemExit(code)
    _leave(code)


def _standard_streams() -> None:
    """Descriptors 0, 1 and 2 open on /dev/null when the caller closed them (``>&-``), as a
    daemon does: Python left ``sys.stdout`` None then (a crash, exit 3, at the first flush),
    and the next file opened would have taken descriptor 1, the one every child inherits as
    its output."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                opened = os.open(os.devnull, os.O_RDWR)  # (the lowest free: this one)
            except OSError:  # (a chroot without /dev/null: left closed, as Python left it)
                return
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
    # (the process's own, never closed; what cannot be encoded is shown, not an error)
    if sys.stdin is None:
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
    if sys.stdout is None:
        sys.stdout = open(1, "w", errors="backslashreplace", closefd=False)  # noqa: SIM115
    if sys.stderr is None:
        sys.stderr = open(2, "w", errors="backslashreplace", closefd=False)  # noqa: SIM115


def _is_the_program(caller: FrameType) -> bool:
    """Whether :func:`entry` was called by the program's own main code: the console script,
    or ``python -m ascendpatch`` (through runpy, whose frames are the only ones beneath it).
    A tool that runs ascendpatch in its own process (a profiler, a debugger, a coverage run)
    has work to do after the run returns, which ``os._exit`` would cut."""
    main = sys.modules.get("__main__")
    if main is None or caller.f_globals is not vars(main):
        return False
    frame = caller.f_back
    while frame is not None:
        if frame.f_globals.get("__name__") != "runpy":
            return False
        frame = frame.f_back
    return True


def _leave(code: int) -> NoReturn:
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_handlers is None or _threads_running() or _inspect_after():
        raise SystemExit(code)
    _flush_or_fall_back(code, before_interrupt=run_exit_handlers, own=True)
    code = streams.said(code)  # (--version into a full disk: only its flush fails)
    run_exit_handlers()
    _end(code)


def _end(code: int) -> NoReturn:  # pragma: no cover - after coverage's own handler has saved
    # (what a handler printed: the handlers have run, and do not run again)
    _flush_or_fall_back(code)
    os._exit(code)


def _flush_or_fall_back(code: int, before_interrupt: Callable[[], object] = lambda: None, *,
                        own: bool = False) -> None:
    """Flush both standard streams. A flush that fails leaves the ending to the interpreter,
    which words it as it always has (status 120); a Ctrl-C while a flush waits on a reader
    that stopped reading (Ctrl-S) ends the run at once, 130, after ``before_interrupt``: what
    could not be written is dropped, with no second wait. ``own``: what the run itself wrote
    (before the exit handlers run): a stdout that cannot take it (a full disk, not a closed
    pipe) is remembered, to be said (shell/streams.py)."""
    try:
        flushed = _flushed(own)
    except KeyboardInterrupt:
        before_interrupt()
        os._exit(EXIT_INTERRUPTED)
    if not flushed:
        raise SystemExit(code)


def _flushed(own: bool = False) -> bool:
    """Whether both standard streams were flushed: none may be (a descriptor closed at the
    start), or be anything a handler put there. A Ctrl-C while a flush waits is raised."""
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                _flush(stream, own and stream is sys.stdout)
    except Exception:  # (anything: the interpreter's ending meets it again, and words it)
        return False
    return True


def _flush(stream: IO[str], remember: bool) -> None:
    try:
        stream.flush()
    except OSError as exc:
        if not remember or isinstance(exc, BrokenPipeError):
            raise
        streams.stdout_failed(exc)


def _inspect_after() -> bool:
    """``python -i`` or ``PYTHONINSPECT`` (set now, even by the run): the interpreter opens
    its prompt once the program ends, for a post-mortem."""
    return bool(sys.flags.inspect or os.environ.get("PYTHONINSPECT"))


def _threads_running() -> bool:
    """A thread the interpreter's ending would wait for (not a daemon, not this one), or a
    ``concurrent.futures`` pool it would shut down (their workers are such threads)."""
    threading = sys.modules.get("threading")  # (not imported: no thread was started by it)
    if threading is None:
        return False
    return any(thread.is_alive() and not thread.daemon and thread is not threading.main_thread()
               for thread in threading.enumerate())


def _stop_unfinished() -> None:
    """A target inspection or a reading of pip's settings still running (the parser started
    it and no command took it, or the run ended before its command waited for it) is stopped
    and reaped."""
    try:
        _stop_started_by("ascendpatch.env.introspection")
    finally:  # (a Ctrl-C while the first stops: the second is still stopped)
        _stop_started_by("ascendpatch.env.pipconfig")


def _stop_started_by(module: str) -> None:
    started = sys.modules.get(module)
    if started is not None:
        started.stop_unfinished()


def _fail(run: _Run, message: str, code: int, log: str | None = None,
          details: Sequence[str] = ()) -> int:
    from ascendpatch.shell import output

    output.error(message, command=run.command, exit_code=code, as_json=run.as_json,
                 color=run.color, log_path=log, details=details)
    return code


def _main(run: _Run) -> int:
    options = _options(run.words)
    run.as_json = _Parser.json_errors = "--json" in options
    names = {command.name for command in cliargs.COMMANDS}
    run.command = _Parser.command_hint = next((w for w in run.words if w in names), None)
    run.color = _Parser.color = _given_color(options)
    args = build_parser(lazy=True, prefetch=True).parse_args(run.words)
    run.command, run.as_json, run.color = args.command, args.json, args.color
    from ascendpatch import progress
    from ascendpatch.shell import output

    reporter = output.ConsoleReporter(color=args.color, verbose=args.verbose, quiet=args.quiet,
                                      as_json=args.json, invocation=_invocation(args))
    with progress.reporting(reporter):
        result = _dispatch(args)
    run.finished = True
    # (stdout and stderr are guarded here, main: `| head -1`, a full disk never raise)
    output.render(result, as_json=args.json, color=args.color, quiet=args.quiet,
                  streamed=True, invocation=reporter.invocation)
    sys.stdout.flush()
    return result.exit_code


def _invocation(args: argparse.Namespace) -> str:
    """How this run was pointed at its target, for the hints it prints."""
    words = ["ascendpatch"]
    if getattr(args, "python", None) is not None:
        words += ["--python", str(args.python)]
    elif getattr(args, "site_packages", None) is not None:
        words += ["--site-packages", str(args.site_packages)]
    if getattr(args, "manifest", None) is not None:
        words += ["--manifest", str(args.manifest)]
    return shlex.join(words)


def _interrupted(run: _Run, exc: KeyboardInterrupt) -> str:
    """Ctrl-C: say what really happened. After a commit point the change is in place."""
    if run.finished:
        return "interrupted while showing the results; the command itself had finished"
    if not isinstance(exc, Interrupted):
        return "interrupted; any change in progress was rolled back"
    verb = {"apply": "applied", "revert": "reverted"}.get(run.command or "", "written")
    return (f"interrupted after the commit point: {'; '.join(exc.committed)} {verb} in full, "
            f"not rolled back; run 'ascendpatch status' to see every artifact's state")
