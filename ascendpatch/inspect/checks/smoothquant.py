"""SmoothQuant: both halves or neither.

weights_smooth/ holds weights pre-divided by the smooth scales. Answers are right only when the
w8a8 drop-in is installed AND VLLM_ASCEND_SMOOTH_SCALES names the scales file. With one half
missing nothing fails; quality silently degrades. verify says which half is missing, loads the
scales in the target (torch .pt, or safetensors read directly) and counts the vectors, and with
--serve-log requires the drop-in's "loaded N smooth scale vectors" line once per TP rank.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ascendpatch.deploy.logs import SMOOTHQUANT_MARKER, load_rules, triage
from ascendpatch.env import inscript
from ascendpatch.inspect.checks.base import CheckContext
from ascendpatch.manifest.model import Artifact
from ascendpatch.redact import is_secret, shown
from ascendpatch.results import CheckResult, Hint, Level, Phrase

SCALES_PROBE = r"""
import json, struct, sys
path = sys.argv[1]
try:
    if path.endswith(".safetensors"):
        with open(path, "rb") as f:
            size = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(size))
        count = len([k for k in header if k != "__metadata__"])
    else:
        import torch
        obj = torch.load(path, map_location="cpu", weights_only=True)
        if isinstance(obj, dict):
            count = len([v for v in obj.values() if hasattr(v, "shape")])
        elif isinstance(obj, (list, tuple)):
            count = len(obj)
        else:
            count = int(obj.shape[0]) if len(obj.shape) > 1 else 1
    print(json.dumps({"count": count}))
except BaseException as exc:
    print(json.dumps({"error": "%s: %s" % (type(exc).__name__, exc)}))
"""
UNKNOWN_ENV = "Unknown vLLM environment variable detected: {name}"


def count_vectors(python: Path, scales: str, env: Mapping[str, str]) -> tuple[int | None, str]:
    try:
        doc = inscript.run_json(python, SCALES_PROBE, [scales], 300, env)
    except inscript.ScriptError as exc:
        return None, f"the scale-loading probe failed: {exc}"
    if "error" in doc:
        return None, str(doc["error"])
    return int(doc["count"]), ""


def check(artifact: Artifact, var: str, applied: bool, enabled: bool, python: Path | None,
          env: Mapping[str, str]) -> list[CheckResult]:
    """One SmoothQuant drop-in ``artifact`` whose scales file the variable ``var`` names."""
    scales = env.get(var)
    cid = f"smoothquant:{artifact.id}"
    if not applied and not scales:
        if enabled:
            return [CheckResult(cid, "smoothquant", Level.FAIL,
                                f"SmoothQuant is enabled but neither the drop-in nor {var} is "
                                f"in place",
                                fix=Phrase(Hint(("apply", "--with", artifact.id)), f" and export "
                                           f"{var}=<weights_smooth>/smooth_scales.pt"))]
        return [CheckResult(cid, "smoothquant", Level.SKIP,
                            f"SmoothQuant not in use (no drop-in, {var} unset)")]
    if applied and not scales:
        return [CheckResult(cid, "smoothquant", Level.FAIL,
                            f"the SmoothQuant drop-in is installed but {var} is not set: half "
                            f"installed, answers silently degrade",
                            fix=f"export {var}=<weights_smooth>/smooth_scales.pt")]
    if not applied:
        return [CheckResult(cid, "smoothquant", Level.FAIL,
                            f"{var} is set but the SmoothQuant drop-in is not installed: half "
                            f"installed, answers silently degrade",
                            fix=Phrase("SMOOTH=1 bash install.sh, or ",
                                       Hint(("apply", "--with", artifact.id))))]
    assert scales is not None
    results = [CheckResult(f"{cid}:env", "smoothquant", Level.WARN,
                           f"vLLM logs '{UNKNOWN_ENV.format(name=var)}' at start-up: harmless "
                           "(the drop-in reads the variable itself)")]
    if not Path(scales).is_file():
        return [*results, CheckResult(cid, "smoothquant", Level.FAIL,
                                      f"{var}={shown(var, scales)}: no such file")]
    if python is None:
        return results
    count, error = count_vectors(python, scales, env)
    if count is None:
        return [*results, CheckResult(cid, "smoothquant", Level.FAIL,
                                      f"{var}={shown(var, scales)} cannot be loaded: "
                                      f"{error if not is_secret(var) else '(hidden)'}")]
    return [*results, CheckResult(cid, "smoothquant", Level.OK,
                                  f"SmoothQuant: drop-in installed and {count} smooth scale "
                                  f"vectors in {shown(var, scales)}", data={"vectors": count})]


def check_serve_log(text: str, expected_tp: int | None) -> CheckResult:
    """The drop-in's marker once per TP rank, counted by the serve-log triage."""
    result = triage(text.splitlines(), load_rules([SMOOTHQUANT_MARKER]))
    seen = result.markers.get(str(SMOOTHQUANT_MARKER["id"]), 0)
    tp = result.tp_size or expected_tp or 1
    if seen >= tp:
        return CheckResult("serve-log:smoothquant", "smoothquant", Level.OK,
                           f"serve log: '[smooth-w8a8] loaded N smooth scale vectors' on all "
                           f"{tp} TP rank(s) ({seen} line(s))")
    return CheckResult("serve-log:smoothquant", "smoothquant", Level.FAIL,
                       f"serve log: the SmoothQuant line appears {seen} time(s) for "
                       f"tensor_parallel_size={tp}: a rank runs without smooth scales",
                       fix="check the drop-in and VLLM_ASCEND_SMOOTH_SCALES on every rank")


@dataclass(frozen=True)
class Halves:
    """A SmoothQuant drop-in and the variable that must name its scales file."""

    artifact: Artifact
    scales_env: str


@dataclass(frozen=True)
class SmoothQuantCheck:
    """Both halves or neither, for each drop-in; with --serve-log, the line on every rank."""

    drop_ins: tuple[Halves, ...]
    name: str = "smoothquant"

    def run(self, ctx: CheckContext) -> Iterator[CheckResult]:
        for one in self.drop_ins:
            artifact = one.artifact
            yield from check(artifact, one.scales_env, artifact.id in ctx.applied,
                             ctx.enabled(artifact), ctx.target.python, ctx.env)
        if ctx.serve_log is not None and any(h.artifact.id in ctx.applied
                                             for h in self.drop_ins):
            yield check_serve_log(ctx.serve_log, ctx.manifest.tp_size)
