"""A diff artifact's patch against a release's own files, read from its wheel or sdist.

What ``port`` (one artifact, one release) and ``catalog-check`` (every artifact, every release)
both read; read-only, it never writes the manifest or a patch.
"""

from __future__ import annotations

from ascendpatch.env import releases
from ascendpatch.env.pipadapter import Source
from ascendpatch.kinds.diff import Loader, load_patch
from ascendpatch.manifest.loader import resolve_source
from ascendpatch.manifest.model import Artifact, Variant
from ascendpatch.patchfile import porting
from ascendpatch.patchfile.diffpatch import FilePatch
from ascendpatch.patchfile.porting import Verdict
from ascendpatch.results import Level

# The level of each hunk verdict (and of a summary word) as the port / catalog lines show it.
LEVEL = {Verdict.EXACT: Level.OK, Verdict.OFFSET: Level.WARN, Verdict.OBSOLETE: Level.WARN,
         Verdict.CONFLICT: Level.FAIL, Verdict.GONE: Level.FAIL}




def verdicts(artifact: Artifact, variant: Variant, version: str, source: Source,
             env: dict[str, str]) -> tuple[list[porting.HunkVerdict], dict[str, bytes | None]]:
    assert variant.source is not None and artifact.distribution is not None
    patches = load_patch(resolve_source(artifact, variant.source, env))
    archive = releases.archive(artifact.distribution, version, source)
    files = {p.path: releases.read_member(archive, p.path) for p in patches}
    return porting.port(patches, files), files


def release_reader(artifact: Artifact, version: str, source: Source) -> porting.Reader:
    """The release's files by path, each read once from its wheel or sdist."""
    assert artifact.distribution is not None
    archive = releases.archive(artifact.distribution, version, source)
    cache: dict[str, bytes | None] = {}

    def read(rel: str) -> bytes | None:
        if rel not in cache:
            cache[rel] = releases.read_member(archive, rel)
        return cache[rel]
    return read


def patch_loader(artifact: Artifact, env: dict[str, str]) -> Loader:
    def load(variant: Variant) -> tuple[FilePatch, ...]:
        assert variant.source is not None
        return load_patch(resolve_source(artifact, variant.source, env))
    return load
