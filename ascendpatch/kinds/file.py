"""Kind ``file``: create a missing file; fine when it exists with the same content."""

from __future__ import annotations

from ascendpatch.kinds.base import ArtifactSite, Content, FileFinding, SingleFileKind
from ascendpatch.pipeline.filestate import FileState


class FileKind(SingleFileKind):
    name = "file"

    def inspect(self, site: ArtifactSite) -> list[FileFinding]:
        one = self.one_file(site)
        rel, path, current, new = one.rel, one.path, one.current, one.new
        if current is None:
            return [FileFinding(rel, path, FileState.PRISTINE, None, Content(new), Content(None),
                                f"{rel}: missing, will be created")]
        if current == new:
            return [FileFinding(rel, path, FileState.APPLIED, current, Content(new), Content(None),
                                f"{rel}: present with the expected content")]
        return [FileFinding(rel, path, FileState.CONFLICT, current, Content(new), Content(current),
                            f"{rel}: exists with different content", forceable=True)]
