"""The install plan (env/pipdiff.py), fed with real pip reports, and its executor.

A wheelhouse of tiny real wheels and a real venv (torch 2.5.0 standing in for the image's
protected torch, helper 1.0). Real pip resolves each step of the plan
(``install --dry-run --report``, the reference: pip's resolution, not ours); the pure
``plan()`` diffs those reports against the venv. The executor test installs a plan for real
and compares what the plan predicted with what is installed afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from ascendpatch.env import pipdiff, pipinstall
from ascendpatch.env.pipadapter import Source
from ascendpatch.env.pipdiff import (
    ChangeAction,
    InstallPlan,
    PackageChange,
    PipStep,
    Refusal,
    Unmet,
)
from ascendpatch.env.target import Target, from_python
from ascendpatch.errors import RefusedError
from tests.kit import build_wheel, tree_digest, wheels

pytestmark = pytest.mark.integration

PROTECTED = ("torch", "torch-npu")
TORCH_FILES = {"torch/__init__.py": "'''stand-in torch for the install-plan tests'''\n"}


def _pip_env() -> dict[str, str]:
    """The machine's pip configuration never reaches these pip runs (module fixtures run
    before conftest's per-test isolation)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _pip(python: Path, house: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                    "--quiet", "--no-index", "--find-links", str(house), *args],
                   check=True, env=_pip_env())


@pytest.fixture(scope="module")
def house(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("house")
    for version in ("2.1.0", "2.5.0"):
        build_wheel(folder, "torch", version, files=TORCH_FILES)
    build_wheel(folder, "helper", "1.0")
    build_wheel(folder, "helper", "2.0")
    build_wheel(folder, "newdep", "1.0")
    build_wheel(folder, "friendly", "1.0", ["torch>=2.0", "newdep==1.0", "helper>=1.0"])
    build_wheel(folder, "old-top", "1.0", ["old-mid>=1"])
    build_wheel(folder, "old-mid", "1.0", ["torch<2.5"])
    build_wheel(folder, "step-audio2", "1.0", ["torch>=2.6", "librosa>=0.10", "helper>=2.0",
                                               "pywin32; sys_platform == 'win32'"])
    return folder


def _venv(root: Path, house: Path) -> Path:
    python = wheels.make_venv(root)
    _pip(python, house, "torch==2.5.0", "helper==1.0")
    return python


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory, house: Path) -> Path:
    """Shared by the tests that only plan (nothing is ever installed into it)."""
    return _venv(tmp_path_factory.mktemp("planned") / "venv", house)


@pytest.fixture
def target(python: Path) -> Iterator[Target]:
    before = tree_digest(python.parent.parent)
    yield from_python(python)
    assert tree_digest(python.parent.parent) == before  # planning changed nothing


def pip_report(python: Path, house: Path, step: PipStep, tmp: Path) -> dict[str, Any]:
    """Real pip's answer for one step of the plan: ``install --dry-run --report``."""
    out = tmp / f"report-{len(list(tmp.glob('report-*')))}.json"
    _pip(python, house, "--dry-run", "--report", str(out), *step.options, *step.args)
    report = json.loads(out.read_text())
    assert isinstance(report, dict)
    return report


def plan_for(python: Path, house: Path, tmp: Path, target: Target, reqs: Sequence[str],
             no_deps: Sequence[str] = (), protected: Sequence[str] = PROTECTED) -> InstallPlan:
    steps = pipdiff.steps_for([Requirement(r) for r in reqs], no_deps)
    reports = [(step, pip_report(python, house, step, tmp)) for step in steps]
    return pipdiff.plan(reports, target, protected)


def test_nothing_to_do(python: Path, house: Path, tmp_path: Path, target: Target) -> None:
    plan = plan_for(python, house, tmp_path, target, ["helper", "torch>=2.0"])
    assert plan.nothing_to_do and not plan.refused
    assert (plan.steps, plan.changes, plan.unmet) == ((), (), ())
    assert plan.constraints == "torch==2.5.0\n"  # torch-npu is not installed: no line


def test_a_new_package_and_its_new_dependency(python: Path, house: Path, tmp_path: Path,
                                             target: Target) -> None:
    plan = plan_for(python, house, tmp_path, target, ["friendly"])
    assert sorted(plan.changes, key=lambda c: c.name) == [
        PackageChange("friendly", ChangeAction.INSTALL, None, "1.0"),
        PackageChange("newdep", ChangeAction.INSTALL, None, "1.0")]
    assert plan.steps == (PipStep(("friendly",)),)
    assert not plan.refused and not plan.nothing_to_do
    assert [c.describe() for c in plan.changes if c.name == "friendly"] == [
        "install friendly 1.0"]


def test_an_upgrade(python: Path, house: Path, tmp_path: Path, target: Target) -> None:
    plan = plan_for(python, house, tmp_path, target, ["helper==2.0"])
    assert plan.changes == (PackageChange("helper", ChangeAction.UPGRADE, "1.0", "2.0"),)
    assert plan.changes[0].describe() == "upgrade helper 1.0 -> 2.0"
    assert not plan.refused


def test_a_protected_downgrade_is_refused_with_its_chain(python: Path, house: Path,
                                                        tmp_path: Path,
                                                        target: Target) -> None:
    plan = plan_for(python, house, tmp_path, target, ["old-top"])
    downgrade = PackageChange("torch", ChangeAction.DOWNGRADE, "2.5.0", "2.1.0")
    assert downgrade in plan.changes
    assert plan.refusals == (Refusal(downgrade, ("old-top 1.0", "old-mid 1.0", "torch 2.1.0")),)
    assert plan.refusals[0].requester == "old-top"
    # control: the same resolution is not refused where torch is not protected
    unguarded = plan_for(python, house, tmp_path, target, ["old-top"], protected=())
    assert not unguarded.refused and downgrade in unguarded.changes


def test_no_deps_packages_show_what_they_leave_unmet(python: Path, house: Path, tmp_path: Path,
                                                     target: Target) -> None:
    alone = plan_for(python, house, tmp_path, target, ["step-audio2"], no_deps=["step-audio2"])
    assert alone.steps == (PipStep(("step-audio2",), no_deps=True),)
    assert alone.changes == (PackageChange("step-audio2", ChangeAction.INSTALL, None, "1.0"),)
    assert not alone.refused  # --no-deps: torch>=2.6 is reported, never installed
    assert alone.unmet == (Unmet("step-audio2", ("torch>=2.6", "librosa>=0.10",
                                                 "helper>=2.0")),)
    # unmet is judged against the target with the plan made: helper 2.0 comes in with it
    both = plan_for(python, house, tmp_path, target, ["step-audio2", "helper==2.0"],
                    no_deps=["step-audio2"])
    assert [s.no_deps for s in both.steps] == [False, True]
    assert both.unmet == (Unmet("step-audio2", ("torch>=2.6", "librosa>=0.10")),)


def test_planning_runs_no_process(python: Path, house: Path, tmp_path: Path, target: Target,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    steps = pipdiff.steps_for([Requirement("old-top")], ())
    reports = [(step, pip_report(python, house, step, tmp_path)) for step in steps]

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"plan() started a process: {args}")

    monkeypatch.setattr(subprocess, "Popen", forbidden)
    assert pipdiff.plan(reports, target, PROTECTED).refused


def test_the_executor_does_what_the_plan_said(house: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path / "venv", house)
    target = from_python(python)
    source = Source(wheelhouse=house, offline=True)
    plan = plan_for(python, house, tmp_path, target, ["step-audio2", "friendly"],
                    no_deps=["step-audio2"])
    after = pipinstall.execute(plan, target, source, env=_pip_env())
    for change in plan.changes:
        installed = after.get(change.name)
        assert installed is not None and installed.version == change.new
    torch = after.get("torch")
    assert torch is not None and torch.version == "2.5.0"  # the constraints held it
    dist = after.get("step-audio2")
    assert dist is not None
    real = pipdiff.unmet(dist.metadata.get_all("Requires-Dist") or [],
                         pipdiff.installed_versions(after), dict(after.markers or {}))
    assert tuple(real) == plan.unmet[0].missing == ("torch>=2.6", "librosa>=0.10",
                                                    "helper>=2.0")


def test_the_executor_never_runs_a_refused_plan(house: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path / "venv", house)
    target = from_python(python)
    plan = plan_for(python, house, tmp_path, target, ["old-top"])
    before = tree_digest(tmp_path / "venv")
    with pytest.raises(RefusedError, match=r"protected packages \(torch\)"):
        pipinstall.execute(plan, target, Source(wheelhouse=house, offline=True))
    assert tree_digest(tmp_path / "venv") == before
