"""Kind ``file``: create a missing file; fine when it exists with the same content."""

from __future__ import annotations

from ascendpatch.kinds.base import Content, FilePlan, FileStatus, KindContext
from ascendpatch.kinds.dropin import _single_target, read_source


class FileKind:
    name = "file"
    needs_distribution = True
    independent_files = False

    def prepare(self, ctx: KindContext) -> None:
        ctx.path(_single_target(ctx))
        read_source(ctx)

    def inspect(self, ctx: KindContext) -> list[FilePlan]:
        rel = _single_target(ctx)
        path, current = ctx.read(rel)
        new = read_source(ctx)
        if current is None:
            return [FilePlan(rel, path, FileStatus.PRISTINE, None, Content(new), Content(None),
                             f"{rel}: missing, will be created")]
        if current == new:
            return [FilePlan(rel, path, FileStatus.APPLIED, current, Content(new), Content(None),
                             f"{rel}: present with the expected content")]
        return [FilePlan(rel, path, FileStatus.CONFLICT, current, Content(new), Content(current),
                         f"{rel}: exists with different content", forceable=True)]
