"""``ascendpatch catalog-check [VERSION...] [--markdown FILE] [--new]``: every diff artifact
against every release (a matrix)."""

from __future__ import annotations

import os
from argparse import ArgumentParser, Namespace
from pathlib import Path

from packaging.version import Version

from ascendpatch import cliargs, progress
from ascendpatch.commands import context
from ascendpatch.env import releases
from ascendpatch.env.pipadapter import Source
from ascendpatch.errors import InvalidInputError
from ascendpatch.inspect.portcheck import LEVEL, patch_loader, release_reader, verdicts
from ascendpatch.kinds.diff import by_content
from ascendpatch.manifest.model import Artifact, Manifest, version_in
from ascendpatch.patchfile import porting
from ascendpatch.results import CheckResult, CommandResult, Level


def catalog_check(manifest: Manifest, versions: list[str], source: Source,
                  markdown: Path | None = None, *, new: bool = False) -> CommandResult:
    artifacts = [a for a in manifest.artifacts if a.kind == "diff" and a.distribution]
    if not artifacts:
        raise InvalidInputError(f"manifest {manifest.name} has no diff artifact to check")
    if new and versions:
        raise InvalidInputError("give either --new or VERSION..., not both")
    env = dict(os.environ)
    rows: list[CheckResult] = []
    matrix: dict[str, dict[str, str]] = {}
    for artifact in artifacts:
        assert artifact.distribution is not None
        wanted = versions or releases.versions_on_index(artifact.distribution, source)
        if new:
            wanted = newer_than_catalog(artifact, wanted)
            if not wanted:
                rows.append(CheckResult(f"{artifact.id}@new", "catalog", Level.OK,
                                        f"{artifact.id}: no release of {artifact.distribution} "
                                        f"on the index is newer than the catalog"))
        for version in sorted(wanted, key=Version):
            cell, level = _cell(artifact, version, source, env)
            matrix.setdefault(artifact.id, {})[version] = cell
            rows.append(CheckResult(f"{artifact.id}@{version}", "catalog", level,
                                    f"{artifact.id} x {artifact.distribution} {version}: {cell}",
                                    data={"artifact": artifact.id, "version": version,
                                          "verdict": cell}))
            progress.item(rows[-1])  # shown as each release is checked
    table = markdown_table(matrix)
    if markdown is not None:
        markdown.write_text(table)
    return CommandResult("catalog-check", tuple(rows), summary=table.rstrip("\n"),
                         extra={"matrix": matrix}, streamed=True)


def known_to_catalog(artifact: Artifact, version: Version) -> bool:
    claimed = artifact.not_needed is not None and version_in(artifact.not_needed[0], version)
    return claimed or artifact.variant_for(version) is not None


def newer_than_catalog(artifact: Artifact, versions: list[str]) -> list[str]:
    """The releases above the newest one the catalog names (by a variant or not_needed)."""
    parsed = sorted(Version(v) for v in versions)
    known = [v for v in parsed if known_to_catalog(artifact, v)]
    if not known:
        return [str(v) for v in parsed]
    return [str(v) for v in parsed if v > known[-1]]


def _cell(artifact: Artifact, version: str, source: Source, env: dict[str, str]) \
        -> tuple[str, Level]:
    parsed = Version(version)
    if artifact.not_needed and version_in(artifact.not_needed[0], parsed):
        return "not needed", Level.OK
    covering = artifact.variant_for(parsed)
    if covering is None and artifact.needed_if is not None:
        verdict = by_content(artifact, release_reader(artifact, version, source),
                             patch_loader(artifact, env))
        return _CONTENT_CELL[verdict.word]
    found, _files = verdicts(artifact, covering or artifact.variants[-1], version, source, env)
    word = porting.summary(found)
    if covering is None:  # a release no variant claims: information, not a broken catalog
        return f"{word} (no variant)", Level.WARN
    return word, LEVEL[word]


# A release the catalog does not list, decided by its content (the artifact's needed_if).
_CONTENT_CELL = {
    porting.NOT_NEEDED: ("not needed (fixed upstream)", Level.OK),
    porting.APPLIED: (f"{porting.OBSOLETE} (no variant)", Level.WARN),
    porting.EXACT: (f"{porting.EXACT} (no variant)", Level.WARN),
    porting.OFFSET: (f"{porting.OFFSET} (no variant)", Level.WARN),
    porting.PORT_BY_HAND: (porting.PORT_BY_HAND, Level.FAIL),
}


def markdown_table(matrix: dict[str, dict[str, str]]) -> str:
    versions = sorted({v for row in matrix.values() for v in row}, key=Version)
    lines = ["| artifact | " + " | ".join(versions) + " |",
             "|---|" + "---|" * len(versions)]
    for artifact_id, row in matrix.items():
        lines.append(f"| {artifact_id} | " + " | ".join(row.get(v, "") for v in versions) + " |")
    return "\n".join(lines) + "\n"


def from_args(args: Namespace) -> CommandResult:
    return catalog_check(context.manifest_from_args(args), args.versions,
                         context.source_from_args(args), args.markdown, new=args.new)


def configure(p: ArgumentParser) -> None:
    p.add_argument("versions", nargs="*", metavar="VERSION",
                   help="default: every release (wheel or sdist) on the index (or wheelhouse)")
    p.add_argument("--markdown", type=cliargs.file_in_a_folder, metavar="FILE",
                   help="also write the matrix as a Markdown table to FILE")
    p.add_argument("--new", action="store_true",
                   help="only the releases newer than the catalog, each with a verdict "
                        "decided by content (a weekly maintainer check)")


COMMAND = cliargs.CommandSpec(
    name="catalog-check",
    help="matrix of diff artifacts x releases",
    description=("Matrix of every diff artifact against every release with wheels (a table on a "
                 "terminal, --json, --markdown FILE)."),
    example="ascendpatch catalog-check 0.18.0 0.23.0",
    run=from_args, configure=configure, source=True,
)
