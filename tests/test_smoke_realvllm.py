"""`ascendpatch smoke` against a REAL vLLM 0.22.1 server on CPU (tests/kit/realserver.py).

One server for the module, started without waiting: smoke sees it while it loads the model
(connection refused with the process up: "still starting", then ``--wait``), then healthy and
asked for a model it does not serve. A second server carries the PIT1 plugin (the labelled
stand-in for the NPU: its top-k/top-p sampling raises torch_npu's AttributeError) and dies on
smoke's top_p=0.9 request the way vLLM really does: a 500 with a JSON message, then gone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kit import Run, isolated, realserver, run_cli

pytestmark = pytest.mark.integration

FIX = "fix: ascendpatch apply sampler-topk-topp-fallback"


# First: a server of its own, stopped before the module's shared server starts (pytest keeps
# a module fixture until the module ends; this module runs one vLLM server at a time).
def test_pit1_death_is_diagnosed_with_its_fix(tmp_path: Path) -> None:
    """89ee836 printed ``[FAIL] POST /v1/chat/completions: 500: {"error": ...`` and no fix."""
    with realserver.serve(tmp_path, pit1=True) as server:
        result = run_cli("smoke", "--url", server.url)
        group = server.pid
        # vLLM's ZeroMQ sockets are in the run's folder (conftest), not left in /tmp
        rpc = Path(os.environ["VLLM_RPC_BASE_PATH"])
        assert rpc.is_relative_to(tmp_path.parent) and any(p.is_socket() for p in rpc.iterdir())
    assert result.code == 1, result.out
    assert ("[FAIL] EngineCore died on the top_p request: POST /v1/chat/completions with "
            f"top_p=0.9 for '{server.model}' answered 500 (EngineCore encountered an issue. "
            "See stack trace (above) for the root cause.), then the server went away") \
        in result.out
    assert FIX in result.out
    # the fix's second half: the serve log names the cause
    triage = run_cli("logs", server.log)
    assert realserver.PIT1_MESSAGE in triage.out
    assert "sampler-topk-topp-fallback" in triage.out
    # the kit left nothing of the server's process group behind
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _group(p) == group]
    # and where it was, nothing listens now
    refused = run_cli("smoke", "--url", server.url)
    assert f"connection refused: nothing listens on 127.0.0.1:{server.port}" in refused.out


@dataclass(frozen=True)
class Started:
    server: realserver.Server
    starting: bool  # it refused connections when smoke first asked
    early: Run  # smoke without --wait while it loads the model
    waited: Run  # smoke --wait from then on


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Started]:
    with isolated(tmp_path_factory.mktemp("home")), \
            realserver.serve(tmp_path_factory.mktemp("vllm"), wait=False) as server:
        starting = not server.ready()
        early = run_cli("smoke", "--url", server.url)
        waited = run_cli("smoke", "--url", server.url, "--wait", str(realserver.READY_TIMEOUT))
        yield Started(server, starting, early, waited)


def test_a_server_still_loading_its_model_is_named_as_such(started: Started) -> None:
    assert started.starting
    assert started.early.code == 1, started.early.out
    assert (f"connection refused, and vllm serve (PID {started.server.pid}) for port "
            f"{started.server.port} is running on this host: it is still starting") \
        in started.early.out
    assert (f"fix: wait for it: ascendpatch smoke --url {started.server.url} --wait 600") \
        in started.early.out


def test_wait_then_ok_from_start_up(started: Started) -> None:
    assert started.starting
    assert started.waited.code == 0, started.waited.out + started.server.log_tail()
    assert "[OK] server ready after" in started.waited.out
    assert "[OK] chat completion with top_p=0.9: 200 in" in started.waited.out


def test_healthy_server(started: Started) -> None:
    result = run_cli("smoke", "--url", started.server.url)
    assert result.code == 0, result.out
    assert "[OK] GET /v1/models: 200 in" in result.out
    assert f"serving {started.server.model}" in result.out
    assert "[OK] chat completion with top_p=0.9: 200 in" in result.out


def test_wrong_model_id(started: Started) -> None:
    result = run_cli("smoke", "--url", started.server.url, "--model", "Muse-Glimmer-30B")
    assert result.code == 1
    assert ("[FAIL] model 'Muse-Glimmer-30B' is not what the server exposes "
            f"({started.server.model})") in result.out
    # vLLM's own 404 body, quoted
    assert ("[FAIL] POST /v1/chat/completions: 404 for model 'Muse-Glimmer-30B' (The model "
            "`Muse-Glimmer-30B` does not exist.)") in result.out


def _group(proc: Path) -> int | None:
    try:
        return int((proc / "stat").read_text().rpartition(")")[2].split()[2])
    except (OSError, ValueError, IndexError):
        return None
