"""`ascendpatch logs --baseline good.log new.log`: only what is new or gone since a known-good
start, by message shape (numbers, timestamps and pids ignored); exit 1 on a new error or
warning."""

from __future__ import annotations

from pathlib import Path

from tests.kit import run_cli


def _start(tmp_path: Path, name: str, stamp: str, pid: int, extra: tuple[str, ...] = ()) -> Path:
    lines = [f"(APIServer pid={pid}) INFO {stamp} [api_server.py:1880] Starting vLLM API server "
             "0 on http://0.0.0.0:8000",
             f"(EngineCore_DP0 pid={pid + 1}) WARNING {stamp} [registry.py:980] Model "
             "architecture DeepseekV4ForCausalLM is already registered, and will be overwritten "
             "by the new model class vllm_ascend.models.deepseek_v4:DeepseekV4ForCausalLM.",
             f"(EngineCore_DP0 pid={pid + 1}) WARNING {stamp} [worker.py:{pid % 97}] queue depth "
             f"{pid % 13} above threshold",
             *extra,
             f"(APIServer pid={pid}) INFO:     Application startup complete."]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_restart_with_the_same_warnings_is_no_difference(tmp_path: Path) -> None:
    good = _start(tmp_path, "good.log", "11-30 05:00:01", 300)
    again = _start(tmp_path, "again.log", "12-01 17:42:59", 4711)
    result = run_cli("logs", "--baseline", good, again)
    assert result.code == 0, result.out
    assert "logs: the same as" in result.out
    assert "[WARN]" not in result.out and "[FAIL]" not in result.out


def test_a_new_error_is_reported_alone_and_fails(tmp_path: Path) -> None:
    good = _start(tmp_path, "good.log", "11-30 05:00:01", 300)
    worse = _start(tmp_path, "worse.log", "12-01 17:42:59", 4711, (
        "(EngineCore_DP0 pid=4712) ERROR 12-01 17:43:00 [core.py:866] ValueError: No available "
        "memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
        "the engine.",))
    result = run_cli("logs", "--baseline", good, worse)
    assert result.code == 1
    fails = [line for line in result.out.splitlines() if line.startswith("[FAIL]")]
    assert len(fails) == 1 and "new since" in fails[0] and "kv-cache-no-memory" in fails[0]
    assert "queue depth" not in result.out  # the same warning shape: not reported


def test_a_start_that_no_longer_completes_fails(tmp_path: Path) -> None:
    good = _start(tmp_path, "good.log", "11-30 05:00:01", 300)
    cut = tmp_path / "cut.log"
    cut.write_text("\n".join(good.read_text().splitlines()[:-1]) + "\n")
    result = run_cli("logs", "--baseline", good, cut)
    assert result.code == 1 and "gone since" in result.out and "startup-complete" in result.out


def test_a_warning_that_went_away_is_reported_but_fine(tmp_path: Path) -> None:
    good = _start(tmp_path, "good.log", "11-30 05:00:01", 300)
    lines = [line for line in good.read_text().splitlines() if "queue depth" not in line]
    better = tmp_path / "better.log"
    better.write_text("\n".join(lines) + "\n")
    result = run_cli("logs", "--baseline", good, better)
    assert result.code == 0 and "gone since" in result.out, result.out


def test_a_stop_whose_worker_was_terminated_is_no_new_problem(tmp_path: Path) -> None:
    """One of two real stops of the same healthy vLLM 0.22.1 server in CI ended with this
    warning (vLLM prints it when a worker takes SIGTERM before its graceful shutdown is over):
    a sign of the stop, not a new error of the start."""
    good = _start(tmp_path, "good.log", "11-30 05:00:01", 300)
    stopped = _start(tmp_path, "stopped.log", "12-02 22:25:01", 4350, (
        "(Worker pid=4350) WARNING 12-02 22:25:13 [multiproc_executor.py:884] WorkerProc was "
        "terminated",))
    result = run_cli("logs", "--baseline", good, stopped)
    assert result.code == 0 and "[FAIL]" not in result.out, result.out
