"""`ascendpatch stop` against REAL vLLM 0.22.1 servers (tests/kit/realserver.py), in a private
PID namespace (integration tier).

A real server is four processes: the API server (``vllm serve``), the multiprocessing resource
tracker it starts, ``VLLM::EngineCore`` and the engine's ``VLLM::Worker``. The scenarios run as
PID 1 of a namespace that reaps what is left to it every 0.5 s (tests/kit/namespaces.py), with
at most two of its servers alive at a time (each holds about 3.6 GB; the other xdist worker may
run one more):

1. servers A and B; ``stop --port <B's port>`` stops B's whole tree, A keeps every process and
   still answers;
2. server C; SIGKILL of A's API server only (its tracker, EngineCore and Worker are orphans
   now, and vLLM's log says nothing); ``stop`` finds and stops them, with no false zombie
   line, while C keeps every process and answers;
3. ``stop --pidfile`` with C's PID leaves nothing of C's tree in /proc.

And a namespace whose PID 1 *is* ``vllm serve`` (a container running the server as its entry
point): its engine is left alone, ``--port`` refuses it, the server still answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.kit import REPO, isolated, namespaces, realserver
from tests.kit.namespaces import REAPER

pytestmark = pytest.mark.integration
NO_NAMESPACE = namespaces.problem()
GRACE = "20"  # vLLM's own shutdown of a real engine takes seconds on a loaded machine

SCENARIO = REAPER + r"""
from tests.kit import realserver
tmp = Path(sys.argv[1])
def serve(name):
    port = realserver.free_port()
    log = tmp / (name + ".log")
    with log.open("wb") as out:
        proc = start(realserver.serve_argv(port), stdout=out, stderr=subprocess.STDOUT,
                     stdin=subprocess.DEVNULL, env=realserver.server_env(),
                     start_new_session=True)
    return realserver.Server(proc, port, str(realserver.model()), log)
def identity(pid):
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return {"start": fields[19], "state": fields[0], "sid": int(fields[3]),
            "title": Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
                     or text[text.index("(") + 1:text.rindex(")")]}
def tree(server):
    # the whole server: its session (it leads one), orphans included
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            now = identity(int(entry.name))
            if now is not None and now["sid"] == server.pid:
                found[entry.name] = now
    return found
def left(found):
    # what of a tree is still in /proc (the same process: same start time), zombies included
    out = {}
    for pid, was in found.items():
        now = identity(int(pid))
        if now is not None and now["start"] == was["start"]:
            out[pid] = {**was, "state": now["state"]}
    return out
def reaped(found):
    # what of a tree is left once this PID 1 has reaped what exited: a process of the tree that
    # exited on its own just before (the resource tracker, once its server is gone) is a zombie
    # until the reaper's next round (every 0.5 s); a process still running stays in the answer
    for _ in range(100):
        now = left(found)
        if all(v["state"] != "Z" for v in now.values()):
            break
        time.sleep(0.05)
    return now
def settled(server):
    # ready, and its four processes are there (the tracker starts before the engine)
    server.wait_ready()
    wait_for(lambda: len(tree(server)) >= 4)
    return tree(server)
steps, trees = {}, {}
def step(name, *args):
    began = time.monotonic()
    steps[name] = {**ap(*args, "--grace", os.environ["GRACE"]),
                   "seconds": round(time.monotonic() - began, 1)}
a, b = serve("a"), serve("b")
trees["a"], trees["b"] = settled(a), settled(b)
step("port", "stop", "--port", str(b.port))
steps["port"].update(b_left=reaped(trees["b"]), a_left=left(trees["a"]), a_answers=a.ready())
c = serve("c")
trees["c"] = settled(c)
engine = next(p for p, v in trees["a"].items() if v["title"] == "VLLM::EngineCore")
os.kill(a.pid, 9)  # SIGKILL of the API server only
wait_for(lambda: identity(a.pid) is None)  # reaped by this PID 1, as a container's init would
wait_for(lambda: Path(f"/proc/{engine}/stat").read_text().rsplit(")", 1)[1].split()[1] == "1")
time.sleep(2)  # the orphans stay: vLLM does not notice its API server is gone
orphans = {p: v for p, v in left(trees["a"]).items() if v["state"] != "Z"}
step("sweep", "stop")
steps["sweep"].update(orphans=orphans, a_left=reaped(trees["a"]), c_left=left(trees["c"]),
                      c_answers=c.ready())
(tmp / "c.pid").write_text(f"{c.pid}\n")
step("pidfile", "stop", "--pidfile", str(tmp / "c.pid"))
steps["pidfile"].update(c_left=reaped(trees["c"]))
print(json.dumps({"steps": steps, "trees": trees,
                  "servers": {"a": a.pid, "b": b.pid, "c": c.pid}}))
"""


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if NO_NAMESPACE is not None:
        pytest.skip(NO_NAMESPACE)
    realserver.model()  # build (or find) the cached venv and model outside the namespace
    tmp = tmp_path_factory.mktemp("stop-real")
    with isolated(tmp_path_factory.mktemp("home")):  # (HOME, the caches, logs, no pip.conf)
        env = {**realserver.server_env(), "PYTHONPATH": str(REPO), "GRACE": GRACE}
    logs = tmp / "*.log"
    doc = namespaces.as_pid_1(SCENARIO, [str(tmp)], env, timeout=1800,
                              context=f"(the servers' logs: {logs})")
    (tmp / "scenario.json").write_text(json.dumps(doc, indent=1))  # kept for a failure's reader
    return doc


def _ids(found: dict[str, Any]) -> dict[str, str]:
    """PID -> start time: a process's identity."""
    return {pid: seen["start"] for pid, seen in found.items()}


def _running(found: dict[str, Any]) -> dict[str, str]:
    return _ids({pid: seen for pid, seen in found.items() if seen["state"] != "Z"})


def test_stop_by_port_stops_the_right_one_of_two_real_servers(real: dict[str, Any]) -> None:
    step = real["steps"]["port"]
    assert step["code"] == 0, step["out"]
    assert f"PID {real['servers']['b']} (" in step["out"] and "listens on port" in step["out"]
    assert len(real["trees"]["b"]) >= 4, real["trees"]["b"]
    assert step["b_left"] == {}, (step["b_left"], step["out"])  # nothing of B in /proc
    assert _running(step["a_left"]) == _ids(real["trees"]["a"]), step["out"]  # A keeps all
    assert step["a_answers"]


def test_orphans_of_a_killed_real_api_server_are_stopped_and_the_live_server_spared(
        real: dict[str, Any]) -> None:
    """On 89ee836: the Worker was "[SKIP] ... belongs to a live server (parent PID <the
    orphaned EngineCore>)" and survived, and the engine, just exited and not yet reaped by
    PID 1, was reported as a zombie only PID 1 could reap."""
    step = real["steps"]["sweep"]
    out = step["out"]
    titles = sorted(v["title"] for v in step["orphans"].values())
    assert "VLLM::EngineCore" in titles and "VLLM::Worker" in titles, step["orphans"]
    assert step["code"] == 0, out
    assert step["a_left"] == {}, (step["a_left"], out)  # every orphan stopped, and reaped
    assert "zombie" not in out, out
    assert "belongs to a live server (parent PID " in out  # C's engine, named and spared
    for pid in step["orphans"]:
        assert f"parent PID {pid}): left alone" not in out, out
    assert "[OK] nothing of the server and no leftover vLLM process is running" in out
    assert _running(step["c_left"]) == _ids(real["trees"]["c"]), out  # C keeps every process
    assert step["c_answers"]


def test_stop_pidfile_leaves_nothing_of_the_real_tree(real: dict[str, Any]) -> None:
    step = real["steps"]["pidfile"]
    assert step["code"] == 0, step["out"]
    assert len(real["trees"]["c"]) >= 4
    assert step["c_left"] == {}, (step["c_left"], step["out"])
    assert "zombie" not in step["out"], step["out"]


def test_pid_1_running_vllm_serve_is_left_alone(tmp_path: Path) -> None:
    """A container whose entry point is `vllm serve` (PID 1 of its namespace): `stop` inside it
    (as `docker exec` would run it) leaves the live engine and worker alone, `--port` refuses
    PID 1, and the server still answers."""
    if NO_NAMESPACE is not None:
        pytest.skip(NO_NAMESPACE)
    port = realserver.free_port()
    log = tmp_path / "pid1.log"
    with log.open("wb") as out:
        container = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc",
                                      "--kill-child", *realserver.serve_argv(port)],
                                     stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=realserver.server_env(),
                                     start_new_session=True)
    server = realserver.Server(container, port, str(realserver.model()), log)
    try:
        server.wait_ready()
        init = int(Path(f"/proc/{container.pid}/task/{container.pid}/children").read_text()
                   .split()[0])

        def inside(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["nsenter", "--target", str(init), "--pid", "--mount",
                                   sys.executable, "-m", "ascendpatch", *args],
                                  capture_output=True, text=True, cwd=REPO, timeout=300,
                                  env={**realserver.server_env(), "PYTHONPATH": str(REPO)},
                                  check=False)

        swept = inside("stop", "--grace", "5")
        assert swept.returncode == 0, swept.stdout + swept.stderr
        assert "(VLLM::EngineCore) belongs to a live server (parent PID 1): left alone" \
            in swept.stdout, swept.stdout
        assert "stopping it" not in swept.stdout, swept.stdout
        by_port = inside("stop", "--port", str(port), "--grace", "5")
        assert by_port.returncode == 1, by_port.stdout + by_port.stderr
        assert "is PID 1, the init process" in by_port.stdout, by_port.stdout
        assert server.ready() and container.poll() is None
    finally:
        container.kill()  # --kill-child: the namespace ends with it
        container.wait(timeout=60)
