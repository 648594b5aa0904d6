"""The package index as this tool's own pip sees it.

Every index access of ascendpatch goes through pip (``sys.executable -m pip``, through
env/pipadapter), so whatever pip would use is used: the index-url, extra-index-url and
find-links of any pip.conf (global, user, site) or PIP_* variable, certificates, proxies,
trusted hosts, netrc and keyring credentials. Nothing here opens a URL itself.

- ``versions``: ``pip index versions NAME`` (its ``--json`` where pip has it, pip >= 25;
  the "Available versions:" line before that);
- ``sdist``: an sdist's bytes through ``_pipfind.py``, pip's own finder and session
  (``pip download --no-binary :all:`` would build the sdist's metadata first, which
  vllm-ascend's cannot have without CANN);
- ``where``: the indexes and links pip reads, as every error names them (passwords masked).

Wheels come from ``pip download --only-binary :all:`` (env/releases.archive).
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from ascendpatch import redact
from ascendpatch.env import pipadapter
from ascendpatch.errors import AscendpatchError

SCRIPT = "_pipfind.py"
FIX = "check the index in pip's configuration (pip config list), or use --wheelhouse DIR " \
      "(and --offline)"
_NONE = "No matching distribution found for"
# urllib3's retry warnings and requests' errors, as pip logs them when an index cannot be read
_BROKEN = re.compile(r"connection broken by '(?P<why>.*)'|(?P<other>(?:SSL|Proxy)Error\(.*)")
_ERRNO = re.compile(r"\[Errno -?\d+\] [^\"')]+")


class ReleaseError(AscendpatchError):
    """A release's files could not be had."""


@dataclass(frozen=True)
class Fetched:
    """An sdist pip found and downloaded: its bytes and the sha256 the index published."""

    filename: str
    data: bytes
    sha256: str | None
    where: str  # the indexes pip read, shown


def _broken(stderr: str) -> str | None:
    """Why pip could not read an index, in a few words; None when nothing broke."""
    found = [m for line in stderr.splitlines() if (m := _BROKEN.search(line))]
    if not found:
        return None
    why = redact.text(found[-1]["why"] or found[-1]["other"])  # before it is cut short
    errno = _ERRNO.search(why)
    return errno[0].strip() if errno else why[:200]


def _shown(doc: dict[str, Any]) -> str:
    places = [p for p in doc.get("where", []) if isinstance(p, str)]
    return redact.url(", ".join(places)) if places else "no index (pip's no-index is set)"


def _ask(args: list[str], label: str) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    proc = pipadapter.run_pip_script(SCRIPT, args, label)
    try:
        doc = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        doc = None
    if not isinstance(doc, dict):
        raise ReleaseError(f"pip cannot read its configuration: "
                           f"{redact.text(pipadapter.explain(proc.stderr) or 'no answer')}",
                           fix="fix what pip names (pip config debug shows its files)")
    return doc, proc


def where() -> str:
    """The indexes and find-links pip reads, comma-separated, passwords masked."""
    return _shown(_ask(["where"], "pip config")[0])


def _parse(stdout: str) -> list[Version]:
    try:
        doc = json.loads(stdout)
        words = doc.get("versions", []) if isinstance(doc, dict) else []
    except ValueError:  # the text form: "Available versions: 1.1, 1.0"
        line = next((x for x in stdout.splitlines() if x.startswith("Available versions:")), "")
        words = line.partition(":")[2].split(",")
    found = set()
    for word in words:
        try:
            found.add(Version(str(word).strip()))
        except InvalidVersion:
            continue
    return sorted(found)


def versions(name: str, *, sdists: bool = True) -> list[Version]:
    """The releases of ``name`` pip can use on this interpreter (pre-releases too, yanked ones
    not; with ``sdists`` False only those with a wheel), oldest first; [] when the index has
    none. ReleaseError, naming the index, when pip cannot read it."""
    args = ["index", "versions", name, "--pre", "--ignore-requires-python",
            "--disable-pip-version-check", *([] if sdists else ["--only-binary", ":all:"])]
    label = f"pip index versions {name}"
    proc = pipadapter.run_pip([*args, "--json"], label=label)
    if proc.returncode != 0 and "--json" in proc.stderr:  # a pip before 25: no --json
        proc = pipadapter.run_pip(args, label=label)
    if proc.returncode == 0:
        return _parse(proc.stdout)
    why = _broken(proc.stderr)
    if why is None and _NONE in proc.stderr:
        return []
    why = why or redact.text(pipadapter.explain(proc.stderr))
    raise ReleaseError(f"cannot list {name} on {where()}: {why}", fix=FIX)


def sdist(name: str, version: str, cap: int) -> Fetched | None:
    """The sdist of ``name==version`` as pip finds it on its indexes and links (None when there
    is none), at most ``cap`` bytes. Not checked here: the caller checks and scans it."""
    with tempfile.TemporaryDirectory() as tmp:
        doc, proc = _ask(["sdist", name, version, tmp, str(cap)],
                         f"downloading the sdist of {name} {version}")
        shown, filename = _shown(doc), doc.get("filename")
        if not isinstance(filename, str):
            if (why := _broken(proc.stderr)) is not None:
                raise ReleaseError(f"cannot list {name} on {shown}: {why}", fix=FIX)
            return None
        if doc.get("too_big"):
            raise ReleaseError(f"{filename} on {shown} is larger than {cap >> 20} MiB; not "
                               f"downloaded", fix="use --wheelhouse DIR holding it (and --offline)")
        if "error" in doc:
            raise ReleaseError(f"cannot download {filename} from {shown}: "
                               f"{redact.text(str(doc['error']))}",
                               fix="use --wheelhouse DIR holding it (and --offline)")
        with (Path(tmp) / Path(filename).name).open("rb") as handle:
            data = handle.read(cap + 1)
    sha256 = doc.get("sha256")
    return Fetched(filename, data, sha256 if isinstance(sha256, str) else None, shown)
