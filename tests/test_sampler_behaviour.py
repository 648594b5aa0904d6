"""Behaviour of the patched sampler on CPU torch, for one release of every patch family.

The selection code of the real upstream file (before and after our patch) runs with labelled
stand-ins for the NPU operators (see tests/sampler_harness.py). With the operator present, it is
called and its output returned; absent, the file's own PyTorch function runs and gives the same
result as the unpatched PyTorch function, with one warning; the probe runs once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from ascendpatch.diffpatch import analyze, apply_forward
from ascendpatch.kinds.diff import load_patch
from tests import wheels
from tests.kit import REPO

pytestmark = pytest.mark.integration

PATCHES = REPO / "patches" / "vllm-ascend" / "sampler-topk-topp-fallback"
FAMILIES = {  # one release per patch file; "custom" = torch.ops._C_ascend, else torch_npu
    "0.14.0rc1": "custom", "0.15.0rc1": "custom", "0.16.0rc1": "custom",
    "0.18.0rc1": "custom", "0.19.1rc1": "custom", "0.20.2rc1": "custom",
    "0.21.0rc1": "custom", "0.23.0": "torch_npu", "0.25.1rc1": "torch_npu",
    "0.26.0rc1": "torch_npu",
}
HAS_TOP_K_PARAM = {"0.20.2rc1", "0.21.0rc1", "0.23.0", "0.25.1rc1", "0.26.0rc1"}


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not _torch_available():
        if os.environ.get("CI"):
            pytest.fail("CPU torch must be installed for this test in CI (.ci/run installs it)")
        pytest.skip("needs CPU torch: pip install torch")
    folder = tmp_path_factory.mktemp("sampler")
    cases = []
    for version, family in FAMILIES.items():
        original = wheels.wheel_member(version, wheels.SAMPLER)
        (patch,) = load_patch(PATCHES / f"{version}.patch")
        patched = apply_forward(patch, original, analyze(patch, original))
        assert patched is not None
        (folder / f"{version}-original.py").write_bytes(original)
        (folder / f"{version}-patched.py").write_bytes(patched)
        for reduce in ([False, True] if version in HAS_TOP_K_PARAM else [False]):
            cases.append({"name": f"{version}{'-reduce' if reduce else ''}", "family": family,
                          "reduce": reduce, "has_top_k": version in HAS_TOP_K_PARAM,
                          "original": str(folder / f"{version}-original.py"),
                          "patched": str(folder / f"{version}-patched.py")})
    spec = folder / "cases.json"
    spec.write_text(json.dumps(cases))
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "sampler_harness.py"), str(spec)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert isinstance(doc, dict)
    return doc


def _cases() -> list[str]:
    names = []
    for version in FAMILIES:
        names.append(version)
        if version in HAS_TOP_K_PARAM:
            names.append(f"{version}-reduce")
    return names


@pytest.mark.parametrize("name", _cases())
def test_missing_operator_falls_back_to_pytorch(observed: dict[str, Any], name: str) -> None:
    facts = observed[name]
    crash = facts["unpatched_missing_op"]  # the upstream file, operator missing
    if name == "0.26.0rc1":  # upstream moved the non-reduce path to PyTorch already
        assert crash == "no error"
    else:
        assert crash.startswith(("AttributeError", "RuntimeError")), crash
    absent = facts["absent"]
    assert absent["equals_pytorch_reference"] is True
    assert absent["op_calls"] == 0 and absent["returned_operator_output"] is False
    assert len(absent["warnings"]) == 1 and "PyTorch implementation" in absent["warnings"][0]
    assert absent["greedy_untouched"] is True
    if FAMILIES[name.split("-")[0]] == "custom":
        assert absent["probe_calls"] == 1  # tried to load vllm_ascend_C once, then cached


@pytest.mark.parametrize("name", _cases())
def test_present_operator_is_called(observed: dict[str, Any], name: str) -> None:
    facts = observed[name]
    present = facts.get("present") or facts["lazy"]
    assert present["selected"] in ("_apply_top_k_top_p_ascendc", "_apply_top_k_top_p_torch_npu")
    assert present["warnings"] == []
    if name.endswith("-reduce") or name.startswith("0.26.0rc1"):
        # reduce-sample mode calls the op on the gathered values; 0.26's non-reduce path is
        # PyTorch by upstream design: both still reach the op only when it exists.
        assert present["op_calls"] >= (2 if name.endswith("-reduce") else 0)
        return
    assert present["op_calls"] == 2 and present["returned_operator_output"] is True


def test_operator_loaded_lazily_after_import_is_used(observed: dict[str, Any]) -> None:
    """The library registers the op only when enable_custom_op runs (after the module
    imported): the probe at first use loads it and the NPU path stays on."""
    lazy = observed["0.14.0rc1"]["lazy"]
    assert lazy["probe_calls"] == 1
    assert lazy["op_calls"] == 2 and lazy["returned_operator_output"] is True
