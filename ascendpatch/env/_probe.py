# Runs INSIDE the target interpreter (Python 3.8+), stdlib only at module level. ONE process
# for every operator probe: import torch_npu, load vllm-ascend's op library the way
# vllm-ascend itself does (import vllm_ascend.vllm_ascend_C), then hasattr() each operator.
# argv[1]: JSON list of operator names ("torch_npu.X" or "_C_ascend.X"). Prints one JSON doc.
# argv[2] (optional, verify --device): JSON {"op": name, "sampler": path}: run that fused
# top-k/top-p operator once on random logits on the NPU and compare the tokens it keeps with
# the fallback that the patched sampler file at `path` installs (_ascendpatch_top_k_top_p_pytorch).
import json
import sys
import traceback
from typing import Any, Dict, List  # noqa: F401  (List: in a type comment)


def _error(exc: BaseException) -> str:
    return "%s: %s" % (type(exc).__name__, exc)


def _operator(torch, torch_npu, name):
    # type: (Any, Any, str) -> Any
    namespace, _, op = name.partition(".")
    if namespace == "torch_npu":
        return getattr(torch_npu, op)
    return getattr(getattr(torch.ops, namespace), op)


def _fallback(torch, sampler):
    # type: (Any, str) -> Any
    import ast

    with open(sampler, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef)
            and n.name == "_ascendpatch_top_k_top_p_pytorch"]  # type: List[ast.stmt]
    if not body:
        return None
    namespace = {"torch": torch}  # type: Dict[str, Any]
    exec(compile(ast.Module(body=body, type_ignores=[]), sampler, "exec"), namespace)
    return namespace["_ascendpatch_top_k_top_p_pytorch"]


def device_check(torch, torch_npu, spec):
    # type: (Any, Any, Dict[str, str]) -> Dict[str, Any]
    fallback = _fallback(torch, spec["sampler"])
    if fallback is None:
        return {"outcome": "no-fallback"}
    npu = getattr(torch, "npu", None)
    device = "npu" if npu is not None and npu.is_available() else "cpu"
    gen = torch.Generator().manual_seed(16)
    rows, vocab = 64, 4096
    logits = (torch.randn(rows, vocab, generator=gen) * 3.0).to(device)
    k = torch.randint(1, 1025, (rows,), generator=gen, dtype=torch.int32).to(device)
    p = (torch.rand(rows, generator=gen) * 0.7 + 0.3).to(device)
    out = {"device": device, "rows": rows, "vocab": vocab}  # type: Dict[str, Any]
    try:
        result = _operator(torch, torch_npu, spec["op"])(logits.clone(), k=k, p=p)
        if npu is not None and device == "npu":
            npu.synchronize()  # a kernel fault surfaces here, not at the call
    except BaseException as exc:
        out.update(outcome="raises", error=_error(exc))
        return out
    want = fallback(logits.clone(), k, p)
    differ = (torch.isfinite(result) != torch.isfinite(want)).any(dim=-1)
    out.update(outcome="match" if not bool(differ.any()) else "mismatch",
               differ=int(differ.sum()))
    return out


def main() -> None:
    wanted = json.loads(sys.argv[1])
    device = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
    out: Dict[str, Any] = {"imports": {}, "ops": {}}
    try:
        import torch_npu
    except BaseException as exc:  # ImportError, RuntimeError from autoload, OSError ...
        out["imports"]["torch_npu"] = _error(exc)
        out["traceback"] = traceback.format_exc()[-2000:]
        sys.stdout.write(json.dumps(out))
        return
    out["imports"]["torch_npu"] = "ok"
    import torch

    if any(name.startswith("_C_ascend.") for name in wanted):
        try:
            import vllm_ascend.vllm_ascend_C  # noqa: F401  (registers torch.ops._C_ascend.*)

            out["imports"]["vllm_ascend_C"] = "ok"
        except BaseException as exc:
            out["imports"]["vllm_ascend_C"] = _error(exc)
    for name in wanted:
        namespace, _, op = name.partition(".")
        try:
            if namespace == "torch_npu":
                out["ops"][name] = hasattr(torch_npu, op)
            else:
                out["ops"][name] = hasattr(getattr(torch.ops, namespace), op)
        except BaseException:
            out["ops"][name] = False
    if device is not None:
        try:
            out["device"] = device_check(torch, torch_npu, device)
        except BaseException as exc:  # the check itself failed: say so, never crash verify
            out["device"] = {"outcome": "error", "error": _error(exc)}
    sys.stdout.write(json.dumps(out))


main()
