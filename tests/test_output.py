"""The renderer: the words, prefixes and styles of every line come from ascendpatch/output.py."""

from __future__ import annotations

import io

from ascendpatch import output
from ascendpatch.results import ArtifactResult, CommandResult, Level, Status

DIFF = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"


def _pending(diff: str = DIFF) -> ArtifactResult:
    return ArtifactResult("fix", "diff", Status.NOT_APPLIED, Level.WARN, "fix: would be applied",
                          diff=diff, details=("hunk 1 applies",))


def _plain(result: CommandResult) -> str:
    out = io.StringIO()
    output.render(result, as_json=False, color="never", stream=out)
    return out.getvalue()


def test_the_result_says_whether_its_diffs_are_shown() -> None:
    """Not the command's name: any command whose result asks for diffs gets them."""
    shown = _plain(CommandResult("apply --dry-run", (_pending(),), show_diff=True))
    assert shown == ("[WARN] fix: would be applied\n    hunk 1 applies\n"
                     "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n")
    hidden = _plain(CommandResult("plan", (_pending(),)))
    assert hidden == "[WARN] fix: would be applied\n    hunk 1 applies\n"
