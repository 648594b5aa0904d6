"""Each artifact in the desired state, and no interrupted run left behind."""

from __future__ import annotations

from collections.abc import Iterator

from ascendpatch.inspect.checks.base import CheckContext
from ascendpatch.results import ArtifactResult, CheckResult, Hint, Level, Phrase, Status


def artifact_check(item: ArtifactResult) -> CheckResult:
    level = item.level
    if item.status is Status.NOT_APPLIED:
        level = Level.FAIL  # verify: anything not in the desired state is a failure
    return CheckResult(f"artifact:{item.id}", "artifact", level, item.message, item.details,
                       fix=item.fix)


class ArtifactsCheck:
    name = "artifacts"

    def run(self, ctx: CheckContext) -> Iterator[CheckResult]:
        journal = ctx.artifacts.journal
        if journal is not None:
            yield CheckResult("state:journal", "artifact", Level.FAIL,
                              f"an interrupted run left {journal}",
                              fix=Phrase(Hint(("status",)), " (as a user who can write the target) "
                                         "rolls it back"))
        yield from (artifact_check(item) for item in ctx.artifacts.shown)
