"""verify's check registry: one Check protocol, the facts computed once and shared, and the
checks that belong to one kind contributed by that kind (Kind.checks), not asked for by name."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from ascendpatch.env.target import Target
from ascendpatch.inspect.checks.base import ArtifactFacts, Check, CheckContext, ProbeOutcome
from ascendpatch.inspect.checks.registry import CHECKS, KindChecks
from ascendpatch.kinds import KINDS
from ascendpatch.kinds.base import BaseKind
from ascendpatch.manifest.model import Artifact, Manifest, Variant
from ascendpatch.results import CheckResult, Level
from tests.kit import REPO


def _artifact(aid: str, kind: str) -> Artifact:
    return Artifact(aid, aid, kind, "pkg", (Variant(None, None, (), {}),))


def _ctx(artifacts: Sequence[Artifact] = (), probe: ProbeOutcome | None = None,
         sandbox: bool = False) -> CheckContext:
    target = cast(Target, SimpleNamespace(python=Path("/no/python")))
    return CheckContext(target, Manifest("m", None, artifacts=tuple(artifacts)), {}, (),
                        ArtifactFacts(None, (), frozenset()), probe, sandbox)


def test_the_registry_holds_each_check_once_by_name() -> None:
    names = [check.name for check in CHECKS]
    assert len(names) == len(set(names)) and "kinds" in names


def test_a_kind_contributes_its_checks_for_its_own_artifacts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The kinds step asks every kind; each gets only its artifacts, in manifest order."""
    given: list[list[str]] = []

    class Mine:
        name = "mine"

        def run(self, ctx: CheckContext) -> Iterable[CheckResult]:
            yield CheckResult("mine", "mine", Level.OK, "checked by the file kind")

    class Checking(BaseKind):
        name = "file"

        def checks(self, artifacts: Sequence[Artifact]) -> Sequence[Check]:
            given.append([a.id for a in artifacts])
            return (Mine(),)

    monkeypatch.setitem(KINDS, "file", Checking())
    artifacts = [_artifact("b", "file"), _artifact("x", "diff"), _artifact("a", "file")]
    results = list(KindChecks().run(_ctx(artifacts)))
    assert given == [["b", "a"]]
    assert [r.message for r in results] == ["checked by the file kind"]


def test_the_npu_stack_is_a_fact_of_the_probe_not_of_another_checks_results() -> None:
    imports = ProbeOutcome({"imports": {"torch_npu": "ok"}, "ops": {}})
    fails = ProbeOutcome({"imports": {"torch_npu": "ImportError: libhccl.so"}, "ops": {}})
    assert _ctx(probe=imports).npu_stack
    assert not _ctx(probe=imports, sandbox=True).npu_stack  # simulated: not an NPU stack
    assert not _ctx(probe=fails).npu_stack
    assert not _ctx(probe=ProbeOutcome({"error": "timed out"})).npu_stack
    assert not _ctx().npu_stack  # --no-probes


def test_generic_verify_code_never_asks_an_artifact_for_its_kind_or_a_kinds_option() -> None:
    """What one kind knows (a plugin's registry, SmoothQuant's scales) stays in its kind."""
    sniffing = re.compile(r"\.kind\s*[!=]=\s*[\"']|options(\.get\(|\[)[\"']scales_env")
    generic = [REPO / "ascendpatch/commands/verify.py",
               *sorted((REPO / "ascendpatch/inspect/checks").glob("*.py"))]
    offenders = [f"{path.relative_to(REPO)}:{number}" for path in generic
                 for number, line in enumerate(path.read_text().splitlines(), 1)
                 if sniffing.search(line)]
    assert offenders == []
