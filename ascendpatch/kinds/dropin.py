"""Kind ``dropin``: replace a whole file, only over a known original.

The file is *pristine* when its sha256 is one of the declared originals (``sha256.before``)
or the RECORD hash of the installed wheel, *applied* when it already equals the drop-in, and
a *conflict* otherwise: only ``--force`` overwrites content ascendpatch does not recognise.
"""

from __future__ import annotations

from ascendpatch.errors import InvalidInputError
from ascendpatch.filestate import FileState
from ascendpatch.hashing import sha256_bytes
from ascendpatch.kinds.base import UNKNOWN, ArtifactSite, Content, FileFinding


def _single_target(site: ArtifactSite) -> str:
    if len(site.variant.targets) != 1:
        raise InvalidInputError(f"artifact {site.artifact.id}: kind {site.artifact.kind} needs "
                                f"exactly one target (has {len(site.variant.targets)})")
    return site.variant.targets[0]


def read_source(site: ArtifactSite) -> bytes:
    if site.source is None:
        raise InvalidInputError(f"artifact {site.artifact.id}: needs a source file")
    try:
        return site.source.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"artifact {site.artifact.id}: source {site.source} cannot be "
                                f"read ({exc})") from None


class DropinKind:
    name = "dropin"
    needs_distribution = True
    independent_files = False

    def prepare(self, site: ArtifactSite) -> None:
        site.path(_single_target(site))
        read_source(site)

    def inspect(self, site: ArtifactSite) -> list[FileFinding]:
        rel = _single_target(site)
        path, current = site.read(rel)
        new = read_source(site)
        hashes = site.variant.sha256.get(rel)
        originals = set(hashes.before if hashes else ())
        record = site.record_sha256(rel)
        if record:
            originals.add(record)
        if current is None:
            return [FileFinding(rel, path, FileState.CONFLICT, None, Content(new), UNKNOWN,
                             f"{rel}: missing (the file this drop-in replaces is not installed)",
                             forceable=True)]
        digest = sha256_bytes(current)
        if current == new:
            return [FileFinding(rel, path, FileState.APPLIED, current, Content(new), UNKNOWN,
                             f"{rel}: drop-in installed")]
        if digest in originals:
            return [FileFinding(rel, path, FileState.PRISTINE, current, Content(new),
                             Content(current), f"{rel}: known original ({digest[:12]})")]
        return [FileFinding(rel, path, FileState.CONFLICT, current, Content(new), Content(current),
                         f"{rel}: unrecognised content (sha256 {digest[:12]}…, not a known "
                         f"original)", forceable=True)]
