"""A target named by ``--python`` (or ``$ASCENDPATCH_PYTHON``) starts being inspected as soon as
the parser reads the command word, while the command's modules load (shell/cliargs._prefetch,
env.introspection.prefetch): once, for the command that then takes it, and never left running
when no command does."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ascendpatch.env import inscript, uvbin
from tests.kit import past_racy_window, run_cli

# What a cold run must not have loaded when it starts the target interpreter: each of these is
# milliseconds the run then waits for that interpreter's report (env/introspection.py; hashlib
# loads OpenSSL's libcrypto: env/introcache.py).
HEAVY = ("dataclasses", "ascendpatch.results", "ascendpatch.store.atomic",
         "ascendpatch.env.target", "ascendpatch.commands.audit", "hashlib", "json")

SPY = f"""
import sys
before = set(sys.modules)  # (coverage's start-up in CI's subprocesses loads dataclasses itself)
from ascendpatch.env import inscript, introspection
started = introspection.prefetch
def prefetch(python):
    loaded = "ascendpatch.commands.audit" in sys.modules
    print("PREFETCH after the command's module" if loaded else "PREFETCH first", file=sys.stderr)
    started(python)
introspection.prefetch = prefetch
real = inscript.Running.__init__
def start(self, *args, **kwargs):
    loaded = [m for m in {HEAVY!r} if m in sys.modules and m not in before]
    print("START with", loaded, file=sys.stderr)
    real(self, *args, **kwargs)
inscript.Running.__init__ = start
from ascendpatch.shell.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def small_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real venv without pip: a target with next to nothing to audit. Older than the racy
    window (ascendpatch/stamps.py), as an image's is: its first report is cached."""
    root = tmp_path_factory.mktemp("small-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    past_racy_window(root)
    return root / "bin" / "python"


def _logging(python: Path, folder: Path) -> tuple[Path, Path]:
    """An interpreter that records each time it is run, then is ``python``."""
    marker = folder / "runs"
    wrapper = folder / "python"
    wrapper.write_text(f"#!/bin/sh\necho ran >> {marker}\nexec {python} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper, marker


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[inscript.Running]:
    """Every script started in a target interpreter from now on (the real class, watched)."""
    started: list[inscript.Running] = []
    real = inscript.Running.__init__

    def recording(self: inscript.Running, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        started.append(self)

    monkeypatch.setattr(inscript.Running, "__init__", recording)
    return started


def _runs(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


@pytest.mark.parametrize("named_by", ["--python", "$ASCENDPATCH_PYTHON"])
def test_the_target_is_inspected_once_and_before_the_commands_modules_load(
        small_venv: Path, tmp_path: Path, named_by: str) -> None:
    """Cold (no cached report): the target interpreter runs once, started by the parser before
    it imported the audit command (or dataclasses, the store, env/target.py: HEAVY), and
    audit takes that run's report; named by --python before the command, or by the variable
    when nothing on the line names another."""
    wrapper, marker = _logging(small_venv, tmp_path)
    env = {**os.environ, "ASCENDPATCH_CACHE": str(tmp_path / "cache")}
    words = ["audit"]
    if named_by == "--python":
        words[:0] = ["--python", str(wrapper)]
    else:
        env["ASCENDPATCH_PYTHON"] = str(wrapper)
    proc = subprocess.run([sys.executable, "-c", SPY, *words],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "PREFETCH first" in proc.stderr
    assert "START with []" in proc.stderr
    assert _runs(marker) == 1
    assert "files checked" in proc.stdout


def test_a_run_that_fails_after_the_prefetch_leaves_no_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parser started the target, then refused a later word (exit 2): the inspection is
    stopped and reaped at once, not waited for."""
    hanging = tmp_path / "python"
    hanging.write_text("#!/bin/sh\nexec sleep 60\n")
    hanging.chmod(0o755)
    started = _recording(monkeypatch)
    began = time.monotonic()
    result = run_cli("--python", hanging, "audit", "--workers", "many")
    assert result.code == 2, result.err
    assert time.monotonic() - began < 30  # (not the 60 s of the hanging "interpreter")
    assert len(started) == 1
    proc = started[0].proc
    assert proc.returncode is not None, "the prefetched inspection was left running"
    assert not Path(f"/proc/{proc.pid}").exists()  # and reaped


@pytest.mark.parametrize("named_by", ["--python", "$ASCENDPATCH_PYTHON"])
@pytest.mark.parametrize("words", [
    ("manifests",),  # a command that reaches into no target
    ("audit", "--site-packages", "{site}"),  # --site-packages wins over --python
    ("audit", "--python", "{other}"),  # the last --python is the target
    ("audit", "--py={other}"),  # (argparse takes an unambiguous prefix)
    ("audit", "--help"), ("audit", "--hel"), ("audit", "-qh"),  # help runs nothing in it
])
def test_no_inspection_is_started_where_the_named_interpreter_is_not_the_one_used(
        small_venv: Path, tmp_path: Path, words: tuple[str, ...], named_by: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    wrapper, marker = _logging(small_venv, tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setenv("ASCENDPATCH_CACHE", str(tmp_path / "cache"))
    started = _recording(monkeypatch)
    line = [w.format(site=site, other=small_venv) for w in words]
    if named_by == "--python":
        line[:0] = ["--python", str(wrapper)]
    else:
        monkeypatch.setenv("ASCENDPATCH_PYTHON", str(wrapper))
    result = run_cli(*line)
    assert result.code == 0, result.err
    assert [run.python for run in started] == ([small_venv] if "{other}" in str(words) else [])
    assert _runs(marker) == 0


def test_the_variable_is_not_inspected_when_site_packages_comes_before_the_command(
        small_venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--site-packages`` wins over ``$ASCENDPATCH_PYTHON`` wherever it is written (before the
    command word, argparse refuses it beside --python: only the variable's case exists)."""
    wrapper, marker = _logging(small_venv, tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setenv("ASCENDPATCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ASCENDPATCH_PYTHON", str(wrapper))
    started = _recording(monkeypatch)
    result = run_cli("--site-packages", site, "audit")
    assert result.code == 0, result.err
    assert started == [] and _runs(marker) == 0


def test_a_parser_built_outside_main_starts_nothing(small_venv: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Completion and tests parse words too: only main, whose error boundary stops what no
    command took, has the parser start a target."""
    from ascendpatch.shell.cli import build_parser

    wrapper, marker = _logging(small_venv, tmp_path)
    started = _recording(monkeypatch)
    build_parser(lazy=True).parse_args(["--python", str(wrapper), "status"])
    assert started == [] and _runs(marker) == 0


def test_an_interrupt_between_the_start_and_the_wait_leaves_no_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C after the command took the prefetched inspection but before it waited for it
    (while its modules load): exit 130, and the interpreter is stopped and reaped."""
    from ascendpatch.env import target

    hanging = tmp_path / "python"
    hanging.write_text("#!/bin/sh\nexec sleep 60\n")
    hanging.chmod(0o755)
    started = _recording(monkeypatch)
    real = target.start_python

    def interrupted(python: Path) -> Any:
        real(python)
        raise KeyboardInterrupt

    monkeypatch.setattr(target, "start_python", interrupted)
    result = run_cli("--python", hanging, "audit")
    assert result.code == 130, result.err
    assert len(started) == 1 and started[0].proc.returncode is not None
    assert not Path(f"/proc/{started[0].proc.pid}").exists()


def test_a_stopped_inspection_takes_the_children_holding_its_pipes(tmp_path: Path) -> None:
    """An interpreter that has exited but left a child holding its output: stop does not wait
    for that child, it ends it (the group is still the script's own until it is reaped)."""
    child_pid = tmp_path / "child"
    leaving = tmp_path / "python"
    leaving.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {child_pid}\nexit 0\n")
    leaving.chmod(0o755)
    running = inscript.Running(leaving, "pass")
    deadline = time.monotonic() + 10
    while not child_pid.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)  # the script itself has exited by now, unreaped
    began = time.monotonic()
    running.stop()
    assert time.monotonic() - began < 10  # (not the child's 60 s)
    pid = int(child_pid.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_a_script_the_kernel_reaped_is_not_signalled(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """With SIGCHLD ignored (a parent can hand that down through exec) the kernel reaps the
    script as it exits, unseen by Popen: its pid may then be anyone's, so stop signals no
    group, and still returns."""
    import signal

    quick = tmp_path / "python"
    quick.write_text("#!/bin/sh\nexit 0\n")
    quick.chmod(0o755)
    signalled: list[int] = []
    real_killpg = os.killpg

    def killpg(pid: int, sig: int) -> None:
        signalled.append(pid)
        real_killpg(pid, sig)

    monkeypatch.setattr(os, "killpg", killpg)
    before = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        running = inscript.Running(quick, "pass")
        deadline = time.monotonic() + 10
        while Path(f"/proc/{running.proc.pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert running.proc.returncode is None  # (Popen has not seen it go)
        running.stop()
    finally:
        signal.signal(signal.SIGCHLD, before)
    assert signalled == []
    hanging = tmp_path / "hanging"
    hanging.write_text("#!/bin/sh\nexec sleep 60\n")
    hanging.chmod(0o755)
    alive = inscript.Running(hanging, "pass")
    alive.stop()  # a script still running is ours: its group is killed
    assert signalled == [alive.proc.pid] and alive.proc.returncode is not None


def test_a_second_interrupt_while_stopping_still_stops_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C pressed again while the end of a run stops what it started: the interrupt goes
    on, and every inspection is still stopped and reaped."""
    from ascendpatch.env import introspection

    hanging = tmp_path / "python"
    hanging.write_text("#!/bin/sh\nexec sleep 60\n")
    hanging.chmod(0o755)
    runs = [inscript.Running(hanging, "pass") for _ in range(3)]
    monkeypatch.setattr(introspection, "_unfinished", list(runs))
    real_stop, calls = inscript.Running.stop, []

    def stop(self: inscript.Running) -> None:
        calls.append(self)
        if len(calls) == 1:
            raise KeyboardInterrupt  # the user presses Ctrl-C again
        real_stop(self)

    monkeypatch.setattr(inscript.Running, "stop", stop)
    with pytest.raises(KeyboardInterrupt):
        introspection.stop_unfinished()
    monkeypatch.setattr(inscript.Running, "stop", real_stop)
    assert introspection._unfinished == []
    for run in runs:  # the one being stopped when the interrupt came too
        assert run.proc.returncode is not None and not Path(f"/proc/{run.proc.pid}").exists()


# What a warm install must not have loaded when it starts reading pip's settings: that read is
# then the run's longest wait (bench/README, ninth round), and each of these delays its start.
HEAVY_BEFORE_READ = ("dataclasses", "ascendpatch.env.target", "ascendpatch.results",
                     "hashlib", "ascendpatch.commands.install")

READ_SPY = f"""
import sys
before = set(sys.modules)  # (coverage's start-up in CI's subprocesses loads dataclasses itself)
from ascendpatch.env import inscript, pipconfig
real = inscript.Running.__init__
def recording(self, python, script, args=(), env=None, **options):
    what = "READ" if script == pipconfig._READ else "INSPECT"
    when = "late" if "ascendpatch.commands.install" in sys.modules else "early"
    loaded = [m for m in {HEAVY_BEFORE_READ!r} if m in sys.modules and m not in before]
    print(f"START {{what}} {{when}}" + (f" with {{loaded}}" if what == "READ" else ""),
          file=sys.stderr)
    real(self, python, script, args, env, **options)
inscript.Running.__init__ = recording
from ascendpatch.shell.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_pips_settings_are_read_once_and_while_install_loads_once_the_target_is_known(
        small_venv: Path, tmp_path: Path) -> None:
    """install's reading of pip's settings (the resolver's choice, the pre-flight's key: a
    Python start importing pip, 0.1 s) starts in the parser as soon as the target is known
    from its cached report, and the command takes that read: it is started once. Cold, the
    target interpreter is still running then: the read waits for the command, as before.
    Warm, a run before kept the answer (env/pipsaved.py): nothing is read. Warm with another
    environment, nothing it does not need is loaded before it starts
    (:data:`HEAVY_BEFORE_READ`). pip's find-links reaches uv every time."""
    if uvbin.find().path is None:
        pytest.skip("uv is not installed with ascendpatch here (ascendpatch[fast])")
    house = tmp_path / "house"
    house.mkdir()
    links = tmp_path / "mirror-links"
    links.mkdir()
    # no pip.conf of the machine's counts (os.devnull: pip reads no file), one setting of pip's
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PIP_")},
           "ASCENDPATCH_CACHE": str(tmp_path / "cache"), "PIP_CONFIG_FILE": os.devnull,
           "PIP_FIND_LINKS": str(links)}
    words = ["--python", str(small_venv), "-v", "install", "--dry-run", "--resolver", "uv",
             "--offline", "--wheelhouse", str(house), "six"]
    said = []
    for extra in ({}, {}, {"ASCENDPATCH_TEST_ANOTHER_SHELL": "1"}):
        proc = subprocess.run([sys.executable, "-c", READ_SPY, *words], capture_output=True,
                              text=True, env={**env, **extra}, timeout=120, check=False)
        assert proc.returncode == 1, proc.stderr  # (six is in no wheelhouse)
        assert "uv cannot resolve six" in proc.stdout + proc.stderr
        said.append([line for line in proc.stderr.splitlines() if line.startswith("START")])
        assert f"--find-links {links}" in proc.stderr  # uv was given pip's setting
    assert said[0][0] == "START INSPECT early" and said[0][1].startswith("START READ late")
    assert said[1] == []
    assert said[2] == ["START READ early with []"]


def test_a_run_that_fails_after_pips_settings_were_prefetched_leaves_no_process(
        small_venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parser started reading pip's settings (here from a FIFO no one writes: pip waits
    for ever), then refused a later word (exit 2): the read is stopped and reaped at once."""
    monkeypatch.setenv("ASCENDPATCH_CACHE", str(tmp_path / "cache"))
    assert run_cli("--python", small_venv, "status").code in (0, 1)  # the report is cached
    fifo = tmp_path / "pip.conf"
    os.mkfifo(fifo)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(fifo))
    started = _recording(monkeypatch)
    began = time.monotonic()
    result = run_cli("--python", small_venv, "install", "--resolver", "never")
    assert result.code == 2, result.err
    assert time.monotonic() - began < 30  # (not the 60 s the read may take)
    assert [run.python for run in started] == [small_venv]
    proc = started[0].proc
    assert proc.returncode is not None, "the prefetched read was left running"
    assert not Path(f"/proc/{proc.pid}").exists()  # and reaped
    from ascendpatch.env import pipconfig

    assert pipconfig._started == {}  # and forgotten: the next command reads afresh


def test_an_interrupt_while_the_inspections_stop_still_stops_pips_settings_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The end of a run stops the target's inspections, then the readings of pip's settings:
    a Ctrl-C (or any error) in the first still lets the second stop and reap its own."""
    from ascendpatch.env import introspection, pipconfig
    from ascendpatch.shell import cli

    hanging = tmp_path / "python"
    hanging.write_text("#!/bin/sh\nexec sleep 60\n")
    hanging.chmod(0o755)
    pipconfig.prefetch(pipconfig.Reader(hanging), "install")
    [(running, _since)] = pipconfig._started.values()

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(introspection, "stop_unfinished", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cli._stop_unfinished()
    assert pipconfig._started == {}
    assert running.proc.returncode is not None and not Path(f"/proc/{running.proc.pid}").exists()


def _holding(marker: str) -> list[int]:
    """The processes whose environment names ``marker`` (this uid's: readable)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_signal_to_the_callers_group_ends_a_hanging_read_of_pips_settings(
        small_venv: Path, tmp_path: Path) -> None:
    """``timeout`` or a terminal's hangup signals ascendpatch's process group, and main's
    error boundary does not run: the reading of pip's settings (hanging here on a FIFO
    PIP_CONFIG_FILE) is in that group, so it ends too, not left behind for 60 s (a review
    found it in a session of its own, orphaned)."""
    if uvbin.find().path is None:
        pytest.skip("uv is not installed with ascendpatch here (ascendpatch[fast])")
    fifo = tmp_path / "pip.conf"
    os.mkfifo(fifo)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PIP_")},
           "ASCENDPATCH_CACHE": str(tmp_path / "cache")}
    words = [sys.executable, "-m", "ascendpatch", "--python", str(small_venv)]
    subprocess.run([*words, "status"], env=env, capture_output=True, timeout=120, check=False)
    env["PIP_CONFIG_FILE"] = str(fifo)  # (after: the report is cached, the read prefetched)
    house = tmp_path / "house"
    house.mkdir()
    proc = subprocess.Popen([*words, "install", "--dry-run", "--resolver", "uv", "--offline",
                             "--wheelhouse", str(house), "six"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(_holding(str(fifo))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_holding(str(fifo))) >= 2, "the read never started"
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while _holding(str(fifo)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _holding(str(fifo)) == [], "a read of pip's settings outlived its caller"
    finally:
        for pid in _holding(str(fifo)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.parametrize("chosen", [("--resolver", "pip"), ("--resolver=pip",), ("--res", "pip")])
def test_nothing_is_read_ahead_for_a_command_that_resolves_with_pip(
        small_venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        chosen: tuple[str, ...]) -> None:
    """With --resolver pip (as argparse takes it) the uv choice reads no pip settings: the
    parser starts no reading of them (it would run the target's interpreter for nothing)."""
    from ascendpatch.env import pipconfig

    monkeypatch.setenv("ASCENDPATCH_CACHE", str(tmp_path / "cache"))
    assert run_cli("--python", small_venv, "status").code in (0, 1)  # the report is cached
    house = tmp_path / "house"
    house.mkdir()
    started = _recording(monkeypatch)
    result = run_cli("--python", small_venv, "install", "--dry-run", *chosen, "--offline",
                     "--wheelhouse", house, "six")
    assert result.code == 1, result.err  # (pip finds no six in an empty wheelhouse)
    assert not [run for run in started if run.own_group is False], "pip's settings were read"
    if uvbin.find().path is not None:  # the control: with uv, they are read (ahead), once
        started.clear()
        pipconfig._READ_BEFORE.clear()
        run_cli("--python", small_venv, "install", "--dry-run", "--resolver", "uv",
                "--offline", "--wheelhouse", house, "six")
        assert [run.python for run in started if run.own_group is False] == [small_venv]


# What install must not have loaded when uv starts on a refusal from a wheelhouse: each is an
# import the whole command waits for (kinds its manifest does not name, the wheelhouse archive
# readers an online pre-flight never uses, the checks run only after a real install).
NOT_BEFORE_UV = ("ascendpatch.kinds.diff", "ascendpatch.kinds.dropin",
                 "ascendpatch.kinds.envfile", "ascendpatch.kinds.plugin",
                 "ascendpatch.patchfile.diffpatch", "dotenv", "ascendpatch.deploy.logs",
                 "ascendpatch.env.releases", "tarfile", "ascendpatch.inspect.checks.pins")

# and, once the manifest's parse is kept (manifest/parsed.py), PyYAML
UV_SPY = f"""
import sys
from ascendpatch.env import resolver
real = resolver._uv
def spied(*args, **kwargs):
    print("UV with", [m for m in {NOT_BEFORE_UV!r} if m in sys.modules], file=sys.stderr)
    print("yaml" in sys.modules and "YAML" or "NO YAML", file=sys.stderr)
    return real(*args, **kwargs)
resolver._uv = spied
from ascendpatch.shell.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_refused_install_loads_nothing_it_does_not_use_before_uv_starts(
        tmp_path: Path) -> None:
    """The torch guard's refusal from a wheelhouse, whose manifest names no artifact (the
    case bench/resolver.py measures against pip's own resolution)."""
    if uvbin.find().path is None:
        pytest.skip("uv is not installed with ascendpatch here (ascendpatch[fast])")
    from tests.kit import torchguard

    world = torchguard.world(tmp_path / "guard")
    past_racy_window(world["manifest"])  # (as a manifest written minutes before is)
    env = {**os.environ, "ASCENDPATCH_CACHE": str(tmp_path / "cache")}
    for yaml_loaded in ("YAML", "NO YAML"):  # the second run takes the manifest's kept parse
        proc = subprocess.run([sys.executable, "-c", UV_SPY, "--python", str(world["python"]),
                               "--manifest", str(world["manifest"]), "install", "--dry-run",
                               "--offline", "--wheelhouse", str(world["house"]), "--resolver",
                               "uv", "needs-new-torch"], capture_output=True, text=True,
                              env=env, timeout=120, check=False)
        assert proc.returncode == 1 and "torch is protected" in proc.stdout, proc.stderr
        assert "UV with []" in proc.stderr.splitlines()
        assert yaml_loaded in proc.stderr.splitlines()
