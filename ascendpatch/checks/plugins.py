"""Model adapters: after loading vLLM's general plugins in the target, is every declared
architecture in ``ModelRegistry.get_supported_archs()``? One subprocess of the target."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ascendpatch import inscript
from ascendpatch.manifest.model import Artifact
from ascendpatch.results import CheckResult, Level

REGISTRY_PROBE = """
import json, os, sys
os.environ["VLLM_PLUGINS"] = sys.argv[1]
try:
    from vllm.plugins import load_general_plugins
    load_general_plugins()
    from vllm import ModelRegistry
    print(json.dumps({"archs": sorted(ModelRegistry.get_supported_archs())}))
except BaseException as exc:
    print(json.dumps({"error": "%s: %s" % (type(exc).__name__, exc)}))
"""


def check(python: Path, artifacts: Sequence[Artifact], npu_stack: bool,
          env: Mapping[str, str], timeout: float = 120.0) -> list[CheckResult]:
    plugins = [a for a in artifacts if a.kind == "plugin"]
    if not plugins:
        return []
    # Where no NPU stack is present, vllm-ascend's own plugins would fail to import torch_npu:
    # load only the adapters (field notes / vllm plugins docs: VLLM_PLUGINS filters by name).
    names = [a.id for a in plugins] + (["ascend"] if npu_stack else [])
    try:
        doc = inscript.run_json(python, REGISTRY_PROBE, [",".join(names)], timeout, env)
    except inscript.ScriptError as exc:
        return [CheckResult("plugins", "plugin", Level.FAIL,
                            f"the vLLM plugin registry probe failed: {exc}")]
    if "error" in doc:
        return [CheckResult("plugins", "plugin", Level.FAIL,
                            f"loading vLLM's general plugins failed: {doc['error']}")]
    results = []
    for artifact in plugins:
        for arch in artifact.options.get("architectures") or []:
            ok = arch in doc["archs"]
            results.append(CheckResult(
                f"plugin:{arch}", "plugin", Level.OK if ok else Level.FAIL,
                f"{arch} is registered in vLLM's ModelRegistry" if ok else
                f"{arch} is not registered in vLLM's ModelRegistry ({artifact.title} missing or "
                f"broken); fix: ascendpatch apply {artifact.id}"))
    return results
