"""``ascendpatch sandbox DIR [--vllm-ascend VERSION]``: a throwaway target for any machine.

A venv with the real vllm-ascend wheel from the index (``--no-deps``) and stand-in
distributions for everything it requires (torch, torch-npu, ...: labelled simulated in their
metadata, see ascendpatch/env/standins.py), so that install, apply, verify, audit and revert run
end to end without an NPU. ``DIR/ascendpatch-sandbox.json`` marks it; `verify` then reports the
CANN checks as skipped (there is no CANN on this host) instead of failing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from argparse import ArgumentParser, Namespace
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from ascendpatch import cachedir
from ascendpatch.commands import context
from ascendpatch.env import inscript, pipadapter, standins
from ascendpatch.env.pipadapter import ONLINE, PipError, Source
from ascendpatch.env.target import from_python
from ascendpatch.errors import InvalidInputError, RefusedError
from ascendpatch.results import CheckResult, CommandResult, Level
from ascendpatch.shell import cliargs

DEFAULT_VERSION = "0.18.0"  # an affected final release: the catalog's fix applies


def _wheels(folder: Path | None, version: str) -> list[Path]:
    return sorted(folder.glob(f"vllm_ascend-{version}-*.whl")) \
        if folder is not None and folder.is_dir() else []


def _wheel(version: str, source: Source) -> Path:
    if found := _wheels(source.wheelhouse, version):
        return found[0]
    cache = cachedir.folder("wheels", only_source=source.offline)
    if found := _wheels(cache, version):
        return found[0]
    if source.offline:
        raise PipError(f"no vllm-ascend {version} wheel in {source.wheelhouse} and --offline "
                       f"forbids the index ({_why('', source)})",
                       fix="add the wheel to the wheelhouse")
    proc = pipadapter.run_pip(["download", "--no-deps", "--only-binary", ":all:", "--quiet",
                               "-d", str(cache), f"vllm-ascend=={version}"])
    if proc.returncode != 0:
        raise PipError(f"cannot download vllm-ascend {version}: {_why(proc.stderr, source)}",
                       fix="pick one of those releases, or pass --wheelhouse DIR holding the "
                           "wheel")
    return _wheels(cache, version)[0]


def _why(stderr: str, source: Source) -> str:
    """Name the releases that exist instead of pip's cut-off message."""
    from ascendpatch.env import releases

    try:
        known = releases.versions_on_index("vllm-ascend", source, sdists=False)
    except releases.ReleaseError:
        known = []
    where = f"in {source.wheelhouse}" if source.offline else "on the index"
    if not known:
        lines = [line for line in stderr.splitlines() if line.startswith("ERROR")]
        return " | ".join(lines[-2:]) or stderr.strip()[-300:] or f"no vllm-ascend wheel {where}"
    return (f"no wheel of that release for this Python {where}; releases with wheels: "
            f"{', '.join(known)}")


def _check_version(version: str) -> None:
    try:
        Version(version)
    except InvalidVersion:
        raise InvalidInputError(f"--vllm-ascend {version!r} is not a version",
                                fix="e.g. --vllm-ascend 0.18.0") from None


def _installed_version(folder: Path) -> str | None:
    """vllm-ascend's version as installed in the sandbox (read from its dist-info name)."""
    for info in folder.glob("lib/python*/site-packages/vllm_ascend-*.dist-info"):
        return info.name[len("vllm_ascend-"):-len(".dist-info")]
    return None


def _build(folder: Path, python: Path, wheel: Path, version: str) -> dict[str, Any]:
    made = subprocess.run(inscript.module_argv(sys.executable, "venv", [str(folder)]),
                          capture_output=True, text=True, check=False)
    if made.returncode != 0:
        raise PipError(f"cannot create the venv {folder}: {made.stderr.strip()[-300:]}")
    proc = pipadapter.run_pip(["install", "--quiet", "--no-deps", "--no-index",
                               "--disable-pip-version-check", str(wheel)], python=str(python))
    if proc.returncode != 0:
        raise PipError(f"cannot install {wheel.name}: {proc.stderr.strip()[-300:]}")
    target = from_python(python)
    dist = target.get("vllm-ascend")
    assert dist is not None
    made_standins = standins.satisfy(target.root, dist.metadata.get_all("Requires-Dist") or [],
                                     target.distributions, target.markers)
    doc = {"kind": "ascendpatch-sandbox", "vllm_ascend": version, "wheel": wheel.name,
           "standins": [f"{n}=={v}" for n, v in made_standins],
           "note": "simulated NPU stack: stand-ins are metadata (and tiny torch / torch_npu "
                   "modules) only; nothing here runs on an NPU"}
    # last: the marker says the sandbox is complete
    (folder / standins.SANDBOX_MARKER).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def _undo(folder: Path, created: bool) -> None:
    """After a failed build: nothing half-built is left for the next run to refuse."""
    if created:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for child in folder.iterdir() if folder.is_dir() else ():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def run(folder: Path, version: str = DEFAULT_VERSION, source: Source = ONLINE) \
        -> CommandResult:
    if folder.exists() and not folder.is_dir():
        raise InvalidInputError(f"sandbox {folder} is a file, not a folder",
                                fix="give a new or empty folder")
    marker = folder / standins.SANDBOX_MARKER
    python = folder / "bin" / "python"
    _check_version(version)
    if marker.is_file():
        existing = json.loads(marker.read_text())
        installed = _installed_version(folder) or existing["vllm_ascend"]
        if Version(installed) != Version(version):
            raise RefusedError(f"sandbox {folder} holds vllm-ascend {installed}, not {version}; "
                               f"not touching it", fix=f"use --vllm-ascend {installed}, another "
                               f"folder, or remove it first: rm -rf {folder}")
        return CommandResult("sandbox", (CheckResult(
            "sandbox", "sandbox", Level.OK,
            f"sandbox {folder} already exists (vllm-ascend {existing['vllm_ascend']}, "
            f"{len(existing['standins'])} stand-ins); target: --python {python}"),))
    if folder.exists() and any(folder.iterdir()):
        raise RefusedError(f"{folder} exists and is not an ascendpatch sandbox; not touching it",
                           fix="choose an empty or new folder")
    wheel = _wheel(version, source)
    created = not folder.exists()  # (an existing folder is empty: a non-empty one is refused)
    try:
        doc = _build(folder, python, wheel, version)
    except BaseException:
        _undo(folder, created)
        raise
    made_standins = doc["standins"]
    lines = (
        CheckResult("sandbox:venv", "sandbox", Level.OK, f"venv {folder}"),
        CheckResult("sandbox:wheel", "sandbox", Level.OK,
                    f"vllm-ascend {version} from the real wheel {wheel.name} (--no-deps)"),
        CheckResult("sandbox:standins", "sandbox", Level.OK,
                    f"{len(made_standins)} stand-in distributions (simulated): "
                    f"{', '.join(doc['standins'][:6])}{', ...' if len(made_standins) > 6 else ''}"),
        CheckResult("sandbox", "sandbox", Level.OK, f"target: --python {python}"),
    )
    return CommandResult("sandbox", lines)


def from_args(args: Namespace) -> CommandResult:
    return run(args.folder, args.vllm_ascend, context.source_from_args(args))


def configure(p: ArgumentParser) -> None:
    cliargs.folder(p)
    p.add_argument("--vllm-ascend", default="0.18.0", metavar="VERSION",
                   help="the vllm-ascend release to install (default 0.18.0)")


COMMAND = cliargs.CommandSpec(
    name="sandbox",
    help="a throwaway target: real vllm-ascend wheel + stand-ins",
    description=("Build (or check) a throwaway target: the real vllm-ascend wheel plus labelled "
                 "stand-ins for torch / torch-npu. Runs on any machine, no NPU needed."),
    example="ascendpatch sandbox ./ascendpatch-sandbox --vllm-ascend 0.18.0",
    run=from_args, configure=configure, source=True,
)
