"""Pure evaluation: desired vs actual state of each artifact. Reads files, writes nothing.

The words (ArtifactPlan, ArtifactSite, FileFinding, FileState, Context) are defined in the
glossary of :mod:`ascendpatch.kinds.base`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ascendpatch.env.pipadapter import pip_shown
from ascendpatch.env.target import Target
from ascendpatch.errors import InvalidInputError
from ascendpatch.kinds import KINDS
from ascendpatch.kinds.base import ArtifactSite, FileFinding, Skip
from ascendpatch.manifest.loader import resolve_source
from ascendpatch.manifest.model import Artifact, Manifest, version_in
from ascendpatch.manifest.schema import did_you_mean
from ascendpatch.pipeline.filestate import FileState
from ascendpatch.results import Hint, Level, Phrase


@dataclass(frozen=True)
class ArtifactPlan:
    """One artifact's findings (``files``) at its site, or why it is skipped."""

    artifact: Artifact
    site: ArtifactSite | None
    skip: Skip | None
    files: tuple[FileFinding, ...] = ()

    @property
    def state(self) -> FileState | None:
        """The artifact's state, folded from its files' (None: it has no file)."""
        return FileState.combine(f.state for f in self.files)


def select(manifest: Manifest, ids: list[str], enabled_extra: tuple[str, ...] = ()) \
        -> list[Artifact]:
    """The artifacts a command acts on: named ones, else every enabled one (+ --with ones).
    The --with ids were checked when the command's context was built (context.check_with)."""
    if ids:
        unknown = [i for i in ids if manifest.artifact(i) is None]
        if unknown:
            known = [a.id for a in manifest.artifacts]
            raise InvalidInputError(f"unknown artifact id(s) {', '.join(unknown)} in manifest "
                                    f"{manifest.name}{did_you_mean(unknown[0], known)} "
                                    f"(known: {', '.join(known) or 'none'})")
        return [a for a in manifest.artifacts if a.id in ids]
    return [a for a in manifest.artifacts if a.enabled or a.id in enabled_extra]


def site_for(artifact: Artifact, target: Target, env: Mapping[str, str],
                required: bool = True) -> ArtifactSite | Skip:
    """Pick the variant for the installed version (the kind chooses), or say why the artifact
    does not apply."""
    kind = KINDS[artifact.kind]
    if not kind.needs_distribution:  # e.g. the Hugging Face cache: its own root, no version
        try:
            root = kind.root_for(artifact, env) or target.root
        except InvalidInputError as exc:  # e.g. ${MODEL_DIR} is not set
            if required:
                raise
            return Skip.from_error(exc)
        return ArtifactSite(artifact, artifact.variants[0], None, root, None, dict(env))
    dist = target.get(artifact.distribution) if artifact.distribution else None
    if dist is None:
        return Skip(f"{artifact.distribution or '(no distribution named)'} is not installed "
                    f"in {target.describe()}")
    version = dist.parsed_version
    if version is None:
        return Skip(f"{dist.name} {dist.version} is not a PEP 440 version", Level.WARN)
    if artifact.not_needed and version_in(artifact.not_needed[0], version):
        return Skip(f"not needed for {dist.name} {dist.version}: "
                    f"{artifact.not_needed[1]}")
    variant = kind.choose_variant(artifact, dist, env)
    if isinstance(variant, Skip):
        return variant
    if variant is None:
        return Skip(f"no variant for {dist.name} {dist.version} (covers "
                    f"{artifact.covered_versions()})", Level.WARN,
                    Phrase("check whether this release needs the fix: ",
                           Hint(("port", artifact.id, "--to", str(dist.version)))))
    try:
        source = resolve_source(artifact, variant.source, env) if variant.source else None
    except InvalidInputError as exc:
        if required:
            raise
        return Skip.from_error(exc)
    return ArtifactSite(artifact, variant, dist, dist.location, source, dict(env),
                        pip_shown(target) if target.python is not None else ())


def prepare(artifacts: list[Artifact], target: Target, env: Mapping[str, str],
            required: bool = True) -> list[tuple[Artifact, ArtifactSite | Skip]]:
    """Resolve and validate every artifact before anything is written (bad input -> exit 2).

    ``required`` False (revert of everything): an artifact whose source needs an unset
    variable is skipped with a warning instead of stopping the whole command.
    """
    prepared: list[tuple[Artifact, ArtifactSite | Skip]] = []
    for artifact in artifacts:
        site = site_for(artifact, target, env, required or artifact.enabled)
        if isinstance(site, ArtifactSite):
            KINDS[artifact.kind].prepare(site)
        prepared.append((artifact, site))
    return prepared


def evaluate(artifact: Artifact, site: ArtifactSite | Skip) -> ArtifactPlan:
    if isinstance(site, Skip):
        return ArtifactPlan(artifact, None, site)
    files = tuple(KINDS[artifact.kind].inspect(site))
    return ArtifactPlan(artifact, site, None, files)

