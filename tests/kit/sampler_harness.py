"""Runs the real patched sampler of a vllm-ascend release on CPU torch next to the real vLLM.

WHAT IS REAL: the functions of ``vllm_ascend/sample/sampler.py`` as the release ships it and as
our patch leaves it (executed from the file, not copied), and the reference, vLLM 0.22.1's own
``vllm.v1.sample.ops.topk_topp_sampler.apply_top_k_top_p`` imported from the real wheel
(tests/kit/realvllm.py). The TP=2 case runs two real processes joined by torch.distributed (gloo).

STAND-INS (built here, labelled, never shipped), for what only exists on an Ascend host:
- the fused operator: ``_C_ascend::npu_apply_top_k_top_p`` registered with ``torch.library``
  under the schema the real vllm_ascend_C declares, or a ``torch_npu`` module with
  ``npu_top_k_top_p``. Its behaviour is chosen per case: absent, present (returns a sentinel so
  that we can see its output was used), raising at every call, raising only when k > 1024.
- the module-level names the sampler imports. Importing the real module needs torch_npu,
  ``torch.npu`` and triton-ascend (tried with the real vllm installed: it stops at
  ``torch.npu.Stream`` in vllm_ascend/ops), so the function definitions are executed from the
  file with ``get_ascend_config``, ``get_tp_group`` and ``get_ascend_device_type`` bound to
  stand-ins (A2, the device that selects the fused path).
- vLLM's TP group coordinator: ``all_gather(tensor, dim)`` over the gloo process group.

Input: a JSON document on argv[1]. Output: one JSON document of observed facts on stdout.
"""

from __future__ import annotations

import ast
import enum
import json
import logging
import os
import sys
import types
from pathlib import Path
from typing import Any

import torch

STANDIN = "stand-in built by ascendpatch tests (no NPU): not the real operator"
SENTINEL = 7.0
VOCAB = 2048  # > 1024, so that rows without top-k (k = vocab) reach the "k > 1024" failure
OPERATOR_ERROR = "EZ9999: aclnnApplyTopKTopP not found in the operator library (stand-in)"


class AscendDeviceType(enum.Enum):
    A2 = 0
    A3 = 1
    _310P = 2
    A5 = 3


class Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


class Operator:
    """The fused operator's stand-in; ``mode`` is absent / present / raises / raises_k1024."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.calls = 0

    def __call__(self, logits: torch.Tensor, p: torch.Tensor | None = None,
                 k: torch.Tensor | None = None) -> torch.Tensor:
        self.calls += 1
        if self.mode == "raises" or (self.mode == "raises_k1024" and k is not None
                                     and int(k.max()) > 1024):
            raise RuntimeError(OPERATOR_ERROR)
        return torch.full_like(logits, SENTINEL)


CURRENT: dict[str, Any] = {"op": None, "library": None}


def _forward(logits: torch.Tensor, p: torch.Tensor | None = None,
             k: torch.Tensor | None = None) -> torch.Tensor:
    op = CURRENT["op"]
    assert op is not None
    result: torch.Tensor = op(logits, p, k)
    return result


def install_operator(family: str, op: Operator) -> types.ModuleType:
    """Make ``op`` reachable the way the release calls it; return the torch_npu stand-in.

    A torch.library operator cannot be unregistered: in one process "absent" comes first."""
    torch_npu = types.ModuleType("torch_npu")
    torch_npu.__doc__ = STANDIN
    CURRENT["op"] = op
    if op.mode == "absent":
        assert CURRENT["library"] is None or family == "torch_npu", "absent must come first"
        return torch_npu
    if family == "torch_npu":
        torch_npu.npu_top_k_top_p = op  # type: ignore[attr-defined]
        return torch_npu
    if op.mode == "lazy":  # registered by enable_custom_op, as vllm_ascend_C is loaded lazily
        assert CURRENT["library"] is None, "lazy must be the first registration"
        return torch_npu
    register_library()
    return torch_npu


def register_library() -> None:
    if CURRENT["library"] is None:
        lib = torch.library.Library("_C_ascend", "DEF")
        lib.define("npu_apply_top_k_top_p(Tensor logits, Tensor? p=None, Tensor? k=None) "
                   "-> Tensor")
        lib.impl("npu_apply_top_k_top_p", _forward, "CPU")
        CURRENT["library"] = lib


def enable_custom_op() -> bool:
    """vllm_ascend.utils.enable_custom_op: loads the op library (here: registers the stand-in
    operator when the case says the library loads lazily)."""
    CURRENT["enable_calls"] = CURRENT.get("enable_calls", 0) + 1
    op = CURRENT["op"]
    if op is not None and op.mode == "lazy":
        register_library()
    return CURRENT["library"] is not None


def install_vllm_ascend_utils() -> None:
    """``from vllm_ascend.utils import enable_custom_op`` (the custom-op probe) finds this."""
    package = types.ModuleType("vllm_ascend")
    package.__doc__ = STANDIN
    utils = types.ModuleType("vllm_ascend.utils")
    utils.__doc__ = STANDIN
    utils.enable_custom_op = enable_custom_op  # type: ignore[attr-defined]
    package.utils = utils  # type: ignore[attr-defined]
    sys.modules["vllm_ascend"] = package
    sys.modules["vllm_ascend.utils"] = utils


class GlooTPGroup:
    """vLLM's GroupCoordinator, as far as the sampler uses it (stand-in over real gloo)."""

    def __init__(self) -> None:
        import torch.distributed as dist

        self.dist = dist
        self.rank_in_group = dist.get_rank()
        self.world_size = dist.get_world_size()

    def all_gather(self, tensor: torch.Tensor, dim: int = -1) -> torch.Tensor:
        parts = [torch.empty_like(tensor) for _ in range(self.world_size)]
        self.dist.all_gather(parts, tensor.contiguous())
        return torch.cat(parts, dim=dim)


class SingleTPGroup:
    rank_in_group = 0
    world_size = 1

    def all_gather(self, tensor: torch.Tensor, dim: int = -1) -> torch.Tensor:
        return tensor


def load(path: str, torch_npu: types.ModuleType, reduce: bool,
         tp_group: Any = None) -> dict[str, Any]:
    """Execute the file's function definitions and module-level assignments (not its imports,
    which need the NPU stack) with the names those imports would bind."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    keep: list[ast.stmt] = [n for n in tree.body
                            if (isinstance(n, ast.FunctionDef)
                                and n.name.startswith(("_apply_top_k_top_p", "_ascendpatch")))
                            or (isinstance(n, ast.Assign) and ast.unparse(n.targets[0])
                                in ("_ASCENDPATCH_TOPK_TOPP_OP", "apply_top_k_top_p"))]
    group = tp_group if tp_group is not None else SingleTPGroup()
    namespace: dict[str, Any] = {
        "__name__": "vllm_ascend.sample.sampler", "torch": torch, "torch_npu": torch_npu,
        "AscendDeviceType": AscendDeviceType,
        "get_ascend_device_type": lambda: AscendDeviceType.A2,
        # 0.28.0rc1+ select by a hardware profile: an A2 that supports the fused operator
        "get_current_hardware_profile": lambda: types.SimpleNamespace(supports=lambda _: True),
        "HardwareCapability": types.SimpleNamespace(NPU_TOP_K_TOP_P="NPU_TOP_K_TOP_P"),
        "get_ascend_config": lambda: types.SimpleNamespace(enable_reduce_sample=reduce),
        "get_tp_group": lambda: group,
    }
    exec(compile(ast.Module(body=keep, type_ignores=[]), path, "exec"), namespace)
    return namespace


# ---- the rows: random logits and every edge the issue names ------------------------------

def random_rows(rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, VOCAB, generator=gen) * 3.0
    k = torch.randint(1, 257, (rows,), generator=gen, dtype=torch.int32)
    p = torch.rand(rows, generator=gen) * 0.7 + 0.3
    return logits, k, p


def edge_rows(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[str]]:
    gen = torch.Generator().manual_seed(seed)
    names, ks, ps, rows = [], [], [], []

    def row(name: str, k: int, p: float, logits: torch.Tensor | None = None) -> None:
        names.append(name)
        ks.append(k)
        ps.append(p)
        rows.append(logits if logits is not None else torch.randn(VOCAB, generator=gen) * 3)

    row("k=vocab (no top-k)", VOCAB, 0.9)
    row("k=1", 1, 0.9)
    row("p=1 (no top-p)", 40, 1.0)
    row("p near 0", 40, 1e-6)
    row("no k and no p in a mixed batch", VOCAB, 1.0)
    row("k=1, p=1", 1, 1.0)
    ties = (torch.randn(VOCAB, generator=gen) * 2).round()  # many equal logits
    row("ties, k inside a tie", 30, 0.8, ties)
    row("ties, p cut inside a tie", VOCAB, 0.5, ties.clone())
    flat = torch.zeros(VOCAB)
    row("all equal", 10, 0.5, flat)
    peaked = torch.randn(VOCAB, generator=gen)
    peaked[7] = 40.0  # one token holds ~all mass
    row("one dominant token", 100, 0.95, peaked)
    return (torch.stack(rows), torch.tensor(ks, dtype=torch.int32),
            torch.tensor(ps, dtype=torch.float32), names)


def kept(out: torch.Tensor) -> torch.Tensor:
    return torch.isfinite(out)


def rows_differing(a: torch.Tensor, b: torch.Tensor) -> list[int]:
    return [int(i) for i in (kept(a) != kept(b)).any(dim=-1).nonzero().flatten()]


# ---- the cases -----------------------------------------------------------------------------

def vllm_reference() -> Any:
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p

    return apply_top_k_top_p


def call(ns: dict[str, Any], has_top_k: bool, logits: torch.Tensor, k: Any, p: Any) -> Any:
    fn = ns["apply_top_k_top_p"]
    return fn(logits.clone(), k, p, None) if has_top_k else fn(logits.clone(), k, p)


def semantics(case: dict[str, Any]) -> dict[str, Any]:
    """Before (the release's own PyTorch function) and after (our fallback) against vLLM."""
    reference = vllm_reference()
    logits, k, p = random_rows(case["rows"], seed=16)
    want = reference(logits.clone(), k.clone(), p.clone())
    original = load(case["original"], types.ModuleType("torch_npu"), False)
    before = original["_apply_top_k_top_p_pytorch"](logits.clone(), k.clone(), p.clone())
    patched = load(case["patched"], types.ModuleType("torch_npu"), False)
    after = patched["_ascendpatch_top_k_top_p_pytorch"](logits, k, p)
    edges, ek, ep, names = edge_rows(seed=3)
    edge_diff: dict[str, list[str]] = {}
    variants = {"k and p": (ek, ep), "k only": (ek, None), "p only": (None, ep)}
    for label, (kk, pp) in variants.items():
        got = patched["_ascendpatch_top_k_top_p_pytorch"](edges, kk, pp)
        ref = reference(edges.clone(), None if kk is None else kk.clone(),
                        None if pp is None else pp.clone())
        edge_diff[label] = [names[i] for i in rows_differing(got, ref)]
    return {"rows": case["rows"], "before_differ": len(rows_differing(before, want)),
            "after_differ": len(rows_differing(after, want)),
            "edge_rows_differing": edge_diff,
            "edge_names": names}


def behaviour(case: dict[str, Any], mode: str) -> dict[str, Any]:
    """The patched file's selected function with the operator in ``mode``."""
    op = Operator(mode)
    torch_npu = install_operator(case["family"], op)
    ns = load(case["patched"], torch_npu, False)
    enable_before = CURRENT.get("enable_calls", 0)
    recorder = Recorder()
    logger = logging.getLogger("vllm.ascendpatch")
    logger.addHandler(recorder)
    reference = vllm_reference()
    edges, ek, ep, _ = edge_rows(seed=5)
    small = ek.clamp(max=1024)  # every k within the documented range
    calls: list[dict[str, Any]] = []
    # a call with k <= 1024, one with k = vocab (> 1024), then k <= 1024 again
    for kk in (small, ek, small):
        inputs = edges.clone()
        out = call(ns, case["has_top_k"], inputs, kk, ep)
        ref = reference(edges.clone(), kk.clone(), ep.clone())
        calls.append({
            "operator_output": bool((out == SENTINEL).all()),
            "differ_from_vllm": len(rows_differing(out, ref)),
            "input_unchanged": bool(torch.equal(inputs, edges)),
            "contiguous": out.is_contiguous(), "dtype": str(out.dtype),
            "shape": list(out.shape)})
    greedy = call(ns, case["has_top_k"], edges, None, None)
    logger.removeHandler(recorder)
    return {"calls": calls, "op_calls": op.calls, "warnings": recorder.messages,
            "library_loads": CURRENT.get("enable_calls", 0) - enable_before,
            "selected": ns["apply_top_k_top_p"].__name__,
            "greedy_untouched": bool(torch.equal(greedy, edges)),
            "state": ns.get("_ASCENDPATCH_TOPK_TOPP_OP")}


def unpatched_crash(case: dict[str, Any], mode: str) -> str:
    """The bug itself: the upstream file with the operator missing or raising."""
    ns = load(case["original"], install_operator(case["family"], Operator(mode)), False)
    edges, ek, ep, _ = edge_rows(seed=5)
    try:
        call(ns, case["has_top_k"], edges, ek, ep)
    except Exception as exc:  # the crash that kills EngineCore
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def tp_worker(rank: int, cases: list[dict[str, Any]], port: int, out_dir: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    vllm_reference()
    facts: dict[str, Any] = {case["name"]: {} for case in cases}
    for mode in ("absent", "raises", "present"):  # a registered operator stays registered
        for case in cases:
            facts[case["name"]][mode] = tp_case(case, mode, rank)
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(facts))
    dist.destroy_process_group()


def tp_case(case: dict[str, Any], mode: str, rank: int) -> dict[str, Any]:
    op = Operator(mode)
    ns = load(case["patched"], install_operator(case["family"], op), True, GlooTPGroup())
    logits, k, p = random_rows(64, seed=21)
    k = k.clamp(max=64)  # reduce-sample candidates: each rank's top max(k)
    top_k = int(k.max())
    width = VOCAB // 2
    shard = logits[:, rank * width:(rank + 1) * width].contiguous()
    recorder = Recorder()
    logging.getLogger("vllm.ascendpatch").addHandler(recorder)
    vals, idx = ns["apply_top_k_top_p"](shard, k, p, top_k)
    logging.getLogger("vllm.ascendpatch").removeHandler(recorder)
    full = torch.full_like(logits, -float("inf")).scatter_(1, idx, vals)
    want = vllm_reference()(logits.clone(), k.clone(), p.clone())
    return {
        "vals": {"shape": list(vals.shape), "dtype": str(vals.dtype),
                 "contiguous": vals.is_contiguous(), "stride": list(vals.stride())},
        "idx": {"shape": list(idx.shape), "dtype": str(idx.dtype),
                "contiguous": idx.is_contiguous(), "stride": list(idx.stride())},
        "logits_dtype": str(logits.dtype),
        "operator_output": bool((vals == SENTINEL).all()),
        "differ_from_vllm": len(rows_differing(full, want)),
        "warnings": recorder.messages, "op_calls": op.calls,
    }


def tensor_parallel(cases: list[dict[str, Any]]) -> dict[str, Any]:
    import socket
    import tempfile

    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(tp_worker, args=(cases, port, out_dir), nprocs=2, join=True)
        return {f"rank{r}": json.loads(Path(out_dir, f"rank{r}.json").read_text())
                for r in range(2)}


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    if job["what"] == "semantics":
        return semantics(job)
    return {"unpatched": unpatched_crash(job, job["mode"]),
            "patched": behaviour(job, job["mode"])}


def main() -> None:
    """argv[1]: {"jobs": [...]} (in order: "absent" jobs first) or {"tp": [cases]}."""
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    torch.set_num_threads(1)
    install_vllm_ascend_utils()
    vllm_reference()  # import vLLM (and its logging configuration) before recording warnings
    if "tp" in spec:
        result: Any = tensor_parallel(spec["tp"])
    else:
        result = [run_job(job) for job in spec["jobs"]]
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    main()
