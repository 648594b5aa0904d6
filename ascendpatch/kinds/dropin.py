"""Kind ``dropin``: replace a whole file, only over a known original.

The file is *pristine* when its sha256 is one of the declared originals (``sha256.before``)
or the RECORD hash of the installed wheel, *applied* when it already equals the drop-in, and
a *conflict* otherwise: only ``--force`` overwrites content ascendpatch does not recognise.
"""

from __future__ import annotations

from ascendpatch.errors import InvalidInputError
from ascendpatch.hashing import sha256_bytes
from ascendpatch.kinds.base import UNKNOWN, Content, FilePlan, FileStatus, KindContext


def _single_target(ctx: KindContext) -> str:
    if len(ctx.variant.targets) != 1:
        raise InvalidInputError(f"artifact {ctx.artifact.id}: kind {ctx.artifact.kind} needs "
                                f"exactly one target (has {len(ctx.variant.targets)})")
    return ctx.variant.targets[0]


def read_source(ctx: KindContext) -> bytes:
    if ctx.source is None:
        raise InvalidInputError(f"artifact {ctx.artifact.id}: needs a source file")
    try:
        return ctx.source.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"artifact {ctx.artifact.id}: source {ctx.source} cannot be "
                                f"read ({exc})") from None


class DropinKind:
    name = "dropin"
    needs_distribution = True
    independent_files = False

    def prepare(self, ctx: KindContext) -> None:
        ctx.path(_single_target(ctx))
        read_source(ctx)

    def inspect(self, ctx: KindContext) -> list[FilePlan]:
        rel = _single_target(ctx)
        path, current = ctx.read(rel)
        new = read_source(ctx)
        hashes = ctx.variant.sha256.get(rel)
        originals = set(hashes.before if hashes else ())
        record = ctx.record_sha256(rel)
        if record:
            originals.add(record)
        if current is None:
            return [FilePlan(rel, path, FileStatus.CONFLICT, None, Content(new), UNKNOWN,
                             f"{rel}: missing (the file this drop-in replaces is not installed)",
                             forceable=True)]
        digest = sha256_bytes(current)
        if current == new:
            return [FilePlan(rel, path, FileStatus.APPLIED, current, Content(new), UNKNOWN,
                             f"{rel}: drop-in installed")]
        if digest in originals:
            return [FilePlan(rel, path, FileStatus.PRISTINE, current, Content(new),
                             Content(current), f"{rel}: known original ({digest[:12]})")]
        return [FilePlan(rel, path, FileStatus.CONFLICT, current, Content(new), Content(current),
                         f"{rel}: unrecognised content (sha256 {digest[:12]}…, not a known "
                         f"original)", forceable=True)]
