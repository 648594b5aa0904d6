"""verify's checks, in the order it shows them: one registry, like ``kinds.KINDS``.

Adding a check = a class with ``name`` and ``run(ctx)`` (the :class:`Check` protocol) in a
module of this package + one line here. A check that belongs to one artifact kind is returned
by that kind's ``Kind.checks`` instead, and runs in the ``kinds`` step.
"""

from __future__ import annotations

from collections.abc import Iterator

from ascendpatch.inspect.checks.artifacts import ArtifactsCheck
from ascendpatch.inspect.checks.base import Check, CheckContext
from ascendpatch.inspect.checks.cann import CannCheck
from ascendpatch.inspect.checks.deps import DepsCheck
from ascendpatch.inspect.checks.envvars import ExpectedEnvCheck, RequiredEnvCheck
from ascendpatch.inspect.checks.pins import PinsCheck
from ascendpatch.inspect.checks.probes import ProbeCheck
from ascendpatch.kinds import KINDS
from ascendpatch.results import CheckResult, Level


class NoInterpreterCheck:
    """A --site-packages target: one line for the host checks that need an interpreter."""

    name = "host"

    def run(self, ctx: CheckContext) -> list[CheckResult]:
        if ctx.target.python is not None:
            return []
        return [CheckResult("host", "env", Level.SKIP,
                            "CANN environment, operator probes and environment variables "
                            "are checked for --python targets (this host's shell)")]


class KindChecks:
    """What each kind adds for its artifacts of the manifest (``Kind.checks``)."""

    name = "kinds"

    def run(self, ctx: CheckContext) -> Iterator[CheckResult]:
        for kind in KINDS.values():
            mine = [a for a in ctx.manifest.artifacts if a.kind == kind.name]
            for check in kind.checks(mine):
                yield from check.run(ctx)


CHECKS: tuple[Check, ...] = (
    PinsCheck(),
    ArtifactsCheck(),
    DepsCheck(),
    NoInterpreterCheck(),
    CannCheck(),
    ProbeCheck(),
    ExpectedEnvCheck(),
    KindChecks(),
    RequiredEnvCheck(),
)
