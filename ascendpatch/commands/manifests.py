"""``ascendpatch manifests [--manifest NAME|FILE]``: the bundled manifests, each validated, or
the one given, with every problem."""

from __future__ import annotations

from argparse import Namespace

from ascendpatch.errors import (
    EXIT_OK,
    EXIT_USAGE,
    MAX_PROBLEMS_SHOWN,
    ManifestError,
    shown_problems,
)
from ascendpatch.manifest import loader
from ascendpatch.manifest.model import Artifact, Manifest
from ascendpatch.results import CheckResult, CommandResult, Level
from ascendpatch.shell import cliargs


def run(manifest: str | None = None) -> CommandResult:
    """Every bundled manifest, validated; ``manifest`` (a name or a file): that one alone,
    exit 2 when it is invalid, with every problem listed."""
    if manifest is not None:
        result = _checked(manifest)
        return CommandResult("manifests", (result,), exit_code_override=EXIT_USAGE
                             if result.level is Level.FAIL else EXIT_OK)
    return CommandResult("manifests", tuple(_checked(n) for n in loader.bundled_names()))


def _checked(name: str) -> CheckResult:
    try:
        manifest = loader.load(name)
    except ManifestError as exc:
        count = len(exc.problems)
        return CheckResult(name, "manifest", Level.FAIL,
                           f"{name}: invalid, {count} problem{'s' if count != 1 else ''}",
                           details=shown_problems(exc.problems),
                           data={"problems": exc.problems[:MAX_PROBLEMS_SHOWN]})
    pins = ", ".join(f"{p.name}{p.specifier}" for p in manifest.stack.packages) or "no pins"
    optional = [a.id for a in manifest.artifacts if not a.enabled]
    extra = f", optional: {', '.join(optional)} (--with ID)" if optional else ""
    text = f"{name}: {manifest.description or '(no description)'} [{pins}; " \
           f"{len(manifest.artifacts)} artifact(s){extra}]"
    return CheckResult(name, "manifest", Level.OK, text, data=_fields(manifest))


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
    given = getattr(args, "manifest", None)
    return run(None if given in (None, loader.DEFAULT_MANIFEST) else str(given))


COMMAND = cliargs.CommandSpec(
    name="manifests",
    help="list the bundled manifests, or validate one (--manifest FILE)",
    description=("List the bundled manifests, each validated, with their pins and artifacts "
                 "(optional ones marked). With --manifest NAME|FILE: validate that one alone, "
                 "listing every problem with its key path (exit 0 valid, 2 invalid)."),
    example="ascendpatch manifests --manifest manifests/my-stack.yaml",
    run=from_args,
)
