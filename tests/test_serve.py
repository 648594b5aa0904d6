"""`ascendpatch serve` without a server (fast tier): the real CLI's refusals, the pid file and
log guards, the stage shown while starting. The real vLLM server's runs are in
tests/test_serve_realserver.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ascendpatch.deploy import serve_start
from ascendpatch.errors import InvalidInputError
from tests.kit import run_cli, write_manifest


@pytest.fixture
def target(site: Path, tmp_path: Path) -> list[str]:
    manifest = write_manifest(tmp_path / "m.yaml", [])
    return ["--site-packages", str(site), "--manifest", str(manifest)]


def test_serve_without_a_command_is_a_usage_error(target: list[str]) -> None:
    run = run_cli(*target, "serve")
    assert run.code == 2 and "nothing to serve" in run.err + run.out


def test_a_failing_preflight_refuses_and_starts_nothing(target: list[str], tmp_path: Path) -> None:
    pid, log = tmp_path / "s.pid", tmp_path / "s.log"
    run = run_cli(*target, "serve", "--pidfile", pid, "--log", log, "--", "vllm", "serve",
                  tmp_path / "missing-model")
    assert run.code == 1, run.out + run.err
    assert "[FAIL] cannot find the model folder" in run.out
    assert "serve: refused: 1 pre-flight problem(s); nothing was started" in run.out
    assert not pid.exists() and not log.exists()


def test_force_shows_the_failure_as_a_warning_and_goes_on(target: list[str],
                                                           tmp_path: Path) -> None:
    pid, log = tmp_path / "s.pid", tmp_path / "s.log"
    run = run_cli(*target, "serve", "--force", "--pidfile", pid, "--log", log, "--",
                  str(tmp_path / "no-vllm"), "serve", tmp_path / "missing-model")
    assert "[WARN] (--force) cannot find the model folder" in run.out, run.out
    assert run.code == 2 and "cannot start" in run.out + run.err  # no such program
    assert not pid.exists()


def test_a_link_planted_at_the_log_path_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "s.log").symlink_to(victim)
    with pytest.raises(InvalidInputError, match="cannot be written"):
        serve_start.open_log(tmp_path / "s.log")
    assert victim.read_text() == "keep"


def test_the_default_folder_is_made_private_and_a_shared_one_refused(tmp_path: Path) -> None:
    made = serve_start.private_dir(tmp_path / "run" / "ascendpatch")
    assert made.stat().st_mode & 0o777 == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(InvalidInputError, match="only you can write"):
        serve_start.private_dir(shared)
    assert serve_start.runtime_dir({"XDG_RUNTIME_DIR": str(tmp_path)}) == \
        tmp_path / "ascendpatch"
    assert serve_start.runtime_dir({}) == Path("/run/ascendpatch")


@pytest.mark.parametrize("content", [b"", b"abc\n", b"1\n", b"99999999999\n", b"\xff" * 100])
def test_a_pidfile_names_a_running_server_only_when_it_does(tmp_path: Path,
                                                             content: bytes) -> None:
    pidfile = tmp_path / "s.pid"
    pidfile.write_bytes(content)
    assert serve_start.running_pid(pidfile) is None


def test_a_pidfile_naming_a_running_server_refuses_a_second_start(target: list[str],
                                                                  tmp_path: Path) -> None:
    pidfile = tmp_path / "s.pid"
    pidfile.write_text(f"{os.getpid()}\n")
    assert serve_start.running_pid(pidfile) is None  # alive, but no vLLM server
    os.mkfifo(tmp_path / "fifo")
    assert serve_start.running_pid(tmp_path / "fifo") is None  # not waited on
    (tmp_path / "link.pid").symlink_to(pidfile)
    fake = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "vllm",
                             "serve"], stdin=subprocess.DEVNULL)  # its argv says vllm serve
    try:
        pidfile.write_text(f"{fake.pid}\n")
        assert serve_start.running_pid(pidfile) == fake.pid
        assert serve_start.running_pid(tmp_path / "link.pid") is None  # a link is not read
        model = tmp_path / "model"
        model.mkdir()
        run = run_cli(*target, "serve", "--pidfile", pidfile, "--log", tmp_path / "s.log",
                      "--", "vllm", "serve", model)
        assert run.code == 2 and f"names PID {fake.pid}, a vLLM server that is running" \
            in run.out + run.err
        assert not (tmp_path / "s.log").exists() and fake.poll() is None
    finally:
        fake.kill()
        fake.wait()


def test_the_port_comes_from_the_command_line() -> None:
    assert serve_start.port_of(["vllm", "serve", "m"]) == 8000
    assert serve_start.port_of(["vllm", "serve", "m", "--port=8199"]) == 8199
    for bad in ("x", "0", "70000"):
        with pytest.raises(InvalidInputError, match="--port"):
            serve_start.port_of(["vllm", "serve", "m", "--port", bad])
    assert serve_start.host_of(["vllm", "serve", "m", "--host", "0.0.0.0"]) == "127.0.0.1"


def test_the_stage_is_the_log_line_without_vllms_prefix() -> None:
    line = ("(EngineCore_DP0 pid=12) INFO 12-01 10:00:00 [gpu_model_runner.py:2000] Loading "
            "weights took 1.2 seconds\x1b[31m")
    assert serve_start.stage(line) == "Loading weights took 1.2 seconds\\x1b[31m"
    assert len(serve_start.stage("x" * 500)) == 70
