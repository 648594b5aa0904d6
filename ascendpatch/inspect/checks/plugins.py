"""Model adapters: after loading vLLM's general plugins in the target, does vLLM's
``ModelRegistry`` resolve every declared architecture to the adapter's own ``module:Class``,
and is that a class vLLM can instantiate? Only the name being known is not enough: vLLM ships
classes under many architecture names, and an adapter that means to replace one (a fixed
multimodal placeholder) must win; and a class whose ``__init__`` does not name
``vllm_config`` and ``prefix`` is resolved fine but kills the Worker when vLLM builds it (the
bundled probe applies vLLM's own rules in the target, env/_registry.py). One subprocess of the
target."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ascendpatch.env import inscript
from ascendpatch.inspect.checks.base import CheckContext
from ascendpatch.manifest.model import Artifact
from ascendpatch.results import CheckResult, Hint, Level, Phrase


@dataclass(frozen=True)
class Adapter:
    """A plugin artifact and what its plugin registers: architecture -> ``module:Class``."""

    artifact: Artifact
    targets: Mapping[str, str] = field(hash=False)


def check(python: Path, adapters: Sequence[Adapter], npu_stack: bool,
          env: Mapping[str, str], timeout: float = 120.0) -> list[CheckResult]:
    plugins = [a.artifact for a in adapters]
    if not plugins:
        return []
    # On an NPU host, load what vLLM itself would load (all plugins, or the environment's
    # VLLM_PLUGINS): vllm-ascend's own general plugins register models too, and the last
    # registration wins. Where no NPU stack is present they would fail to import torch_npu:
    # load only the adapters (vllm plugins docs: VLLM_PLUGINS filters by name).
    names = "" if npu_stack else ",".join(a.id for a in plugins)
    wanted = {arch: target for a in adapters for arch, target in a.targets.items()}
    try:
        doc = inscript.run_json(python, inscript.bundled("_registry.py"),
                                [names, json.dumps(wanted, sort_keys=True)], timeout, env)
    except inscript.ScriptError as exc:
        return [CheckResult("plugins", "plugin", Level.FAIL,
                            f"the vLLM plugin registry probe failed: {exc}")]
    if "error" in doc:
        return [CheckResult("plugins", "plugin", Level.FAIL,
                            f"loading vLLM's general plugins failed: {doc['error']}")]
    interface = doc.get("interface") or {}
    return [_result(a.artifact, arch, target, doc["resolved"].get(arch), interface.get(arch))
            for a in adapters for arch, target in a.targets.items()]


def _result(artifact: Artifact, arch: str, target: str, resolved: str | None,
            problems: list[str] | None = None) -> CheckResult:
    cid = f"plugin:{arch}"
    if resolved == target and problems:
        return CheckResult(cid, "plugin", Level.FAIL,
                           f"vLLM's ModelRegistry resolves {arch} to the adapter's {target}, but "
                           f"vLLM cannot instantiate that class: {'; '.join(problems)}",
                           fix=Phrase("correct the adapter's source, then ",
                                      Hint(("apply", artifact.id))))
    if resolved == target:
        return CheckResult(cid, "plugin", Level.OK,
                           f"vLLM's ModelRegistry resolves {arch} to the adapter's {target}, a "
                           "class vLLM can instantiate")
    if resolved is None:
        return CheckResult(cid, "plugin", Level.FAIL,
                           f"{arch} is not registered in vLLM's ModelRegistry ({artifact.title} "
                           f"missing or broken)", fix=Phrase(Hint(("apply", artifact.id))))
    return CheckResult(cid, "plugin", Level.FAIL,
                       f"vLLM's ModelRegistry resolves {arch} to {resolved}, not to the "
                       f"adapter's {target}: {artifact.title} is not in effect",
                       fix=Phrase(Hint(("apply", artifact.id)), f" (if another plugin registers "
                                  f"{arch} after it, limit VLLM_PLUGINS)"))


@dataclass(frozen=True)
class RegistryCheck:
    """The adapters in place, as vLLM's ModelRegistry resolves them (one subprocess)."""

    adapters: tuple[Adapter, ...]
    name: str = "plugins"

    def run(self, ctx: CheckContext) -> list[CheckResult]:
        python = ctx.target.python
        if python is None:
            return []
        in_place = [a for a in self.adapters if a.artifact.id in ctx.applied]
        return check(python, in_place, ctx.npu_stack, ctx.env)
