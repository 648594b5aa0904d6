"""``ascendpatch manifests``: the bundled manifests, each validated."""

from __future__ import annotations

from argparse import Namespace

from ascendpatch.errors import ManifestError
from ascendpatch.manifest import loader
from ascendpatch.manifest.model import Artifact, Manifest
from ascendpatch.results import CheckResult, CommandResult, Level
from ascendpatch.shell import cliargs


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
        optional = [a.id for a in manifest.artifacts if not a.enabled]
        extra = f", optional: {', '.join(optional)} (--with ID)" if optional else ""
        text = f"{name}: {manifest.description or '(no description)'} [{pins}; " \
               f"{len(manifest.artifacts)} artifact(s){extra}]"
        results.append(CheckResult(name, "manifest", Level.OK, text, data=_fields(manifest)))
    return CommandResult("manifests", tuple(results))


def _fields(manifest: Manifest) -> dict[str, object]:
    """The manifest as fields for --json: scripts need not parse the message."""
    return {
        "name": manifest.name,
        "description": manifest.description,
        "pins": {p.name: str(p.specifier) for p in manifest.stack.packages},
        "protected": list(manifest.protected),
        "artifacts": [_artifact(a) for a in manifest.artifacts],
        "optional": [a.id for a in manifest.artifacts if not a.enabled],
    }


def _artifact(artifact: Artifact) -> dict[str, object]:
    """One artifact's fields, with the files it may change in its distribution (any of its
    variants'): what a fleet's check mode previews for a node that has no ascendpatch yet."""
    files = sorted({t for variant in artifact.variants for t in variant.targets})
    return {"id": artifact.id, "kind": artifact.kind, "enabled": artifact.enabled,
            "title": artifact.title, "distribution": artifact.distribution, "files": files}


def from_args(args: Namespace) -> CommandResult:
    del args
    return run()


COMMAND = cliargs.CommandSpec(
    name="manifests",
    help="list the bundled manifests",
    description=("List the bundled manifests, each validated, with their pins and artifacts "
                 "(optional ones marked)."),
    example="ascendpatch manifests --json",
    run=from_args,
)
