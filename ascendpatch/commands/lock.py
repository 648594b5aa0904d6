"""``ascendpatch lock [-o FILE]``: the manifest's stack as a hashed requirements lock (pip-tools).

pip-compile resolves for the interpreter it runs in, so it runs from a small venv created *from
the target interpreter* (same Python version, platform and markers), cached under
``$ASCENDPATCH_CACHE`` (default ~/.cache/ascendpatch), both by env/pipadapter. Protected
packages are resolved against their installed versions (a constraints file) and left out of
the lock: the image provides them. ``ascendpatch install --lock FILE`` installs it with
``--require-hashes``.
"""

from __future__ import annotations

import tempfile
from argparse import ArgumentParser, Namespace
from pathlib import Path

from packaging.utils import canonicalize_name

from ascendpatch.commands import context
from ascendpatch.commands.context import Context
from ascendpatch.env import pipadapter, pipdiff, stackcheck
from ascendpatch.env.pipadapter import ONLINE, PipError, Source
from ascendpatch.errors import InvalidInputError
from ascendpatch.results import CheckResult, CommandResult, Hint, Level, Phrase
from ascendpatch.shell import cliargs
from ascendpatch.store import atomic

DEFAULT_UNSAFE = ("pip", "setuptools", "distribute")


def stack_input(ctx: Context, constraints: Path) -> str:
    protected = {canonicalize_name(p) for p in ctx.manifest.protected}
    lines = [f"# ascendpatch lock input for manifest {ctx.manifest.name}",
             f"-c {constraints}"]
    for pin in ctx.manifest.stack.packages:
        if canonicalize_name(pin.name) not in protected:
            lines.append(f"{pin.name}{pin.specifier}")
    return "\n".join(lines) + "\n"


def run(ctx: Context, output: Path, source: Source = ONLINE) -> CommandResult:
    """Resolve the stack into a lock (pip-compile), then write it: nothing is written unless
    the whole stack resolved."""
    target = ctx.target
    if target.python is None:
        raise InvalidInputError("lock needs an interpreter target (--python)")
    protected = {canonicalize_name(x) for x in ctx.manifest.protected}
    if not [p for p in ctx.manifest.stack.packages if canonicalize_name(p.name) not in protected]:
        raise InvalidInputError(f"manifest {ctx.manifest.name} pins no installable package",
                                fix=Phrase("lock a stack manifest (", Hint(("manifests",)), ")"))
    found = stackcheck.conflicts(ctx.manifest, target, source)
    if found:
        return CommandResult("lock", tuple(stackcheck.conflict_results(found, "lock",
                                                                       "nothing was locked")))
    unsafe = [*DEFAULT_UNSAFE, *sorted(protected)]
    text = _compile(ctx, target.python, unsafe, source)
    header = (f"# ascendpatch lock of manifest {ctx.manifest.name} for {target.describe()}\n"
              f"# protected (provided by the image, not locked): {', '.join(unsafe[3:])}\n"
              f"# install: ascendpatch --manifest {ctx.manifest.name} install --lock {output}\n")
    to_stdout = str(output) == "-"
    if not to_stdout:
        atomic.write_atomic(output, (header + text).encode())
    count = sum(1 for line in text.splitlines() if "==" in line and not line.startswith("#"))
    return CommandResult("lock", (CheckResult("lock", "lock", Level.OK,
                                              f"locked {count} packages with hashes into "
                                              f"{'stdout' if to_stdout else output}"),),
                         payload=header + text if to_stdout else None)


def _compile(ctx: Context, python: Path, unsafe: list[str], source: Source) -> str:
    """pip-compile's lock of the stack (hashed, protected packages left out), or PipError."""
    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "protected.txt"
        constraints.write_text(pipdiff.constraints(ctx.target, ctx.manifest.protected))
        spec = Path(tmp) / f"{ctx.manifest.name}.in"
        spec.write_text(stack_input(ctx, constraints))
        result = Path(tmp) / "lock.txt"
        args = ["--generate-hashes", "--no-header", "--strip-extras",
                *[a for u in unsafe for a in ("--unsafe-package", u)], *source.args(),
                "-o", str(result), str(spec)]
        proc = pipadapter.pip_compile(python, ctx.target.python_version, source, args,
                                      cwd=Path(tmp), label=f"pip-compile {ctx.manifest.name}")
        if proc.returncode != 0:
            raise PipError(f"pip-compile could not resolve the stack of {ctx.manifest.name}: "
                           f"{pipadapter.explain(proc.stdout + chr(10) + proc.stderr)}; "
                           "nothing was locked",
                           fix="pin versions that agree in the manifest, or list a package "
                               "under its no_deps")
        return result.read_text().replace(str(constraints), "protected packages (installed)")


def from_args(args: Namespace) -> CommandResult:
    return run(context.from_args(args), args.output, context.source_from_args(args))


def configure(p: ArgumentParser) -> None:
    p.add_argument("-o", "--output", type=cliargs.output_file, required=True, metavar="FILE",
                   help="where to write the lock ('-' for stdout)")


COMMAND = cliargs.CommandSpec(
    name="lock",
    help="compile the manifest's stack into a hashed lock (pip-tools)",
    description=("Compile the manifest's stack into a hashed requirements lock with pip-tools, "
                 "resolved for the target's Python; protected packages stay with the image."),
    example="ascendpatch --manifest vllm-ascend-0.18.0 lock -o stack.lock",
    run=from_args, configure=configure, source=True,
)
