"""`ascendpatch logs` on logs assembled from the real message texts (upstream code and notes)."""

from __future__ import annotations

import ast
import os
import re
import zipfile
from pathlib import Path

import pytest

from ascendpatch.deploy.logs import MAX_GROUPS, stream_lines
from tests.kit import REPO, make_dist, run_cli, wheels, write_manifest

ENV_LINE = ("WARNING 11-30 05:00:02 [envs.py:2087] Unknown vLLM environment variable detected: "
            "{}")
BENIGN = [
    "(EngineCore_DP0 pid=91) WARNING 11-30 05:00:09 [registry.py:980] Model architecture "
    "DeepseekV4ForCausalLM is already registered, and will be overwritten by the new model "
    "class vllm_ascend.models.deepseek_v4:DeepseekV4ForCausalLM.",
    "WARNING 11-30 05:00:10 [compilation.py:55] torch.compile is turned on, but the model "
    "MuseGlimmerForConditionalGeneration does not support it.",
    "WARNING 11-30 05:00:11 [omni.py:12] vllm-omni 0.25.0 version mismatch with vllm 0.25.1",
    # the last line of one of two real stops of a healthy vLLM 0.22.1 server in CI
    "(Worker pid=4350) WARNING 12-02 22:25:13 [multiproc_executor.py:884] WorkerProc was "
    "terminated",
]
FAULTS = {
    "libhccl-missing": "ImportError: libhccl.so: cannot open shared object file: No such file "
                       "or directory",
    "libatb-missing": "OSError: libatb.so: cannot open shared object file: No such file or "
                      "directory",
    "topk-topp-custom-op-missing": "AttributeError: '_OpNamespace' '_C_ascend' object has no "
                                   "attribute 'npu_apply_top_k_top_p'",
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


CUSTOM_OPS = "WARNING:root:Warning: Failed to register custom ops, all custom ops will be disabled"


@pytest.mark.parametrize(("release", "code", "says"), [
    ("0.7.3", 0, "known-benign"),  # printed by almost every 0.7.x / 0.8.x start
    ("0.8.5rc1", 0, "known-benign"),
    ("0.18.0", 1, "custom-ops-disabled: "),  # this release needs its custom ops
])
def test_the_custom_ops_warning_is_judged_by_the_release(tmp_path: Path, release: str, code: int,
                                                        says: str) -> None:
    result = run_cli("logs", "--vllm-ascend", release, _log(tmp_path, [CUSTOM_OPS, STARTED]))
    assert result.code == code, result.out
    assert says in result.out


def test_without_a_release_the_log_s_own_version_decides(tmp_path: Path) -> None:
    """The warning comes before the version line (the plugin loads first): judged at the end."""
    old = [CUSTOM_OPS, "INFO 02-21 10:53:44 api_server.py:838] vLLM API server version 0.7.1",
           STARTED]
    assert "known-benign" in run_cli("logs", _log(tmp_path, old, "old.log")).out
    new = [CUSTOM_OPS, "(EngineCore_DP0 pid=9) INFO 07-16 06:40:52 [core.py:69] Initializing a "
           "V1 LLM engine (v0.10.1) with config: model='m'", STARTED]
    assert run_cli("logs", _log(tmp_path, new, "new.log")).code == 1
    unknown = run_cli("logs", _log(tmp_path, [CUSTOM_OPS, STARTED], "none.log"))
    assert unknown.code == 0, unknown.out  # no release known: a warning that says what to pass
    assert "depends on the vllm-ascend release" in unknown.out and "--vllm-ascend" in unknown.out


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


MUSE = ("--manifest", "muse-glimmer-w8a8")
ARCH_LINE = ("(EngineCore_DP0 pid=91) WARNING 11-30 05:00:09 [registry.py:980] Model architecture "
             "{} is already registered, and will be overwritten by the new model class {}.")


def test_overwriting_the_deployed_architecture_is_a_warning(tmp_path: Path) -> None:
    deployed = ARCH_LINE.format("MuseGlimmerForConditionalGeneration",
                                "vllm.model_executor.models.muse:MuseGlimmerForConditionalGeneration")
    other = ARCH_LINE.format("DeepseekV4ForCausalLM",
                             "vllm_ascend.models.deepseek_v4:DeepseekV4ForCausalLM")
    result = run_cli(*MUSE, "logs", _log(tmp_path, [deployed, other, STARTED]))
    assert result.code == 0, result.out
    warn = [x for x in result.out.splitlines() if x.startswith("[WARN]")]
    assert len(warn) == 1 and "architecture-overwritten: the deployed architecture " \
        "MuseGlimmerForConditionalGeneration was overwritten: the class that won is " \
        "vllm.model_executor.models.muse:MuseGlimmerForConditionalGeneration" in warn[0]
    assert result.out.count("known-benign") == 1  # DeepseekV4: not what this manifest deploys


@pytest.mark.parametrize(("counts", "ok", "says"), [
    ((364, 364), True, "(364, 364 vectors, expected 364 per rank)"),
    ((364, 0), False, "a rank loaded 0, expected 364 per rank"),
    ((0, 0), False, "a rank loaded 0"),
    ((364, 100), False, "a rank loaded 100, expected 364 per rank"),
    ((364,), False, "missing marker on 2 TP rank(s)"),
])
def test_smoothquant_vectors_per_rank_match_the_manifest(tmp_path: Path, counts: tuple[int, ...],
                                                         ok: bool, says: str) -> None:
    head = "INFO Initializing a V1 LLM engine with config: tensor_parallel_size=2"
    lines = [head, *(f"(Worker_TP{r} pid=7) INFO [smooth-w8a8] loaded {n} smooth scale vectors"
                     for r, n in enumerate(counts)), STARTED]
    result = run_cli(*MUSE, "logs", "--with", "smoothquant", _log(tmp_path, lines))
    assert result.code == (0 if ok else 1), result.out
    assert says in result.out


def _sampler_fallback_warning() -> str:
    """The warning text exactly as the shipped sampler fallback patch logs it."""
    for patch in sorted((REPO / "patches").rglob("*.patch")):
        text = patch.read_text()
        if "ascendpatch sampler fallback" in text:
            block = text[text.index(".warning("):text.index("ascendpatch sampler fallback")]
            pieces = re.findall(r'"((?:[^"\\]|\\.)*)"', block + 'ascendpatch sampler fallback"')
            return "".join(pieces)
    raise AssertionError("no patch logs the sampler fallback warning")


def test_the_sampler_fallback_warning_is_explained(tmp_path: Path) -> None:
    warning = _sampler_fallback_warning()
    assert "ascendpatch sampler fallback" in warning
    line = f"(EngineCore_DP0 pid=91) WARNING 11-30 05:01:00 [sampler.py:31] {warning}"
    result = run_cli("logs", _log(tmp_path, [line, STARTED]))
    assert result.code == 0, result.out
    assert "known-benign" in result.out and "the sampler fallback is doing its job" in result.out


def test_escape_sequences_from_a_log_never_reach_the_terminal(tmp_path: Path) -> None:
    evil = "WARNING 11-30 05:00:00 [x.py:1] \x1b]0;pwned\x07\x1b[2J\x1b[31mred \u202etxt.exe"
    result = run_cli("logs", _log(tmp_path, [evil, STARTED]))
    assert "\x1b" not in result.out and "\x07" not in result.out and "\u202e" not in result.out
    assert "\\x1b]0;pwned\\x07" in result.out and "\\u202e" in result.out


def test_escape_sequences_in_a_file_name_never_reach_the_terminal(tmp_path: Path) -> None:
    """On a shared host anyone can name a file that `logs /var/log/vllm/*.log` picks up."""
    evil = _log(tmp_path, [FAULTS["out-of-memory"], STARTED]).rename(
        tmp_path / "serve\x1b]0;pwned\x07.log")
    fifo = tmp_path / "f\x1b[2J"
    os.mkfifo(fifo)
    for result in (run_cli("logs", evil), run_cli("logs", fifo)):
        shown = result.out + result.err
        assert "\x1b" not in shown and "\x07" not in shown, shown
    assert "serve\\x1b]0;pwned\\x07.log:1: out-of-memory" in run_cli("logs", evil).out


def test_distinct_unknown_kinds_are_capped_and_counted(tmp_path: Path) -> None:
    words = [f"{a}{b}{c}" for a in "abcdefghij" for b in "klmnopqrst" for c in "uvwxyzABCDEFGHI"]
    assert len(words) > MAX_GROUPS + 100
    lines = [f"WARNING 11-30 05:00:00 [x.py:1] unexpected state {w}" for w in words]
    result = run_cli("logs", _log(tmp_path, [*lines, STARTED]))
    assert result.out.count("unknown, for a human") == MAX_GROUPS
    assert f"{len(words) - MAX_GROUPS} more unknown line(s) of kinds beyond the first " \
           f"{MAX_GROUPS}" in result.out


def test_overlong_lines_are_cut_not_loaded(tmp_path: Path) -> None:
    path = tmp_path / "serve.log"
    with path.open("w") as handle:
        handle.write("WARNING x " + "A" * 5_000_000 + "\n")
        handle.write(FAULTS["out-of-memory"] + "\n" + STARTED + "\n")
    result = run_cli("logs", path)
    assert result.code == 1 and "serve.log:2: out-of-memory" in result.out
    assert len(result.out) < 5000


def test_a_log_growing_while_read_ends_at_its_size_when_opened(tmp_path: Path) -> None:
    """A live server keeps appending; faster than we read, it would keep us reading forever.
    Here every line read appends two more."""
    path = tmp_path / "serve.log"
    path.write_text("".join(f"INFO line {n}\n" for n in range(100)))
    read = 0
    with path.open("a") as writer:
        for _ in stream_lines(path):
            read += 1
            writer.write("WARNING appended\nWARNING appended\n")
            writer.flush()
            if read > 10_000:
                break
    assert read == 100


def test_fifo_and_devices_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "serve.log"
    os.mkfifo(fifo)
    result = run_cli("logs", fifo)  # opened O_NONBLOCK: no writer needed, nothing blocks
    assert result.code == 2 and "is a FIFO, not a regular file" in result.err + result.out
    zero = run_cli("logs", "/dev/zero")
    assert zero.code == 2 and "is a device, not a regular file" in zero.err + zero.out


def _wheel_source(version: str, member: str) -> str:
    with zipfile.ZipFile(wheels.wheel(version)) as archive:
        return archive.read(member).decode()


def _logged_format(source: str, starts: str) -> str:
    """The format string of the logger call in ``source`` whose text starts with ``starts``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and str(node.args[0].value).startswith(starts):
            return str(node.args[0].value)
    raise AssertionError(f"no logger call starting {starts!r}")


@pytest.mark.integration
@pytest.mark.parametrize("version", ["0.20.2rc1", "0.22.1rc1", "0.26.0rc1"])
def test_quantization_wording_is_the_real_vllm_ascend_one(tmp_path: Path, version: str) -> None:
    """The line is formatted from the real wheel's logger call (not paraphrased), for the
    first wheel that logs it (0.18.0 detects silently), the wheel nearest the
    muse-glimmer-w8a8 stack's 0.22.1rc2 (which has none), and the newest wheel."""
    fmt = _logged_format(_wheel_source(version, "vllm_ascend/quantization/utils.py"),
                         "No quantization signature detected")
    line = "(APIServer pid=5) INFO 11-30 05:00:01 [utils.py:174] " + \
        fmt % "/models/Muse-Glimmer-30B-w8a8"
    log = _log(tmp_path, [line, STARTED])
    quantized = run_cli(*MUSE, "logs", log)
    assert quantized.code == 1 and "quantization-not-detected" in quantized.out
    assert "quant_model_description.json" in quantized.out
    assert run_cli("logs", log).code == 0  # a float model: the INFO line is the normal case


@pytest.mark.integration
def test_vllm_ascend_variables_are_checked_against_the_installed_envs_py(site: Path,
                                                                         tmp_path: Path) -> None:
    """Names come from the real 0.22.1rc1 envs.py, installed into a temp site-packages."""
    envs = _wheel_source("0.22.1rc1", "vllm_ascend/envs.py")
    make_dist(site, "vllm-ascend", "0.22.1rc1", {"vllm_ascend/__init__.py": "",
                                                 "vllm_ascend/envs.py": envs})
    real = sorted(set(re.findall(r'"(VLLM_ASCEND_[A-Z0-9_]+)"', envs)))
    assert real, "the real envs.py names no VLLM_ASCEND_ variable"
    typo = real[0] + "S"
    assert typo not in envs
    lines = [ENV_LINE.format(real[0]), ENV_LINE.format(typo),
             ENV_LINE.format("VLLM_ASCEND_SMOOTH_SCALES"), STARTED]
    result = run_cli("--site-packages", site, *MUSE, "logs", _log(tmp_path, lines))
    assert result.code == 0, result.out
    assert f"{typo} is not a variable the installed vllm-ascend knows" in result.out
    assert "VLLM_ASCEND_SMOOTH_SCALES is not a variable" in result.out  # drop-in not enabled
    assert f"{real[0]} is not" not in result.out
    assert result.out.count("known-benign") == 1
    smooth = run_cli("--site-packages", site, *MUSE, "logs", "--with", "smoothquant",
                     _log(tmp_path, lines[2:], "smooth.log"))
    assert "VLLM_ASCEND_SMOOTH_SCALES is not" not in smooth.out  # the drop-in reads it


@pytest.mark.integration
def test_an_overridden_quantization_is_a_fault_in_real_wording(tmp_path: Path) -> None:
    fmt = _logged_format(_wheel_source("0.18.0", "vllm_ascend/quantization/utils.py"),
                         "Auto-detected quantization method '%s' from model files for '%s', but")
    line = "(APIServer pid=5) WARNING 11-30 05:00:01 [utils.py:160] " + \
        fmt % ("ascend", "/models/m", "fp8", "ascend")
    result = run_cli("logs", _log(tmp_path, [line, STARTED]))
    assert result.code == 1 and "quantization-overridden" in result.out, result.out


def test_a_terminated_worker_never_stands_in_for_the_exception_above_it(tmp_path: Path) -> None:
    """vLLM prints "WorkerProc was terminated" when a worker takes SIGTERM, after whatever
    ended the server: an exception no rule names stays the finding, with or without it (a
    review found a crash_fix on this rule folding the exception into it, and the same crash
    'gone since' its baseline)."""
    api = "(APIServer pid=4200) "
    crash = [STARTED, f"{api}Traceback (most recent call last):",
             f'{api}  File "/usr/lib/python3.11/site-packages/my_plugin/middleware.py", line 42, '
             "in __call__", f"{api}    raise KeyError(scope['x-tenant'])",
             f"{api}KeyError: 'x-tenant'"]
    terminated = [f"(Worker_TP{n} pid=435{n}) WARNING 12-02 22:25:13 [multiproc_executor.py:884] "
                  "WorkerProc was terminated" for n in range(2)]
    alone = run_cli("logs", _log(tmp_path, crash, "alone.log"))
    both = run_cli("logs", _log(tmp_path, crash + terminated, "both.log"))
    assert both.code == alone.code, both.out
    assert "KeyError: 'x-tenant'" in "".join(_lines(both.out, "[WARN]")), both.out
    assert "[FAIL]" not in both.out and "known-benign (2x)" in both.out, both.out
    compared = run_cli("logs", "--baseline", tmp_path / "alone.log", tmp_path / "both.log")
    assert "gone since" not in compared.out, compared.out


def _lines(out: str, tag: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(tag)]
