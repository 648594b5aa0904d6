"""`ascendpatch serve` against the REAL vLLM 0.22.1 CPU server (tests/kit/realserver.py),
integration tier. Server starts are the cost (25 s to 2 min each here): four in all.

1. The healthy tiny model, with stand-in CANN / ATB ``set_env.sh`` scripts written at the
   standard paths under a sandbox root (``ASCENDPATCH_SERVE_ROOT``): ready, the pid file
   names the server, ``--smoke`` passes, the server's own environment (``/proc/PID/environ``)
   holds what the scripts export while ascendpatch's output masks the secret, and ``stop
   --pidfile`` leaves nothing of its session.
2. A pre-flight that fails (a launch rule: the model folder is missing; the CANN environment:
   no set_env.sh): exit 1, nothing started (no server start).
3. A model folder whose config.json is broken: the engine dies during the start; exit 1, the
   cause from the log, nothing left running.
4. ``--foreground`` as PID 1 of a PID namespace: TERM stops everything and the exit code is
   the server's; SIGKILL of the API server: its EngineCore is stopped by the supervisor and
   the exit code is 137.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit import REPO, isolated, namespaces, realserver, wheels

pytestmark = pytest.mark.integration
SECRET = "s3cret-value-9f2"


def _stand_in_cann(root: Path) -> dict[str, str]:
    """Stand-in set_env.sh scripts at the standard paths under ``root`` (labelled as such):
    what each exports."""
    toolkit = root / "usr/local/Ascend/ascend-toolkit"
    atb = root / "usr/local/Ascend/nnal/atb"
    (toolkit / "latest/lib64").mkdir(parents=True)
    (atb / "latest/lib").mkdir(parents=True)
    (toolkit / "latest/lib64/libhccl.so").write_bytes(b"")
    (atb / "latest/lib/libatb.so").write_bytes(b"")
    (toolkit / "set_env.sh").write_text(
        "# TEST STAND-IN for the CANN toolkit's set_env.sh (tests/test_serve_realserver.py)\n"
        f"export ASCEND_TOOLKIT_HOME={toolkit}/latest\n"
        f"export LD_LIBRARY_PATH={toolkit}/latest/lib64:${{LD_LIBRARY_PATH}}\n"
        f"export ASCEND_OPP_TOKEN={SECRET}\n")
    (atb / "set_env.sh").write_text(
        "# TEST STAND-IN for ATB's set_env.sh\n"
        f"export ATB_HOME_PATH={atb}/latest\n"
        f"export LD_LIBRARY_PATH={atb}/latest/lib:${{LD_LIBRARY_PATH}}\n")
    for folder in [root, *root.rglob("*")]:
        folder.chmod(0o755 if folder.is_dir() else 0o644)
    return {"ASCEND_TOOLKIT_HOME": f"{toolkit}/latest", "ATB_HOME_PATH": f"{atb}/latest",
            "ASCEND_OPP_TOKEN": SECRET}


def _env(root: Path | None) -> dict[str, str]:
    env = {**realserver.server_env(), "PYTHONPATH": str(REPO)}
    env.pop("ASCENDPATCH_SERVE_ROOT", None)
    if root is not None:
        env["ASCENDPATCH_SERVE_ROOT"] = str(root)
    return env


def _serve(tmp: Path, *args: str, model: Path | None = None, root: Path | None = None,
           port: int | None = None) -> tuple[subprocess.CompletedProcess[str], int]:
    port = port or realserver.free_port()
    argv = realserver.serve_argv(port)
    if model is not None:
        argv[2] = str(model)
    run = subprocess.run([sys.executable, "-m", "ascendpatch", "--python",
                          str(realserver.python()), "serve", "--pidfile", str(tmp / "s.pid"),
                          "--log", str(tmp / "s.log"), *args, "--", *argv],
                         capture_output=True, text=True, env=_env(root), timeout=1800,
                         check=False, stdin=subprocess.DEVNULL, cwd=REPO)
    return run, port


def _session(sid: int) -> list[int]:
    """The running (not zombie) processes of session ``sid``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _kill_session(sid: int) -> None:
    for pid in _session(sid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(e.split("=", 1) for e in raw.decode(errors="replace").split("\0") if "=" in e)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    tmp = tmp_path_factory.mktemp("serve-healthy")
    exported = _stand_in_cann(tmp / "root")
    realserver.model()  # (the kit is built with the machine's settings, outside the isolation)
    # (_env reads it: HOME, the caches and logs of serve and stop are the fixture's own)
    with isolated(tmp_path_factory.mktemp("home")):
        run, port = _serve(tmp, "--smoke", root=tmp / "root")
        pid = int((tmp / "s.pid").read_text()) if (tmp / "s.pid").exists() else 0
        facts: dict[str, object] = {"run": run, "port": port, "pid": pid, "exported": exported,
                                    "tmp": tmp}
        try:
            if pid:
                facts["session"] = _session(pid)
                facts["environ"] = _environ(pid)
                stop = subprocess.run([sys.executable, "-m", "ascendpatch", "stop", "--pidfile",
                                       str(tmp / "s.pid"), "--grace", "20"],
                                      capture_output=True, text=True, timeout=300, check=False,
                                      cwd=REPO)
                facts["stop"] = stop
                facts["left"] = _session(pid)
            yield facts
        finally:
            if pid:
                _kill_session(pid)


def test_serve_starts_the_healthy_model_writes_the_pidfile_and_smoke_passes(
        healthy: dict[str, object]) -> None:
    run = healthy["run"]
    assert isinstance(run, subprocess.CompletedProcess)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "[OK] ready after" in run.stdout and "Application startup complete" in run.stdout
    assert "chat completion with top_p=0.9: 200" in run.stdout, run.stdout
    pid = healthy["pid"]
    assert isinstance(pid, int) and pid > 1
    session = healthy["session"]
    assert isinstance(session, list) and pid in session and len(session) >= 3  # API + engine


def test_the_servers_environment_holds_what_set_env_exports_and_the_secret_is_masked(
        healthy: dict[str, object]) -> None:
    environ, exported, run = healthy["environ"], healthy["exported"], healthy["run"]
    assert isinstance(environ, dict) and isinstance(exported, dict)
    assert isinstance(run, subprocess.CompletedProcess)
    for name, value in exported.items():
        assert environ.get(name) == value, name
    assert "ascend-toolkit/latest/lib64" in environ["LD_LIBRARY_PATH"]
    assert "sourced " in run.stdout and "ASCEND_OPP_TOKEN=<set, value hidden>" in run.stdout
    assert SECRET not in run.stdout + run.stderr
    assert "ASCEND_TOOLKIT_HOME" not in os.environ  # the test's own environment: untouched


def test_stop_by_the_pidfile_leaves_nothing_of_the_server(healthy: dict[str, object]) -> None:
    stop = healthy["stop"]
    assert isinstance(stop, subprocess.CompletedProcess)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert healthy["left"] == [], stop.stdout


def test_a_broken_launch_rule_refuses_and_starts_nothing(tmp_path: Path) -> None:
    _stand_in_cann(tmp_path / "root")
    run, _ = _serve(tmp_path, model=tmp_path / "no-such-model", root=tmp_path / "root")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "cannot find the model folder" in run.stdout
    assert "serve: refused: " in run.stdout and "nothing was started" in run.stdout
    assert not (tmp_path / "s.pid").exists() and not (tmp_path / "s.log").exists()


def test_no_cann_environment_refuses_with_the_fix_and_force_is_named(tmp_path: Path) -> None:
    (tmp_path / "empty-root").mkdir()
    run, _ = _serve(tmp_path, root=tmp_path / "empty-root")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "no set_env.sh found" in run.stdout
    assert "[FAIL] CANN toolkit environment not loaded" in run.stdout
    assert "fix: source /usr/local/Ascend/ascend-toolkit/set_env.sh" in run.stdout
    assert "--force" in run.stdout and not (tmp_path / "s.log").exists()


def test_an_engine_dying_during_the_start_is_triaged_and_nothing_is_left(tmp_path: Path) -> None:
    broken = tmp_path / "broken-model"
    shutil.copytree(realserver.model(), broken)
    config = json.loads((broken / "config.json").read_text())
    config["num_attention_heads"] = 3  # a hidden size of 128 cannot be split into 3 heads
    (broken / "config.json").write_text(json.dumps(config))
    _stand_in_cann(tmp_path / "root")
    run, _ = _serve(tmp_path, "--ready-timeout", "900", model=broken, root=tmp_path / "root")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "before it was ready" in run.stdout and "everything it started was stopped" \
        in run.stdout, run.stdout
    assert "not a multiple of the number of attention heads (3)" in run.stdout  # the cause
    assert not (tmp_path / "s.pid").exists()
    assert not [p for p in _pids_with(str(broken))], "a process of the dead start survives"


def _pids_with(word: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and word.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1]
                                            .split()[1]) == pid:
                out.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return out


def _descendants(pid: int) -> list[int]:
    todo, out = [pid], []
    while todo:
        for child in _children(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _title(pid: int) -> str:
    return _cmdline(pid).split(b"\0")[0].decode(errors="replace")


def _foreground(tmp: Path, act: str) -> dict[str, object]:
    """``serve --foreground`` as PID 1 of a new PID namespace; once it is ready, ``act``:
    TERM to PID 1, or KILL to the API server only."""
    why = namespaces.problem()
    if why is not None:
        pytest.skip(why)
    _stand_in_cann(tmp / "root")
    port = realserver.free_port()
    out = (tmp / "out.txt").open("w")
    unshare = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", sys.executable, "-m",
         "ascendpatch", "--python", str(realserver.python()), "serve", "--foreground",
         "--pidfile", str(tmp / "s.pid"), "--log", str(tmp / "s.log"), "--",
         *realserver.serve_argv(port)], stdout=out, stderr=subprocess.STDOUT,
        env=_env(tmp / "root"), cwd=REPO, stdin=subprocess.DEVNULL)
    try:
        server = realserver.Server(unshare, port, "", tmp / "s.log")
        server.wait_ready()
        (init,) = _children(unshare.pid)
        time.sleep(1)  # let the supervisor read the marker too
        tree = {p: _title(p) for p in _descendants(init)}
        api = next(p for p in _children(init) if b"/vllm\0serve\0" in _cmdline(p))
        os.kill(init if act == "term" else api, signal.SIGTERM if act == "term"
                else signal.SIGKILL)
        code = unshare.wait(timeout=300)
        return {"code": code, "tree": tree, "left": [p for p in tree if _title(p)],
                "out": (tmp / "out.txt").read_text(errors="replace")}
    finally:
        if unshare.poll() is None:
            unshare.kill()
            unshare.wait()
        out.close()


def test_foreground_as_pid_1_term_stops_everything_and_passes_the_code(tmp_path: Path) -> None:
    seen = _foreground(tmp_path, "term")
    out = str(seen["out"])
    tree = seen["tree"]
    assert isinstance(tree, dict) and any("VLLM::EngineCore" in t for t in tree.values()), seen
    assert "Application startup complete" in out  # the server's output reached the terminal
    assert "[OK] ready after" in out
    assert seen["left"] == [], out
    assert "the API server exited with code 0" in out and seen["code"] == 0, out


def test_foreground_as_pid_1_stops_the_engine_of_a_killed_api_server(tmp_path: Path) -> None:
    seen = _foreground(tmp_path, "kill")
    out = str(seen["out"])
    assert "the API server exited with code 137" in out, out
    stopped = out.split("leftovers of its group stopped:", 1)[1].splitlines()[0]
    assert "VLLM::EngineCore" in stopped, out  # stopped by the supervisor, not the kernel
    assert seen["code"] == 137 and seen["left"] == [], out


def test_the_ci_prebuild_names_the_very_kit_these_tests_use() -> None:
    """`.ci/run` starts `python -m tests.kit.prebuild` in the background before lint, so that a
    cold machine's 3 GB download overlaps the rest: it must build (here: find) the same venv,
    model and plugin folders the tests then ask for, or the download would happen twice."""
    used = [realserver.venv().name, realserver.model().name, realserver.pit1_plugin().name]
    env = {**os.environ, "ASCENDPATCH_TEST_CACHE": str(wheels.CACHE)}
    done = subprocess.run([sys.executable, "-m", "tests.kit.prebuild"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("[OK] real vLLM server kit ready in ")
    assert done.stdout.rstrip().endswith(": " + ", ".join(used))
