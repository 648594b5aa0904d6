"""``ascendpatch bundle DIR``: a wheelhouse for air-gapped hosts (run on a connected machine).

It holds ascendpatch itself (built from this checkout), its dependencies and pip-tools, so that
``bash install.sh --wheelhouse DIR`` and ``ascendpatch lock --offline`` work with no index.
"""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

from ascendpatch import data, pipadapter
from ascendpatch.errors import InvalidInputError
from ascendpatch.pipadapter import PipError
from ascendpatch.results import CheckResult, CommandResult, Level


def source_tree() -> Path:
    root = data.data_root()
    if (root / "pyproject.toml").is_file():
        return root
    raise InvalidInputError("bundle builds ascendpatch from its source checkout, and this "
                            "ascendpatch was installed from a wheel",
                            fix="run 'ascendpatch bundle' from a git checkout (bash install.sh "
                                "does)")


def run(folder: Path) -> CommandResult:
    folder.mkdir(parents=True, exist_ok=True)
    steps = [["wheel", "--quiet", "--disable-pip-version-check", "-w", str(folder),
              str(source_tree())],
             ["download", "--quiet", "--disable-pip-version-check", "-d", str(folder),
              "pip-tools", "pip", "setuptools", "wheel"]]
    for args in steps:
        proc = pipadapter.run_pip(args)
        if proc.returncode != 0:
            raise PipError(f"pip {args[0]} failed: {proc.stderr.strip()[-500:]}")
    wheels = sorted(p.name for p in folder.glob("*.whl"))
    text = f"wheelhouse {folder}: {len(wheels)} wheels (ascendpatch, its dependencies, pip-tools)"
    return CommandResult("bundle", (CheckResult("bundle", "bundle", Level.OK, text),))


def from_args(args: Namespace) -> CommandResult:
    return run(args.folder)
