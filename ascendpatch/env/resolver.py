"""Which resolver runs ``lock`` and install's plan: pip (the reference) or uv (seconds).

``--resolver auto`` (the default) takes uv when this tool's own environment has it
(``ascendpatch[fast]``, env/uvbin.py) and pip's configuration translates into uv's
(env/pipconfig.py); else pip, saying why with ``-v``. ``--resolver uv`` insists on uv (exit 2
without it) but still falls back to pip, with a warning, when pip's configuration holds what
uv cannot take. ``--resolver pip`` is pip / pip-tools, as before.

uv gets pip's settings and nothing of its own: ``--no-config``, no ``UV_*`` variable of the
caller, pip's index strategy (the best match over every index, ``unsafe-best-match``) and a
cache folder under ascendpatch's checked cache. For install's plan, uv's
``pip install --dry-run`` decides what would be installed against the target as it is; the
metadata of those exact releases (their requirements, for the requirement chains and what
``--no-deps`` packages leave unmet) is pip's own report, read without resolving
(stackcheck.report, cached per release): pipdiff.plan then decides from a report of pip's
format, whichever resolver ran.
"""

from __future__ import annotations

import contextlib
import enum
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ascendpatch import cachedir, progress, redact
from ascendpatch.env import pipconfig, uvbin
from ascendpatch.env.pipadapter import PipError, Source
from ascendpatch.env.target import Target
from ascendpatch.errors import InvalidInputError


class Mode(str, enum.Enum):
    AUTO = "auto"
    PIP = "pip"
    UV = "uv"


@dataclass(frozen=True)
class Choice:
    """The resolver that runs, and why (shown with -v, and in --json as ``resolver``)."""

    name: str  # "pip" or "uv"
    why: str
    uv: Path | None = None
    settings: pipconfig.UvSettings | None = None


def choose(mode: Mode, target: Target, env: Mapping[str, str] | None = None,
           command: str = "install") -> Choice:
    if mode is Mode.PIP:
        return _said(Choice("pip", "--resolver pip"))
    found = uvbin.find()
    if found.path is None:
        if mode is Mode.UV:
            raise InvalidInputError(f"--resolver uv: {found.why}",
                                    fix="pip install 'ascendpatch[fast]' into ascendpatch's "
                                        "own environment, or use --resolver pip")
        return _said(Choice("pip", f"uv not used: {found.why}"))
    try:
        settings = pipconfig.translate(pipconfig.read(pipconfig.reader(target), command, env))
    except pipconfig.Untranslatable as exc:
        why = f"uv not used: {exc}; resolving with pip"
        if mode is Mode.UV:
            progress.notice(why)
        return _said(Choice("pip", why))
    return _said(Choice("uv", f"uv at {found.path} (pip's configuration translated)",
                        found.path, settings))


def _said(choice: Choice) -> Choice:
    progress.output(f"resolver: {choice.name} ({choice.why})\n")
    return choice


def _names(requirements: Sequence[str]) -> set[str]:
    found = set()
    for raw in requirements:
        with contextlib.suppress(InvalidRequirement):
            found.add(str(canonicalize_name(Requirement(raw).name)))
    return found


def _uv(choice: Choice, args: Sequence[str], source: Source, *, label: str,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    assert choice.uv is not None and choice.settings is not None
    cache = cachedir.folder("uv")
    cmd = [str(choice.uv), "pip", *args[:1], "--no-config", "--color", "never",
           "--index-strategy", "unsafe-best-match", "--cache-dir", str(cache),
           *choice.settings.args, *source.args(), *args[1:]]
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    env.update(choice.settings.env)
    progress.command(redact.argv(cmd))
    with progress.task(label):
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                              stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    progress.output(proc.stdout)
    progress.output(proc.stderr)
    return proc


def uv_said(text: str) -> str:
    """uv's failure in one line: its "No solution found" explanation, without decoration,
    an index's password masked (redact.text) before it is cut short."""
    lines = [re.sub(r"^[\s×╰─▶│]+", "", line).strip() for line in text.splitlines()]
    useful = [line for line in lines if line and not line.startswith(("hint:", "Resolved"))]
    return redact.text(" ".join(useful[-4:]))[:1500]


def compile_lock(choice: Choice, python: Path, args: Sequence[str], source: Source,
                 cwd: Path, label: str) -> subprocess.CompletedProcess[str]:
    """``uv pip compile --generate-hashes`` for ``python``; ``args``: its own (output, input,
    --no-emit-package ...)."""
    return _uv(choice, ["compile", "--python", str(python.absolute()), "--generate-hashes",
                        "--no-header", *args], source, label=label, cwd=cwd)


_CHANGE = re.compile(r"^ \+ (?P<name>[A-Za-z0-9._-]+)==(?P<version>\S+)$")


def dry_run_report(choice: Choice, target: Target, requirements: Sequence[str],
                   source: Source, extra: Sequence[str] = ()) -> dict[str, Any]:
    """A report of pip's ``--dry-run --report`` format from uv's ``pip install --dry-run``
    (what would be installed) and pip's metadata of those releases (no resolving)."""
    from ascendpatch.env import stackcheck

    assert target.python is not None
    proc = _uv(choice, ["install", "--dry-run", "--python", str(target.python.absolute()), *extra,
                        *requirements], source,
               label=f"uv pip install --dry-run {' '.join(requirements)[-60:]}")
    if proc.returncode != 0:
        raise PipError(f"uv cannot resolve {' '.join(requirements)}: "
                       f"{uv_said(proc.stderr or proc.stdout)}")
    pins = [f"{m['name']}=={m['version']}" for line in proc.stderr.splitlines()
            if (m := _CHANGE.match(line))]
    if not pins:
        return {"install": []}
    try:
        found = stackcheck.report(target, pins, source)
    except PipError as exc:
        raise MetadataUnavailable(str(exc)) from None
    named = _names(requirements)
    everything_requested = "-r" in requirements
    for item in found.get("install", []):
        item["requested"] = everything_requested or \
            str(canonicalize_name(item["metadata"]["name"])) in named
    return found


class MetadataUnavailable(PipError):
    """uv resolved, but pip cannot read the metadata of what it chose (no wheel): the plan
    is then pip's own."""


@dataclass(frozen=True)
class Used:
    """The --json key saying which resolver ran (a results.Payload)."""

    choice: Choice

    def json(self) -> dict[str, object]:
        return {"resolver": {"name": self.choice.name, "why": self.choice.why}}

    def table(self) -> None:
        return None

