"""A creation patch under ``a/`` ``b/`` names (one hunk ``@@ -0,0 +1,N @@``, no ``/dev/null``)
decided as the real ``git apply --check`` decides it: git matches a lone zero-line hunk at both
ends of the file, so only an empty file takes it and only the file holding exactly its lines
has it applied. On 89ee836 a non-empty file with other content was "not applied" (apply would
have inserted the lines at its top) where git refuses: a conflict."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascendpatch.patchfile.diffpatch import analyze, parse_patch
from ascendpatch.pipeline.filestate import FileState
from tests.kit import make_dist, run_cli, tree_digest, write_manifest

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="needs git as the reference")


def _creation(lines: list[str]) -> str:
    body = "".join(f"+{line}\n" for line in lines)
    return f"--- a/f.py\n+++ b/f.py\n@@ -0,0 +1,{len(lines)} @@\n{body}"


def _git_state(folder: Path, patch: str, current: bytes) -> FileState:
    """What git says: forward applies -> pristine; reverse applies -> applied; else conflict."""
    (folder / "f.py").write_bytes(current)
    (folder / "c.patch").write_text(patch)

    def ok(*flags: str) -> bool:
        return subprocess.run([str(GIT), "apply", "--check", *flags, "c.patch"], cwd=folder,
                              capture_output=True, check=False).returncode == 0

    forward, reverse = ok(), ok("-R")
    assert not (forward and reverse)
    return FileState.PRISTINE if forward else FileState.APPLIED if reverse else \
        FileState.CONFLICT


_LINE = st.text(alphabet="ab =1", min_size=1, max_size=6)


@given(added=st.lists(_LINE, min_size=1, max_size=4),
       current=st.one_of(st.just(None), st.lists(_LINE, max_size=5)),
       exact=st.booleans())
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_engine_decides_as_git_apply_check(tmp_path: Path, added: list[str],
                                               current: list[str] | None, exact: bool) -> None:
    """60 examples (two git runs each): the file empty, exactly the patch's lines, or any
    other lines (``exact``: the patch's lines followed or preceded by the file's)."""
    if current is None:
        content = "".join(f"{line}\n" for line in added)  # exactly the lines: applied
    elif exact:
        content = "".join(f"{line}\n" for line in [*added, *current])
    else:
        content = "".join(f"{line}\n" for line in current)
    patch = _creation(added)
    (parsed,) = parse_patch(patch, origin="c.patch")
    engine = analyze(parsed, content.encode()).state
    assert engine is _git_state(tmp_path, patch, content.encode()), (patch, content)


def test_apply_refuses_it_as_a_conflict_and_changes_nothing(tmp_path: Path) -> None:
    site = tmp_path / "site"
    make_dist(site, "demo", "1.0", {"demo/__init__.py": "", "demo/f.py": "x = 1\ny = 2\n"})
    (tmp_path / "c.patch").write_text(_creation(["a = 1", "b = 2"]).replace(
        "a/f.py", "a/demo/f.py").replace("b/f.py", "b/demo/f.py"))
    manifest = write_manifest(tmp_path / "m.yaml", [{
        "id": "make-f", "title": "make f", "kind": "diff", "distribution": "demo",
        "versions": ">=1", "source": "c.patch"}])
    before = tree_digest(site)
    for command in ("status", "apply"):
        result = run_cli("--site-packages", site, "--manifest", manifest, command)
        assert result.code == 1, result.out + result.err
        assert "conflict" in result.out and "the file exists with other content" in result.out
        assert tree_digest(site) == before
