"""Image-rebuild simulation on a real wheel (integration tier).

A venv gets the real vllm-ascend 0.18.0 wheel (pip --no-deps), stand-in distributions for every
requirement (labelled simulated: see ascendpatch/env/standins.py) and a simulated sourced CANN/ATB
environment (folders holding libhccl.so / libatb.so). Then: apply -> verify 0; pip
--force-reinstall (what an image rebuild or a careless pip does) -> verify 1 naming the lost
patch and the command; apply -> verify 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendpatch.env.standins import satisfy
from ascendpatch.env.target import from_python
from tests.kit import fake_cann, run_process, wheels

pytestmark = pytest.mark.integration


def test_reinstall_loses_the_patch_and_verify_says_so(tmp_path: Path) -> None:
    python = wheels.make_venv(tmp_path / "venv")
    wheel = wheels.wheel("0.18.0")
    wheels.pip_install(python, "--no-deps", str(wheel))
    target = from_python(python)
    dist = target.get("vllm-ascend")
    assert dist is not None
    created = satisfy(wheels.site_packages(python), dist.metadata.get_all("Requires-Dist") or [],
                      target.distributions, target.markers)
    assert ("torch-npu", "2.9.0") in created
    env = fake_cann(tmp_path)

    assert run_process("--python", python, "apply", env=env).code == 0
    ok = run_process("--python", python, "verify", env=env)
    assert ok.code == 0, ok.out
    assert "[OK] sampler top_k/top_p fallback patch applied" in ok.out
    # torch_npu here is a labelled stand-in: a missing operator is expected (6236fe1), and
    # the fallback the patch applies is what the sampler uses
    assert "[OK] _C_ascend.npu_apply_top_k_top_p missing, as expected in a sandbox" in ok.out
    assert ("the sampler (top-k/top-p) uses the PyTorch fallback (sampler-topk-topp-fallback is "
            "applied)") in ok.out

    wheels.pip_install(python, "--force-reinstall", "--no-deps", str(wheel))
    lost = run_process("--python", python, "verify", env=env)
    assert lost.code == 1
    again = f"ascendpatch --python {python} apply"  # hints repeat the --python given
    assert ("[FAIL] sampler top_k/top_p fallback patch: vllm-ascend was reinstalled and the "
            f"patch is gone; run: {again} sampler-topk-topp-fallback") in lost.out
    assert ("[FAIL] _C_ascend.npu_apply_top_k_top_p missing: the first top_p<1 request will kill "
            f"EngineCore; fix: {again} sampler-topk-topp-fallback") in lost.out

    assert run_process("--python", python, "apply", env=env).code == 0
    assert run_process("--python", python, "verify", env=env).code == 0
