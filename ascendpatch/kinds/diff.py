"""Kind ``diff``: a unified diff applied by content (see :mod:`ascendpatch.diffpatch`)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ascendpatch.diffpatch import (
    FileAnalysis,
    FilePatch,
    FileState,
    analyze,
    apply_forward,
    apply_reverse,
    parse_patch,
)
from ascendpatch.errors import InvalidInputError
from ascendpatch.hashing import sha256_bytes
from ascendpatch.kinds.base import UNKNOWN, Content, FilePlan, FileStatus, KindContext

_STATUS = {FileState.PRISTINE: FileStatus.PRISTINE, FileState.APPLIED: FileStatus.APPLIED,
           FileState.PARTIAL: FileStatus.PARTIAL, FileState.CONFLICT: FileStatus.CONFLICT}


@lru_cache(maxsize=64)
def _load(source: Path, mtime_ns: int) -> tuple[FilePatch, ...]:
    try:
        text = source.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise InvalidInputError(f"patch {source} cannot be read ({exc})") from None
    return parse_patch(text, origin=str(source))


def load_patch(source: Path) -> tuple[FilePatch, ...]:
    try:
        mtime = source.stat().st_mtime_ns
    except OSError as exc:
        raise InvalidInputError(f"patch {source} cannot be read ({exc})") from None
    return _load(source, mtime)


class DiffKind:
    name = "diff"
    needs_distribution = True
    independent_files = False

    def prepare(self, ctx: KindContext) -> None:
        if ctx.source is None:
            raise InvalidInputError(f"artifact {ctx.artifact.id}: kind diff needs a source patch")
        patches = load_patch(ctx.source)
        declared = set(ctx.variant.targets)
        for patch in patches:
            ctx.path(patch.path)  # the path guard, before anything is written
            if declared and patch.path not in declared:
                raise InvalidInputError(
                    f"{ctx.source}: changes {patch.path}, which artifact {ctx.artifact.id} does "
                    f"not list in its targets ({', '.join(sorted(declared))})")

    def inspect(self, ctx: KindContext) -> list[FilePlan]:
        assert ctx.source is not None
        return [self._plan(ctx, patch) for patch in load_patch(ctx.source)]

    def _plan(self, ctx: KindContext, patch: FilePatch) -> FilePlan:
        path, current = ctx.read(patch.path)
        analysis = analyze(patch, current)
        state = _STATUS[analysis.state]
        desired = original = UNKNOWN
        if state in (FileStatus.PRISTINE, FileStatus.PARTIAL):
            desired = Content(apply_forward(patch, current, analysis))
        if state in (FileStatus.APPLIED, FileStatus.PARTIAL):
            original = Content(apply_reverse(patch, current, analysis))
        if state is FileStatus.PRISTINE:
            original = Content(current)
        if state is FileStatus.APPLIED:
            desired = Content(current)
        detail = _detail(ctx, patch, analysis, current, desired)
        return FilePlan(patch.path, path, state, current, desired, original, detail)


def _detail(ctx: KindContext, patch: FilePatch, analysis: FileAnalysis, current: bytes | None,
            desired: Content) -> str:
    text = analysis.summary()
    hashes = ctx.variant.sha256.get(patch.path)
    if hashes and analysis.state is FileState.PRISTINE and desired.known and hashes.after:
        produced = sha256_bytes(desired.data) if desired.data is not None else None
        if current is not None and sha256_bytes(current) in hashes.before and \
                produced not in hashes.after:
            text += " (warning: the patched content does not match the manifest's sha256)"
    return text
