"""``ascendpatch manifests``: the bundled manifests, each validated."""

from __future__ import annotations

from argparse import Namespace

from ascendpatch.errors import ManifestError
from ascendpatch.manifest import loader
from ascendpatch.results import CheckResult, CommandResult, Level


def run() -> CommandResult:
    results = []
    for name in loader.bundled_names():
        try:
            manifest = loader.load(name)
        except ManifestError as exc:
            results.append(CheckResult(name, "manifest", Level.FAIL, f"{name}: invalid: {exc}",
                                       details=tuple(exc.problems)))
            continue
        pins = ", ".join(f"{p.name}{p.specifier}" for p in manifest.stack.packages) or "no pins"
        text = f"{name}: {manifest.description or '(no description)'} [{pins}; " \
               f"{len(manifest.artifacts)} artifact(s)]"
        results.append(CheckResult(name, "manifest", Level.OK, text))
    return CommandResult("manifests", tuple(results))


def from_args(args: Namespace) -> CommandResult:
    del args
    return run()
