"""The content-based patch matcher (patchfile/diffpatch): every state, decided from the file
alone."""

from __future__ import annotations

import pytest

from ascendpatch.errors import PatchFormatError, UnsafePathError
from ascendpatch.patchfile.diffpatch import (
    FilePatch,
    analyze,
    apply_forward,
    apply_reverse,
    parse_patch,
)
from ascendpatch.pipeline.filestate import FileState

ORIGINAL = "".join(f"line {i}\n" for i in range(1, 31))

TWO_HUNKS = """\
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -2,3 +2,4 @@
 line 2
 line 3
+inserted after 3
 line 4
@@ -20,3 +21,3 @@
 line 20
-line 21
+LINE 21
 line 22
"""


def _patch(text: str = TWO_HUNKS) -> FilePatch:
    (file_patch,) = parse_patch(text, origin="test.patch")
    return file_patch


def _apply(text: str, content: bytes) -> bytes:
    patch = _patch(text)
    result = apply_forward(analyze(patch, content))
    assert result is not None
    return result


def test_pristine_file_applies_and_reverses_byte_identically() -> None:
    patch = _patch()
    analysis = analyze(patch, ORIGINAL.encode())
    assert analysis.state is FileState.PRISTINE
    patched = apply_forward(analysis)
    assert patched is not None
    assert b"inserted after 3\nline 4\n" in patched and b"LINE 21\n" in patched
    after = analyze(patch, patched)
    assert after.state is FileState.APPLIED
    assert apply_reverse(after) == ORIGINAL.encode()


def test_partial_within_one_file_names_the_hunks() -> None:
    half = ORIGINAL.replace("line 21\n", "LINE 21\n").encode()
    analysis = analyze(_patch(), half)
    assert analysis.state is FileState.PARTIAL
    assert [h.state for h in analysis.hunks] == [FileState.PRISTINE, FileState.APPLIED]
    assert "applied: hunks #2" in analysis.summary()
    assert "not applied: #1" in analysis.summary()
    completed = apply_forward(analysis)
    assert completed == _apply(TWO_HUNKS, ORIGINAL.encode())


def test_conflict_names_the_hunk_and_shows_nearest_code() -> None:
    drifted = ORIGINAL.replace("line 21\n", "line twenty-one\n").encode()
    analysis = analyze(_patch(), drifted)
    assert analysis.state is FileState.CONFLICT
    bad = analysis.hunks[1]
    assert bad.state is FileState.CONFLICT and bad.index == 2
    assert "hunk #2 does not match" in analysis.summary()
    assert bad.nearest is not None and "line twenty-one" in bad.nearest
    assert "   21| line twenty-one" in bad.nearest  # 1-based line numbers of the file


def test_offset_is_found_exactly_and_reported() -> None:
    shifted = ("# header\n" * 5 + ORIGINAL).encode()
    analysis = analyze(_patch(), shifted)
    assert analysis.state is FileState.PRISTINE
    assert [h.offset for h in analysis.hunks] == [5, 5]  # from the header, as git reports
    assert "offset +5 lines" in analysis.summary()


def test_no_fuzz_a_single_changed_context_line_is_a_conflict() -> None:
    drifted = ORIGINAL.replace("line 3\n", "line 3 \n").encode()
    assert analyze(_patch(), drifted).hunks[0].state is FileState.CONFLICT


def test_crlf_file_stays_crlf() -> None:
    crlf = ORIGINAL.replace("\n", "\r\n").encode()
    patched = _apply(TWO_HUNKS, crlf)
    assert b"\r\ninserted after 3\r\nline 4\r\n" in patched
    assert b"\n" not in patched.replace(b"\r\n", b"")
    patch = _patch()
    assert analyze(patch, patched).state is FileState.APPLIED
    assert apply_reverse(analyze(patch, patched)) == crlf


NO_EOL_BOTH = """\
--- a/f.txt
+++ b/f.txt
@@ -1,2 +1,2 @@
 a
-b
\\ No newline at end of file
+B
\\ No newline at end of file
"""

ADD_EOL = """\
--- a/f.txt
+++ b/f.txt
@@ -1,2 +1,3 @@
 a
-b
\\ No newline at end of file
+b
+c
"""


def test_file_without_final_newline_keeps_that_state() -> None:
    patched = _apply(NO_EOL_BOTH, b"a\nb")
    assert patched == b"a\nB"
    patch = _patch(NO_EOL_BOTH)
    assert analyze(patch, patched).state is FileState.APPLIED


def test_final_newline_added_by_patch_is_detected_as_applied() -> None:
    patched = _apply(ADD_EOL, b"a\nb")
    assert patched == b"a\nb\nc\n"
    patch = _patch(ADD_EOL)
    assert analyze(patch, patched).state is FileState.APPLIED
    assert analyze(patch, b"a\nb").state is FileState.PRISTINE
    assert apply_reverse(analyze(patch, patched)) == b"a\nb"


ZERO_CONTEXT_INSERT = """\
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -3,0 +4,2 @@
+import os
+import sys
"""


def test_zero_context_insertion_applied_twice_gives_one_copy() -> None:
    once = _apply(ZERO_CONTEXT_INSERT, ORIGINAL.encode())
    patch = _patch(ZERO_CONTEXT_INSERT)
    analysis = analyze(patch, once)
    assert analysis.state is FileState.APPLIED
    assert apply_forward(analysis) == once  # nothing left to apply
    assert once.count(b"import os\n") == 1
    assert once.startswith(b"line 1\nline 2\nline 3\nimport os\nimport sys\nline 4\n")


def test_zero_context_insertion_elsewhere_in_file_is_not_mistaken_for_applied() -> None:
    content = (ORIGINAL + "import os\nimport sys\n").encode()
    assert analyze(_patch(ZERO_CONTEXT_INSERT), content).state is FileState.PRISTINE


ZERO_CONTEXT_DELETE = """\
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -5 +4,0 @@
-line 5
"""


def test_zero_context_deletion_is_idempotent() -> None:
    once = _apply(ZERO_CONTEXT_DELETE, ORIGINAL.encode())
    assert b"line 5\n" not in once
    patch = _patch(ZERO_CONTEXT_DELETE)
    assert analyze(patch, once).state is FileState.APPLIED
    assert analyze(patch, ORIGINAL.encode()).state is FileState.PRISTINE


NEW_AND_DELETED = """\
--- /dev/null
+++ b/pkg/new.py
@@ -0,0 +1,2 @@
+x = 1
+y = 2
--- a/pkg/old.py
+++ /dev/null
@@ -1 +0,0 @@
-gone = True
"""


def test_new_and_deleted_files() -> None:
    new, old = parse_patch(NEW_AND_DELETED, origin="t")
    assert analyze(new, None).state is FileState.PRISTINE
    assert apply_forward(analyze(new, None)) == b"x = 1\ny = 2\n"
    assert analyze(new, b"x = 1\ny = 2\n").state is FileState.APPLIED
    assert analyze(new, b"something else\n").state is FileState.CONFLICT
    assert analyze(old, b"gone = True\n").state is FileState.PRISTINE
    assert apply_forward(analyze(old, b"gone = True\n")) is None
    assert analyze(old, None).state is FileState.APPLIED
    assert apply_reverse(analyze(old, None)) == b"gone = True\n"


@pytest.mark.parametrize("text, fragment", [
    ("", "contains no file changes"),
    ("just some words\nnot a diff\n", "contains no file changes"),
    ("--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n", "not a valid unified diff"),
    ("--- a/x\n+++ b/x\n@@ garbage @@\n", "x has no hunks"),
])
def test_truncated_or_garbage_patches_are_rejected(text: str, fragment: str) -> None:
    with pytest.raises(PatchFormatError, match=fragment):
        parse_patch(text, origin="bad.patch")


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "pkg/../../x"])
def test_paths_that_leave_the_tree_are_refused_at_parse_time(path: str) -> None:
    text = f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n".replace("a//", "/").replace(
        "b//", "/")
    with pytest.raises(UnsafePathError):
        parse_patch(text, origin="evil.patch")


def test_non_utf8_bytes_survive() -> None:
    content = ORIGINAL.encode().replace(b"line 10\n", b"line \xff\xfe 10\n")
    patched = _apply(TWO_HUNKS, content)
    assert b"line \xff\xfe 10\n" in patched


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_a_hunks_compared_lines_are_the_files_line_keys(eol: str) -> None:
    """The parser builds a hunk's before and after lines inline (a catalog has ~37,000); they
    must stay what place.py compares a file's lines by: line_key, for LF and CRLF patches and
    a last line without its newline."""
    from ascendpatch.patchfile.diffpatch.parse import line_key

    text = ("--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n"
            f" a = 1{eol}-b = 2{eol}+b = 3{eol} c = 4\n\\ No newline at end of file\n")
    [patch] = parse_patch(text.encode(), origin="test")
    [hunk] = patch.hunks
    ops = hunk.ops
    assert hunk.pre_keys == tuple(line_key(t, e, patch.exact_eol) for k, t, e in ops if k != "+")
    assert hunk.post_keys == tuple(line_key(t, e, patch.exact_eol) for k, t, e in ops if k != "-")
    assert hunk.pre_keys[-1] == "c = 4" and patch.exact_eol is (eol == "\r\n")
