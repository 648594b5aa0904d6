"""Kind ``file``: create a missing file; fine when it exists with the same content."""

from __future__ import annotations

from ascendpatch.filestate import FileState
from ascendpatch.kinds.base import (
    ArtifactSite,
    BaseKind,
    Content,
    FileFinding,
    read_source,
    single_target,
)


class FileKind(BaseKind):
    name = "file"

    def prepare(self, site: ArtifactSite) -> None:
        site.path(single_target(site))
        read_source(site)

    def inspect(self, site: ArtifactSite) -> list[FileFinding]:
        rel = single_target(site)
        path, current = site.read(rel)
        new = read_source(site)
        if current is None:
            return [FileFinding(rel, path, FileState.PRISTINE, None, Content(new), Content(None),
                             f"{rel}: missing, will be created")]
        if current == new:
            return [FileFinding(rel, path, FileState.APPLIED, current, Content(new), Content(None),
                             f"{rel}: present with the expected content")]
        return [FileFinding(rel, path, FileState.CONFLICT, current, Content(new), Content(current),
                         f"{rel}: exists with different content", forceable=True)]
