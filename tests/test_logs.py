"""`ascendpatch logs` on logs assembled from the real message texts (upstream code and notes)."""

from __future__ import annotations

from pathlib import Path

from tests.kit import run_cli, write_manifest

BENIGN = [
    "WARNING 11-30 05:00:02 [envs.py:2087] Unknown vLLM environment variable detected: "
    "VLLM_ASCEND_SMOOTH_SCALES",
    "(EngineCore_DP0 pid=91) WARNING 11-30 05:00:09 [registry.py:980] Model architecture "
    "DeepseekV4ForCausalLM is already registered, and will be overwritten by the new model "
    "class vllm_ascend.models.deepseek_v4:DeepseekV4ForCausalLM.",
    "WARNING 11-30 05:00:10 [compilation.py:55] torch.compile is turned on, but the model "
    "MuseGlimmerForConditionalGeneration does not support it.",
    "WARNING 11-30 05:00:11 [omni.py:12] vllm-omni 0.25.0 version mismatch with vllm 0.25.1",
]
FAULTS = {
    "libhccl-missing": "ImportError: libhccl.so: cannot open shared object file: No such file "
                       "or directory",
    "libatb-missing": "OSError: libatb.so: cannot open shared object file: No such file or "
                      "directory",
    "topk-topp-custom-op-missing": "AttributeError: '_OpNamespace' '_C_ascend' object has no "
                                   "attribute 'npu_apply_top_k_top_p'",
    "custom-ops-disabled": "WARNING 11-30 05:00:03 [utils.py:290] Warning: Failed to register "
                           "custom ops, all custom ops will be disabled",
    "leftover-enginecore": "ValueError: Free memory on device (12.1/61.28 GiB) on startup is "
                           "less than desired GPU memory utilization (0.9, 55.15 GiB).",
    "out-of-memory": "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB",
    "device-type": "RuntimeError: Failed to infer device type",
}
STARTED = "INFO:     Application startup complete."


def _log(tmp_path: Path, lines: list[str], name: str = "serve.log") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_every_benign_class_is_recognised(tmp_path: Path) -> None:
    result = run_cli("logs", _log(tmp_path, [*BENIGN, STARTED]))
    assert result.code == 0, result.out
    assert result.out.count("known-benign") == len(BENIGN)
    assert "[FAIL]" not in result.out and "unknown" not in result.out


def test_every_fault_class_names_its_fix(tmp_path: Path) -> None:
    for rule, line in FAULTS.items():
        result = run_cli("logs", _log(tmp_path, [line, STARTED], f"{rule}.log"))
        assert result.code == 1, rule
        assert f": {rule}: " in result.out and "; fix: " in result.out, result.out


def test_fault_hidden_between_benign_warnings(tmp_path: Path) -> None:
    lines = [*BENIGN[:2], "Traceback (most recent call last):",
             '  File "/usr/local/lib/python3.11/site-packages/vllm/v1/sample/sampler.py", '
             'line 97, in forward', FAULTS["topk-topp-custom-op-missing"], *BENIGN[2:], STARTED]
    result = run_cli("logs", _log(tmp_path, lines))
    assert result.code == 1
    fails = [line for line in result.out.splitlines() if line.startswith("[FAIL]")]
    assert len(fails) == 1
    assert "serve.log:5: topk-topp-custom-op-missing" in fails[0]
    assert "ascendpatch apply sampler-topk-topp-fallback" in fails[0]


def test_unknown_warnings_are_listed_once_per_kind(tmp_path: Path) -> None:
    lines = [f"WARNING 11-30 05:00:{i:02d} [x.py:1] queue depth {i} above threshold"
             for i in range(5)] + [STARTED]
    result = run_cli("logs", _log(tmp_path, lines))
    assert result.code == 0
    assert "[WARN] " in result.out and "unknown (5x), for a human" in result.out


def test_missing_startup_marker(tmp_path: Path) -> None:
    result = run_cli("logs", _log(tmp_path, BENIGN))
    assert result.code == 1
    assert "missing marker: the server finished starting" in result.out


def test_smoothquant_marker_once_per_tp_rank_when_enabled(tmp_path: Path) -> None:
    marker = "(Worker_TP{r} pid=7) INFO [smooth-w8a8] loaded 364 smooth scale vectors"
    head = "INFO Initializing a V1 LLM engine with config: tensor_parallel_size=2"
    one = _log(tmp_path, [head, marker.format(r=0), STARTED], "one.log")
    both = _log(tmp_path, [head, marker.format(r=0), marker.format(r=1), STARTED], "both.log")
    args = ("--manifest", "muse-glimmer-w8a8", "logs")
    assert run_cli(*args, one).code == 0  # SmoothQuant not enabled: not required
    bad = run_cli(*args, "--with", "smoothquant", one)
    assert bad.code == 1 and "missing marker on 2 TP rank(s)" in bad.out
    assert run_cli(*args, "--with", "smoothquant", both).code == 0


def test_manifest_extends_the_knowledge_base(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.yaml", [], log_rules=[
        {"id": "my-benign", "class": "benign", "pattern": "queue depth \\d+",
         "why": "our autoscaler logs this"}])
    lines = ["WARNING 11-30 05:00:00 [x.py:1] queue depth 9 above threshold", STARTED]
    result = run_cli("--manifest", manifest, "logs", _log(tmp_path, lines))
    assert result.code == 0 and "our autoscaler logs this" in result.out
