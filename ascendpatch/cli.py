"""The thin CLI: parse arguments, build a Context, call a typed command, render, exit.

This module imports almost nothing at start-up so that ``ascendpatch --version`` stays fast;
commands and their dependencies are imported when a command runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ascendpatch import __version__
from ascendpatch.errors import (
    EXIT_INTERRUPTED,
    EXIT_UNEXPECTED,
    EXIT_USAGE,
    AscendpatchError,
)

if TYPE_CHECKING:
    from ascendpatch.commands.context import Context
    from ascendpatch.results import CommandResult


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"[FAIL] {self.prog}: {message}\n")
        raise SystemExit(EXIT_USAGE)


def _global_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    default = argparse.SUPPRESS if suppress else None

    def dflt(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    where = parser.add_mutually_exclusive_group()
    where.add_argument("--python", type=Path, default=default, metavar="PATH",
                       help="target interpreter (default: $ASCENDPATCH_PYTHON, then the "
                            "documented candidates that have vllm-ascend)")
    where.add_argument("--site-packages", type=Path, default=default, metavar="DIR",
                       help="operate on a site-packages folder without running any interpreter")
    parser.add_argument("--manifest", default=dflt("default"), metavar="NAME|PATH",
                        help="bundled manifest name or YAML path (default: the bundled catalog)")
    parser.add_argument("--json", action="store_true", default=dflt(False),
                        help="one JSON document on stdout")
    parser.add_argument("--color", choices=("auto", "always", "never"), default=dflt("auto"))
    parser.add_argument("--lock-timeout", type=float, default=dflt(300.0), metavar="SECONDS",
                        help="how long to wait for another run's lock (default 300)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ascendpatch",
                     description="Patch and install manager for vllm-ascend environments.")
    parser.add_argument("--version", action="version", version=f"ascendpatch {__version__}")
    _global_options(parser, suppress=False)
    common = _Parser(add_help=False)
    _global_options(common, suppress=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    apply = sub.add_parser("apply", parents=[common], help="apply artifacts (idempotent)")
    apply.add_argument("ids", nargs="*", metavar="ID")
    apply.add_argument("--dry-run", action="store_true", help="show what would change; exit 1 "
                                                              "if anything would")
    apply.add_argument("--force", action="store_true",
                       help="overwrite files ascendpatch does not recognise (keeps a backup)")
    apply.add_argument("--with", dest="with_ids", action="append", default=[], metavar="ID",
                       help="also apply this optional (disabled by default) artifact")

    plan = sub.add_parser("plan", parents=[common], help="what apply would do, with diffs")
    plan.add_argument("ids", nargs="*", metavar="ID")
    plan.add_argument("--with", dest="with_ids", action="append", default=[], metavar="ID")

    revert = sub.add_parser("revert", parents=[common], help="restore the original files")
    revert.add_argument("ids", nargs="*", metavar="ID")

    status = sub.add_parser("status", parents=[common], help="each artifact and file's state")
    status.add_argument("ids", nargs="*", metavar="ID")

    verify = sub.add_parser("verify", parents=[common],
                            help="read-only check of pins, patches, dependencies, probes, env")
    verify.add_argument("--no-probes", action="store_true",
                        help="skip the operator probes (no subprocess of the target)")
    verify.add_argument("--probe-timeout", type=float, default=120.0, metavar="SECONDS")
    verify.add_argument("--serve-log", type=Path, metavar="FILE",
                        help="also check a vLLM serve log for the markers the manifest needs")
    verify.add_argument("--with", dest="with_ids", action="append", default=[], metavar="ID",
                        help="also expect this optional artifact to be applied")

    snap = sub.add_parser("snapshot", parents=[common], help="write a JSON record of the target")
    snap.add_argument("-o", "--output", type=Path, required=True, metavar="FILE")
    snap.add_argument("--all-files", action="store_true",
                      help="hash every installed file, not only the stack's packages")

    audit = sub.add_parser("audit", parents=[common],
                           help="check every installed file against its RECORD")
    audit.add_argument("--baseline", type=Path, metavar="FILE",
                       help="also report packages changed since this snapshot")
    audit.add_argument("--workers", type=int, default=None, metavar="N",
                       help="hashing threads (default: one per CPU)")

    diff = sub.add_parser("diff", parents=[common], help="compare two snapshots")
    diff.add_argument("first", type=Path, metavar="A.json")
    diff.add_argument("second", type=Path, metavar="B.json")

    source = _Parser(add_help=False)
    source.add_argument("--wheelhouse", type=Path, metavar="DIR",
                        help="also look for packages in this folder (pip --find-links)")
    source.add_argument("--offline", action="store_true",
                        help="never contact an index (pip --no-index); needs --wheelhouse")

    install = sub.add_parser("install", parents=[common, source],
                             help="install the stack's pins and REQs without touching torch")
    install.add_argument("reqs", nargs="*", metavar="REQ")
    install.add_argument("--dry-run", action="store_true",
                         help="print the change set; exit 1 if it is not empty")
    install.add_argument("--lock", type=Path, metavar="FILE",
                         help="install a lock written by 'ascendpatch lock' (--require-hashes)")

    lock = sub.add_parser("lock", parents=[common, source],
                          help="compile the manifest's stack into a hashed lock (pip-tools)")
    lock.add_argument("-o", "--output", type=Path, required=True, metavar="FILE")

    bundle = sub.add_parser("bundle", help="build a wheelhouse of ascendpatch for offline hosts")
    bundle.add_argument("folder", type=Path, metavar="DIR")
    bundle.add_argument("--json", action="store_true", default=False)
    bundle.add_argument("--color", choices=("auto", "always", "never"), default="auto")

    sandbox = sub.add_parser("sandbox", parents=[source],
                             help="a throwaway target: real vllm-ascend wheel + stand-ins")
    sandbox.add_argument("folder", type=Path, metavar="DIR")
    sandbox.add_argument("--vllm-ascend", default="0.18.0", metavar="VERSION")
    sandbox.add_argument("--json", action="store_true", default=False)
    sandbox.add_argument("--color", choices=("auto", "always", "never"), default="auto")

    logs = sub.add_parser("logs", parents=[common],
                          help="triage serve logs: known-benign, known faults, unknown")
    logs.add_argument("files", nargs="+", type=Path, metavar="FILE")
    logs.add_argument("--with", dest="with_ids", action="append", default=[], metavar="ID",
                      help="also require the markers of this optional artifact")

    smoke = sub.add_parser("smoke", parents=[common],
                           help="GET /v1/models, then one chat completion with top_p=0.9")
    smoke.add_argument("--url", required=True, metavar="http://HOST:PORT")
    smoke.add_argument("--model", metavar="ID", help="the model id clients will ask for")
    smoke.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS")

    launch = sub.add_parser("check-launch", parents=[common],
                            help="check a vllm serve command line and/or a deploy config")
    launch.add_argument("--config", type=Path, metavar="deploy.yaml")
    launch.add_argument("--model-dir", type=Path, metavar="DIR",
                        help="the model folder (default: the one the command names)")
    launch.add_argument("serve", nargs=argparse.REMAINDER, metavar="-- COMMAND")

    stop = sub.add_parser("stop", parents=[common],
                          help="stop a server: TERM its group, wait, KILL, then leftovers")
    which = stop.add_mutually_exclusive_group()
    which.add_argument("--pidfile", type=Path, metavar="FILE")
    which.add_argument("--pid", type=int, metavar="N")
    stop.add_argument("--grace", type=float, default=5.0, metavar="SECONDS")

    capture = sub.add_parser("capture", parents=[common, source],
                             help="turn edits of an installed distribution into a patch")
    capture.add_argument("dist", metavar="DIST")
    capture.add_argument("--id", dest="artifact_id", metavar="ID")
    capture.add_argument("--output", type=Path, metavar="FILE", help="the patch (default ID.patch)")
    capture.add_argument("--manifest-out", type=Path, metavar="FILE",
                         help="add or update the artifact in this manifest")

    port = sub.add_parser("port", parents=[common, source],
                          help="check (and --write) a diff artifact against another release")
    port.add_argument("artifact_id", metavar="ID")
    port.add_argument("--to", required=True, metavar="VERSION")
    port.add_argument("--from", dest="start", metavar="VERSION",
                      help="the variant to port (default: the one covering --to, else newest)")
    port.add_argument("--write", action="store_true",
                      help="write the patch and the manifest variant when every hunk applies")

    check = sub.add_parser("catalog-check", parents=[common, source],
                           help="matrix of diff artifacts x releases")
    check.add_argument("versions", nargs="*", metavar="VERSION",
                       help="default: every release with wheels on the index (or wheelhouse)")
    check.add_argument("--markdown", type=Path, metavar="FILE")

    sub.add_parser("manifests", parents=[common], help="list the bundled manifests")
    return parser


def _target(args: argparse.Namespace, preferred: Sequence[str]) -> object:
    from ascendpatch import discover, target

    if args.site_packages is not None:
        return target.from_site_packages(args.site_packages)
    if args.python is not None:
        return target.from_python(args.python)
    return discover.find_target(os.environ, preferred=preferred)


def _context(args: argparse.Namespace) -> Context:
    from ascendpatch import output
    from ascendpatch.commands.context import Context
    from ascendpatch.manifest import loader
    from ascendpatch.target import Target

    manifest = loader.load(args.manifest)
    tgt = _target(args, manifest.target.get("python") or ())
    assert isinstance(tgt, Target)
    color = args.color
    return Context(target=tgt, manifest=manifest, env=dict(os.environ),
                   lock_timeout=args.lock_timeout,
                   on_wait=lambda msg: output.progress(msg, color=color),
                   enabled_extra=tuple(getattr(args, "with_ids", ())))


def _dispatch(args: argparse.Namespace) -> CommandResult:
    command: str = args.command
    if command == "manifests":
        from ascendpatch.commands import manifests

        return manifests.run()
    if command == "diff":
        from ascendpatch.commands import snapshot

        return snapshot.diff(args.first, args.second)
    if command == "bundle":
        from ascendpatch.commands import bundle

        return bundle.run(args.folder)
    if command in ("smoke", "check-launch", "stop", "logs"):
        return _deploy(args)
    if command in ("port", "catalog-check"):
        return _port(args)
    if command == "sandbox":
        from ascendpatch.commands import sandbox
        from ascendpatch.pipadapter import Source

        source = _source(args)
        assert isinstance(source, Source)
        return sandbox.run(args.folder, args.vllm_ascend, source)
    ctx = _context(args)
    runners: dict[str, Callable[[], CommandResult]] = {
        "apply": lambda: _apply(ctx, args),
        "plan": lambda: _plan(ctx, args),
        "revert": lambda: _revert(ctx, args),
        "status": lambda: _status(ctx, args),
        "verify": lambda: _verify(ctx, args),
        "snapshot": lambda: _snapshot(ctx, args),
        "audit": lambda: _audit(ctx, args),
        "install": lambda: _install(ctx, args),
        "lock": lambda: _lock(ctx, args),
        "capture": lambda: _capture(ctx, args),
    }
    return runners[command]()


def _apply(ctx: Context, args: argparse.Namespace) -> CommandResult:
    from ascendpatch.commands import apply

    return apply.run(ctx, args.ids, dry_run=args.dry_run, force=args.force)


def _plan(ctx: Context, args: argparse.Namespace) -> CommandResult:
    from ascendpatch.commands import plan

    return plan.run(ctx, args.ids)


def _revert(ctx: Context, args: argparse.Namespace) -> CommandResult:
    from ascendpatch.commands import revert

    return revert.run(ctx, args.ids)


def _status(ctx: Context, args: argparse.Namespace) -> CommandResult:
    from ascendpatch.commands import status

    return status.run(ctx, args.ids)


def _verify(ctx: Context, args: argparse.Namespace) -> CommandResult:
    from ascendpatch.commands import verify

    return verify.run(ctx, no_probes=args.no_probes, serve_log=args.serve_log,
                      probe_timeout=args.probe_timeout)


def _snapshot(ctx: Context, args: argparse.Namespace) -> CommandResult:
    from ascendpatch.commands import snapshot

    return snapshot.run(ctx, args.output, all_files=args.all_files)


def _audit(ctx: Context, args: argparse.Namespace) -> CommandResult:
    from ascendpatch.commands import audit

    return audit.run(ctx, baseline=args.baseline, workers=args.workers)


def _deploy(args: argparse.Namespace) -> CommandResult:
    """Deployment self-checks: they need no target environment."""
    command: str = args.command
    if command == "smoke":
        from ascendpatch.commands import smoke

        return smoke.run(args.url, args.model, args.timeout)
    if command == "check-launch":
        from ascendpatch.commands import launch

        serve = [a for a in args.serve if a != "--"] if args.serve else []
        return launch.run(serve, args.model_dir, args.config)
    if command == "stop":
        from ascendpatch.commands import stop

        return stop.run(args.pidfile, args.pid, args.grace)
    from ascendpatch.commands import logs
    from ascendpatch.manifest import loader

    return logs.run(loader.load(args.manifest), args.files, tuple(args.with_ids))


def _port(args: argparse.Namespace) -> CommandResult:
    """Porting works on releases from the index or a wheelhouse: no target needed."""
    from ascendpatch.commands import port
    from ascendpatch.manifest import loader
    from ascendpatch.pipadapter import Source

    manifest = loader.load(args.manifest)
    source = _source(args)
    assert isinstance(source, Source)
    if args.command == "port":
        return port.run(manifest, args.artifact_id, args.to, source, start=args.start,
                        write=args.write)
    return port.catalog_check(manifest, args.versions, source, args.markdown)


def _capture(ctx: Context, args: argparse.Namespace) -> CommandResult:
    from ascendpatch.commands import capture
    from ascendpatch.pipadapter import Source

    source = _source(args)
    assert isinstance(source, Source)
    return capture.run(ctx, args.dist, args.artifact_id, args.output, args.manifest_out, source)


def _source(args: argparse.Namespace) -> object:
    from ascendpatch.pipadapter import Source

    return Source(wheelhouse=args.wheelhouse, offline=args.offline)


def _install(ctx: Context, args: argparse.Namespace) -> CommandResult:
    from ascendpatch.commands import install
    from ascendpatch.pipadapter import Source

    source = _source(args)
    assert isinstance(source, Source)
    return install.run(ctx, args.reqs, dry_run=args.dry_run, source=source, lock=args.lock)


def _lock(ctx: Context, args: argparse.Namespace) -> CommandResult:
    from ascendpatch.commands import lock
    from ascendpatch.pipadapter import Source

    source = _source(args)
    assert isinstance(source, Source)
    return lock.run(ctx, args.output, source)


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
        sys.stderr.write("[FAIL] interrupted; any change in progress was rolled back\n")
        return EXIT_INTERRUPTED
    except Exception as exc:  # the error boundary: a bug, not a user error
        from ascendpatch import crashlog, output

        log = crashlog.write(exc, argv if argv is not None else sys.argv[1:])
        output.error(f"unexpected error: {type(exc).__name__}: {exc}", command=args.command,
                     exit_code=EXIT_UNEXPECTED, as_json=as_json, color=color, log_path=log)
        return EXIT_UNEXPECTED
    from ascendpatch import output

    output.render(result, as_json=as_json, color=color, show_diff=args.command == "plan")
    return result.exit_code
