"""The Check protocol of ``verify`` and the facts every check reads, computed once.

A check is one step of verify's registry (:mod:`ascendpatch.inspect.checks.registry`): it
reads a :class:`CheckContext` and returns CheckResults, never writes and never raises for
what it finds. The facts several checks share (which artifacts are in place, what the operator
probe answered, whether this is a sandbox) are computed once by ``verify`` and handed to all of
them as typed data, instead of each check inferring them from another's results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ascendpatch.env.target import Target
from ascendpatch.manifest.model import Artifact, Manifest
from ascendpatch.results import ArtifactResult, CheckResult


@dataclass(frozen=True)
class ProbeOutcome:
    """What the one operator-probe subprocess of the target answered."""

    doc: Mapping[str, Any] | None  # None: not started (torch-npu is not installed)
    spec: Mapping[str, str] | None = None  # verify --device: the fused operator, the sampler

    @property
    def imports_torch_npu(self) -> bool:
        return self.doc is not None and "error" not in self.doc and \
            self.doc["imports"].get("torch_npu") == "ok"


@dataclass(frozen=True)
class ArtifactFacts:
    """The artifacts' state, read under the target's shared lock."""

    journal: Path | None  # an interrupted run's journal, left behind
    shown: tuple[ArtifactResult, ...]  # wanted ones, and any other that is in place
    applied: frozenset[str]  # ids of every artifact in place (an optional one counts too)


@dataclass(frozen=True)
class CheckContext:
    target: Target
    manifest: Manifest
    env: Mapping[str, str]
    enabled_extra: tuple[str, ...]  # --with: optional artifacts this run treats as enabled
    artifacts: ArtifactFacts
    probe: ProbeOutcome | None  # None: not run (--no-probes, or no interpreter)
    sandbox: bool  # the NPU stack is simulated (ascendpatch sandbox)
    device: bool = False  # --device: the fused operator once on the NPU
    serve_log: str | None = None  # the text of --serve-log

    @property
    def applied(self) -> frozenset[str]:
        return self.artifacts.applied

    @property
    def npu_stack(self) -> bool:
        """torch_npu imports in the target and it is not simulated."""
        return self.probe is not None and self.probe.imports_torch_npu and not self.sandbox

    def enabled(self, artifact: Artifact) -> bool:
        return artifact.enabled or artifact.id in self.enabled_extra


class Check(Protocol):
    @property
    def name(self) -> str:
        """What it checks, in a word."""

    def run(self, ctx: CheckContext) -> Iterable[CheckResult]:
        """The results of this check, in the order verify shows them."""
