"""Argument definitions: shared options defined once, one small function per command.

Nothing here imports a command module at start-up: each command refers to a Handler object whose
loader imports its module only when the command runs, so that `ascendpatch --version` stays
fast. The loaders are real import statements (mypy checks the module, the function and its
signature) and the table names Handler objects, not "module:function" strings, so a misspelt
name fails when this module is imported; tests/test_cli.py loads every handler.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from pathlib import Path

    from ascendpatch.results import CommandResult


def path(text: str) -> Path:
    """A path argument. pathlib (like dataclasses) is imported when an argument needs it, not at
    every start-up: `ascendpatch --version` imports neither."""
    from pathlib import Path

    return Path(text)



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
    return path(text)


def global_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """--python/--site-packages/--manifest/--json/--color/--lock-timeout, before or after the
    command (the copy on each subcommand suppresses defaults so it never overrides)."""

    def dflt(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    where = parser.add_mutually_exclusive_group()
    where.add_argument("--python", type=path, default=dflt(None), metavar="PATH",
                       help="target interpreter (default: $ASCENDPATCH_PYTHON, then the "
                            "documented candidates that have vllm-ascend)")
    where.add_argument("--site-packages", type=folder_path, default=dflt(None), metavar="DIR",
                       help="operate on a site-packages folder without running any interpreter")
    parser.add_argument("--manifest", default=dflt("default"), metavar="NAME|PATH",
                        help="bundled manifest name or YAML path (default: the bundled catalog)")
    parser.add_argument("--json", action="store_true", default=dflt(False),
                        help="one JSON document on stdout")
    parser.add_argument("--color", choices=("auto", "always", "never"), default=dflt("auto"),
                        help="colour and progress on stderr: auto = only on a terminal "
                             "(NO_COLOR / FORCE_COLOR are honoured), always, never")
    parser.add_argument("--lock-timeout", type=seconds, default=dflt(300.0), metavar="SECONDS",
                        help="how long to wait for another run's lock (default 300)")
    parser.add_argument("-v", "--verbose", action="store_true", default=dflt(False),
                        help="also show the pip / pip-compile command lines and their output")
    parser.add_argument("-q", "--quiet", action="store_true", default=dflt(False),
                        help="show only problems ([FAIL] and [WARN] lines)")


def source_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wheelhouse", type=path, metavar="DIR",
                        help="also look for packages in this folder (pip --find-links)")
    parser.add_argument("--offline", action="store_true",
                        help="never contact an index (pip --no-index); needs --wheelhouse")


def output_file(value: str) -> Path:
    """-o FILE: "-" is stdout; a missing parent folder is invalid input (exit 2), never a crash."""
    given = path(value)
    if value != "-" and not given.parent.is_dir():
        raise argparse.ArgumentTypeError(f"folder {given.parent} does not exist; create it "
                                         f"first: mkdir -p {given.parent}")
    return given


def file_in_a_folder(value: str) -> Path:
    """--markdown / --output FILE (no stdout form): its folder must exist (else exit 2)."""
    if value == "-":
        raise argparse.ArgumentTypeError("this option writes a file; '-' (stdout) is not "
                                         "supported here")
    return output_file(value)


def _ids(p: argparse.ArgumentParser) -> None:
    p.add_argument("ids", nargs="*", metavar="ID",
                   help="artifact ids from the manifest (default: every enabled artifact)")


def _revert(p: argparse.ArgumentParser) -> None:
    p.add_argument("ids", nargs="*", metavar="ID",
                   help="artifact ids from the manifest (default: every applied artifact)")
    p.add_argument("--dry-run", action="store_true",
                   help="show what would be restored; exit 1 if anything would")


def _with(p: argparse.ArgumentParser, text: str = "also this optional artifact") -> None:
    p.add_argument("--with", dest="with_ids", action="append", default=[], metavar="ID",
                   help=text)


def _apply(p: argparse.ArgumentParser) -> None:
    _ids(p)
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
    _with(p)


def _plan(p: argparse.ArgumentParser) -> None:
    _ids(p)
    _with(p)


def _verify(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-probes", action="store_true",
                   help="skip the operator probes (no subprocess of the target)")
    p.add_argument("--probe-timeout", type=seconds, default=120.0, metavar="SECONDS",
                   help="how long the operator probe subprocess may run (default 120)")
    p.add_argument("--device", action="store_true",
                   help="also run the fused top-k/top-p operator once on the NPU and compare "
                        "the tokens it keeps with the fallback's")
    p.add_argument("--serve-log", type=path, metavar="FILE",
                   help="also check a vLLM serve log for the markers the manifest needs")
    _with(p, "also expect this optional artifact to be applied")


def _snapshot(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", type=output_file, required=True, metavar="FILE",
                   help="where to write the JSON snapshot ('-' for stdout)")
    p.add_argument("--all-files", action="store_true",
                   help="hash every installed file, not only the stack's packages")


def _audit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baseline", type=path, metavar="FILE",
                   help="also report packages changed since this snapshot")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="hashing threads (default: one per CPU)")


def _diff(p: argparse.ArgumentParser) -> None:
    p.add_argument("first", type=path, metavar="A.json", help="the older snapshot")
    p.add_argument("second", type=path, metavar="B.json", help="the newer snapshot")


def _install(p: argparse.ArgumentParser) -> None:
    p.add_argument("reqs", nargs="*", metavar="REQ",
                   help="extra requirements to install with the stack's pins (pip syntax)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the change set; exit 1 if it is not empty")
    p.add_argument("--lock", type=path, metavar="FILE",
                   help="install a lock written by 'ascendpatch lock' (--require-hashes)")


def _output(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", type=output_file, required=True, metavar="FILE",
                   help="where to write the lock ('-' for stdout)")


def _folder(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", type=path, metavar="DIR",
                   help="the folder to create or update")


def _bundle(p: argparse.ArgumentParser) -> None:
    _folder(p)
    p.add_argument("--platform", metavar="TAG",
                   help="wheels for another platform, e.g. manylinux2014_aarch64 (binary only)")
    p.add_argument("--python-version", metavar="X.Y",
                   help="wheels for another Python version, e.g. 3.11 (binary only)")


def _sandbox(p: argparse.ArgumentParser) -> None:
    _folder(p)
    p.add_argument("--vllm-ascend", default="0.18.0", metavar="VERSION",
                   help="the vllm-ascend release to install (default 0.18.0)")


def _logs(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", type=path, metavar="FILE",
                   help="vLLM serve logs (one per TP rank or node)")
    _with(p, "also require the markers of this optional artifact")


def _smoke(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", required=True, metavar="http://HOST:PORT",
                   help="the server's base URL")
    p.add_argument("--model", metavar="ID", help="the model id clients will ask for")
    p.add_argument("--request-timeout", "--timeout", dest="timeout", type=float, default=120.0,
                   metavar="SECONDS",
                   help="bounds each whole request, body included (default 120; --timeout is "
                        "an alias)")
    p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                   help="first wait up to SECONDS for GET /v1/models to answer 200")


def _launch(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=path, metavar="deploy.yaml",
                   help="a deploy config to check (vllm-omni stage knobs, serve arguments)")
    p.add_argument("--model-dir", type=path, metavar="DIR",
                   help="the model folder (default: the one the command names)")
    p.add_argument("serve", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                   help="the vllm serve command line, after --")


def _stop(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument("--pidfile", type=path, metavar="FILE",
                       help="a file holding the server's PID")
    which.add_argument("--pid", type=int, metavar="N", help="the server's PID")
    p.add_argument("--grace-timeout", "--grace", dest="grace", type=float, default=5.0,
                   metavar="SECONDS",
                   help="how long to wait after TERM before KILL (default 5; --grace is an "
                        "alias)")
    p.add_argument("--all-vllm", action="store_true",
                   help="also stop every vLLM process of this user, even with a live parent "
                        "(default: only the server's own and re-parented ones)")
    p.add_argument("--force-user", action="store_true",
                   help="also signal processes of other users (refused by default)")


def _capture(p: argparse.ArgumentParser) -> None:
    p.add_argument("dist", metavar="DIST", help="the installed distribution you edited")
    p.add_argument("--id", dest="artifact_id", metavar="ID",
                   help="the artifact id (default: derived from DIST)")
    p.add_argument("--output", type=file_in_a_folder, metavar="FILE",
                   help="the patch (default ID.patch)")
    p.add_argument("--manifest-out", type=file_in_a_folder, metavar="FILE",
                   help="add or update the artifact in this manifest")


def _port(p: argparse.ArgumentParser) -> None:
    p.add_argument("artifact_id", metavar="ID", help="a diff artifact of the manifest")
    p.add_argument("--to", required=True, metavar="VERSION",
                   help="the vllm-ascend release to port to")
    p.add_argument("--from", dest="start", metavar="VERSION",
                   help="the variant to port (default: the one covering --to, else newest)")
    p.add_argument("--write", action="store_true",
                   help="write the patch and the manifest variant when every hunk applies")


def _catalog_check(p: argparse.ArgumentParser) -> None:
    p.add_argument("versions", nargs="*", metavar="VERSION",
                   help="default: every release (wheel or sdist) on the index (or wheelhouse)")
    p.add_argument("--markdown", type=file_in_a_folder, metavar="FILE",
                   help="also write the matrix as a Markdown table to FILE")
    p.add_argument("--new", action="store_true",
                   help="only the releases newer than the catalog, each with a verdict "
                        "decided by content (a weekly maintainer check)")


def _fleet_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("snapshots", nargs="+", type=path, metavar="SNAPSHOT",
                   help="snapshot files (HOST.json) or folders of them")
    p.add_argument("--baseline", type=path, metavar="FILE",
                   help="compare with this snapshot (default: the majority per package/patch)")
    p.add_argument("--hosts", type=path, metavar="FILE",
                   help="every host expected, one per line: those without a snapshot are missing")
    p.add_argument("-o", "--output", type=path, metavar="report.html",
                   help="also write a self-contained HTML page")


def _nothing(p: argparse.ArgumentParser) -> None:
    del p


FromArgs = Callable[[argparse.Namespace], "CommandResult"]


class Handler:
    """A command's handler: ``load()`` imports its module and returns its ``from_args``.
    (A plain class, not a dataclass: building one costs a millisecond at every start-up.)"""

    __slots__ = ("load",)

    def __init__(self, load: Callable[[], FromArgs]) -> None:
        self.load = load

    def __call__(self, args: argparse.Namespace) -> CommandResult:
        return self.load()(args)


@Handler
def _apply_handler() -> FromArgs:
    from ascendpatch.commands.apply import from_args

    return from_args


@Handler
def _plan_handler() -> FromArgs:
    from ascendpatch.commands.plan import from_args

    return from_args


@Handler
def _revert_handler() -> FromArgs:
    from ascendpatch.commands.revert import from_args

    return from_args


@Handler
def _status_handler() -> FromArgs:
    from ascendpatch.commands.status import from_args

    return from_args


@Handler
def _verify_handler() -> FromArgs:
    from ascendpatch.commands.verify import from_args

    return from_args


@Handler
def _install_handler() -> FromArgs:
    from ascendpatch.commands.install import from_args

    return from_args


@Handler
def _lock_handler() -> FromArgs:
    from ascendpatch.commands.lock import from_args

    return from_args


@Handler
def _snapshot_handler() -> FromArgs:
    from ascendpatch.commands.snapshot import from_args

    return from_args


@Handler
def _audit_handler() -> FromArgs:
    from ascendpatch.commands.audit import from_args

    return from_args


@Handler
def _diff_handler() -> FromArgs:
    from ascendpatch.commands.diff import from_args

    return from_args


@Handler
def _sandbox_handler() -> FromArgs:
    from ascendpatch.commands.sandbox import from_args

    return from_args


@Handler
def _bundle_handler() -> FromArgs:
    from ascendpatch.commands.bundle import from_args

    return from_args


@Handler
def _logs_handler() -> FromArgs:
    from ascendpatch.commands.logs import from_args

    return from_args


@Handler
def _smoke_handler() -> FromArgs:
    from ascendpatch.commands.smoke import from_args

    return from_args


@Handler
def _check_launch_handler() -> FromArgs:
    from ascendpatch.commands.check_launch import from_args

    return from_args


@Handler
def _stop_handler() -> FromArgs:
    from ascendpatch.commands.stop import from_args

    return from_args


@Handler
def _capture_handler() -> FromArgs:
    from ascendpatch.commands.capture import from_args

    return from_args


@Handler
def _port_handler() -> FromArgs:
    from ascendpatch.commands.port import from_args

    return from_args


@Handler
def _catalog_check_handler() -> FromArgs:
    from ascendpatch.commands.catalog_check import from_args

    return from_args


@Handler
def _fleet_report_handler() -> FromArgs:
    from ascendpatch.commands.fleet_report import from_args

    return from_args


@Handler
def _manifests_handler() -> FromArgs:
    from ascendpatch.commands.manifests import from_args

    return from_args


class Command(NamedTuple):
    name: str
    help: str
    handler: Handler  # imports its command module when the command runs
    configure: Callable[[argparse.ArgumentParser], None]
    source: bool = False  # takes --wheelhouse / --offline


COMMANDS = (
    Command("apply", "apply artifacts (idempotent)", _apply_handler, _apply),
    Command("plan", "what apply would do, with diffs", _plan_handler, _plan),
    Command("revert", "restore the original files", _revert_handler, _revert),
    Command("status", "each artifact and file's state", _status_handler, _ids),
    Command("verify", "read-only check of pins, patches, dependencies, probes, env",
            _verify_handler, _verify),
    Command("install", "install the stack's pins and REQs without touching torch",
            _install_handler, _install, source=True),
    Command("lock", "compile the manifest's stack into a hashed lock (pip-tools)",
            _lock_handler, _output, source=True),
    Command("snapshot", "write a JSON record of the target", _snapshot_handler,
            _snapshot),
    Command("audit", "check every installed file against its RECORD", _audit_handler,
            _audit),
    Command("diff", "compare two snapshots", _diff_handler, _diff),
    Command("sandbox", "a throwaway target: real vllm-ascend wheel + stand-ins",
            _sandbox_handler, _sandbox, source=True),
    Command("bundle", "build a wheelhouse of ascendpatch for offline hosts",
            _bundle_handler, _bundle),
    Command("logs", "triage serve logs: known-benign, known faults, unknown",
            _logs_handler, _logs),
    Command("smoke", "GET /v1/models, then one chat completion with top_p=0.9",
            _smoke_handler, _smoke),
    Command("check-launch", "check a vllm serve command line and/or a deploy config",
            _check_launch_handler, _launch),
    Command("stop", "stop a server: TERM its group, wait, KILL, then leftovers",
            _stop_handler, _stop),
    Command("capture", "turn edits of an installed distribution into a patch",
            _capture_handler, _capture, source=True),
    Command("port", "check (and --write) a diff artifact against another release",
            _port_handler, _port, source=True),
    Command("catalog-check", "matrix of diff artifacts x releases",
            _catalog_check_handler, _catalog_check, source=True),
    Command("fleet-report", "drift of many hosts' snapshots against a baseline",
            _fleet_report_handler, _fleet_report),
    Command("manifests", "list the bundled manifests", _manifests_handler, _nothing),
)


# Each subcommand's description (what it does and what it exits with) and one example, shown by
# `ascendpatch COMMAND --help`. A command added to COMMANDS needs an entry here (a test says so).
DOCS: dict[str, tuple[str, str]] = {
    "apply": ("Bring the selected artifacts to their applied state. Idempotent: a second run "
              "changes zero bytes. Ends with a recap: ok=N changed=N skipped=N failed=N. Exit 0 "
              "when everything is applied, 1 on a conflict or refusal (with --dry-run: 1 when "
              "changes are pending).",
              "ascendpatch --python /usr/local/python3.12.13/bin/python3 apply --dry-run --diff"),
    "plan": ("What apply would do, with the unified diff of each change. Exit 1 when changes "
             "are pending.", "ascendpatch --python ./ascendpatch-sandbox/bin/python plan"),
    "revert": ("Restore byte-identical originals from backups (or by reversing the patch and "
               "checking against the wheel's RECORD). Ends with the same recap as apply.",
               "ascendpatch --python ./ascendpatch-sandbox/bin/python revert --dry-run"),
    "status": ("Each artifact and file with its state: pristine, applied, partial or conflict. "
               "Exit 1 when anything is not in the desired state.",
               "ascendpatch --python ./ascendpatch-sandbox/bin/python status"),
    "verify": ("Read-only: stack pins, artifact states, dependency consistency, operator probes, "
               "CANN / ATB environment and required env vars. Exit 1 on any [FAIL].",
               "ascendpatch --python ./ascendpatch-sandbox/bin/python verify --no-probes"),
    "install": ("Install the manifest's pins and REQs with the target's pip; refuses when torch, "
                "torch-npu or another protected package would change. --dry-run exits 1 when the "
                "change set is not empty.",
                "ascendpatch --python ./ascendpatch-sandbox/bin/python install --dry-run"),
    "lock": ("Compile the manifest's stack into a hashed requirements lock with pip-tools, "
             "resolved for the target's Python; protected packages stay with the image.",
             "ascendpatch --manifest vllm-ascend-0.18.0 lock -o stack.lock"),
    "snapshot": ("Write a JSON record of the target (distributions, artifact states, hashes).",
                 "ascendpatch --python ./ascendpatch-sandbox/bin/python snapshot -o before.json"),
    "audit": ("Check every installed file against its RECORD, rpm -V style: changed, missing, "
              "orphans; ascendpatch's own patches are shown as expected. Exit 1 on drift.",
              "ascendpatch --python ./ascendpatch-sandbox/bin/python audit"),
    "diff": ("Compare two snapshots (two nodes, or before/after an image rebuild). Exit 1 when "
             "they differ.", "ascendpatch diff before.json after.json"),
    "sandbox": ("Build (or check) a throwaway target: the real vllm-ascend wheel plus labelled "
                "stand-ins for torch / torch-npu. Runs on any machine, no NPU needed.",
                "ascendpatch sandbox ./ascendpatch-sandbox --vllm-ascend 0.18.0"),
    "bundle": ("Build a wheelhouse (ascendpatch, its dependencies, pip-tools) for air-gapped "
               "hosts; install there with: bash install.sh --wheelhouse DIR.",
               "ascendpatch bundle ./wheels"),
    "logs": ("Triage vLLM serve logs: known-benign lines (why), known faults (fix), unknown "
             "lines for a human, and the markers the manifest requires.",
             "ascendpatch logs serve-rank0.log serve-rank1.log"),
    "smoke": ("GET /v1/models, then one chat completion with top_p=0.9 (the request that used "
              "to kill EngineCore); names model-id mismatches.",
              "ascendpatch smoke --url http://127.0.0.1:8000 --model Muse-Glimmer-30B"),
    "check-launch": ("Check a vllm serve command line and/or a deploy config before launching.",
                     "ascendpatch check-launch -- vllm serve /models/m --quantization ascend"),
    "stop": ("Stop a vLLM server: TERM its process group, wait, KILL, then its leftover "
             "EngineCore / Worker processes.", "ascendpatch stop --pidfile serve.pid"),
    "capture": ("Turn edits of an installed distribution into a patch (and a manifest entry).",
                "ascendpatch --python ./ascendpatch-sandbox/bin/python capture vllm-ascend "
                "--id my-fix --output my-fix.patch"),
    "port": ("Check a diff artifact against another vllm-ascend release, hunk by hunk; --write "
             "adds the ported variant.",
             "ascendpatch port sampler-topk-topp-fallback --to 0.27.1rc1"),
    "catalog-check": ("Matrix of every diff artifact against every release with wheels (a table "
                      "on a terminal, --json, --markdown FILE).",
                      "ascendpatch catalog-check 0.18.0 0.23.0"),
    "fleet-report": ("Compare many hosts' snapshots against a baseline (the majority per "
                     "package / patch, or --baseline): a table per host, drift in red, an "
                     "optional HTML page. Exit 1 on drift or a missing host.",
                     "ascendpatch fleet-report snapshots/ --hosts hosts.txt -o fleet.html"),
    "manifests": ("List the bundled manifests, each validated, with their pins and artifacts "
                  "(optional ones marked).", "ascendpatch manifests --json"),
}


def describe(command: Command) -> tuple[str, str]:
    """(description, epilog) for the command's --help."""
    description, example = DOCS.get(command.name, (command.help, ""))
    return description, (f"example:\n  {example}" if example else "")
