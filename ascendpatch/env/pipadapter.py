"""The one place that runs pip (pip-tools' lesson: unstable pip surfaces sit behind one adapter).

Pip runs as the *target's* pip (``<python> -m pip``), or, when the target has none (the
vllm-omni image's system python), as this tool's pip with ``--python <target>``. The user's pip
configuration (mirror, certificates) is respected; ``--offline`` adds ``--no-index``.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascendpatch import cachedir, catalog, progress, redact
from ascendpatch.env.inscript import file_argv, module_argv, shown
from ascendpatch.env.target import Target
from ascendpatch.errors import AscendpatchError, InvalidInputError
from ascendpatch.results import Hint, Phrase

PIP_TIMEOUT = 3600.0


@dataclass(frozen=True)
class Source:
    """Where packages come from: the configured index, plus or instead of a wheelhouse."""

    wheelhouse: Path | None = None
    offline: bool = False

    def args(self) -> list[str]:
        if self.offline and self.wheelhouse is None:
            raise InvalidInputError("--offline needs --wheelhouse DIR (there is no index to use)")
        out = ["--no-index"] if self.offline else []
        if self.wheelhouse is not None:
            if not self.wheelhouse.is_dir():
                raise InvalidInputError(f"--wheelhouse {self.wheelhouse} is not a folder")
            out += ["--find-links", str(self.wheelhouse)]
        return out


ONLINE = Source()  # the configured index, no wheelhouse


class PipError(AscendpatchError):
    """pip failed; the message carries pip's own last lines."""


def _pip_of(target: Target) -> tuple[str, list[str]]:
    """The interpreter whose pip runs for ``target``, and the options it needs."""
    if target.python is None:
        raise InvalidInputError("installing needs an interpreter target (--python), not "
                                "--site-packages")
    if target.get("pip") is not None:
        return str(target.python), []
    return sys.executable, ["--python", str(target.python)]


def pip_command(target: Target) -> list[str]:
    """``python -m pip`` for ``target``, as it is run: never from the caller's folder
    (inscript.module_argv)."""
    python, options = _pip_of(target)
    return module_argv(python, "pip", options)


def pip_shown(target: Target) -> tuple[str, ...]:
    """The same pip as a user types it (a Hint's runner; shown, never run)."""
    python, options = _pip_of(target)
    return (python, "-m", "pip", *options)


def _run(cmd: Sequence[str], env: Mapping[str, str] | None, *, label: str | None = None,
         cwd: Path | None = None, timeout: float | None = PIP_TIMEOUT) \
        -> subprocess.CompletedProcess[str]:
    progress.command(shown(cmd))  # -v shows the command line and pip's output
    with progress.task(label or _label(cmd)):
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout,
                              check=False, stdin=subprocess.DEVNULL, cwd=cwd,
                              env=dict(env) if env is not None else None)
    progress.output(proc.stdout if "--report" not in cmd else "")
    progress.output(proc.stderr)
    return proc


_VALUED = {"-d", "--dest", "-f", "--find-links", "--report", "-r", "-c", "--python", "-i",
           "--index-url", "--extra-index-url", "--platform", "--python-version", "--only-binary",
           "--no-binary", "-t", "--target", "--implementation", "--abi"}


def _label(cmd: Sequence[str]) -> str:
    """"pip install --dry-run vllm==0.18.0 ..." for the spinner: the verb and the packages."""
    words = list(cmd)
    verb = next((w for w in words if w in ("install", "download", "wheel")), "")
    names: list[str] = []
    after = words[words.index(verb) + 1:] if verb else []
    for before, word in zip(["", *after], after, strict=False):
        if not word.startswith("-") and before not in _VALUED:
            names.append(word)
    shown = " ".join(Path(n).name for n in names[-3:])
    more = f" (+{len(names) - 3})" if len(names) > 3 else ""
    dry = " --dry-run" if "--dry-run" in words else ""
    return f"pip {verb}{dry} {shown}{more}".rstrip()


def _tail(proc: subprocess.CompletedProcess[str], lines: int = 6) -> str:
    return explain(proc.stderr or proc.stdout) or f"exit code {proc.returncode}"


def _both(proc: subprocess.CompletedProcess[str]) -> str:
    return explain(f"{proc.stdout}\n{proc.stderr}") or f"exit code {proc.returncode}"


_NOT_FOUND = re.compile(r"Could not find a version that satisfies the requirement (?P<req>\S+)"
                        r"(?: \(from versions: (?P<versions>[^)]*)\))?")
_NO_MATCH = re.compile(r"No matching distribution found for (?P<req>\S+)")


def explain(text: str) -> str:
    """pip's (or pip-compile's) failure in plain words, without its traceback.

    The resolver's conflict block ("The conflict is caused by: ...") becomes one line of
    "A needs X; B needs Y"; a requirement the index cannot satisfy names the versions it has.
    Shown to the user: an index's password in it (pip masks its own; a resolver may not) is
    masked (redact.text).
    """
    lines = [redact.text(line.rstrip()) for line in text.splitlines()]
    if "The conflict is caused by:" in [line.strip() for line in lines]:
        start = [line.strip() for line in lines].index("The conflict is caused by:") + 1
        causes = []
        for line in lines[start:]:
            if not line.strip():
                break
            causes.append(line.strip().replace(" depends on ", " needs "))
        return "conflicting requirements: " + "; ".join(causes)
    for line in reversed(lines):
        if (found := _NOT_FOUND.search(line)) is not None:
            versions = [v.strip() for v in (found.group("versions") or "").split(",")
                        if v.strip() and v.strip() != "none"]
            shown = ", ".join(versions[-8:]) if versions else "none"
            return f"no release on the index satisfies {found.group('req')} (it has: {shown})"
    for line in reversed(lines):
        if (found := _NO_MATCH.search(line)) is not None:
            return f"no release on the index satisfies {found.group('req')}"
    errors = [line.strip() for line in lines if line.strip().startswith("ERROR:")
              and "Location" not in line]
    if errors:
        return " | ".join(e.removeprefix("ERROR: ") for e in errors[-2:])
    useful = [line.strip() for line in lines if line.strip()
              and not line.startswith(("WARNING: Location", "Traceback", "  File ", "    "))]
    return " | ".join(useful[-3:])


def dry_run_report(target: Target, requirements: Sequence[str], source: Source,
                   extra: Sequence[str] = (), env: Mapping[str, str] | None = None) \
        -> dict[str, Any]:
    """pip's own resolution (``--dry-run --report``): what it would install, nothing changed."""
    # Not --quiet: the resolver's "The conflict is caused by:" block is an INFO message.
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        cmd = [*pip_command(target), "install", "--dry-run", "--report", str(out),
               "--disable-pip-version-check", *source.args(), *extra, *requirements]
        proc = _run(cmd, env)
        if proc.returncode != 0:
            raise PipError(f"pip cannot resolve {' '.join(requirements)}: {_both(proc)}")
        try:
            report = json.loads(out.read_text())
        except (OSError, ValueError):
            raise PipError(f"pip returned no readable --report ({_tail(proc)})") from None
    assert isinstance(report, dict)
    return report


def install(target: Target, requirements: Sequence[str], source: Source,
            extra: Sequence[str] = (), env: Mapping[str, str] | None = None) -> None:
    cmd = [*pip_command(target), "install", "--disable-pip-version-check",
           *source.args(), *extra, *requirements]
    proc = _run(cmd, env)
    if proc.returncode != 0:
        raise PipError(f"pip install {' '.join(requirements)} failed: {_both(proc)}")


def run_pip(args: Sequence[str], env: Mapping[str, str] | None = None,
            python: str | None = None, label: str | None = None) \
        -> subprocess.CompletedProcess[str]:
    """This tool's own pip (downloads, wheels for bundles, the index's versions)."""
    return _run(module_argv(python or sys.executable, "pip", args), env, label=label)


def run_pip_script(script: str, args: Sequence[str], label: str) \
        -> subprocess.CompletedProcess[str]:
    """A script beside this module (``_pipfind.py``) run by this tool's own interpreter with
    pip as its library, for what no pip command does without building (an sdist's bytes);
    the caller's folder is not on its sys.path (inscript.PREAMBLE)."""
    path = Path(__file__).with_name(script)
    return _run(file_argv(sys.executable, path, args), None, label=label)


def piptools_venv(python: Path, version: str | None, source: Source) -> Path:
    """pip-compile in a venv created *from* ``python`` (pip-compile resolves for the
    interpreter it runs in: same Python version, platform and markers), made once under the
    cache (``piptools/<key>``) and reused. It is run as the user running ascendpatch (often
    root): nothing in it may be another user's to write (cachedir.trusted_tree), else
    UnsafeCacheError and nothing is run."""
    key = hashlib.sha256(f"{python}|{version}".encode()).hexdigest()[:16]
    venv = cachedir.trusted_tree(catalog.cache_dir() / "piptools" / key,
                                 "pip-compile is never run from it")
    compile_bin = venv / "bin" / "pip-compile"
    if compile_bin.exists():
        return compile_bin
    made = subprocess.run(module_argv(python, "venv", [str(venv)]), capture_output=True,
                          text=True, check=False)
    if made.returncode != 0:
        raise PipError(f"cannot create a venv from {python} for pip-tools: "
                       f"{made.stderr.strip().splitlines()[-1:]}")
    proc = run_pip(["install", "--quiet", "--disable-pip-version-check", *source.args(),
                    "pip-tools"], python=str(venv / "bin" / "python"))
    if proc.returncode != 0:
        raise PipError(f"cannot install pip-tools into {venv}: {proc.stderr.strip()[-400:]}",
                       fix=Phrase("add pip-tools to the wheelhouse (", Hint(("bundle",)),
                                  ") or go online"))
    return compile_bin


COMPILE_SCRIPT = "_pipcompile.py"


def pip_compile(python: Path, version: str | None, source: Source, args: Sequence[str],
                cwd: Path, label: str) -> subprocess.CompletedProcess[str]:
    """pip-compile (pip-tools, installed from ``source``) with ``args``, for ``python``'s
    environment, run in ``cwd``; no time limit: resolving a serving stack may take long. It
    runs as ``_pipcompile.py`` (the same command line), which hashes a file by the sha256
    its index states rather than downloading every platform's file from an index without
    the PyPI JSON API (a mirror)."""
    venv_python = piptools_venv(python, version, source).with_name("python")
    script = Path(__file__).with_name(COMPILE_SCRIPT)
    cmd = file_argv(venv_python, script, args)
    return _run(cmd, None, label=label, cwd=cwd, timeout=None)
