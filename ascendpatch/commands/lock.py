"""``ascendpatch lock [-o FILE]``: the manifest's stack as a hashed requirements lock (pip-tools).

pip-compile resolves for the interpreter it runs in, so it runs from a small venv created *from
the target interpreter* (same Python version, platform and markers), cached under
``$ASCENDPATCH_CACHE`` (default ~/.cache/ascendpatch), both by env/pipadapter. Protected
packages are resolved as the target has them (env/provided.py) and left out of the lock: the
image provides them. The manifest's ``no_deps`` packages are not resolved: they are recorded
pinned with their hashes (env/lockfile.py). ``--resolver`` picks pip-compile or uv
(env/resolver.py). ``ascendpatch install --lock FILE`` installs it with ``--require-hashes``.
The lock names no index (no ``--index-url``, ``--trusted-host``, ``--find-links`` line): pip's
configuration may hold a mirror's token, and the installing machine's pip configuration decides.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from argparse import ArgumentParser, Namespace
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ascendpatch.commands import context
from ascendpatch.commands.context import Context
from ascendpatch.env import lockfile, pipadapter, provided, resolver, stackcheck
from ascendpatch.env.pipadapter import ONLINE, PipError, Source
from ascendpatch.errors import InvalidInputError
from ascendpatch.manifest.model import PackagePin
from ascendpatch.results import CheckResult, CommandResult, Hint, Level, Phrase
from ascendpatch.shell import cliargs
from ascendpatch.store import atomic

DEFAULT_UNSAFE = ("pip", "setuptools", "distribute")
# pip-compile writes the index options it was given or found in pip's configuration into the
# lock, a password in the URL in clear text (pip-tools #1193, #1099); a lock is committed, and
# installs through pip's configuration of the machine that installs it. uv writes none unless
# told to (--emit-index-url, --emit-find-links), and it is never told.
NO_INDEX_OPTIONS = ("--no-emit-index-url", "--no-emit-trusted-host", "--no-emit-find-links")
# what no lock may hold, should a resolver write it all the same (pip's requirement-file
# options: -i/--index-url, --extra-index-url, --trusted-host, -f/--find-links)
_INDEX_OPTION = re.compile(r"^[ \t]*(?P<option>--index-url|--extra-index-url|--trusted-host|"
                           r"--find-links|-i|-f)(?=[\s=]|$|(?<=-[if]))", re.MULTILINE)


def stack_input(ctx: Context, constraints: Path) -> str:
    """pip-compile's input: the stack's pins, less the protected and the ``no_deps`` ones."""
    lines = [f"# ascendpatch lock input for manifest {ctx.manifest.name}",
             f"-c {constraints}"]
    lines += [f"{pin.name}{pin.specifier}" for pin in _compiled_pins(ctx)]
    return "\n".join(lines) + "\n"


def _names(items: Iterable[str]) -> set[str]:
    return {str(canonicalize_name(x)) for x in items}


def _compiled_pins(ctx: Context) -> list[PackagePin]:
    left_out = _names(ctx.manifest.protected) | _names(ctx.manifest.no_deps)
    return [p for p in ctx.manifest.stack.packages if canonicalize_name(p.name) not in left_out]


def _loose_pins(ctx: Context) -> list[str]:
    """The stack's pins that are installed with --no-deps (the manifest's no_deps)."""
    protected, loose = _names(ctx.manifest.protected), _names(ctx.manifest.no_deps)
    return [f"{canonicalize_name(p.name)}{p.specifier}" for p in ctx.manifest.stack.packages
            if canonicalize_name(p.name) in loose - protected]


def run(ctx: Context, output: Path, source: Source = ONLINE,
        mode: resolver.Mode = resolver.Mode.AUTO) -> CommandResult:
    """Resolve the stack into a lock (pip-compile for the pins with dependencies, pip's report
    for the ``no_deps`` ones), then write it: nothing is written unless the whole stack
    resolved."""
    target = ctx.target
    if target.python is None:
        raise InvalidInputError("lock needs an interpreter target (--python)")
    if not _compiled_pins(ctx) and not _loose_pins(ctx):
        raise InvalidInputError(f"manifest {ctx.manifest.name} pins no installable package",
                                fix=Phrase("lock a stack manifest (", Hint(("manifests",)), ")"))
    pins_report = stackcheck.report(target, stackcheck.stack_pins(ctx.manifest), source)
    found = stackcheck.conflicts(ctx.manifest, target, source, pins_report=pins_report)
    if found:
        return CommandResult("lock", tuple(stackcheck.conflict_results(found, "lock",
                                                                       "nothing was locked")))
    unsafe = unsafe_packages(ctx)
    choice = resolver.choose(mode, target, ctx.env)
    text = _compile(ctx, target.python, unsafe, source, choice) if _compiled_pins(ctx) else ""
    loose = _loose_section(ctx, target.python, source, pins_report)
    header = (f"# ascendpatch lock of manifest {ctx.manifest.name} for {target.describe()}\n"
              f"# protected (provided by the image, not locked): {', '.join(unsafe[3:])}\n"
              f"# install: ascendpatch --manifest {ctx.manifest.name} install --lock {output}\n")
    body = header + text + loose
    to_stdout = str(output) == "-"
    if not to_stdout:
        atomic.write_atomic(output, body.encode())
    count = sum(1 for line in text.splitlines() if "==" in line and not line.startswith("#"))
    count += loose.count(lockfile.MARK)
    return CommandResult("lock", (CheckResult("lock", "lock", Level.OK,
                                              f"locked {count} packages with hashes into "
                                              f"{'stdout' if to_stdout else output}"),),
                         payload=body if to_stdout else None, body=resolver.Used(choice))


def _loose_section(ctx: Context, python: Path, source: Source,
                   pins_report: dict[str, Any]) -> str:
    """The ``no_deps`` pins, exact and hashed, from pip's report of the pins (the
    pre-flight's): their dependencies are not resolved, as ``install`` does not install them."""
    pins = _loose_pins(ctx)
    if not pins:
        return ""
    return lockfile.section(pins_report, [Requirement(p).name for p in pins], python, source)


def _compile(ctx: Context, python: Path, unsafe: list[str], source: Source,
             choice: resolver.Choice) -> str:
    """The resolver's lock of the stack (hashed, protected packages left out), or PipError."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = write_input(ctx, Path(tmp))
        result = Path(tmp) / "lock.txt"
        proc = _resolved(ctx, python, unsafe, source, choice, spec, result)
        if proc.returncode != 0:
            said = _unnamed(pipadapter.explain(proc.stdout + chr(10) + proc.stderr)
                            if choice.name == "pip" else resolver.uv_said(proc.stderr),
                            spec, Path(tmp), ctx.manifest.name)
            raise PipError(f"{_tool_of(choice)} could not resolve the stack of manifest "
                           f"{ctx.manifest.name}: {said}; nothing was locked",
                           fix="pin versions that agree in the manifest, or list a package "
                               "under its no_deps")
        text = _index_free(result.read_text(), _tool_of(choice), ctx.manifest.name)
        constraints = Path(tmp) / PROTECTED
        # pip-compile names its input by the path it was given (a temp folder, gone), uv by
        # its name: the input's name either way, so that two locks of one stack are the same
        return text.replace(str(constraints), "protected packages (installed)") \
            .replace(str(spec), spec.name)


def _tool_of(choice: resolver.Choice) -> str:
    return "pip-compile" if choice.name == "pip" else "uv"


def _index_free(text: str, tool: str, manifest: str) -> str:
    """The resolver's output, or PipError when it holds an index option (it may carry an
    index's password and pins this machine's index): refused, never masked, since a lock is
    pip's input, not a message (the option is named, its value never shown)."""
    found = _INDEX_OPTION.search(text)
    if found is None:
        return text
    line = text.count("\n", 0, found.start("option")) + 1
    raise PipError(f"{tool} wrote {found['option']} into the lock of manifest {manifest} "
                   f"(line {line} of its output) although told not to; nothing was locked",
                   fix="lock with the other --resolver, or remove ascendpatch's piptools "
                       "cache folder so that a current pip-tools is installed")


PROTECTED = "protected.txt"


def write_input(ctx: Context, folder: Path) -> Path:
    """The resolver's input, written into ``folder``: ``protected.txt``, each installed
    protected package as a direct URL to its metadata-only wheel (env/provided.py, the wheels
    beside it), and ``MANIFEST.in`` (:func:`stack_input`) constrained by it; the .in file."""
    constraints = folder / PROTECTED
    constraints.write_text(provided.constraints(ctx.target, ctx.manifest.protected, folder))
    spec = folder / f"{ctx.manifest.name}.in"
    spec.write_text(stack_input(ctx, constraints))
    return spec


def unsafe_packages(ctx: Context) -> list[str]:
    """What the lock leaves out: pip's own, and the protected packages (the image's)."""
    return [*DEFAULT_UNSAFE, *sorted(_names(ctx.manifest.protected))]


def _pip_compile_args(unsafe: list[str], source: Source, spec: Path, result: Path) -> list[str]:
    return ["--generate-hashes", "--no-header", "--strip-extras", *NO_INDEX_OPTIONS,
            *[a for u in unsafe for a in ("--unsafe-package", u)], *source.args(),
            "-o", str(result), str(spec)]


def pip_compile_argv(ctx: Context, folder: Path, source: Source = ONLINE) -> list[str]:
    """Stock pip-compile with the arguments ``lock --resolver pip`` gives it (in the input's
    folder; lock runs them through env/_pipcompile.py), its input written into ``folder`` by
    :func:`write_input` and kept there, its output ``folder/lock.txt``: pip's own resolution
    of the request lock makes, for bench/resolver.py to time as the baseline."""
    python = ctx.target.python
    if python is None:
        raise InvalidInputError("lock needs an interpreter target (--python)")
    spec = write_input(ctx, folder)
    binary = pipadapter.piptools_venv(python, ctx.target.python_version, source)
    return [str(binary), *_pip_compile_args(unsafe_packages(ctx), source, spec,
                                            folder / "lock.txt")]


def _resolved(ctx: Context, python: Path, unsafe: list[str], source: Source,
              choice: resolver.Choice, spec: Path, result: Path) \
        -> subprocess.CompletedProcess[str]:
    label = f"{'pip-compile' if choice.name == 'pip' else 'uv pip compile'} {ctx.manifest.name}"
    if choice.name == "uv":
        return resolver.compile_lock(
            choice, python, [*[a for u in unsafe for a in ("--no-emit-package", u)],
                             "-o", str(result), str(spec)], source, spec.parent, label)
    return pipadapter.pip_compile(python, ctx.target.python_version, source,
                                  _pip_compile_args(unsafe, source, spec, result),
                                  cwd=spec.parent, label=label)


def _unnamed(text: str, spec: Path, tmp: Path, manifest: str) -> str:
    """pip-compile's words with its input file (deleted when the user reads them) replaced by
    the manifest and the requirement on that line."""
    lines = spec.read_text().splitlines()

    def line_of(found: re.Match[str]) -> str:
        number = int(found.group(1))
        req = lines[number - 1].strip() if 0 < number <= len(lines) else "?"
        return f"{req} (manifest {manifest})"

    text = re.sub(rf"-r {re.escape(str(spec))} \(line (\d+)\)", line_of, text)
    return re.sub(rf"{re.escape(str(tmp))}/[^\s)]*", f"the lock input of manifest {manifest}", text)


def from_args(args: Namespace) -> CommandResult:
    return run(context.from_args(args), args.output, context.source_from_args(args),
               resolver.Mode(args.resolver))


def configure(p: ArgumentParser) -> None:
    p.add_argument("-o", "--output", type=cliargs.output_file, required=True, metavar="FILE",
                   help="where to write the lock ('-' for stdout)")
    cliargs.resolver_option(p, "the stack (pip-compile --generate-hashes, or uv pip compile "
                               "--generate-hashes)")


COMMAND = cliargs.CommandSpec(
    name="lock",
    help="compile the manifest's stack into a hashed lock (pip-tools or uv)",
    description=("Compile the manifest's stack into a hashed requirements lock with pip-tools "
                 "(or uv: --resolver), resolved for the target's Python; protected packages stay "
                 "with the image, no_deps packages are recorded pinned and hashed, to be "
                 "installed with --no-deps by install --lock."),
    example=("ascendpatch --python ./ascendpatch-sandbox/bin/python --manifest "
             "vllm-ascend-0.18.0 lock -o stack.lock"),
    run=from_args, configure=configure, source=True,
)
