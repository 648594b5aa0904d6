# Runs INSIDE the target interpreter (Python 3.8+), stdlib only at module level. ONE process
# for every operator probe: import torch_npu, load vllm-ascend's op library the way
# vllm-ascend itself does (import vllm_ascend.vllm_ascend_C), then hasattr() each operator.
# argv[1]: JSON list of operator names ("torch_npu.X" or "_C_ascend.X"). Prints one JSON doc.
import json
import sys
import traceback
from typing import Any, Dict


def _error(exc: BaseException) -> str:
    return "%s: %s" % (type(exc).__name__, exc)


def main() -> None:
    wanted = json.loads(sys.argv[1])
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
    sys.stdout.write(json.dumps(out))


main()
