"""One state vocabulary: the engine, every kind and the planner speak FileState."""

from __future__ import annotations

import pytest

from ascendpatch.kinds import base
from ascendpatch.patchfile import diffpatch
from ascendpatch.pipeline.filestate import FileState

P, A, X, C = FileState.PRISTINE, FileState.APPLIED, FileState.PARTIAL, FileState.CONFLICT
U = FileState.OUTDATED  # only the engine says it (engine.recognise)


@pytest.mark.parametrize(("parts", "whole"), [
    ([], None),
    ([P], P), ([P, P], P),
    ([A, A], A),
    ([P, A], X), ([A, X], X), ([X], X),
    ([A, C], C), ([P, X, C], C), ([C], C),
    ([U], U), ([A, U], U), ([P, U], U), ([U, C], C), ([U, X], X),
])
def test_combine_folds_parts_into_one_state(parts: list[FileState],
                                            whole: FileState | None) -> None:
    assert FileState.combine(parts) is whole
    assert FileState.combine(iter(parts)) is whole  # a generator is enough


def test_one_enum_no_mapping() -> None:
    """The diff engine and the kinds use the very same class: nothing to translate."""
    assert not hasattr(base, "FileStatus")
    assert not hasattr(diffpatch, "HunkState")
    assert base.FileFinding.__dataclass_fields__["state"].type in ("FileState", FileState)
    assert [s.value for s in FileState] == ["pristine", "applied", "partial", "conflict",
                                            "outdated"]
    assert f"{FileState.PARTIAL} {FileState.APPLIED}" == "partial applied"
