"""Write unified diffs that our patch matcher (and GNU patch, git apply) read back exactly.

difflib writes no "\\ No newline at end of file" marker; this adds it, writes /dev/null for
created and deleted files, and checks every diff by applying it in memory before it is used.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ascendpatch.errors import AscendpatchError
from ascendpatch.patchfile.diffpatch import analyze, apply_forward, parse_patch, split_lines

NO_EOL = "\\ No newline at end of file\n"


def _lines(data: bytes | None) -> list[str]:
    """Split as the patch matcher does (only \\n and \\r\\n end a line: a form feed does not)."""
    if data is None:
        return []
    return split_lines(data)


def file_diff(path: str, old: bytes | None, new: bytes | None, context: int = 3) -> str:
    if not old and not new and (old is None) != (new is None):  # an empty file: no hunks
        verb = "new" if old is None else "deleted"
        return f"diff --git a/{path} b/{path}\n{verb} file mode 100644\n"
    before = "/dev/null" if old is None else f"a/{path}"
    after = "/dev/null" if new is None else f"b/{path}"
    out = []
    for line in difflib.unified_diff(_lines(old), _lines(new), before, after, n=context):
        if line.startswith(("---", "+++")):
            out.append(line if line.endswith("\n") else line + "\n")
        elif line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n" + NO_EOL)
    return "".join(out)


def patch_text(header: str, files: Iterable[tuple[str, bytes | None, bytes | None]]) -> str:
    items = list(files)
    body = "".join(file_diff(path, old, new) for path, old, new in items)
    text = header.rstrip("\n") + "\n\n" + body if header else body
    check(text, items)
    return text


def check(text: str, files: list[tuple[str, bytes | None, bytes | None]]) -> None:
    """Applied to the old contents, the diff must give the new ones byte for byte."""
    patches = {p.path: p for p in parse_patch(text, origin="generated diff")}
    for path, old, new in files:
        patch = patches[path]
        if apply_forward(analyze(patch, old)) != new:
            raise AscendpatchError(f"internal: the diff written for {path} does not reproduce "
                                   "it; please report this with the file")
