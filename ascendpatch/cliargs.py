"""Argument definitions: shared options defined once, one small function per command.

Nothing here imports a command: each command names its handler as "module:function", imported
only when that command runs, so that `ascendpatch --version` stays fast.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


def seconds(text: str) -> float:
    """A duration: a finite number >= 0 (``nan``, ``inf`` and negatives are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds >= 0")
    return value


def folder_path(text: str) -> Path:
    """A path that must not be empty (``Path("")`` would silently mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path is not a folder; give the folder")
    return Path(text)


def global_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """--python/--site-packages/--manifest/--json/--color/--lock-timeout, before or after the
    command (the copy on each subcommand suppresses defaults so it never overrides)."""

    def dflt(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    where = parser.add_mutually_exclusive_group()
    where.add_argument("--python", type=Path, default=dflt(None), metavar="PATH",
                       help="target interpreter (default: $ASCENDPATCH_PYTHON, then the "
                            "documented candidates that have vllm-ascend)")
    where.add_argument("--site-packages", type=folder_path, default=dflt(None), metavar="DIR",
                       help="operate on a site-packages folder without running any interpreter")
    parser.add_argument("--manifest", default=dflt("default"), metavar="NAME|PATH",
                        help="bundled manifest name or YAML path (default: the bundled catalog)")
    parser.add_argument("--json", action="store_true", default=dflt(False),
                        help="one JSON document on stdout")
    parser.add_argument("--color", choices=("auto", "always", "never"), default=dflt("auto"))
    parser.add_argument("--lock-timeout", type=seconds, default=dflt(300.0), metavar="SECONDS",
                        help="how long to wait for another run's lock (default 300)")


def source_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wheelhouse", type=Path, metavar="DIR",
                        help="also look for packages in this folder (pip --find-links)")
    parser.add_argument("--offline", action="store_true",
                        help="never contact an index (pip --no-index); needs --wheelhouse")


def _ids(p: argparse.ArgumentParser) -> None:
    p.add_argument("ids", nargs="*", metavar="ID")


def _with(p: argparse.ArgumentParser, text: str = "also this optional artifact") -> None:
    p.add_argument("--with", dest="with_ids", action="append", default=[], metavar="ID",
                   help=text)


def _apply(p: argparse.ArgumentParser) -> None:
    _ids(p)
    p.add_argument("--dry-run", action="store_true",
                   help="show what would change; exit 1 if anything would")
    p.add_argument("--force", action="store_true",
                   help="overwrite files ascendpatch does not recognise (keeps a backup)")
    _with(p)


def _plan(p: argparse.ArgumentParser) -> None:
    _ids(p)
    _with(p)


def _verify(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-probes", action="store_true",
                   help="skip the operator probes (no subprocess of the target)")
    p.add_argument("--probe-timeout", type=seconds, default=120.0, metavar="SECONDS")
    p.add_argument("--serve-log", type=Path, metavar="FILE",
                   help="also check a vLLM serve log for the markers the manifest needs")
    _with(p, "also expect this optional artifact to be applied")


def _snapshot(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE")
    p.add_argument("--all-files", action="store_true",
                   help="hash every installed file, not only the stack's packages")


def _audit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baseline", type=Path, metavar="FILE",
                   help="also report packages changed since this snapshot")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="hashing threads (default: one per CPU)")


def _diff(p: argparse.ArgumentParser) -> None:
    p.add_argument("first", type=Path, metavar="A.json")
    p.add_argument("second", type=Path, metavar="B.json")


def _install(p: argparse.ArgumentParser) -> None:
    p.add_argument("reqs", nargs="*", metavar="REQ")
    p.add_argument("--dry-run", action="store_true",
                   help="print the change set; exit 1 if it is not empty")
    p.add_argument("--lock", type=Path, metavar="FILE",
                   help="install a lock written by 'ascendpatch lock' (--require-hashes)")


def _output(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE")


def _folder(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", type=Path, metavar="DIR")


def _bundle(p: argparse.ArgumentParser) -> None:
    _folder(p)
    p.add_argument("--platform", metavar="TAG",
                   help="wheels for another platform, e.g. manylinux2014_aarch64 (binary only)")
    p.add_argument("--python-version", metavar="X.Y",
                   help="wheels for another Python version, e.g. 3.11 (binary only)")


def _sandbox(p: argparse.ArgumentParser) -> None:
    _folder(p)
    p.add_argument("--vllm-ascend", default="0.18.0", metavar="VERSION")


def _logs(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", type=Path, metavar="FILE")
    _with(p, "also require the markers of this optional artifact")


def _smoke(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", required=True, metavar="http://HOST:PORT")
    p.add_argument("--model", metavar="ID", help="the model id clients will ask for")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                   help="bounds each whole request, body included (default 120)")
    p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                   help="first wait up to SECONDS for GET /v1/models to answer 200")


def _launch(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, metavar="deploy.yaml")
    p.add_argument("--model-dir", type=Path, metavar="DIR",
                   help="the model folder (default: the one the command names)")
    p.add_argument("serve", nargs=argparse.REMAINDER, metavar="-- COMMAND")


def _stop(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument("--pidfile", type=Path, metavar="FILE")
    which.add_argument("--pid", type=int, metavar="N")
    p.add_argument("--grace", type=float, default=5.0, metavar="SECONDS")
    p.add_argument("--all-vllm", action="store_true",
                   help="also stop every vLLM process of this user, even with a live parent "
                        "(default: only the server's own and re-parented ones)")
    p.add_argument("--force-user", action="store_true",
                   help="also signal processes of other users (refused by default)")


def _capture(p: argparse.ArgumentParser) -> None:
    p.add_argument("dist", metavar="DIST")
    p.add_argument("--id", dest="artifact_id", metavar="ID")
    p.add_argument("--output", type=Path, metavar="FILE", help="the patch (default ID.patch)")
    p.add_argument("--manifest-out", type=Path, metavar="FILE",
                   help="add or update the artifact in this manifest")


def _port(p: argparse.ArgumentParser) -> None:
    p.add_argument("artifact_id", metavar="ID")
    p.add_argument("--to", required=True, metavar="VERSION")
    p.add_argument("--from", dest="start", metavar="VERSION",
                   help="the variant to port (default: the one covering --to, else newest)")
    p.add_argument("--write", action="store_true",
                   help="write the patch and the manifest variant when every hunk applies")


def _catalog_check(p: argparse.ArgumentParser) -> None:
    p.add_argument("versions", nargs="*", metavar="VERSION",
                   help="default: every release (wheel or sdist) on the index (or wheelhouse)")
    p.add_argument("--markdown", type=Path, metavar="FILE")
    p.add_argument("--new", action="store_true",
                   help="only the releases newer than the catalog, each with a verdict "
                        "decided by content (a weekly maintainer check)")


def _fleet_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("snapshots", nargs="+", type=Path, metavar="SNAPSHOT",
                   help="snapshot files (HOST.json) or folders of them")
    p.add_argument("--baseline", type=Path, metavar="FILE",
                   help="compare with this snapshot (default: the majority per package/patch)")
    p.add_argument("--hosts", type=Path, metavar="FILE",
                   help="every host expected, one per line: those without a snapshot are missing")
    p.add_argument("-o", "--output", type=Path, metavar="report.html",
                   help="also write a self-contained HTML page")


def _nothing(p: argparse.ArgumentParser) -> None:
    del p


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    handler: str  # "module:function", imported when the command runs
    configure: Callable[[argparse.ArgumentParser], None]
    source: bool = False  # takes --wheelhouse / --offline


_C = "ascendpatch.commands."
COMMANDS = (
    Command("apply", "apply artifacts (idempotent)", _C + "apply:from_args", _apply),
    Command("plan", "what apply would do, with diffs", _C + "plan:from_args", _plan),
    Command("revert", "restore the original files", _C + "revert:from_args", _ids),
    Command("status", "each artifact and file's state", _C + "status:from_args", _ids),
    Command("verify", "read-only check of pins, patches, dependencies, probes, env",
            _C + "verify:from_args", _verify),
    Command("install", "install the stack's pins and REQs without touching torch",
            _C + "install:from_args", _install, source=True),
    Command("lock", "compile the manifest's stack into a hashed lock (pip-tools)",
            _C + "lock:from_args", _output, source=True),
    Command("snapshot", "write a JSON record of the target", _C + "snapshot:from_args",
            _snapshot),
    Command("audit", "check every installed file against its RECORD", _C + "audit:from_args",
            _audit),
    Command("diff", "compare two snapshots", _C + "snapshot:diff_from_args", _diff),
    Command("sandbox", "a throwaway target: real vllm-ascend wheel + stand-ins",
            _C + "sandbox:from_args", _sandbox, source=True),
    Command("bundle", "build a wheelhouse of ascendpatch for offline hosts",
            _C + "bundle:from_args", _bundle),
    Command("logs", "triage serve logs: known-benign, known faults, unknown",
            _C + "logs:from_args", _logs),
    Command("smoke", "GET /v1/models, then one chat completion with top_p=0.9",
            _C + "smoke:from_args", _smoke),
    Command("check-launch", "check a vllm serve command line and/or a deploy config",
            _C + "launch:from_args", _launch),
    Command("stop", "stop a server: TERM its group, wait, KILL, then leftovers",
            _C + "stop:from_args", _stop),
    Command("capture", "turn edits of an installed distribution into a patch",
            _C + "capture:from_args", _capture, source=True),
    Command("port", "check (and --write) a diff artifact against another release",
            _C + "port:from_args", _port, source=True),
    Command("catalog-check", "matrix of diff artifacts x releases",
            _C + "port:catalog_from_args", _catalog_check, source=True),
    Command("fleet-report", "drift of many hosts' snapshots against a baseline",
            _C + "fleet:from_args", _fleet_report),
    Command("manifests", "list the bundled manifests", _C + "manifests:from_args", _nothing),
)
