"""Runs the sampler's selection code from real upstream files on CPU torch, with stand-ins.

STAND-INS (built here, labelled, never shipped): the ``_C_ascend::npu_apply_top_k_top_p``
operator is registered with ``torch.library`` under the schema the real vllm_ascend_C library
declares, and returns a sentinel; ``torch_npu`` is a plain module that has (or lacks)
``npu_top_k_top_p``; ``vllm_ascend.utils.enable_custom_op`` registers the operator on its first
call, the way the real one imports vllm_ascend_C lazily. Everything else is the file's own code.

Input: a JSON list of cases on argv[1]. Output: one JSON document of observed facts.
"""

from __future__ import annotations

import ast
import enum
import json
import logging
import sys
import types
from pathlib import Path
from typing import Any

import torch

STANDIN = "stand-in built by ascendpatch tests (no NPU): not the real operator"
FUNCS = {"_apply_top_k_top_p_pytorch", "_ascendpatch_topk_topp_op_available",
         "_apply_top_k_top_p_ascendc", "_apply_top_k_top_p_torch_npu"}
ASSIGNS = {"_ASCENDPATCH_TOPK_TOPP_OP", "apply_top_k_top_p"}
SENTINEL = 7.0


class AscendDeviceType(enum.Enum):
    A2 = 0
    A3 = 1
    _310P = 2
    A5 = 3


class FakeTPGroup:
    """A tensor-parallel group of one: all_gather returns its input (labelled stand-in)."""

    rank_in_group = 0
    world_size = 1

    def all_gather(self, tensor: torch.Tensor, dim: int = -1) -> torch.Tensor:
        return tensor


class Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


STATE: dict[str, Any] = {"op_calls": 0, "probe_calls": 0, "register_on_probe": False,
                         "library": None}


def register_op() -> None:
    if STATE["library"] is not None:
        return
    lib = torch.library.Library("_C_ascend", "DEF")
    lib.define("npu_apply_top_k_top_p(Tensor logits, Tensor? p=None, Tensor? k=None) -> Tensor")

    def impl(logits: torch.Tensor, p: torch.Tensor | None = None,
             k: torch.Tensor | None = None) -> torch.Tensor:
        STATE["op_calls"] += 1
        return torch.full_like(logits, SENTINEL)

    lib.impl("npu_apply_top_k_top_p", impl, "CPU")
    STATE["library"] = lib


def enable_custom_op() -> bool:
    STATE["probe_calls"] += 1
    if STATE["register_on_probe"]:
        register_op()
    return STATE["library"] is not None


def install_vllm_ascend_standin() -> None:
    package = types.ModuleType("vllm_ascend")
    package.__doc__ = STANDIN
    utils = types.ModuleType("vllm_ascend.utils")
    utils.__doc__ = STANDIN
    utils.enable_custom_op = enable_custom_op  # type: ignore[attr-defined]
    package.utils = utils  # type: ignore[attr-defined]
    sys.modules["vllm_ascend"] = package
    sys.modules["vllm_ascend.utils"] = utils


def torch_npu_standin(with_op: bool) -> types.ModuleType:
    module = types.ModuleType("torch_npu")
    module.__doc__ = STANDIN
    if with_op:
        def npu_top_k_top_p(logits: torch.Tensor, p: Any = None, k: Any = None) -> torch.Tensor:
            STATE["op_calls"] += 1
            return torch.full_like(logits, SENTINEL)

        module.npu_top_k_top_p = npu_top_k_top_p  # type: ignore[attr-defined]
    return module


def load(path: str, torch_npu: types.ModuleType, reduce: bool) -> dict[str, Any]:
    """Execute only the selection code of ``path`` (its imports need the real NPU stack)."""
    source = Path(path).read_text(encoding="utf-8")
    tree = ast.parse(source)
    keep: list[ast.stmt] = [n for n in tree.body
            if (isinstance(n, ast.FunctionDef) and n.name in FUNCS)
            or (isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) in ASSIGNS)]
    namespace: dict[str, Any] = {
        "__name__": "vllm_ascend.sample.sampler", "torch": torch, "torch_npu": torch_npu,
        "AscendDeviceType": AscendDeviceType,
        "get_ascend_device_type": lambda: AscendDeviceType.A2,
        "get_ascend_config": lambda: types.SimpleNamespace(enable_reduce_sample=reduce),
        "get_tp_group": FakeTPGroup,
    }
    exec(compile(ast.Module(body=keep, type_ignores=[]), path, "exec"), namespace)
    return namespace


def inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1234)
    logits = torch.randn(4, 64, generator=generator)
    k = torch.tensor([5, 64, 10, 64], dtype=torch.int32)  # 64 = vocab: "no top-k" rows
    p = torch.tensor([0.9, 0.5, 1.0, 0.8], dtype=torch.float32)
    return logits, k, p


def same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and not isinstance(b, tuple):
        # (full logits, identity indices) against a release whose PyTorch path returns logits
        identity = torch.arange(b.shape[-1]).expand_as(b)
        return len(a) == 2 and same(a[0], b) and same(a[1], identity)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(torch.equal(a, b))


def run_case(case: dict[str, Any], phase: str) -> dict[str, Any]:
    family, reduce = case["family"], case.get("reduce", False)
    with_op = phase != "absent"
    npu = torch_npu_standin(with_op and family == "torch_npu")
    if family == "custom" and phase == "lazy":
        STATE["register_on_probe"] = True
    logits, k, p = inputs()
    top_k = logits.shape[-1] if reduce else None  # reduce mode: the batch's max k (= vocab)
    args: tuple[Any, ...] = (k, p, top_k) if case["has_top_k"] else (k, p)
    reference = load(case["original"], npu, reduce)["_apply_top_k_top_p_pytorch"](
        logits.clone(), *args)
    patched = load(case["patched"], npu, reduce)
    before = dict(STATE)
    recorder = Recorder()
    logging.getLogger("vllm.ascendpatch").addHandler(recorder)
    first = patched["apply_top_k_top_p"](logits.clone(), *args)
    second = patched["apply_top_k_top_p"](logits.clone(), *args)
    greedy_args = (None, None, top_k) if case["has_top_k"] else (None, None)
    greedy = patched["apply_top_k_top_p"](logits.clone(), *greedy_args)
    logging.getLogger("vllm.ascendpatch").removeHandler(recorder)
    sentinel = not isinstance(first, tuple) and bool((first == SENTINEL).all())
    return {
        "selected": patched["apply_top_k_top_p"].__name__,
        "equals_pytorch_reference": same(first, reference) and same(second, reference),
        "returned_operator_output": sentinel,
        "op_calls": STATE["op_calls"] - before["op_calls"],
        "probe_calls": STATE["probe_calls"] - before["probe_calls"],
        "warnings": recorder.messages,
        # greedy requests (no k, no p) must come back unchanged; reduce mode returns the
        # gathered pair by design, so the check applies outside it.
        "greedy_untouched": True if reduce else same(greedy, logits),
    }


def unpatched_crash(case: dict[str, Any]) -> str:
    """The bug itself: the upstream file with the operator missing."""
    reduce = case.get("reduce", False)
    namespace = load(case["original"], torch_npu_standin(False), reduce)
    logits, k, p = inputs()
    top_k = logits.shape[-1] if reduce else None
    args: tuple[Any, ...] = (k, p, top_k) if case["has_top_k"] else (k, p)
    try:
        namespace["apply_top_k_top_p"](logits, *args)
    except Exception as exc:  # the crash that kills EngineCore
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def main() -> None:
    cases = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    install_vllm_ascend_standin()
    results: dict[str, Any] = {}
    for case in cases:  # operator absent everywhere first: registration cannot be undone
        results[case["name"]] = {"unpatched_missing_op": unpatched_crash(case),
                                 "absent": run_case(case, "absent")}
    for case in cases:
        phase = "lazy" if case["family"] == "custom" and STATE["library"] is None else "present"
        results[case["name"]][phase] = run_case(case, phase)
    sys.stdout.write(json.dumps(results) + "\n")


if __name__ == "__main__":
    main()
