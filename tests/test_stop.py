"""`ascendpatch stop` against real process trees in a private PID namespace.

Each scenario runs under ``unshare --pid --fork --mount-proc`` (we are root in CI), so PID 1 is a
process of the test and nothing outside the namespace can be signalled by mistake. Canary
processes (a plain process, a second live server, an offline-engine script, another user's
orphan) show what survived. The container case runs a ``vllm serve`` stand-in as PID 1 with a
live VLLM::EngineCore child; ``ascendpatch stop`` enters it the way ``docker exec`` does
(``nsenter``). Process titles are set as setproctitle leaves them: comm via prctl(PR_SET_NAME),
truncated by the kernel to 15 characters ("VLLM::EngineCor").
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendpatch.deploy import procs
from tests.kit import REPO, namespaces, run_cli, run_process
from tests.kit.namespaces import REAPER

TITLED = r"""
import ctypes, signal, sys, time
ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)  # PR_SET_NAME, as setproctitle does
if "ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(600)
"""
# `vllm serve` stand-in: a script called vllm (as the console script is), with an EngineCore
# child that has a TERM-ignoring worker, and (host case) an EngineCore that escaped into its own
# session and whose launcher exited: re-parented to PID 1.
SERVER = r"""
import json, os, socket, subprocess, sys, time
titled = os.environ["TITLED"]
def spawn(*args, **kw):
    return subprocess.Popen([sys.executable, "-c", titled, *args], **kw)
kept = ()
if os.environ.get("PORT"):  # the API socket; the engine inherits it, as a forked child does
    listening = socket.create_server(("127.0.0.1", int(os.environ["PORT"])))
    kept = (listening.fileno(),)
engine = subprocess.Popen([sys.executable, "-c",
    "import ctypes, subprocess, sys, time\n"
    "ctypes.CDLL(None).prctl(15, b'VLLM::EngineCore', 0, 0, 0)\n"
    "w = subprocess.Popen([sys.executable, '-c', sys.argv[1], 'VLLM::Worker_TP0',"
    " 'ignore-term'])\n"
    "print(w.pid, flush=True)\n"
    "time.sleep(600)", titled], stdout=subprocess.PIPE, text=True, pass_fds=kept)
worker = int(engine.stdout.readline())
info = {"server": os.getpid(), "engine": engine.pid, "worker": worker}
if os.environ.get("ESCAPE") == "1":
    launcher = subprocess.run([sys.executable, "-c",
        "import subprocess, sys\n"
        "g = subprocess.Popen([sys.executable, '-c', sys.argv[1], 'VLLM::EngineCore'],"
        " start_new_session=True, stdout=subprocess.DEVNULL,"
        " stderr=subprocess.DEVNULL)\n"
        "print(g.pid)", titled], capture_output=True, text=True, check=True)
    info["escaped"] = int(launcher.stdout)
open(os.environ["INFO"] + ".tmp", "w").write(json.dumps(info))
os.replace(os.environ["INFO"] + ".tmp", os.environ["INFO"])
time.sleep(600)
"""
# PID 1 of the host scenario: plays init (like `tail -f /dev/null`, it reaps nothing), starts
# the server and the canaries, runs `ascendpatch stop` as an operator would, and records what
# was alive after each step.
DRIVER = r"""
import json, os, subprocess, sys, time
from pathlib import Path
tmp, vllm, titled = Path(sys.argv[1]), sys.argv[2], os.environ["TITLED"]
def alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
def wait_file(path):
    for _ in range(400):
        if path.exists():
            return json.loads(path.read_text())
        time.sleep(0.05)
    raise SystemExit("timed out waiting for " + str(path))
def serve(name, escape):
    info = tmp / (name + ".json")
    proc = subprocess.Popen([vllm, "serve", "/models/" + name], start_new_session=True,
                            env={**os.environ, "INFO": str(info), "ESCAPE": escape})
    return wait_file(info)
def ap(*args):
    run = subprocess.run([sys.executable, "-m", "ascendpatch", *args], capture_output=True,
                         text=True)
    return {"code": run.returncode, "out": run.stdout + run.stderr}
server = serve("served", "1")
(tmp / "server.pid").write_text(f"{server['server']}\n")
(tmp / "one.pid").write_text("1\n")
other = serve("other", "0")
plain = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
offline = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time\n"
    "e = subprocess.Popen([sys.executable, '-c', sys.argv[1], 'VLLM::EngineCore'])\n"
    "print(e.pid, flush=True)\n"
    "time.sleep(600)", titled], stdout=subprocess.PIPE, text=True, start_new_session=True)
offline_engine = int(offline.stdout.readline())
foreign = subprocess.run([sys.executable, "-c",
    "import subprocess, sys\n"
    "g = subprocess.Popen(['VLLM::EngineCore', '600'], executable='/bin/sleep', user=65534,"
    " start_new_session=True, stdout=subprocess.DEVNULL,"
    " stderr=subprocess.DEVNULL)\n"
    "print(g.pid)"], capture_output=True, text=True, check=True)  # argv[0] titled, as a
# setproctitle'd process shows in cmdline ('nobody' cannot run this venv's python)
pids = {"server": server["server"], "engine": server["engine"], "worker": server["worker"],
        "escaped": server["escaped"], "other_server": other["server"],
        "other_engine": other["engine"], "other_worker": other["worker"], "plain": plain.pid,
        "offline": offline.pid, "offline_engine": offline_engine,
        "foreign": int(foreign.stdout)}
for _ in range(200):
    if all(Path(f"/proc/{p}/comm").read_text().startswith("VLLM::") for p in
           (pids["escaped"], pids["offline_engine"], pids["other_engine"])):
        break
    time.sleep(0.05)
steps = {}
def step(name, *args):
    steps[name] = {**ap(*args), "alive": {k: alive(v) for k, v in pids.items()}}
step("pid1", "stop", "--pid", "1", "--grace", "1")
step("pidfile1", "stop", "--pidfile", str(tmp / "one.pid"), "--grace", "1")
(tmp / "zero.pid").write_text("0\n")
step("pidfile0", "stop", "--pidfile", str(tmp / "zero.pid"), "--grace", "1")
for bad in ("0", "-1", "-4242"):
    step("pid" + bad, "stop", "--pid=" + bad, "--grace", "1")
shell = subprocess.run(["sh", "-c",
                        f'"{sys.executable}" -m ascendpatch stop --pid $$; echo rc=$?'],
                       capture_output=True, text=True)
steps["ancestor"] = {"out": shell.stdout + shell.stderr,
                     "alive": {k: alive(v) for k, v in pids.items()}}
step("server", "stop", "--pidfile", str(tmp / "server.pid"), "--grace", "1")
step("force", "stop", "--force-user", "--grace", "1")
step("all", "stop", "--all-vllm", "--grace", "1")
print(json.dumps({"pids": pids, "steps": steps}))
"""


NO_NAMESPACE = namespaces.problem()
# The scenarios in a namespace run real process trees and wait out real grace periods (seconds
# each): they are marked integration; what needs no namespace stays in the fast tier.
needs_namespace = pytest.mark.skipif(NO_NAMESPACE is not None, reason=NO_NAMESPACE or "")


def _vllm_script(tmp_path: Path) -> Path:
    """A `vllm` console script stand-in running SERVER, so ps shows `.../vllm serve MODEL`."""
    script = tmp_path / "bin" / "vllm"
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"#!{sys.executable}\n{SERVER}")
    script.chmod(0o755)
    return script


def _env() -> dict[str, str]:
    return {**os.environ, "TITLED": TITLED, "PYTHONPATH": str(REPO)}


def _wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def _scenario(factory: pytest.TempPathFactory, name: str, driver: str) -> dict[str, Any]:
    """``driver`` as PID 1 of a namespace, given a temp folder and the `vllm` stand-in (PID 1
    survives every step, or as_pid_1 fails)."""
    tmp = factory.mktemp(name)
    tmp.chmod(0o755)
    return namespaces.as_pid_1(driver, [str(tmp), str(_vllm_script(tmp))], _env())


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _scenario(tmp_path_factory, "stop-ns", DRIVER)


@pytest.mark.integration
@needs_namespace
def test_pid_1_is_refused_and_nothing_is_signalled(host: dict[str, Any]) -> None:
    for name in ("pid1", "pidfile1"):  # a refusal, as an ancestor's is (2 on main)
        step = host["steps"][name]
        assert step["code"] == 1, step["out"]
        assert "refusing PID 1" in step["out"]
        assert all(step["alive"].values()), step["alive"]
    for name in ("pidfile0", "pid0", "pid-1", "pid-4242"):
        step = host["steps"][name]
        assert step["code"] == 2 and "is not a process id" in step["out"], step["out"]
        assert all(step["alive"].values()), step["alive"]


@pytest.mark.integration
@needs_namespace
def test_an_ancestor_is_refused(host: dict[str, Any]) -> None:
    step = host["steps"]["ancestor"]
    assert "one of its parents: refusing to stop it" in step["out"] and "rc=1" in step["out"]
    assert all(step["alive"].values())


def test_pid_1_and_an_ancestor_are_one_refusal_and_not_a_pid_is_invalid_input() -> None:
    """A refusal exits 1 whichever process it spares (on main PID 1 was 2, an ancestor 1);
    what is no process id at all is invalid input, 2. Nothing is signalled: the refusals come
    before any signal (this test process is the ancestor)."""
    pid1 = run_cli("stop", "--pid", "1")
    ancestor = run_process("stop", "--pid", str(os.getpid()), "--grace", "0")
    zero = run_cli("stop", "--pid", "0")
    assert (pid1.code, ancestor.code, zero.code) == (1, 1, 2), (pid1, ancestor, zero)
    assert "refusing PID 1" in pid1.err
    assert "one of its parents: refusing to stop it" in ancestor.out
    assert "is not a process id" in zero.err


@pytest.mark.integration
@needs_namespace
def test_the_server_tree_stops_and_every_canary_survives(host: dict[str, Any]) -> None:
    step, pids = host["steps"]["server"], host["pids"]
    assert step["code"] == 0, step["out"]
    out, alive = step["out"], step["alive"]
    for name in ("server", "engine", "worker", "escaped"):
        assert not alive[name], (name, out)
    assert f"PID {pids['worker']} (VLLM::Worker_TP) ignored TERM for 1s: sending KILL" in out
    assert f"leftover vLLM process PID {pids['escaped']} (VLLM::EngineCor), parent PID 1" in out
    for name in ("other_server", "other_engine", "other_worker", "plain", "offline",
                 "offline_engine", "foreign"):
        assert alive[name], (name, out)
    assert f"PID {pids['other_engine']} (VLLM::EngineCor) belongs to a live server" in out
    assert f"PID {pids['offline_engine']} (VLLM::EngineCor) has a live parent, PID " \
           f"{pids['offline']} (" in out  # on 89ee836: "is in the session of PID 1"
    assert (f"leftover PID {pids['foreign']} (VLLM::EngineCore) belongs to uid 65534, not to "
            "you: left alone (--force-user") in out
    # the final check sees every leftover, not only those this run signalled (on 89ee836 it
    # said "[OK] nothing ... running" with the other user's orphan still there)
    assert "[OK] nothing of the server" not in out
    assert ("[WARN] still running, of the server or orphaned, and not stopped by this run: "
            f"PID {pids['foreign']} (VLLM::EngineCore, uid 65534)") in out


@pytest.mark.integration
@needs_namespace
def test_force_user_and_all_vllm_are_the_explicit_escape_hatches(host: dict[str, Any]) -> None:
    force, everything = host["steps"]["force"]["alive"], host["steps"]["all"]["alive"]
    assert not force["foreign"] and force["other_engine"] and force["offline_engine"]
    assert not everything["other_engine"] and not everything["offline_engine"]
    assert everything["plain"] and everything["offline"]  # not vLLM: never touched
    # the other server's API process is not a VLLM:: engine/worker: --all-vllm leaves it
    assert everything["other_server"]


@pytest.mark.integration
@needs_namespace
def test_container_with_vllm_serve_as_pid_1(tmp_path: Path) -> None:
    """`vllm serve` is the container's entry point (PID 1): its live EngineCore is no
    leftover, `stop --pid 1` is refused, and only --all-vllm stops the engine."""
    tmp_path.chmod(0o755)
    info = tmp_path / "pid1.json"
    container = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
                                  str(_vllm_script(tmp_path)), "serve", "/models/m"],
                                 env={**_env(), "INFO": str(info), "ESCAPE": "0"}, cwd=REPO)
    try:
        _wait_for(info.exists)
        pids = json.loads(info.read_text())
        assert pids["server"] == 1
        children = Path(f"/proc/{container.pid}/task/{container.pid}/children").read_text()
        init = int(children.split()[0])  # PID 1 of the namespace, seen from outside

        def inside(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["nsenter", "--target", str(init), "--pid", "--mount",
                                   sys.executable, "-m", "ascendpatch", *args],
                                  capture_output=True, text=True, cwd=REPO, env=_env(),
                                  timeout=120, check=False)

        def alive(pid: int) -> bool:
            probe = subprocess.run(["nsenter", "--target", str(init), "--pid", "--mount",
                                    "cat", f"/proc/{pid}/stat"], capture_output=True,
                                   text=True, check=False)
            return probe.returncode == 0 and probe.stdout.rsplit(")", 1)[1].split()[0] != "Z"

        swept = inside("stop", "--grace", "1")
        assert swept.returncode == 0, swept.stdout + swept.stderr
        assert f"PID {pids['engine']} (VLLM::EngineCor) belongs to a live server (parent " \
               "PID 1): left alone" in swept.stdout
        assert alive(pids["engine"]) and alive(pids["worker"]) and alive(1)

        refused = inside("stop", "--pid", "1")
        assert refused.returncode == 1 and "refusing PID 1" in refused.stdout + refused.stderr
        assert alive(pids["engine"]) and alive(1)

        everything = inside("stop", "--all-vllm", "--grace", "1")
        assert everything.returncode == 0, everything.stdout + everything.stderr
        assert not alive(pids["engine"]) and not alive(pids["worker"])
        assert alive(1)
    finally:
        # --kill-child: unshare's death KILLs its child, PID 1, and the kernel then ends the
        # whole namespace
        container.kill()
        container.wait(timeout=30)


ZOMBIE = r"""
import json, subprocess, sys, time
parent = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time\n"
    "z = subprocess.Popen([sys.executable, '-c', "
    "'import ctypes; ctypes.CDLL(None).prctl(15, b\\'VLLM::Worker_TP0\\', 0, 0, 0)'])\n"
    "print(z.pid, flush=True)\n"
    "time.sleep(300)"], stdout=subprocess.PIPE, text=True, start_new_session=True)
zombie = int(parent.stdout.readline())
for _ in range(200):
    if open(f"/proc/{zombie}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
        break
    time.sleep(0.05)
run = subprocess.run([sys.executable, "-m", "ascendpatch", "stop", "--pid", str(zombie),
                      "--grace", "0.5"], capture_output=True, text=True)
print(json.dumps({"code": run.returncode, "out": run.stdout + run.stderr, "zombie": zombie,
                  "parent": parent.pid}))
"""
EPERM = r"""
import contextlib, io, json, os, signal, subprocess, sys
victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                          start_new_session=True)
real_kill = os.kill
def refusing(pid, sig):
    if pid == victim.pid:
        raise PermissionError(1, "Operation not permitted")
    real_kill(pid, sig)
os.kill = refusing  # what kill(2) answers for a process we may not signal
real_send = signal.pidfd_send_signal
def refusing_fd(fd, sig, *rest):
    info = open(f"/proc/self/fdinfo/{fd}").read()
    if f"Pid:\t{victim.pid}\n" in info:
        raise PermissionError(1, "Operation not permitted")
    real_send(fd, sig, *rest)
signal.pidfd_send_signal = refusing_fd  # the same answer through the process's pidfd
from ascendpatch.shell.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["stop", "--pid", str(victim.pid), "--grace", "0.2"])
print(json.dumps({"code": code, "out": out.getvalue(), "victim": victim.pid}))
"""


def _ns(code: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``code`` as PID 1 of a fresh PID namespace; it prints one JSON line."""
    return namespaces.as_pid_1(code, env={**_env(), **(env or {})}, timeout=180)


@pytest.mark.integration
def test_zombie_is_reported_with_its_parent_and_no_memory_claim() -> None:
    """A zombie has exited, but NPU memory may stay held until it is reaped (#9888)."""
    doc = _ns(ZOMBIE)
    out = doc["out"]
    assert doc["code"] == 0, out
    assert f"PID {doc['zombie']} (VLLM::Worker_TP) is still a zombie (state Z)" in out
    assert "vllm-project/vllm-ascend#9888" in out
    assert f"only its parent PID {doc['parent']}" in out
    assert "holds no memory" not in out


@pytest.mark.parametrize(("content", "why"), [
    (b"\x7fELF\x02\x01\x01\x00" * 4, "binary or non-ASCII"),
    ("\u0661\u0662\u0663\n".encode(), "binary or non-ASCII"),  # Arabic-Indic digits 123
    (b"1" * 4_000_000, "more than 64 bytes"),
    (b"12ab\n", "does not hold a process id"),
    (b"-5\n", "does not hold a process id"),
    (b"99999999999999999999\n", "is not a process id"),
])
def test_bad_pidfiles_are_refused_without_echoing(tmp_path: Path, content: bytes,
                                                 why: str) -> None:
    pidfile = tmp_path / "server.pid"
    pidfile.write_bytes(content)
    result = run_cli("stop", "--pidfile", pidfile)
    assert result.code == 2, result.out + result.err
    assert why in result.err + result.out
    shown = result.out + result.err
    assert "ELF" not in shown and "\u0661" not in shown and "1111111111" not in shown
    assert "12ab" not in shown


def test_a_fifo_pidfile_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "server.pid"
    os.mkfifo(fifo)
    result = run_process("stop", "--pidfile", fifo, timeout=30)
    assert result.code == 2 and "is not a regular file" in result.err + result.out


@pytest.mark.integration
def test_kill_not_permitted_is_named() -> None:
    """EPERM from kill(2) is reported as "not permitted", not as uninterruptible I/O. Only
    os.kill is replaced (no process refuses root here); the process itself is real."""
    doc = _ns(EPERM)
    assert doc["code"] == 1, doc["out"]
    assert f"PID {doc['victim']}" in doc["out"]
    assert "KILL was not permitted (EPERM" in doc["out"]
    assert "uninterruptible" not in doc["out"]


@pytest.mark.integration
def test_npu_smi_table_is_shown_afterwards(tmp_path: Path) -> None:
    """Where npu-smi exists its process table follows (STAND-IN npu-smi printing the real
    table layout recorded in vllm-ascend #12980: no NPU here)."""
    fake = tmp_path / "bin" / "npu-smi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\ncat <<'TABLE'\n"
                    "| NPU     Chip | Process id | Process name | Process memory(MB) |\n"
                    "| No running processes found in NPU 0 |\n"
                    "TABLE\n")
    fake.chmod(0o755)
    doc = _ns("import json, subprocess, sys\n"
              "run = subprocess.run([sys.executable, '-m', 'ascendpatch', 'stop', '--pid', "
              "'999999', '--grace', '0'], capture_output=True, text=True)\n"
              "print(json.dumps({'code': run.returncode, 'out': run.stdout}))",
              env={"PATH": f"{fake.parent}:{os.environ['PATH']}"})
    assert doc["code"] == 0, doc["out"]
    assert "npu-smi info afterwards:" in doc["out"]
    assert "No running processes found in NPU 0" in doc["out"]


def test_process_titles_are_shown_escaped() -> None:
    """Any process can set its title: an escape sequence in it never reaches the terminal."""
    from ascendpatch.deploy.procs import Proc

    proc = Proc(42, 1, 42, 42, "S", "VLLM::x", "VLLM::\x1b]0;pwned\x07\x1b[2J\0--flag", 0)
    assert proc.title == "VLLM::\\x1b]0;pwned\\x07\\x1b[2J"


RECYCLE = r"""
import json, os, subprocess, sys, time
titled = os.environ["TITLED"]
leftover = subprocess.Popen([sys.executable, "-c", titled, "VLLM::EngineCore"])
for _ in range(200):
    if open(f"/proc/{leftover.pid}/comm").read().startswith("VLLM::"):
        break
    time.sleep(0.05)
from ascendpatch.deploy import procs, stop
real, state = procs.all_procs, {}
def recycled():
    snapshot = real()
    if "canary" not in state:  # right after discovery the leftover ends, its PID is reused
        leftover.kill()
        leftover.wait()
        time.sleep(0.1)  # a later start time, as any recycled PID has
        with open("/proc/sys/kernel/ns_last_pid", "w") as last:
            last.write(str(leftover.pid - 1))
        state["canary"] = subprocess.Popen([sys.executable, "-c",
                                            "import time; time.sleep(300)"])
    return snapshot
procs.all_procs = recycled
report = stop.stop(None, grace=0.5)
canary = state["canary"]
print(json.dumps({"reused": canary.pid == leftover.pid, "alive": canary.poll() is None,
                  "survivors": [p.pid for p in report.survivors], "events": report.events}))
"""


@pytest.mark.integration
def test_a_pid_recycled_after_discovery_is_never_signalled() -> None:
    """The leftover found by the scan ends, and the kernel gives its PID to an unrelated
    process (forced with ns_last_pid) before the signal: the newcomer survives, and is not
    reported as a survivor of the stop."""
    doc = _ns(RECYCLE)
    assert doc["reused"], doc  # the PID really was recycled
    assert doc["alive"], doc["events"]
    assert doc["survivors"] == [], doc


PIDFILES = r"""
import json, os, subprocess, sys, time
from pathlib import Path
tmp = Path(os.environ["TMP"])
def victim():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
def stop(*args):
    run = subprocess.run([sys.executable, "-m", "ascendpatch", "stop", *args, "--grace", "0.5"],
                         capture_output=True, text=True)
    return {"code": run.returncode, "out": run.stdout + run.stderr}
out = {}
stale, v = tmp / "stale.pid", victim()  # the file predates the process holding its PID now
stale.write_text(f"{v.pid}\n")
os.utime(stale, (time.time() - 3600, time.time() - 3600))
out["stale"] = {**stop("--pidfile", str(stale)), "alive": v.poll() is None}
other, v = tmp / "sshd.pid", victim()  # a link planted in /tmp to another service's pid file
other.write_text(f"{v.pid}\n")
(tmp / "link.pid").symlink_to(other)
out["symlink"] = {**stop("--pidfile", str(tmp / "link.pid")), "alive": v.poll() is None}
foreign, v = tmp / "foreign.pid", victim()  # written by another user
foreign.write_text(f"{v.pid}\n")
os.chown(foreign, 65534, 65534)
out["foreign"] = {**stop("--pidfile", str(foreign)), "alive": v.poll() is None}
out["forced"] = {**stop("--pidfile", str(foreign), "--force-user"), "alive": v.poll() is None}
fresh, v = tmp / "fresh.pid", victim()
time.sleep(0.1)
fresh.write_text(f"{v.pid}\n")
out["fresh"] = {**stop("--pidfile", str(fresh)), "alive": v.poll() is None}
print(json.dumps(out))
"""


@pytest.mark.integration
def test_stale_linked_and_foreign_pidfiles_are_refused(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    doc = _ns(PIDFILES, env={"TMP": str(tmp_path)})
    stale = doc["stale"]
    assert stale["code"] == 1 and stale["alive"], stale
    assert "started after the pid file was written" in stale["out"]
    link = doc["symlink"]
    assert link["code"] == 2 and link["alive"] and "is a symbolic link" in link["out"], link
    foreign = doc["foreign"]
    assert foreign["code"] == 2 and foreign["alive"], foreign
    assert "is owned by uid 65534, not by this user (uid 0) or root" in foreign["out"]
    assert doc["forced"]["code"] == 0 and not doc["forced"]["alive"], doc["forced"]
    assert doc["fresh"]["code"] == 0 and not doc["fresh"]["alive"], doc["fresh"]


CUSTOM_PID1 = r"""
import json, os, subprocess, sys, time
titled = os.environ["TITLED"]
os.setsid()  # PID 1 of a container leads its session, as runc makes it
engine = subprocess.Popen([sys.executable, "-c", titled, "VLLM::EngineCore"])
launcher = subprocess.run([sys.executable, "-c",  # a server started by `docker exec` died
    "import subprocess, sys\n"
    "g = subprocess.Popen([sys.executable, '-c', sys.argv[1], 'VLLM::EngineCore'],"
    " start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(g.pid)", titled], capture_output=True, text=True, check=True)
orphan = int(launcher.stdout)
def alive(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
for _ in range(200):
    if all(open(f"/proc/{p}/comm").read().startswith("VLLM::") for p in (engine.pid, orphan)):
        break
    time.sleep(0.05)
run = subprocess.run([sys.executable, "-m", "ascendpatch", "stop", "--grace", "1"],
                     capture_output=True, text=True)
print(json.dumps({"code": run.returncode, "out": run.stdout + run.stderr, "engine": engine.pid,
                  "engine_alive": alive(engine.pid), "orphan_alive": alive(orphan)}))
"""


@pytest.mark.integration
def test_a_custom_server_as_pid_1_keeps_its_engine() -> None:
    """The container's entry point serves through a script of its own (`python serve.py`,
    not recognisable as `vllm serve`): its live EngineCore is its child in its session, not
    an orphan. An orphan from a server started with `docker exec` (its own session) still is
    one."""
    doc = _ns(CUSTOM_PID1)
    assert doc["code"] == 0, doc["out"]
    assert doc["engine_alive"], doc["out"]
    assert not doc["orphan_alive"], doc["out"]
    assert f"PID {doc['engine']} (VLLM::EngineCor) is in the session of PID 1" in doc["out"]


@pytest.mark.integration
@needs_namespace
def test_a_proc_of_another_pid_namespace_is_refused(tmp_path: Path) -> None:
    """A shell that joined only a container's mount namespace sees the container's /proc: its
    PID 2 is the container's second process, but kill(2) would reach the host's PID 2. On
    89ee836 stop acted on those numbers; now /proc/self must be this process, or nothing is
    signalled (exit 1, one line naming the cause)."""
    container = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
                                  "sh", "-c", "sleep 120 & wait"], cwd=REPO)
    try:
        _wait_for(lambda: bool(Path(f"/proc/{container.pid}/task/{container.pid}/children")
                               .read_text().split()))
        init = int(Path(f"/proc/{container.pid}/task/{container.pid}/children").read_text()
                   .split()[0])
        _wait_for(lambda: bool(Path(f"/proc/{init}/task/{init}/children").read_text().split()))
        sleeper = int(Path(f"/proc/{init}/task/{init}/children").read_text().split()[0])
        run = subprocess.run(["nsenter", "--target", str(init), "--mount",
                              sys.executable, "-m", "ascendpatch", "stop", "--pid", "2",
                              "--grace", "1"], capture_output=True, text=True, cwd=REPO,
                             env=_env(), timeout=120, check=False)
        said = run.stdout + run.stderr
        assert run.returncode == 1, said
        assert "/proc belongs to another PID namespace" in said and "nothing was signalled" \
            in said
        assert Path(f"/proc/{sleeper}").exists()  # the container's PID 2 is untouched
    finally:
        container.kill()
        container.wait(timeout=30)


ORPHANS = REAPER + r"""
tmp, vllm = Path(sys.argv[1]), sys.argv[2]
def serve(name):
    info, port = tmp / (name + ".json"), free_port()
    proc = start([vllm, "serve", "/models/" + name], waited=name == "a", start_new_session=True,
                 env={**os.environ, "INFO": str(info), "ESCAPE": "0", "PORT": str(port)})
    wait_for(info.exists)
    return proc, {**json.loads(info.read_text()), "port": port}
killed, a = serve("a")
_, b = serve("b")
other = start([sys.executable, "-c", "import socket, time\n"
               "s = socket.create_server(('127.0.0.1', 0)); print(s.getsockname()[1], "
               "flush=True); time.sleep(600)"], stdout=subprocess.PIPE, text=True)
other_port = int(other.stdout.readline())
pids = {"a_engine": a["engine"], "a_worker": a["worker"], "b_server": b["server"],
        "b_engine": b["engine"], "b_worker": b["worker"], "other": other.pid}
wait_for(lambda: all(Path(f"/proc/{pids[k]}/comm").read_text().startswith("VLLM::")
                     for k in ("a_engine", "b_engine")))
killed.kill()  # SIGKILL of the API server only: its engine and worker are orphans now
killed.wait()
wait_for(lambda: Path(f"/proc/{a['engine']}/stat").read_text().rsplit(")", 1)[1].split()[1]
         == "1")
steps = {}
def step(name, *args):
    steps[name] = {**ap(*args), "alive": {k: alive(v) for k, v in pids.items()}}
step("not_vllm", "stop", "--port", str(other_port), "--grace", "1")
step("sweep", "stop", "--grace", "1")
step("nobody", "stop", "--port", str(free_port()), "--grace", "1")
step("port", "stop", "--port", str(b["port"]), "--grace", "1")
print(json.dumps({"pids": pids, "steps": steps, "ports": [a["port"], b["port"], other_port]}))
"""


@pytest.fixture(scope="module")
def orphans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _scenario(tmp_path_factory, "stop-orphans", ORPHANS)


@pytest.mark.integration
@needs_namespace
def test_an_orphaned_engine_is_stopped_with_its_worker_and_no_false_zombie(
        orphans: dict[str, Any]) -> None:
    """The API server was SIGKILLed: its EngineCore (re-parented to PID 1) and the EngineCore's
    Worker are one orphan tree. On 89ee836 the Worker was "[SKIP] ... belongs to a live server
    (parent PID <the orphan being stopped>)", and the processes that had just exited, not yet
    reaped by PID 1, were reported as zombies only PID 1 could reap."""
    step, pids = orphans["steps"]["sweep"], orphans["pids"]
    out, alive = step["out"], step["alive"]
    assert step["code"] == 0, out
    assert not alive["a_engine"] and not alive["a_worker"], out
    assert f"leftover vLLM process PID {pids['a_worker']} (VLLM::Worker_TP), parent PID " \
           f"{pids['a_engine']}: stopping it" in out
    assert f"parent PID {pids['a_engine']}): left alone" not in out
    assert "zombie" not in out, out
    assert "[OK] nothing of the server and no leftover vLLM process is running" in out
    # the second server keeps every process
    assert alive["b_server"] and alive["b_engine"] and alive["b_worker"], out
    assert f"PID {pids['b_engine']} (VLLM::EngineCor) belongs to a live server (parent PID " \
           f"{pids['b_server']})" in out


@pytest.mark.integration
@needs_namespace
def test_stop_by_port_stops_the_listener_and_only_its_tree(orphans: dict[str, Any]) -> None:
    """`stop --port N` finds the process holding the socket listening on N (the server, not
    its engine that inherited the socket) and stops that tree; a listener that is no vLLM
    server is refused and untouched; a free port stops nothing."""
    pids, steps = orphans["pids"], orphans["steps"]
    port = steps["port"]
    assert port["code"] == 0, port["out"]
    assert f"PID {pids['b_server']} (" in port["out"]
    assert f"listens on port {orphans['ports'][1]}" in port["out"]
    assert not any(port["alive"][k] for k in ("b_server", "b_engine", "b_worker")), port["out"]
    assert port["alive"]["other"]
    refused = steps["not_vllm"]
    assert refused["code"] == 1, refused["out"]
    assert f"PID {pids['other']} (" in refused["out"] and "is no vLLM server: refusing" \
        in refused["out"]
    assert all(refused["alive"].values()), refused["out"]
    nobody = steps["nobody"]
    assert "nothing listens on port" in nobody["out"], nobody["out"]
    assert nobody["alive"]["b_server"] and nobody["alive"]["other"]


PERSISTING = REAPER + r"""
import signal
if sys.argv[1] == "slow":  # an init that handles SIGCHLD, but has not reaped yet
    signal.signal(signal.SIGCHLD, lambda *_: None)
lock.acquire()  # the reaper never reaps in these scenarios: the zombie persists
launcher = subprocess.run([sys.executable, "-c",
    "import subprocess, sys\n"
    "z = subprocess.Popen([sys.executable, '-c', 'import ctypes, time; "
    "ctypes.CDLL(None).prctl(15, b\"VLLM::EngineCore\", 0, 0, 0); time.sleep(0.5)'],"
    " start_new_session=True)\n"
    "print(z.pid)"], capture_output=True, text=True, check=True)
zombie = int(launcher.stdout)
for _ in range(200):
    if open(f"/proc/{zombie}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
        break
    time.sleep(0.05)
run = subprocess.run([sys.executable, "-m", "ascendpatch", "stop", "--grace", "0.5"],
                     capture_output=True, text=True)
print(json.dumps({"code": run.returncode, "out": run.stdout + run.stderr, "zombie": zombie}))
"""


@pytest.mark.integration
@pytest.mark.parametrize("init", ["never", "slow"])
def test_a_persisting_zombie_left_to_pid_1_gets_advice_that_fits_a_container(init: str) -> None:
    """A zombie re-parented to PID 1 that persists: when PID 1 does not handle SIGCHLD (like
    `tail -f /dev/null` as a container's entry point) only a restart of the container frees
    it; when it does, the memory is released once it reaps. On 89ee836 both were told to stop
    or restart "that parent"."""
    doc = _ns(PERSISTING.replace("sys.argv[1]", repr(init)))
    out = doc["out"]
    assert doc["code"] == 0, out
    assert f"PID {doc['zombie']} (VLLM::EngineCor) is still a zombie (state Z)" in out
    assert "stop or restart that parent" not in out
    if init == "never":
        assert "never reaps the processes left to it" in out
        assert "stay until the container is restarted" in out
    else:
        assert "which reaps exited children: the memory is released when it does" in out


@given(port=st.integers(0, 65535), inode=st.integers(0, 2**40),
       state=st.sampled_from(["0A", "01", "06", "08"]), v6=st.booleans())
@settings(max_examples=300, deadline=None)
def test_a_tcp_table_line_gives_its_listening_port_and_inode(port: int, inode: int, state: str,
                                                             v6: bool) -> None:
    """The /proc/net/tcp{,6} line layout (kernel net/ipv4/tcp_ipv4.c get_tcp4_sock): only a
    LISTEN (0A) line names a listener, with its hex port and decimal inode."""
    address = "00000000000000000000000001000000" if v6 else "0100007F"
    line = (f"   3: {address}:{port:04X} {'0' * len(address)}:0000 {state} 00000000:00000000 "
            f"00:00000000 00000000  1000        0 {inode} 1 0000000000000000 100 0 0 10 0")
    assert procs.listener(line) == ((port, inode) if state == "0A" else None)


@pytest.mark.parametrize("family", [socket.AF_INET, socket.AF_INET6])
def test_the_process_holding_a_listening_socket_is_found(family: socket.AddressFamily) -> None:
    """The real kernel tables: a socket this process listens on is found by its port."""
    host = "::1" if family == socket.AF_INET6 else "127.0.0.1"
    try:
        listening = socket.create_server((host, 0), family=family)
    except OSError as exc:  # pragma: no cover - a kernel without IPv6
        pytest.skip(f"no {host}: {exc}")
    with listening:
        port = listening.getsockname()[1]
        inodes = procs.listening_inodes(port)
        assert inodes and os.getpid() in procs.socket_holders(inodes)
    assert not procs.listening_inodes(port)
