"""``ascendpatch manifests [--manifest NAME|FILE]``: the bundled manifests, each validated, or
the one given, with every problem."""

from __future__ import annotations

import os
from argparse import ArgumentParser, Namespace
from pathlib import PurePath

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from ascendpatch import paths
from ascendpatch.env.reqs import exact_version
from ascendpatch.errors import (
    EXIT_OK,
    EXIT_USAGE,
    MAX_PROBLEMS_SHOWN,
    AscendpatchError,
    ManifestError,
    shown_problems,
)
from ascendpatch.manifest import loader
from ascendpatch.manifest.model import Artifact, Manifest, Variant
from ascendpatch.paths import describe_mode as describe
from ascendpatch.results import CheckResult, CommandResult, Level
from ascendpatch.shell import cliargs

MAX_PATCH_BYTES = 4 << 20  # a patch shown by --patches (the bundled ones: a few KiB)


def run(manifest: str | None = None, *, patches: bool = False) -> CommandResult:
    """Every bundled manifest, validated; ``manifest`` (a name or a file): that one alone,
    exit 2 when it is invalid, with every problem listed. ``patches``: each artifact's patch
    text in --json (what a fleet's check mode shows for a node without the tool)."""
    if manifest is not None:
        result = _checked(manifest, patches)
        return CommandResult("manifests", (result,), exit_code_override=EXIT_USAGE
                             if result.level is Level.FAIL else EXIT_OK)
    return CommandResult("manifests", tuple(_checked(n, patches)
                                            for n in loader.bundled_names()))


def _checked(name: str, patches: bool = False) -> CheckResult:
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
    return CheckResult(name, "manifest", Level.OK, text, data=_fields(manifest, patches))


def _fields(manifest: Manifest, patches: bool = False) -> dict[str, object]:
    """The manifest as fields for --json: scripts need not parse the message."""
    return {
        "name": manifest.name,
        "description": manifest.description,
        "pins": {p.name: str(p.specifier) for p in manifest.stack.packages},
        "protected": list(manifest.protected),
        "artifacts": [{**_artifact(a), **({"patches": _patches(a, manifest)} if patches else {})}
                      for a in manifest.artifacts],
        "optional": [a.id for a in manifest.artifacts if not a.enabled],
    }


def _artifact(artifact: Artifact) -> dict[str, object]:
    """One artifact's fields, with the files it may change in its distribution (any of its
    variants'): what a fleet's check mode previews for a node that has no ascendpatch yet."""
    files = sorted({t for variant in artifact.variants for t in variant.targets})
    return {"id": artifact.id, "kind": artifact.kind, "enabled": artifact.enabled,
            "title": artifact.title, "distribution": artifact.distribution, "files": files}


def _patches(artifact: Artifact, manifest: Manifest) -> list[dict[str, object]]:
    """The patch text of each variant of a ``diff`` artifact (only the variant for the version
    the manifest pins exactly, when it pins one): the manifest's change, not a diff against a
    target's files. Other kinds have no patch: an empty list."""
    if artifact.kind != "diff":
        return []
    pinned = _pinned_version(manifest, artifact.distribution)
    chosen = artifact.variant_for(pinned) if pinned is not None else None
    return [_patch(artifact, v) for v in ((chosen,) if chosen else artifact.variants)
            if v.source is not None]


def _pinned_version(manifest: Manifest, distribution: str | None) -> Version | None:
    for pin in manifest.stack.packages:
        if distribution is not None \
                and canonicalize_name(pin.name) == canonicalize_name(distribution):
            try:
                return exact_version(SpecifierSet(pin.specifier))
            except InvalidSpecifier:
                return None
    return None


def _patch(artifact: Artifact, variant: Variant) -> dict[str, object]:
    raw = variant.source or ""
    entry: dict[str, object] = {"versions": variant.versions, "source": PurePath(raw).name}
    try:
        data = paths.read_regular(loader.resolve_source(artifact, raw, os.environ),
                                  MAX_PATCH_BYTES)
    except paths.NotRegularFileError as exc:
        return {**entry, "error": f"{paths.shown(raw)}: {describe(exc.mode)}, not a patch file"}
    except OSError as exc:
        return {**entry, "error": f"{paths.shown(raw)}: {exc.strerror or exc}"}
    except AscendpatchError as exc:
        return {**entry, "error": str(exc)}
    return {**entry, "diff": data.decode("utf-8", "backslashreplace")}


def from_args(args: Namespace) -> CommandResult:
    given = getattr(args, "manifest", None)
    return run(None if given in (None, loader.DEFAULT_MANIFEST) else str(given),
               patches=bool(getattr(args, "patches", False)))


def configure(p: ArgumentParser) -> None:
    p.add_argument("--patches", action="store_true",
                   help="with --json, each diff artifact's patch text (per variant; only the "
                        "variant for a version the manifest pins exactly)")


COMMAND = cliargs.CommandSpec(
    name="manifests",
    help="list the bundled manifests, or validate one (--manifest FILE)",
    description=("List the bundled manifests, each validated, with their pins and artifacts "
                 "(optional ones marked). With --manifest NAME|FILE: validate that one alone, "
                 "listing every problem with its key path (exit 0 valid, 2 invalid)."),
    example="ascendpatch manifests --manifest manifests/my-stack.yaml",
    run=from_args, configure=configure,
)
