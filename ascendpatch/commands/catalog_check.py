"""``ascendpatch catalog-check [VERSION...] [--markdown FILE] [--new]``: every diff artifact
against every release (a matrix)."""

from __future__ import annotations

import os
from argparse import ArgumentParser, Namespace
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

from ascendpatch import progress
from ascendpatch.commands import context
from ascendpatch.env import releases
from ascendpatch.env.pipadapter import Source
from ascendpatch.errors import InvalidInputError
from ascendpatch.inspect.portcheck import LEVEL, patch_loader, release_reader, verdicts
from ascendpatch.kinds.diff import by_content
from ascendpatch.manifest.model import Artifact, Manifest, version_in
from ascendpatch.patchfile import porting
from ascendpatch.patchfile.porting import Verdict
from ascendpatch.results import Cell, CheckResult, CommandResult, Level, Table, Tone
from ascendpatch.shell import cliargs


@dataclass(frozen=True)
class MatrixCell:
    """One artifact x release verdict; ``note`` qualifies it ("no variant", "fixed upstream")."""

    verdict: Verdict
    note: str = ""

    @property
    def text(self) -> str:
        return self.verdict.value + (f" ({self.note})" if self.note else "")

    @property
    def tone(self) -> Tone:
        return _TONE.get(self.verdict, Tone.CAUTION)


_TONE = {Verdict.EXACT: Tone.GOOD, Verdict.NOT_NEEDED: Tone.QUIET, Verdict.CONFLICT: Tone.BAD}


@dataclass(frozen=True)
class CatalogMatrix:
    """catalog-check's payload: artifact id -> release -> verdict, in the order checked."""

    cells: dict[str, dict[str, MatrixCell]] = field(default_factory=dict)

    def add(self, artifact_id: str, version: str, cell: MatrixCell) -> None:
        self.cells.setdefault(artifact_id, {})[version] = cell

    def versions(self) -> list[str]:
        return sorted({v for row in self.cells.values() for v in row}, key=Version)

    def words(self) -> dict[str, dict[str, str]]:
        return {aid: {v: c.text for v, c in row.items()} for aid, row in self.cells.items()}

    def json(self) -> dict[str, object]:
        return {"matrix": self.words()}

    def table(self) -> Table | None:
        """One row per release (oldest first), one column per artifact."""
        if not self.cells:
            return None
        rows = tuple((Cell(version), *(_table_cell(row.get(version))
                                       for row in self.cells.values()))
                     for version in self.versions())
        return Table("diff artifacts x vllm-ascend releases", ("release", *self.cells), rows,
                     stands_in=True)


def _table_cell(cell: MatrixCell | None) -> Cell:
    return Cell("", Tone.CAUTION) if cell is None else Cell(cell.text, cell.tone)


def catalog_check(manifest: Manifest, versions: list[str], source: Source,
                  markdown: Path | None = None, *, new: bool = False) -> CommandResult:
    artifacts = [a for a in manifest.artifacts if a.kind == "diff" and a.distribution]
    if not artifacts:
        raise InvalidInputError(f"manifest {manifest.name} has no diff artifact to check")
    if new and versions:
        raise InvalidInputError("give either --new or VERSION..., not both")
    env = dict(os.environ)
    rows: list[CheckResult] = []
    matrix = CatalogMatrix()
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
            matrix.add(artifact.id, version, cell)
            rows.append(CheckResult(f"{artifact.id}@{version}", "catalog", level,
                                    f"{artifact.id} x {artifact.distribution} {version}: "
                                    f"{cell.text}",
                                    data={"artifact": artifact.id, "version": version,
                                          "verdict": cell.text}))
            progress.item(rows[-1])  # shown as each release is checked
    table = markdown_table(matrix)
    if markdown is not None:
        markdown.write_text(table)
    return CommandResult("catalog-check", tuple(rows), summary=table.rstrip("\n"),
                         body=matrix, streamed=True)


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
        -> tuple[MatrixCell, Level]:
    parsed = Version(version)
    if artifact.not_needed and version_in(artifact.not_needed[0], parsed):
        return MatrixCell(Verdict.NOT_NEEDED), Level.OK
    covering = artifact.variant_for(parsed)
    if covering is None and artifact.needed_if is not None:
        verdict = by_content(artifact, release_reader(artifact, version, source),
                             patch_loader(artifact, env))
        return _CONTENT_CELL[verdict.word]
    found, _files = verdicts(artifact, covering or artifact.variants[-1], version, source, env)
    word = porting.summary(found)
    if covering is None:  # a release no variant claims: information, not a broken catalog
        return MatrixCell(word, "no variant"), Level.WARN
    return MatrixCell(word), LEVEL[word]


# A release the catalog does not list, decided by its content (the artifact's needed_if).
_CONTENT_CELL = {
    Verdict.NOT_NEEDED: (MatrixCell(Verdict.NOT_NEEDED, "fixed upstream"), Level.OK),
    Verdict.APPLIED: (MatrixCell(Verdict.OBSOLETE, "no variant"), Level.WARN),
    Verdict.EXACT: (MatrixCell(Verdict.EXACT, "no variant"), Level.WARN),
    Verdict.OFFSET: (MatrixCell(Verdict.OFFSET, "no variant"), Level.WARN),
    Verdict.PORT_BY_HAND: (MatrixCell(Verdict.PORT_BY_HAND), Level.FAIL),
}


def markdown_table(matrix: CatalogMatrix) -> str:
    versions = matrix.versions()
    lines = ["| artifact | " + " | ".join(versions) + " |",
             "|---|" + "---|" * len(versions)]
    for artifact_id, row in matrix.words().items():
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
