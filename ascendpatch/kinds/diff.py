"""Kind ``diff``: a unified diff applied by content (see :mod:`ascendpatch.patchfile.diffpatch`).

A release no variant covers is decided by its own files when the artifact declares
``needed_if`` (:func:`by_content`): the patch is already in, fixed upstream, a variant's patch
fits, or it must be ported by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from ascendpatch.env.target import Distribution
from ascendpatch.errors import InvalidInputError
from ascendpatch.kinds.base import (
    ArtifactSite,
    BaseKind,
    Content,
    FileFinding,
    Skip,
    read_target_file,
)
from ascendpatch.manifest import needed
from ascendpatch.manifest.model import Artifact, Variant, resolve_path
from ascendpatch.patchfile import porting
from ascendpatch.patchfile.diffpatch import (
    FileAnalysis,
    FilePatch,
    analyze,
    parse_patch,
)
from ascendpatch.patchfile.porting import Verdict
from ascendpatch.pipeline.filestate import FileState
from ascendpatch.results import Hint, Level, Phrase
from ascendpatch.store.root import Root


@lru_cache(maxsize=4096)  # a catalog's patches, parsed once per run
def _load(source: Path, mtime_ns: int) -> tuple[FilePatch, ...]:
    try:
        data = source.read_bytes()  # bytes: a lone \r inside a line is content
    except OSError as exc:
        raise InvalidInputError(f"patch {source} cannot be read ({exc})") from None
    return parse_patch(data, origin=str(source))


def load_patch(source: Path) -> tuple[FilePatch, ...]:
    try:
        mtime = source.stat().st_mtime_ns
    except OSError as exc:
        raise InvalidInputError(f"patch {source} cannot be read ({exc})") from None
    return _load(source, mtime)


class DiffKind(BaseKind):
    name = "diff"

    def choose_variant(self, artifact: Artifact, dist: Distribution,
                       env: Mapping[str, str]) -> Variant | Skip | None:
        """By version; a release no variant covers, by its content (``needed_if``)."""
        variant = super().choose_variant(artifact, dist, env)
        if variant is not None or artifact.needed_if is None:
            return variant
        return _by_content(artifact, dist, env)

    def prepare(self, site: ArtifactSite) -> None:
        if site.source is None:
            raise InvalidInputError(f"artifact {site.artifact.id}: kind diff needs a source patch")
        patches = load_patch(site.source)
        declared = set(site.variant.targets)
        for patch in patches:
            site.path(patch.path)  # the path guard, before anything is written
            if declared and patch.path not in declared:
                raise InvalidInputError(
                    f"{site.source}: changes {patch.path}, which artifact {site.artifact.id} does "
                    f"not list in its targets ({', '.join(sorted(declared))})")

    def inspect(self, site: ArtifactSite) -> list[FileFinding]:
        assert site.source is not None
        return [self._finding(site, patch) for patch in load_patch(site.source)]

    def _finding(self, site: ArtifactSite, patch: FilePatch) -> FileFinding:
        path, current = site.read(patch.path)
        analysis = analyze(patch, current)
        state = analysis.state
        # Unknown for a conflict; a pristine file is its own original, an applied one its own
        # desired content (the same Content, so its digest is computed once).
        desired, original = analysis.forward, analysis.reverse
        if desired.known and patch.mode is not None and current is None:
            desired = replace(desired, mode=patch.mode)
        now = original if state is FileState.PRISTINE else \
            desired if state is FileState.APPLIED else Content(current)
        detail = _detail(site, patch, analysis, now, desired)
        refusal = _revert_refusal(site, patch.path, now, original) \
            if state in (FileState.APPLIED, FileState.PARTIAL) else None
        return FileFinding(patch.path, path, state, current, desired, original, detail,
                        revert_refusal=refusal)


def _revert_refusal(site: ArtifactSite, rel: str, current: Content, original: Content) \
        -> str | None:
    """Without a ledger record, reversing is allowed only when something proves the patch is
    ours: the file is the manifest's ``after``, or it differs from the wheel's RECORD and the
    reversed content is what RECORD lists (a file RECORD does not list: absent)."""
    now = current.sha256
    hashes = site.variant.sha256.get(rel)
    if hashes and now in hashes.after:
        return None
    listed = site.dist.record if site.dist is not None else {}
    if listed:
        entry = listed.get(rel)
        shipped = entry.sha256 if entry is not None else None
        if original.known and now != shipped and original.sha256 == shipped:
            return None
        if now == shipped:
            return ("no ledger record, and it is exactly as the package shipped it (its RECORD "
                    "hash): the change is upstream, not ascendpatch's")
    return ("no ledger record, and nothing proves ascendpatch patched it (not the manifest's "
            "'after' hash; reversing it would not give the RECORD content)")


def _detail(site: ArtifactSite, patch: FilePatch, analysis: FileAnalysis, current: Content,
            desired: Content) -> str:
    text = analysis.summary()
    hashes = site.variant.sha256.get(patch.path)
    if hashes and analysis.state is FileState.PRISTINE and desired.known and hashes.after \
            and current.data is not None and current.sha256 in hashes.before \
            and desired.sha256 not in hashes.after:
        text += " (warning: the patched content does not match the manifest's sha256)"
    return text


# --------------------------------------------------------------------------- by content


@dataclass(frozen=True)
class ContentVerdict:
    """What a release the catalog does not list gets, decided from its files.

    ``word``: APPLIED (a variant's patch is already in), EXACT/OFFSET (that variant's patch
    applies), NOT_NEEDED (the artifact's ``needed_if`` is false: fixed upstream) or
    PORT_BY_HAND (the bug is there, or cannot be ruled out, and no patch fits): a
    :class:`ascendpatch.patchfile.porting.Verdict`.
    """

    word: Verdict
    reason: str
    variant: Variant | None = None


Loader = Callable[[Variant], "tuple[FilePatch, ...]"]


def by_content(artifact: Artifact, read: porting.Reader, load: Loader) -> ContentVerdict:
    """Decide by content. Newest variants are tried first (the nearest to a newer release)."""
    candidates = [v for v in reversed(artifact.variants) if v.source]
    loaded = [(v, load(v)) for v in candidates]
    for variant, patches in loaded:  # already in: status says applied, revert finds it
        files = {p.path: read(p.path) for p in patches}
        if patches and all(_applied(p, files[p.path]) for p in patches):
            return ContentVerdict(Verdict.APPLIED,
                                  f"the patch of variant {variant.versions} is in", variant)
    condition = artifact.needed_if
    assert condition is not None
    finding = needed.evaluate(condition, read(condition.file))
    if finding.needed is False:
        return ContentVerdict(Verdict.NOT_NEEDED, f"fixed upstream: {finding.reason}")
    for variant, patches in loaded:
        files = {p.path: read(p.path) for p in patches}
        word = porting.summary(porting.port(patches, files))
        if word in (Verdict.EXACT, Verdict.OFFSET):
            return ContentVerdict(word, f"{finding.reason}; the patch of variant "
                                        f"{variant.versions} fits", variant)
    return ContentVerdict(Verdict.PORT_BY_HAND, f"{finding.reason}, and no variant's patch fits")


def _applied(patch: FilePatch, current: bytes | None) -> bool:
    if current is None:
        return False
    return analyze(patch, current).state is FileState.APPLIED


def _by_content(artifact: Artifact, dist: Distribution, env: Mapping[str, str]) \
        -> Variant | Skip:
    """A release no variant covers: its own files say fixed upstream, patchable, or not."""
    def read(rel: str) -> bytes | None:
        path = Root(dist.location).join(rel, origin=f"artifact {artifact.id}")
        return read_target_file(path, artifact)

    def load(variant: Variant) -> tuple[FilePatch, ...]:
        assert variant.source is not None
        return load_patch(resolve_path(artifact, variant.source, env, "source"))

    verdict = by_content(artifact, read, load)
    release = f"{dist.name} {dist.version}"
    if verdict.word is Verdict.NOT_NEEDED:
        return Skip(f"not needed for {release} (not in the catalog, decided by content): "
                    f"{verdict.reason}")
    if verdict.variant is None:
        return Skip(f"{release} is not in the catalog and needs the fix by hand: "
                    f"{verdict.reason}", Level.FAIL,
                    Phrase(Hint(("port", artifact.id, "--to", str(dist.version), "--write"))))
    return verdict.variant
