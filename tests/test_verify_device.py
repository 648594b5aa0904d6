"""``verify --device`` (opt-in): the fused operator once, in the target, against the fallback.

The target is a real venv with the real vllm-ascend 0.20.2rc1 wheel, patched by ``apply``, and
this interpreter's CPU torch (through a ``.pth`` file). The NPU pieces are STAND-INS built here
and labelled: a ``torch_npu`` module with no operator, and ``vllm_ascend/vllm_ascend_C.py``,
which registers ``_C_ascend::npu_apply_top_k_top_p`` with ``torch.library`` (CPU kernel) under
the real library's schema when the probe imports it, as the real .so does. Three behaviours:
a correct operator (top-p on what top-k kept, written independently of the fallback: per row,
descending), one that does not renormalise after top-k (vllm-ascend's old PyTorch semantics),
and one that raises. With no NPU device the probe runs on CPU and the line says so.
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

import pytest

from ascendpatch.env.standins import write_distribution
from tests.kit import run_cli, wheels

pytestmark = pytest.mark.integration

OP_LIBRARY = '''"""STAND-IN vllm_ascend_C built by ascendpatch tests (no NPU): NOT the real one."""
import os

import torch

MODE = os.environ["ASCENDPATCH_TEST_OP_MODE"]


def _kernel(logits, p=None, k=None):
    if MODE == "raises":
        raise RuntimeError("EZ9999: aclnnApplyTopKTopP not found (stand-in)")
    out = torch.full_like(logits, -float("inf"))
    for row in range(logits.shape[0]):
        values, order = logits[row].sort(descending=True)
        kk = int(k[row]) if k is not None else values.numel()
        keep = values >= values[kk - 1]  # the k largest, ties included
        if MODE == "correct":
            probs = torch.where(keep, values, torch.tensor(-float("inf"))).softmax(-1)
        else:  # "no-renorm": top-p on the probabilities before top-k
            probs = values.softmax(-1)
        if p is not None:
            before = probs.cumsum(-1) - probs  # mass of the tokens ranked above
            keep &= before < float(p[row])
        out[row, order[keep]] = logits[row, order[keep]]
    return out


_lib = torch.library.Library("_C_ascend", "DEF")
_lib.define("npu_apply_top_k_top_p(Tensor logits, Tensor? p=None, Tensor? k=None) -> Tensor")
_lib.impl("npu_apply_top_k_top_p", _kernel, "CPU")
'''
TORCH_NPU = '"""STAND-IN torch_npu built by ascendpatch tests (no NPU): NOT torch_npu."""\n'


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("device")
    python = wheels.venv_with(root / "venv", "0.20.2rc1")
    site = wheels.site_packages(python)
    (site / "cpu_torch.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    write_distribution(site, "torch-npu", "2.11.0rc4", {"torch_npu/__init__.py": TORCH_NPU})
    # the real library (a .so needing CANN's libtorch_npu) would win over a .py: set it aside
    for real in (site / "vllm_ascend").glob("vllm_ascend_C*.so"):
        real.rename(real.with_name(real.name + ".needs-cann"))
    (site / "vllm_ascend" / "vllm_ascend_C.py").write_text(OP_LIBRARY)
    return python


def _verify(python: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("ASCENDPATCH_TEST_OP_MODE", mode)
    result = run_cli("--python", python, "verify", "--device")
    return [line for line in result.out.splitlines() if "on-device check" in line]


def test_device_check_needs_the_fallback(target: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _verify(target, "correct", monkeypatch) == [
        "[SKIP] on-device check needs the fallback to compare with; fix: ascendpatch "
        f"--python {target} apply sampler-topk-topp-fallback"]


@pytest.mark.parametrize("mode, expected", [
    ("correct", "[OK] on-device check: _C_ascend.npu_apply_top_k_top_p keeps the same "
                "tokens as the fallback (vLLM's apply_top_k_top_p) on 64 random rows of 4096 "
                "logits on cpu, no NPU device visible (stand-in: simulated, no NPU)"),
    ("no-renorm", "[WARN] on-device check: _C_ascend.npu_apply_top_k_top_p keeps "
                  "another token set than the fallback (vLLM's apply_top_k_top_p) on "),
    ("raises", "[WARN] on-device check: _C_ascend.npu_apply_top_k_top_p raises "
               "(RuntimeError: EZ9999: aclnnApplyTopKTopP not found (stand-in)) on cpu, no NPU "
               "device visible (stand-in: simulated, no NPU); the sampler runs the PyTorch "
               "fallback on this host"),
])
def test_three_outcomes(target: Path, monkeypatch: pytest.MonkeyPatch, mode: str,
                        expected: str) -> None:
    monkeypatch.setenv("ASCENDPATCH_TEST_OP_MODE", "correct")
    assert run_cli("--python", target, "apply").code == 0  # idempotent across the cases
    (line,) = _verify(target, mode, monkeypatch)
    assert line.startswith(expected), line
    if mode == "no-renorm":  # the figure: rows that differ, of how many
        differ = int(line.split(" on ")[1].split(" of ")[0])
        assert 0 < differ <= 64, line
    assert os.environ["ASCENDPATCH_TEST_OP_MODE"] == mode


def test_device_check_is_opt_in(target: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCENDPATCH_TEST_OP_MODE", "raises")
    out = run_cli("--python", target, "verify").out
    assert "on-device check" not in out
