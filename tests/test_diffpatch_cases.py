"""Minimal cases of the matcher defects of issue 12, each as a small fixture.

The real cases (vllm-ascend release diffs) are in test_diffpatch_vs_git.py; these are the
same shapes cut down to a few lines, so that each behaviour is explained by one test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendpatch.patchfile.diffpatch import (
    FilePatch,
    analyze,
    apply_forward,
    apply_reverse,
    parse_patch,
)
from ascendpatch.pipeline.filestate import FileState
from tests.kit import Run, make_dist, run_cli, tree_digest, write_manifest


def _one(text: str | bytes) -> FilePatch:
    (patch,) = parse_patch(text, origin="case.patch")
    return patch


def _apply(patch: FilePatch, content: bytes | None) -> bytes | None:
    analysis = analyze(patch, content)
    assert analysis.state is FileState.PRISTINE, analysis.summary()
    return apply_forward(analysis)


# --------------------------------------------------------------- 1. re-apply at an offset

FILLER = "".join(f"# filler {i}\n" for i in range(1, 11))
REGISTER = """\
--- a/pkg/__init__.py
+++ b/pkg/__init__.py
@@ -11,2 +11,4 @@
 register("a")
+register("b")
+register("a")
 end()
"""


@pytest.mark.parametrize("filler", [FILLER, ""], ids=["in place", "offset -10"])
def test_applied_then_reapplied_is_already_applied_when_context_recurs_in_the_block(
        filler: str) -> None:
    """The inserted block contains the hunk's own context. At offset -10 the pre-image used
    to match again inside the block, nearer than the post-image: every apply added a copy.
    Whatever the matcher decides, apply-then-apply is never two copies."""
    patch = _one(REGISTER)
    content = (filler + 'register("a")\nend()\n').encode()
    analysis = analyze(patch, content)
    if filler:
        assert analysis.state is FileState.PRISTINE
    if analysis.state is FileState.PRISTINE:
        once = apply_forward(analysis)
        again = analyze(patch, once)
        assert again.state is FileState.APPLIED
        assert apply_forward(again) == once
    else:
        assert analysis.state is FileState.CONFLICT


def test_ambiguous_offset_is_a_conflict_that_names_the_candidates() -> None:
    """Without the filler the hunk lands at offset -10; once applied, its pre-image would
    match again inside the inserted block, nearer to where the header says: refuse, show
    where, never write something the next run would patch again."""
    patch = _one(REGISTER)
    shifted = b'register("a")\nend()\n'
    analysis = analyze(patch, shifted)
    assert analysis.state is FileState.CONFLICT
    assert "ambiguous placement" in analysis.summary()
    assert "line(s) 1" in analysis.summary()
    with pytest.raises(ValueError):
        apply_forward(analysis)


def test_zero_context_insertion_past_the_end_is_never_appended_twice() -> None:
    patch = _one("--- a/f.txt\n+++ b/f.txt\n@@ -10,0 +11,2 @@\n+x\n+y\n")
    content = b"a\nb\nc\n"
    analysis = analyze(patch, content)
    if analysis.state is FileState.PRISTINE:
        once = apply_forward(analysis)
        assert analyze(patch, once).state is FileState.APPLIED
    else:
        assert analysis.state is FileState.CONFLICT
        assert "ambiguous" in analysis.summary()


# --------------------------------------------------------------- 3. empty images, whole files

MODULE = "".join(f"line_{i} = {i}\n" for i in range(1, 6))
EPOCH_NEW = f"""\
--- a/pkg/new.py\t1970-01-01 00:00:00.000000000 +0000
+++ b/pkg/new.py\t2026-01-02 03:04:05.000000000 +0000
@@ -0,0 +1,5 @@
{"".join("+" + line for line in MODULE.splitlines(keepends=True))}"""
EPOCH_GONE = f"""\
--- a/pkg/old.py\t2026-01-02 03:04:05.000000000 +0000
+++ b/pkg/old.py\t1970-01-01 00:00:00.000000000 +0000
@@ -1,5 +0,0 @@
{"".join("-" + line for line in MODULE.splitlines(keepends=True))}"""


def test_creation_onto_a_non_empty_file_is_a_conflict_not_a_second_copy() -> None:
    patch = _one(EPOCH_NEW)
    assert patch.is_new
    for content in (b"other = 1\n", (MODULE + "more = 1\n").encode()):
        assert analyze(patch, content).state is FileState.CONFLICT


def test_deletion_is_decided_on_the_whole_file() -> None:
    patch = _one(EPOCH_GONE)
    assert patch.is_deleted
    assert analyze(patch, b"something else\n").state is FileState.CONFLICT
    assert analyze(patch, MODULE.encode()).state is FileState.PRISTINE
    assert analyze(patch, None).state is FileState.APPLIED


# --------------------------------------------------------------- 4. per-hunk verdicts

TWO = """\
--- a/m.py
+++ b/m.py
@@ -2,3 +2,3 @@
 line 2
-line 3
+LINE 3
 line 4
@@ -20,3 +20,3 @@
 line 20
-line 21
+NEW 21
 line 22
"""


def test_a_hunk_whose_removed_lines_are_still_there_is_not_applied() -> None:
    """A copy of hunk 2's post-image nearer than its pre-image used to make it 'applied'
    while line 21 was still in the file; git apply would apply it there."""
    lines = [f"line {i}\n" for i in range(1, 31)]
    lines[16:16] = ["line 20\n", "NEW 21\n", "line 22\n"]
    analysis = analyze(_one(TWO), "".join(lines).encode())
    assert analysis.hunks[1].state is not FileState.APPLIED
    assert analysis.state is not FileState.APPLIED


# --------------------------------------------------------------- 5. diff -uN and /dev/null


def test_epoch_headers_create_and_delete_files() -> None:
    new, gone = _one(EPOCH_NEW), _one(EPOCH_GONE)
    created = _apply(new, None)
    assert created == MODULE.encode()
    assert analyze(new, created).state is FileState.APPLIED
    assert _apply(gone, MODULE.encode()) is None
    back = analyze(gone, None)
    assert apply_reverse(back) == MODULE.encode()


def test_epoch_in_another_time_zone_is_still_the_epoch() -> None:
    text = EPOCH_NEW.replace("1970-01-01 00:00:00.000000000 +0000",
                             "1969-12-31 19:00:00.000000000 -0500")
    assert _one(text).is_new


# --------------------------------------------------------------- 6. line endings and modes

CRLF_NEW = (b"diff --git a/w.bat b/w.bat\nnew file mode 100755\nindex 0000000..1111111\n"
            b"--- /dev/null\n+++ b/w.bat\n@@ -0,0 +1,2 @@\n+@echo off\r\n+exit 0\r\n")
TO_LF = (b"--- a/t.txt\n+++ b/t.txt\n@@ -1,2 +1,2 @@\n-one\r\n-two\r\n+one\n+two\n")


def test_new_crlf_file_is_written_with_crlf_and_its_mode() -> None:
    patch = _one(CRLF_NEW)
    assert patch.mode == 0o755
    assert _apply(patch, None) == b"@echo off\r\nexit 0\r\n"


def test_crlf_to_lf_patch_changes_the_endings() -> None:
    patch = _one(TO_LF)
    assert _apply(patch, b"one\r\ntwo\r\n") == b"one\ntwo\n"
    assert analyze(patch, b"one\ntwo\n").state is FileState.APPLIED
    assert analyze(patch, b"one\r\ntwo\r\n").state is FileState.PRISTINE


def test_reverting_a_deleted_crlf_file_writes_crlf() -> None:
    patch = _one(b"--- a/d.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\r\n-b\r\n")
    gone = _apply(patch, b"a\r\nb\r\n")
    assert gone is None
    assert apply_reverse(analyze(patch, None)) == b"a\r\nb\r\n"


def test_lone_carriage_return_inside_a_line_survives() -> None:
    patch = _one(b"--- a/r.txt\n+++ b/r.txt\n@@ -1,2 +1,2 @@\n keep\rthis\n-old\n+new\r\n")
    assert _apply(patch, b"keep\rthis\nold\n") == b"keep\rthis\nnew\r\n"


# --------------------------------------------------------------- 7. an empty new file

EMPTY_NEW = ("diff --git a/pkg/py.typed b/pkg/py.typed\nnew file mode 100644\n"
             "index 0000000..e69de29\n")


def test_empty_new_file_is_created_like_git() -> None:
    patch = _one(EMPTY_NEW)
    assert patch.is_new and not patch.hunks
    assert _apply(patch, None) == b""
    assert analyze(patch, b"").state is FileState.APPLIED
    assert analyze(patch, b"x\n").state is FileState.CONFLICT


# --------------------------------------------------------------- 8. plain words


def test_states_read_as_plain_words() -> None:
    assert f"{FileState.PARTIAL} {FileState.APPLIED}" == "partial applied"


# --------------------------------------------------------------- through the CLI: 2, 6, 7

ORIG = "".join(f"v{i} = {i}\n" for i in range(1, 11))
CHANGED = ORIG.replace("v5 = 5\n", "v5 = 55\n")
EDIT = """\
--- a/demo/mod.py
+++ b/demo/mod.py
@@ -4,3 +4,3 @@
 v4 = 4
-v5 = 5
+v5 = 55
 v6 = 6
"""


def _env(site: Path, tmp_path: Path, patch: str | bytes, shipped: str) -> list[str]:
    make_dist(site, "demo", "1.0", {"demo/__init__.py": "", "demo/mod.py": shipped})
    source = tmp_path / "fix.patch"
    source.write_bytes(patch.encode() if isinstance(patch, str) else patch)
    manifest = write_manifest(tmp_path / "m.yaml", [{
        "id": "fix", "title": "demo fix", "kind": "diff", "distribution": "demo",
        "versions": ">=1.0", "source": "fix.patch"}])
    return ["--site-packages", str(site), "--manifest", str(manifest)]


def _cli(base: list[str], *args: str) -> Run:
    return run_cli(*base, *args)


def test_revert_refuses_a_file_that_ships_with_the_change(site: Path, tmp_path: Path) -> None:
    """The release already contains the change and matches RECORD: nothing proves that
    ascendpatch wrote it, so revert must not 'reverse' it."""
    base = _env(site, tmp_path, EDIT, CHANGED)
    before = tree_digest(site)
    result = _cli(base, "revert")
    assert result.code == 1
    assert "demo/mod.py" in result.out and "fix:" in result.out
    assert "RECORD" in result.out
    assert tree_digest(site) == before


def test_revert_without_ledger_is_proven_by_record(site: Path, tmp_path: Path) -> None:
    base = _env(site, tmp_path, EDIT, ORIG)
    assert _cli(base, "apply").code == 0
    (site / ".ascendpatch" / "ledger.json").unlink()
    result = _cli(base, "revert")
    assert result.code == 0, result.out
    assert (site / "demo" / "mod.py").read_text() == ORIG


def test_new_file_mode_and_empty_new_file_through_apply(site: Path, tmp_path: Path) -> None:
    patch = (CRLF_NEW.replace(b"w.bat", b"demo/w.bat") +
             EMPTY_NEW.replace("pkg/", "demo/").encode())
    base = _env(site, tmp_path, patch, ORIG)
    first = _cli(base, "apply")
    assert first.code == 0, first.out + first.err
    script = site / "demo" / "w.bat"
    assert script.read_bytes() == b"@echo off\r\nexit 0\r\n"
    assert script.stat().st_mode & 0o777 == 0o755
    assert (site / "demo" / "py.typed").read_bytes() == b""
    assert _cli(base, "apply").out.strip() == "[OK] demo fix already applied"
    assert _cli(base, "revert").code == 0
    assert not script.exists() and not (site / "demo" / "py.typed").exists()


# --------------------------------------------------------------- batch: one transaction

ON_TOP = """\
--- a/demo/mod.py
+++ b/demo/mod.py
@@ -4,3 +4,3 @@
 v4 = 4
-v5 = 55
+v5 = 555
 v6 = 6
"""
OTHER_FILE = """\
--- a/demo/__init__.py
+++ b/demo/__init__.py
@@ -0,0 +1 @@
+VERSION = 1
"""


def test_one_apply_run_batches_artifacts_and_sees_earlier_writes(site: Path,
                                                                 tmp_path: Path) -> None:
    """Three artifacts in one run: two on separate files share one transaction; the third
    patches the first one's result, so the batch is written before it is evaluated."""
    make_dist(site, "demo", "1.0", {"demo/__init__.py": "", "demo/mod.py": ORIG})
    sources = {"a": EDIT, "b": OTHER_FILE, "c": ON_TOP}
    for name, text in sources.items():
        (tmp_path / f"{name}.patch").write_text(text)
    manifest = write_manifest(tmp_path / "m.yaml", [{
        "id": name, "title": f"fix {name}", "kind": "diff", "distribution": "demo",
        "versions": ">=1.0", "source": f"{name}.patch"} for name in sources])
    base = ["--site-packages", str(site), "--manifest", str(manifest)]
    first = _cli(base, "apply")
    assert first.code == 0, first.out + first.err
    assert first.out.splitlines() == ["[OK] Applied fix a", "[OK] Applied fix b",
                                      "[OK] Applied fix c"]
    assert (site / "demo" / "mod.py").read_text() == ORIG.replace("v5 = 5\n", "v5 = 555\n")
    assert (site / "demo" / "__init__.py").read_text() == "VERSION = 1\n"
    again = _cli(base, "apply", "b", "c")  # (a's own lines were changed again by c)
    assert again.out.splitlines() == ["[OK] fix b already applied", "[OK] fix c already applied"]


def test_a_batch_sees_two_names_of_one_file_as_shared(site: Path, tmp_path: Path) -> None:
    """``demo/alias.py`` is an in-tree symlink to ``demo/mod.py`` (kept a link when written).
    One artifact patches it by the alias, the next by the real name: both must land, the second
    evaluated on the first one's result, not both on the original (a lost update)."""
    make_dist(site, "demo", "1.0", {"demo/__init__.py": "", "demo/mod.py": ORIG})
    (site / "demo" / "alias.py").symlink_to("mod.py")
    (tmp_path / "a.patch").write_text(EDIT.replace("demo/mod.py", "demo/alias.py"))
    (tmp_path / "b.patch").write_text(
        "--- a/demo/mod.py\n+++ b/demo/mod.py\n@@ -7,3 +7,3 @@\n v7 = 7\n-v8 = 8\n+v8 = 88\n"
        " v9 = 9\n")
    manifest = write_manifest(tmp_path / "m.yaml", [{
        "id": name, "title": f"fix {name}", "kind": "diff", "distribution": "demo",
        "versions": ">=1.0", "source": f"{name}.patch"} for name in ("a", "b")])
    base = ["--site-packages", str(site), "--manifest", str(manifest)]
    first = _cli(base, "apply")
    assert first.code == 0, first.out + first.err
    assert (site / "demo" / "mod.py").read_text() == \
        CHANGED.replace("v8 = 8\n", "v8 = 88\n")
    assert (site / "demo" / "alias.py").is_symlink()
    assert _cli(base, "status").code == 0
