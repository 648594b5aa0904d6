"""Benchmark: the sampler guard costs one identity check per call while the operator works.

    python bench/sampler_guard.py [--calls N] [--repeat N]

The real 0.21.0rc1 sampler file (from its wheel, in the test cache) before and after our patch,
its ``apply_top_k_top_p`` called with k and p set on a batch of 8 x 1024 logits, with a
STAND-IN operator (a ``torch.library`` CPU kernel that returns its input: the cheapest
operator, so the guard's share is as large as it can be). Baseline: the unpatched file in the
same run. Goal: ratio <= 1.05 (on an NPU the operator itself takes ~0.2 ms, so the real share
is smaller still). Median of several runs after one warm-up.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from ascendpatch.kinds.diff import load_patch
from ascendpatch.patchfile.diffpatch import analyze, apply_forward
from tests.kit import sampler_harness as harness
from tests.kit import wheels

VERSION = "0.21.0rc1"
PATCH = (Path(__file__).resolve().parent.parent / "patches" / "vllm-ascend"
         / "sampler-topk-topp-fallback" / f"{VERSION}.patch")


def _identity(logits: torch.Tensor, p: Any = None, k: Any = None) -> torch.Tensor:
    return logits


def files(folder: Path) -> tuple[str, str]:
    original = wheels.wheel_member(VERSION, wheels.SAMPLER)
    (patch,) = load_patch(PATCH)
    patched = apply_forward(analyze(patch, original))
    assert patched is not None
    (folder / "original.py").write_bytes(original)
    (folder / "patched.py").write_bytes(patched)
    return str(folder / "original.py"), str(folder / "patched.py")


def timed(fn: Any, args: tuple[Any, ...], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    lib = torch.library.Library("_C_ascend", "DEF")
    lib.define("npu_apply_top_k_top_p(Tensor logits, Tensor? p=None, Tensor? k=None) -> Tensor")
    lib.impl("npu_apply_top_k_top_p", _identity, "CPU")
    harness.install_vllm_ascend_utils()
    with tempfile.TemporaryDirectory() as tmp:
        original, patched = files(Path(tmp))
        npu = types.ModuleType("torch_npu")
        upstream = harness.load(original, npu, False)["apply_top_k_top_p"]
        guarded = harness.load(patched, npu, False)["apply_top_k_top_p"]
    logits = torch.randn(8, 1024)
    k = torch.full((8,), 50, dtype=torch.int32)
    p = torch.full((8,), 0.9)
    call_args = (logits, k, p)
    for fn in (upstream, guarded):  # warm-up (the guard probes once here)
        timed(fn, call_args, 100)
    base, ours = [], []
    for _ in range(args.repeat):
        base.append(timed(upstream, call_args, args.calls))
        ours.append(timed(guarded, call_args, args.calls))
    b, o = statistics.median(base), statistics.median(ours)
    print(f"upstream {VERSION} apply_top_k_top_p: {b / args.calls * 1e6:.2f} us/call")
    print(f"patched  {VERSION} apply_top_k_top_p: {o / args.calls * 1e6:.2f} us/call")
    print(f"ratio patched/upstream: {o / b:.3f} (goal <= 1.05)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
