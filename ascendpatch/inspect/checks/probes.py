"""Operator probes: ONE subprocess of the target interpreter, with a timeout.

Which operators are probed depends on the installed vllm-ascend version (OPERATORS). An import
failure is turned into its cause and fix: libhccl.so / libatb.so not found means the CANN / ATB
set_env.sh was not sourced (see checks/cann.py); a torch / torch_npu pair that does not
match is named.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascendpatch.env import inscript, standins
from ascendpatch.env.reqs import applicable
from ascendpatch.env.target import Target
from ascendpatch.inspect.checks.base import CheckContext, ProbeOutcome
from ascendpatch.inspect.checks.cann import ATB_SETENV, TOOLKIT_SETENV
from ascendpatch.manifest.model import version_in
from ascendpatch.results import CheckResult, Hint, Level, Phrase

PROBE_TIMEOUT = 120.0
SAMPLER_FIX = "sampler-topk-topp-fallback"
SAMPLER_FILE = "vllm_ascend/sample/sampler.py"


@dataclass(frozen=True)
class Operator:
    name: str  # "torch_npu.X" or "_C_ascend.X"
    versions: str  # vllm-ascend versions that call it
    used_by: str
    fallback: str | None = None  # the catalog artifact that makes its absence survivable


OPERATORS = (
    Operator("_C_ascend.npu_apply_top_k_top_p", ">=0.14.0rc1,<=0.23.0rc1",
             "the sampler (top-k/top-p)", SAMPLER_FIX),
    Operator("torch_npu.npu_top_k_top_p", ">=0.23.0", "the sampler (top-k/top-p)", SAMPLER_FIX),
    Operator("torch_npu.npu_top_k_top_p", ">=0.11.0,<0.13.0rc1",
             "the sampler (top-k/top-p, guarded upstream)", "upstream guard"),
    Operator("torch_npu.npu_dynamic_quant", ">=0.9.1", "W8A8 dynamic quantization"),
    Operator("torch_npu.npu_quant_matmul", ">=0.9.1", "W8A8 dynamic quantization"),
)


def operators_for(target: Target) -> list[Operator]:
    dist = target.get("vllm-ascend")
    if dist is None or dist.parsed_version is None:
        return []
    version = dist.parsed_version
    return [op for op in OPERATORS if version_in(op.versions, version)]


def run_probe(python: Path, names: list[str], timeout: float = PROBE_TIMEOUT,
              device: dict[str, str] | None = None) -> dict[str, Any]:
    args = [json.dumps(names)] + ([json.dumps(device)] if device is not None else [])
    try:
        return inscript.run_json(python, inscript.bundled("_probe.py"), args, timeout)
    except inscript.ScriptError as exc:
        return {"error": f"the probe failed: {exc}"}


def explain_import_error(error: str, target: Target) -> tuple[str, str]:
    """Turn an import failure into (its cause, the fix); the fix is "" when none is known."""
    if "libatb.so" in error:
        return f"ATB environment not loaded ({error})", f"source {ATB_SETENV}"
    if any(lib in error for lib in ("libhccl.so", "libascendcl.so", "libascend_hal.so")):
        return (f"CANN environment not loaded ({error})",
                f"source {TOOLKIT_SETENV} and {ATB_SETENV} in the shell that runs Python "
                "(processes inherit them)")
    pair = torch_pair_problem(target)
    if pair:
        return f"{pair} ({error})", Phrase(Hint(("install",)), " restores the stack's pair")
    return f"import torch_npu failed: {error}", ""


def torch_pair_problem(target: Target) -> str | None:
    npu, torch = target.get("torch-npu"), target.get("torch")
    if npu is None or torch is None or torch.parsed_version is None:
        return None
    for req in applicable(npu.metadata.get_all("Requires-Dist") or [], target.markers):
        if req.name == "torch" and not torch.satisfies(req.specifier):
            return (f"torch_npu {npu.version} needs torch{req.specifier}, but torch "
                    f"{torch.version} is installed")
    return None


def device_spec(target: Target) -> dict[str, str] | None:
    """The fused sampler operator of the installed release and its sampler file."""
    dist = target.get("vllm-ascend")
    ops = [op for op in operators_for(target) if op.fallback == SAMPLER_FIX]
    if dist is None or not ops:
        return None
    return {"op": ops[0].name, "sampler": str(dist.location / SAMPLER_FILE)}


def probe(target: Target, timeout: float = PROBE_TIMEOUT, device: bool = False) -> ProbeOutcome:
    """Run the probe subprocess, when there is an interpreter and torch-npu to probe."""
    if target.python is None or target.get("torch-npu") is None:
        return ProbeOutcome(None)
    names = sorted({op.name for op in operators_for(target)})
    spec = device_spec(target) if device and not simulated_torch(target) else None
    return ProbeOutcome(run_probe(target.python, names, timeout, spec), spec)


def results(target: Target, outcome: ProbeOutcome, applied: Collection[str],
            device: bool = False) -> list[CheckResult]:
    """What ``outcome`` says about the target's operators (``applied``: the artifacts in
    place, a fallback among them makes a missing operator survivable)."""
    if target.python is None:
        return [CheckResult("probe", "probe", Level.SKIP,
                            "operator probes need an interpreter (--python), not --site-packages")]
    doc = outcome.doc
    if doc is None:
        return [CheckResult("probe", "probe", Level.FAIL,
                            "torch-npu is not installed in the target; the NPU stack is missing")]
    if "error" in doc:
        return [CheckResult("probe", "probe", Level.FAIL, f"operator probe: {doc['error']}")]
    imported = doc["imports"].get("torch_npu")
    if imported != "ok":
        cause, fix = explain_import_error(str(imported), target)
        return [CheckResult("probe:import", "probe", Level.FAIL, cause, fix=fix)]
    npu = target.get("torch-npu")
    label = standins.LABEL if npu is not None and standins.is_standin(npu.metadata_dir) else ""
    found = [CheckResult("probe:import", "probe", Level.OK, f"import torch_npu works{label}")]
    lib = doc["imports"].get("vllm_ascend_C")
    if lib not in (None, "ok"):
        found.append(_op_library_result(str(lib), target, bool(label)))
    for op in operators_for(target):
        found.append(_op_result(op, bool(doc["ops"].get(op.name)), applied, label))
    if device and simulated_torch(target):
        found.append(CheckResult("probe:device", "probe", Level.SKIP,
                                 f"no NPU: on-device check not run, torch here is a "
                                 f"stand-in{standins.LABEL}; run it on an Ascend host"))
    elif device:
        found.append(_device_result(outcome.spec, doc.get("device"), label))
    return found


def simulated_torch(target: Target) -> bool:
    """torch in the target is one of ascendpatch's stand-ins (a sandbox): it computes nothing."""
    torch = target.get("torch")
    return torch is not None and standins.is_standin(torch.metadata_dir)


def _op_library_result(error: str, target: Target, simulated: bool) -> CheckResult:
    """vllm_ascend_C does not load: expected where the NPU stack is simulated; else a fix."""
    cid = "probe:vllm_ascend_C"
    if simulated:
        return CheckResult(cid, "probe", Level.SKIP,
                           f"vllm-ascend's op library not loaded, as expected in a sandbox "
                           f"(no NPU, torch_npu is a stand-in): {error}")
    cause, fix = explain_import_error(error, target)
    if not fix:
        cause = f"vllm-ascend's op library does not load: {error}"
        fix = ("install the vllm-ascend build made for this CANN and torch_npu (its "
               "vllm_ascend_C is compiled against them)")
    return CheckResult(cid, "probe", Level.WARN, cause, fix=fix)


def check(target: Target, applied: Collection[str], timeout: float = PROBE_TIMEOUT,
          device: bool = False) -> list[CheckResult]:
    return results(target, probe(target, timeout, device), applied, device)


class ProbeCheck:
    name = "probes"

    def run(self, ctx: CheckContext) -> list[CheckResult]:
        if ctx.target.python is None:
            return []  # the "host" line says what is not checked
        if ctx.probe is None:
            return [CheckResult("probe", "probe", Level.SKIP,
                                "operator probes skipped (--no-probes)")]
        return results(ctx.target, ctx.probe, ctx.applied, ctx.device)


def _device_result(spec: Mapping[str, str] | None, found: dict[str, Any] | None,
                   label: str) -> CheckResult:
    """verify --device: the fused operator once on the NPU against the installed fallback."""
    cid = "probe:device"
    if spec is None:
        return CheckResult(cid, "probe", Level.SKIP, "on-device check: this vllm-ascend calls "
                                                     "no fused top-k/top-p operator")
    op = spec["op"]
    outcome = (found or {}).get("outcome")
    if outcome == "no-fallback":
        return CheckResult(cid, "probe", Level.SKIP,
                           "on-device check needs the fallback to compare with",
                           fix=Phrase(Hint(("apply", SAMPLER_FIX))))
    if found is None or outcome == "error":
        error = (found or {}).get("error", "no answer")
        return CheckResult(cid, "probe", Level.FAIL, f"on-device check could not run: {error}")
    where = f"on {found['device']}" + ("" if found["device"] == "npu" else
                                        ", no NPU device visible") + label
    rows = f"{found['rows']} random rows of {found['vocab']} logits"
    if outcome == "raises":
        return CheckResult(cid, "probe", Level.WARN,
                           f"on-device check: {op} raises ({found['error']}) {where}; the "
                           "sampler runs the PyTorch fallback on this host")
    if outcome == "mismatch":
        return CheckResult(cid, "probe", Level.WARN,
                           f"on-device check: {op} keeps another token set than the fallback "
                           f"(vLLM's apply_top_k_top_p) on {found['differ']} of {rows} {where}")
    return CheckResult(cid, "probe", Level.OK,
                       f"on-device check: {op} keeps the same tokens as the fallback (vLLM's "
                       f"apply_top_k_top_p) on {rows} {where}")


def _op_result(op: Operator, present: bool, applied: Collection[str],
               label: str = "") -> CheckResult:
    cid = f"probe:{op.name}"
    if present:
        return CheckResult(cid, "probe", Level.OK, f"{op.name} present ({op.used_by}){label}")
    if op.fallback == "upstream guard":
        return CheckResult(cid, "probe", Level.WARN,
                           f"{op.name} missing; {op.used_by} falls back upstream")
    if op.fallback and op.fallback in applied and label:  # a sandbox: no NPU, so no operator
        return CheckResult(cid, "probe", Level.OK,
                           f"{op.name} missing, as expected in a sandbox{label}; {op.used_by} "
                           f"uses the PyTorch fallback ({op.fallback} is applied)")
    if op.fallback and op.fallback in applied:
        return CheckResult(cid, "probe", Level.WARN,
                           f"{op.name} missing; {op.used_by} uses the PyTorch fallback "
                           f"({op.fallback} is applied)")
    if op.fallback:
        return CheckResult(cid, "probe", Level.FAIL,
                           f"{op.name} missing: the first top_p<1 request will kill EngineCore",
                           fix=Phrase(Hint(("apply", op.fallback))))
    return CheckResult(cid, "probe", Level.FAIL, f"{op.name} missing: {op.used_by} will fail",
                       fix="install the torch_npu of the stack")
