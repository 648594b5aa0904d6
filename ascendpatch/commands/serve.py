"""``ascendpatch serve [--pidfile F] [--log F] [--ready-timeout S] [--smoke] [--foreground]
[--force] -- vllm serve MODEL ARGS...``: one guarded launch, from pre-flight to a verified,
stoppable server.

It composes the verbs that check a launch (check-launch's rules on the exact command line,
verify's checks that decide whether this server will work, in the child's environment),
triage a death (logs) and send the request that used to kill EngineCore (smoke): their ``run``
functions, not their command lines (test_layout allows serve that and no other verb).
"""

from __future__ import annotations

import contextlib
import sys
from argparse import ArgumentParser, Namespace
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ascendpatch import progress
from ascendpatch.commands import check_launch, context, logs, smoke, verify
from ascendpatch.commands.context import Context
from ascendpatch.deploy import serve_env, serve_start, serve_supervise
from ascendpatch.deploy import smoke as smoke_http
from ascendpatch.deploy.text import printable
from ascendpatch.errors import InvalidInputError
from ascendpatch.inspect.checks.registry import CHECKS
from ascendpatch.redact import argv as redacted_argv
from ascendpatch.results import CheckResult, CommandResult, Hint, Item, Level, Phrase
from ascendpatch.shell import cliargs
from ascendpatch.store.atomic import remove

# verify's checks that decide whether this server works: pins, patch states, CANN / ATB,
# required env and what each kind adds (the adapter's registry entry, the SmoothQuant pair).
# Not the pip metadata consistency (deps) nor the operator probe: the start itself imports.
PREFLIGHT = frozenset({"pins", "artifacts", "host", "cann", "env", "kinds", "requires_env"})
READY_TIMEOUT = 1800.0  # the first SmoothQuant TP2 start compiles for minutes


@dataclass(frozen=True)
class Options:
    pidfile: Path | None = None
    log: Path | None = None
    ready_timeout: float = READY_TIMEOUT
    smoke: bool = False
    foreground: bool = False
    force: bool = False


class Lines:
    """The results of this run, each shown as soon as it is final (a foreground run lasts as
    long as the server)."""

    def __init__(self) -> None:
        self.items: list[Item] = []

    def add(self, *items: Item) -> None:
        for item in items:
            progress.item(item)
            self.items.append(item)

    def result(self, summary: str, code: int | None = None) -> CommandResult:
        return CommandResult("serve", tuple(self.items), summary=summary, streamed=True,
                             exit_code_override=code)


def _set_env_paths(ctx: Context) -> list[str]:
    declared = ctx.manifest.launch.get("set_env") or []
    if not isinstance(declared, list) or not all(isinstance(p, str) for p in declared):
        raise InvalidInputError(f"manifest {ctx.manifest.name}: launch.set_env must be a list "
                                "of paths")
    return declared


def environment(ctx: Context) -> tuple[serve_env.ServeEnv, CheckResult]:
    built = serve_env.build(ctx.env, _set_env_paths(ctx), ctx.manifest.env)
    sourced = ", ".join(map(str, built.sourced)) or "no set_env.sh found"
    added = "; ".join(built.shown_additions()) or "nothing"
    removed = f"; unset {', '.join(built.removed)}" if built.removed else ""
    dropped = (f"; dropped empty or relative search-path entries (the current folder): "
               f"{printable(', '.join(built.dropped))}" if built.dropped else "")
    return built, CheckResult("env", "serve", Level.OK,
                              f"child environment: sourced {sourced}; added or changed: "
                              f"{added}{removed}{dropped}")


def preflight(ctx: Context, argv: Sequence[str]) -> list[CheckResult]:
    """check-launch's rules on ``argv`` and verify's deciding checks, in ``ctx.env``."""
    target = ctx.target
    launch = check_launch.run(argv, None, None,
                              lambda: check_launch.installed_vllm_ascend(target),
                              lambda a: check_launch.vllm_parsing(target, a))
    shared = verify.facts(ctx, no_probes=True)
    checks = [r for check in CHECKS if check.name in PREFLIGHT for r in check.run(shared)]
    return [r for r in launch.results if isinstance(r, CheckResult)] + checks


def _forced(results: list[CheckResult]) -> list[CheckResult]:
    return [replace(r, level=Level.WARN, message=f"(--force) {r.message}")
            if r.level is Level.FAIL else r for r in results]


def _files(options: Options, port: int, env: dict[str, str]) -> tuple[Path, Path]:
    if options.pidfile is not None and options.log is not None:
        return options.pidfile, options.log
    folder = serve_start.private_dir(serve_start.runtime_dir(env))
    return (options.pidfile or folder / f"serve-{port}.pid",
            options.log or folder / f"serve-{port}.log")


def _death(ctx: Context, log: Path, outcome: serve_start.Outcome) -> list[CheckResult]:
    """The logs triage of a start that ended: the faults (cause and fix), else the last line."""
    triage = logs.run(ctx.manifest, [log])
    found = [r for r in triage.results if isinstance(r, CheckResult)
             and r.id.startswith(("fault:", "crash"))]
    what = (f"vllm serve exited with code {outcome.exit_code} after {outcome.seconds:.0f} s, "
            "before it was ready" if outcome.exit_code is not None else
            f"the start could not be watched: {outcome.unwatched}" if outcome.unwatched else
            f"vllm serve was not ready after {outcome.seconds:.0f} s (--ready-timeout)")
    head = CheckResult("start", "serve", Level.FAIL,
                       f"{what}; last log line: {outcome.stage or 'none'}; everything it started "
                       f"was stopped (log: {printable(str(log))})",
                       fix="" if found else Phrase("read the log: ", Hint(("logs", str(log)))))
    return [head, *found]


@contextlib.contextmanager
def _supervisor(foreground: bool) -> Iterator[serve_supervise.Forwarder | None]:
    if not foreground:
        yield None
        return
    serve_supervise.become_subreaper()
    with serve_supervise.Forwarder().installed() as forwarder:
        yield forwarder


def _start(ctx: Context, argv: Sequence[str], env: dict[str, str], options: Options,
           lines: Lines) -> CommandResult:
    port = serve_start.port_of(argv)
    pidfile, log = _files(options, port, env)
    running = serve_start.running_pid(pidfile)
    if running is not None:
        raise InvalidInputError(f"--pidfile {pidfile} names PID {running}, a vLLM server that "
                                "is running: not starting a second one",
                                fix=Phrase(Hint(("stop", "--pidfile", str(pidfile))),
                                           " first"))
    endpoint = smoke_http.Endpoint("http", serve_start.host_of(argv), port, "")
    with _supervisor(options.foreground) as forwarder:
        echo = sys.stdout.fileno() if options.foreground else None
        process = serve_start.spawn(argv, env, log, echo)
        reaper = serve_supervise.Reaper(process) if forwarder else (lambda: None)
        if forwarder is not None:
            forwarder.group = process.pid
        serve_start.write_pidfile(pidfile, process.pid)
        lines.add(CheckResult("started", "serve", Level.OK,
                              f"started PID {process.pid} (its own session and process group; "
                              f"pid file {pidfile}, log {log}): "
                              f"{printable(' '.join(redacted_argv(argv)))}"))
        outcome = serve_start.wait_ready(process, log, endpoint, options.ready_timeout, reaper)
        if not outcome.ready and (forwarder is None or forwarder.received is None):
            serve_start.stop_group(process, reap=reaper)
            if forwarder is not None:
                forwarder.group = None  # reaped: its id may be another group's now
            serve_start.echo_done(process)  # (its last words before ours)
            with contextlib.suppress(OSError):
                remove(pidfile)
            lines.add(*_death(ctx, log, outcome))
            return lines.result("serve: the server did not start; nothing is left running", 1)
        if outcome.ready:
            _ready(endpoint, options, outcome, pidfile, lines)
        if forwarder is None:
            return lines.result(f"serve: ready on {endpoint.shown()} (PID {process.pid})")
        assert isinstance(reaper, serve_supervise.Reaper)
        code, left = serve_supervise.supervise(process, reaper)
        forwarder.group = None  # reaped: its id may be another group's now
        serve_start.echo_done(process)  # (its last words before ours)
        with contextlib.suppress(OSError):
            remove(pidfile)
    stopped = ", ".join(f"PID {p.pid} ({p.title})" for p in left) or "none"
    lines.add(CheckResult("exited", "serve", Level.OK if code == 0 else Level.WARN,
                          f"the API server exited with code {code}; leftovers of its group "
                          f"stopped: {stopped}"))
    return lines.result(f"serve: the server exited with code {code}; nothing is left running",
                        code)


def _ready(endpoint: smoke_http.Endpoint, options: Options, outcome: serve_start.Outcome,
           pidfile: Path, lines: Lines) -> None:
    lines.add(CheckResult("ready", "serve", Level.OK,
                          f"ready after {outcome.seconds:.0f} s: Application startup complete, "
                          f"GET {endpoint.shown()}/v1/models answers",
                          fix="" if options.foreground else
                          Phrase("stop it with: ", Hint(("stop", "--pidfile", str(pidfile))))))
    if options.smoke:
        lines.add(*smoke.run(endpoint.shown(), None, 120.0).results)


def run(ctx: Context, argv: Sequence[str], options: Options = Options()) -> CommandResult:
    if not argv:
        raise InvalidInputError("nothing to serve: give the command after --",
                                fix="e.g. serve -- vllm serve /models/m --port 8000")
    if not options.ready_timeout > 0:
        raise InvalidInputError("--ready-timeout must be above 0 seconds")
    lines = Lines()
    built, env_line = environment(ctx)
    lines.add(env_line)
    checks = preflight(replace(ctx, env=built.env), argv)
    failed = sum(1 for r in checks if r.level is Level.FAIL)
    if failed and not options.force:
        lines.add(*checks)
        return lines.result(f"serve: refused: {failed} pre-flight problem(s); nothing was "
                            "started (fix them, or --force to start anyway)", 1)
    lines.add(*_forced(checks))
    return _start(ctx, argv, built.env, options, lines)


def from_args(args: Namespace) -> CommandResult:
    argv = list(args.serve[1:] if args.serve[:1] == ["--"] else args.serve)
    options = Options(args.pidfile, args.log, args.ready_timeout, args.smoke, args.foreground,
                      args.force)
    return run(context.from_args(args), argv, options)


def configure(p: ArgumentParser) -> None:
    p.add_argument("--pidfile", type=cliargs.path, metavar="FILE",
                   help="where the server's PID goes (default: $XDG_RUNTIME_DIR/ascendpatch/ or "
                        "/run/ascendpatch/serve-PORT.pid)")
    p.add_argument("--log", type=cliargs.path, metavar="FILE",
                   help="the server's stdout and stderr (default: serve-PORT.log next to the "
                        "pid file)")
    p.add_argument("--ready-timeout", type=cliargs.seconds, default=READY_TIMEOUT,
                   metavar="SECONDS",
                   help=f"how long the start may take (default {READY_TIMEOUT:g}: the first "
                        "start compiles for minutes)")
    p.add_argument("--smoke", action="store_true",
                   help="once ready, send the top_p=0.9 chat request of smoke")
    p.add_argument("--foreground", action="store_true",
                   help="stay: output to the terminal too, TERM/INT forwarded to the server's "
                        "group, children reaped (a container's PID 1), leftovers stopped, the "
                        "server's exit code")
    p.add_argument("--force", action="store_true",
                   help="start even when a pre-flight check fails")
    cliargs.serve_command(p)


COMMAND = cliargs.CommandSpec(
    name="serve",
    help="pre-flight, start vllm serve, wait until ready (--smoke, --foreground)",
    description=("Check the launch (check-launch's rules, verify's deciding checks), start "
                 "vllm serve with the CANN / ATB set_env.sh sourced into its environment only, "
                 "its PID in a pid file, wait for Application startup complete and /v1/models; "
                 "a death before that is triaged from the log. ASCENDPATCH_SERVE_ROOT (tests "
                 "and sandboxes only) moves the standard set_env.sh locations under a folder."),
    example="ascendpatch serve --smoke -- vllm serve /models/m --port 8000",
    run=from_args, configure=configure,
)
