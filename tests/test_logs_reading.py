"""`ascendpatch logs` reads a log as vLLM writes it: process prefixes, tracebacks as one finding,
a crash's echoes folded, client errors apart from server faults."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ascendpatch.deploy.logs import load_rules, triage
from tests.kit import run_cli

STARTED = "(APIServer pid=300) INFO:     Application startup complete."
ENGINE = "(EngineCore_DP0 pid=415) ERROR 11-30 05:10:00 [core.py:866] "
API = "(APIServer pid=300) ERROR 11-30 05:10:00 [async_llm.py:480] "
TOPK = "AttributeError: '_OpNamespace' '_C_ascend' object has no attribute 'npu_apply_top_k_top_p'"


def _log(tmp_path: Path, lines: list[str], name: str = "serve.log") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _frames(prefix: str, count: int) -> list[str]:
    """What a real vLLM traceback puts between its header and its last line."""
    out = []
    for n in range(count):
        out += [f'{prefix}  File "/vllm-workspace/vllm/vllm/v1/engine/core.py", line {100 + n}, '
                f"in step_{n}",
                f"{prefix}    outputs = self.model_executor.execute_model(scheduler_output)",
                f"{prefix}              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^"]
    return out


def _lines_of(out: str, tag: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(tag)]


def test_a_sampler_crash_is_one_finding_with_its_process(tmp_path: Path) -> None:
    lines = [STARTED, f"{ENGINE}EngineCore encountered a fatal error.",
             f"{ENGINE}Traceback (most recent call last):", *_frames(ENGINE, 40),
             f"{ENGINE}{TOPK}",
             f"{API}Traceback (most recent call last):", *_frames(API, 3),
             f"{API}vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."]
    result = run_cli("logs", _log(tmp_path, lines))
    assert result.code == 1
    fails = _lines_of(result.out, "[FAIL]")
    assert len(fails) == 1, result.out
    assert "topk-topp-custom-op-missing" in fails[0]
    assert "raised in EngineCore_DP0" in fails[0] and "folded in" in fails[0]
    assert _lines_of(result.out, "[WARN]") == [], result.out  # no frame is "unknown"


def test_frames_of_a_traceback_cut_in_the_middle_are_detail(tmp_path: Path) -> None:
    lines = [*_frames("[rank0]:   ", 5), "[rank0]: KeyError: 'layers.0.mlp.gate_up_proj.deq_scale'",
             STARTED]
    result = run_cli("logs", _log(tmp_path, lines))
    assert _lines_of(result.out, "[FAIL]")[0].count("checkpoint-key-mismatch") == 1
    assert _lines_of(result.out, "[WARN]") == [], result.out


def test_an_exception_no_rule_names_is_one_line_for_a_human(tmp_path: Path) -> None:
    lines = [f"{ENGINE}Traceback (most recent call last):", *_frames(ENGINE, 8),
             f"{ENGINE}ZeroDivisionError: division by zero", STARTED]
    result = run_cli("logs", _log(tmp_path, lines))
    warns = _lines_of(result.out, "[WARN]")
    assert len(warns) == 1 and "an exception no rule names" in warns[0]
    assert "ZeroDivisionError" in warns[0] and "raised in EngineCore_DP0" in warns[0]


def test_the_echoes_of_a_crash_fold_into_its_cause(tmp_path: Path) -> None:
    lines = [f"{ENGINE}ValueError: No available memory for the cache blocks. Try increasing "
             "`gpu_memory_utilization` when initializing the engine.",
             f"{ENGINE}[ERROR] 2025-04-27-03:11:08 (PID:5409, Device:0, RankID:1) ERR00100 PTA "
             "call acl api failed.",
             f"{ENGINE}EngineCore failed to start.",
             "(APIServer pid=300) RuntimeError: Engine core initialization failed. See root cause "
             "above. Failed core proc(s): {}"]
    result = run_cli("logs", _log(tmp_path, lines))
    assert _lines_of(result.out, "[WARN]") == [], result.out
    fails = _lines_of(result.out, "[FAIL]")
    assert any("kv-cache-no-memory" in f for f in fails), result.out
    assert not any("enginecore-died" in f for f in fails), result.out
    assert "--gpu-memory-utilization" in result.out and "--max-num-seqs" in result.out


def test_an_engine_death_with_no_known_cause_is_still_a_fault(tmp_path: Path) -> None:
    result = run_cli("logs", _log(tmp_path, [f"{ENGINE}EngineCore failed to start.", STARTED]))
    assert result.code == 1 and "enginecore-died" in result.out


def test_a_client_error_on_a_healthy_server_is_not_a_server_fault(tmp_path: Path) -> None:
    lines = [STARTED, "ERROR 03-18 09:02:03 [serving_chat.py:133] Error with model "
             "object='error' message='The model `QwQ-32B` does not exist.' type='NotFoundError' "
             "param=None code=404",
             'INFO:     192.168.1.168:12475 - "POST /v1/chat/completions HTTP/1.1" 404 Not Found']
    result = run_cli("logs", _log(tmp_path, lines))
    assert result.code == 0, result.out
    assert "a client's error, not a server fault (model-not-found)" in result.out
    assert "GET /v1/models" in result.out


def test_the_manifest_s_own_adapter_overwriting_its_architecture_is_expected(
        tmp_path: Path) -> None:
    line = ("(EngineCore_DP0 pid=91) WARNING 11-30 05:00:09 [registry.py:980] Model architecture "
            "MuseGlimmerForConditionalGeneration is already registered, and will be overwritten "
            "by the new model class muse_glimmer:MuseGlimmerForConditionalGeneration.")
    result = run_cli("--manifest", "muse-glimmer-w8a8", "logs", _log(tmp_path, [line, STARTED]))
    assert result.code == 0 and "[WARN]" not in result.out, result.out
    assert "known-benign" in result.out


def test_a_version_mismatch_warning_explains_the_crash_that_follows(tmp_path: Path) -> None:
    warning = ("/x/vllm_omni/version.py:55: RuntimeWarning: vLLM and vLLM-Omni appear to have "
               "mismatched major/minor versions:")
    served = run_cli("logs", _log(tmp_path, [warning, STARTED], "ok.log"))
    assert served.code == 0 and "known-benign" in served.out
    crashed = run_cli("logs", _log(tmp_path, [warning, "Traceback (most recent call last):",
                                              *_frames("", 2)], "crash.log"))
    assert "vllm-omni-version-mismatch" in "".join(_lines_of(crashed.out, "[FAIL]"))


def test_a_line_after_a_crash_never_explains_it(tmp_path: Path) -> None:
    """A benign line with a crash_fix explains an unnamed crash only when it came before it:
    the same version warning printed after the traceback leaves the exception the finding.
    So does any line a stop prints after whatever ended the server, even one given a
    crash_fix (a review found 'WorkerProc was terminated' with one standing in for a
    KeyError)."""
    warning = ("/x/vllm_omni/version.py:55: RuntimeWarning: vLLM and vLLM-Omni appear to have "
               "mismatched major/minor versions:")
    crash = ["Traceback (most recent call last):", *_frames("", 2), "KeyError: 'x-tenant'"]
    after = run_cli("logs", _log(tmp_path, [STARTED, *crash, warning], "after.log"))
    assert "[FAIL]" not in after.out, after.out
    assert "KeyError: 'x-tenant'" in "".join(_lines_of(after.out, "[WARN]")), after.out
    rules = [replace(r, crash_fix="look for the OOM killer") if r.id == "worker-terminated"
             else r for r in load_rules()]
    terminated = ("(Worker_TP0 pid=4350) WARNING 12-02 22:25:13 [multiproc_executor.py:884] "
                  "WorkerProc was terminated")
    found = triage([STARTED, *crash, terminated], rules)
    assert found.faults == [] and [f.line for f in found.crashes] == ["KeyError: 'x-tenant'"]
    assert [f.rule.id for f in found.benign if f.rule] == ["worker-terminated"]
    before = triage([STARTED, terminated, *crash], rules)  # (the control: it did come first)
    assert [f.rule.id for f in before.faults if f.rule] == ["worker-terminated"]


def test_a_warning_printed_inside_a_traceback_or_before_a_later_crash_still_explains_it() -> None:
    """Processes interleave: another process's version warning printed between a traceback's
    lines, or after an earlier crash but before the one it explains, still explains it (a
    review found both lost when only a line before the first crash could)."""
    warning = ("(APIServer pid=300) /x/vllm_omni/version.py:55: RuntimeWarning: vLLM and "
               "vLLM-Omni appear to have mismatched major/minor versions:")
    engine = "(EngineCore_DP0 pid=415) "
    inside = [f"{engine}Traceback (most recent call last):", warning, *_frames(engine, 2),
              f"{engine}KeyError: 'omni'"]
    earlier = [f"{API}Traceback (most recent call last):", *_frames(API, 1),
               f"{API}ValueError: bad request", warning,
               f"{engine}Traceback (most recent call last):", *_frames(engine, 1),
               f"{engine}KeyError: 'omni'"]
    for lines in (inside, earlier):
        found = triage(lines, load_rules())
        assert [f.rule.id for f in found.faults if f.rule] == ["vllm-omni-version-mismatch"]


def test_an_error_message_s_indented_body_folds_into_its_fault(tmp_path: Path) -> None:
    worker = "(RayWorkerWrapper pid=9) ERROR 02-26 09:45:37 worker_base.py:572] "
    dump = [f"{worker}        open device 1 failed, runtime result = 107001.[FUNC:Report]",
            f"{worker}        Failed to open device, retCode=0x7020014, deviceId=1.",
            f"{worker}        Failed to init RawDriver, device_id=1, retCode=0x7020014"]
    run = run_cli("logs", _log(tmp_path, [STARTED, dump[0].replace("open device 1 failed",
                                                                    "Set visible device failed"),
                                          *dump[1:]]))
    assert run.code == 1
    assert "visible-device-invalid" in run.out and "2 more line(s)" in run.out
    assert not _lines_of(run.out, "[WARN]"), run.out


def test_indented_error_lines_with_no_fault_stay_for_a_human(tmp_path: Path) -> None:
    run = run_cli("logs", _log(tmp_path, [STARTED, f"{API}        some driver detail, ret:4"]))
    assert run.code == 0
    assert len(_lines_of(run.out, "[WARN]")) == 1 and "unknown" in run.out
