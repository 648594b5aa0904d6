"""How a run of ``python -m ascendpatch`` (and the console script) ends: cli.entry.

It ends with ``os._exit`` after main, the output flushed and the ``atexit`` handlers run,
instead of tearing every module down (15-20 ms of each run: bench/README, ninth round). These
tests pin down that it is the same ending as the interpreter's for everything that could
observe it: a real ``atexit`` handler (as coverage's and logging's), a ``weakref.finalize``
(as a TemporaryDirectory's), a thread the interpreter would wait for, the exit status, and
output to a pipe that is gone. A ``sitecustomize`` on ``PYTHONPATH`` plays the code that
registers them, in the real CLI process.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ascendpatch.shell import cli
from tests.kit import REPO, ctrl_c_as_a_terminal_gives_it

# What the process registers before main runs; each leaves a file named after what ran.
_SITE = """
import atexit, os, tempfile, threading, time, weakref
OUT = os.environ["EXIT_PROBE_DIR"]
def mark(name):
    open(os.path.join(OUT, name), "w").close()
atexit.register(mark, "atexit-ran")
class Kept:
    pass
kept = Kept()
weakref.finalize(kept, mark, "finalize-ran")
held = tempfile.TemporaryDirectory(dir=OUT)  # never cleaned up by anyone but the exit
TORN = os.path.join(OUT, "module-teardown-ran")
class Torn:  # (at teardown the builtins may be gone: what it needs, it holds)
    def __del__(self, _open=os.open, _close=os.close, _path=TORN, _flags=os.O_CREAT):
        _close(_open(_path, _flags | 1))
torn = Torn()
if os.environ.get("EXIT_PROBE_LATE_PRINT"):
    atexit.register(print, "printed by an exit handler")
if os.environ.get("EXIT_PROBE_THREAD"):
    def late():
        time.sleep(0.5)
        mark("thread-finished")
    threading.Thread(target=late).start()  # not a daemon: the interpreter waits for it
"""


# The interpreter's own ending, for comparison: runpy.run_module from a `-c` program is not
# the program's own main code (cli._is_the_program), so entry leaves the ending to it.
AS_A_PASSENGER = ("-c", "import runpy; runpy.run_module('ascendpatch', run_name='__main__')")


def _run(tmp_path: Path, *args: str, thread: bool = False,
         stdout: int | None = subprocess.PIPE,
         program: tuple[str, ...] = ("-m", "ascendpatch"), buffered: bool = False,
         closed: tuple[int, ...] = (), stdin: str | None = None,
         late_print: bool = False) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_SITE)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
           "EXIT_PROBE_DIR": str(out), "EXIT_PROBE_THREAD": "1" if thread else "",
           "EXIT_PROBE_LATE_PRINT": "1" if late_print else ""}
    if buffered:  # (this suite's environment may set it: CI's need not)
        env.pop("PYTHONUNBUFFERED", None)

    def close() -> None:
        for fd in closed:
            os.close(fd)

    return subprocess.run([sys.executable, *program, *args], env=env, text=True,
                          stdout=stdout, stderr=subprocess.PIPE, timeout=60, check=False,
                          input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                          preexec_fn=close if closed else None)


def _ran(tmp_path: Path) -> set[str]:
    return {p.name for p in (tmp_path / "out").iterdir()}


CONSOLE_SCRIPT = Path(sys.executable).with_name("ascendpatch")  # (pip install -e . made it)


@pytest.mark.parametrize("program", [("-m", "ascendpatch"), (str(CONSOLE_SCRIPT),)],
                         ids=["python -m ascendpatch", "the console script"])
@pytest.mark.parametrize(("args", "code"), [
    (("--version",), 0),  # argparse's SystemExit(0)
    (("no-such-command",), 2),  # argparse's usage error, SystemExit(2)
    (("--site-packages", "/nonexistent-target", "status"), 2),  # main's own return
])
def test_the_exit_handlers_run_the_modules_are_not_torn_down_and_the_code_is_kept(
        tmp_path: Path, args: tuple[str, ...], code: int, program: tuple[str, ...]) -> None:
    if not Path(program[0]).name.startswith("-") and not CONSOLE_SCRIPT.exists():
        pytest.skip("ascendpatch is not installed with a console script here")
    done = _run(tmp_path, *args, program=program)
    assert done.returncode == code, done.stderr
    # atexit (coverage saves its data so), weakref.finalize (a TemporaryDirectory's clean-up)
    assert _ran(tmp_path) == {"atexit-ran", "finalize-ran"}, done.stderr
    assert "Traceback" not in done.stderr


def test_with_a_thread_still_running_the_interpreter_ends_the_run_and_waits_for_it(
        tmp_path: Path) -> None:
    """The interpreter would join a non-daemon thread (a concurrent.futures pool's worker is
    one): the fast ending would kill it, so the run ends the usual way, tearing down too."""
    done = _run(tmp_path, "--version", thread=True)
    assert done.returncode == 0, done.stderr
    assert _ran(tmp_path) == {"atexit-ran", "finalize-ran", "thread-finished",
                              "module-teardown-ran"}, done.stderr


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "PYTHONUNBUFFERED"])
def test_output_to_a_pipe_that_is_gone_ends_as_the_interpreter_ends_it(
        tmp_path: Path, buffered: bool) -> None:
    """``ascendpatch --help`` into a pipe whose reader has gone: the same exit status and
    words as the interpreter's own ending (buffered, the final flush fails: 120 and
    'Exception ignored'), the exit handlers run."""
    ends = []
    for program in (("-m", "ascendpatch"), AS_A_PASSENGER):
        read, write = os.pipe()
        os.close(read)
        try:
            done = _run(tmp_path, "--help", stdout=write, program=program, buffered=buffered)
        finally:
            os.close(write)
        ends.append((done.returncode, done.stderr.splitlines()[:1]))
        assert {"atexit-ran", "finalize-ran"} <= _ran(tmp_path)
        assert "unexpected error" not in done.stderr  # (3.10's argparse: exit 3 before)
    assert ends[0] == ends[1]


def test_what_an_exit_handler_cannot_print_ends_as_the_interpreter_ends_it(
        tmp_path: Path) -> None:
    """A handler prints after the run, and the output is full (/dev/full): status 120 and
    the interpreter's words, as its own ending gives; the handlers run once."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    empty = tmp_path / "empty"
    empty.mkdir()
    ends = []
    with open("/dev/full", "w") as full:
        for program in (("-m", "ascendpatch"), AS_A_PASSENGER):  # (-q: the run prints nothing)
            done = _run(tmp_path, "-q", "--site-packages", str(empty), "status",
                        stdout=full.fileno(), program=program, buffered=True, late_print=True)
            ends.append((done.returncode, done.stderr.count("Exception ignored")))
    assert ends[0] == ends[1] == (120, 1)


@pytest.mark.parametrize(("args", "closed", "code"), [
    (("--version",), (1,), 0),
    (("no-such-command",), (2,), 2),
    (("--site-packages", "{empty}", "-q", "status"), (1,), 0),  # exit 3 before: a crash
    (("--site-packages", "{empty}", "status"), (0, 1, 2), 0),
])
def test_a_closed_standard_stream_is_as_if_it_were_dev_null(
        tmp_path: Path, args: tuple[str, ...], closed: tuple[int, ...], code: int) -> None:
    """``ascendpatch ... >&-`` (a cron job, a daemon's child): Python leaves sys.stdout None,
    which crashed the final flush (exit 3) and left descriptor 1 to the next file opened."""
    empty = tmp_path / "empty"
    empty.mkdir()
    words = [word.replace("{empty}", str(empty)) for word in args]
    done = _run(tmp_path, *words, closed=closed, buffered=True)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr


def test_python_i_still_opens_its_prompt_after_the_run(tmp_path: Path) -> None:
    """``python -i -m ascendpatch``: the interpreter's prompt, for a post-mortem, comes after
    the run (the fast ending would skip it)."""
    done = _run(tmp_path, "--version", program=("-i", "-m", "ascendpatch"),
                stdin="print('the prompt ran')\n")
    assert "the prompt ran" in done.stdout, done.stdout + done.stderr


class _Unflushable(io.StringIO):
    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_an_output_that_cannot_be_flushed_is_left_to_the_interpreter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """(In this process: _leave raises instead of ending it.) The interpreter's own ending
    then words the failing flush, as it did before cli.entry, and sets its exit status."""
    monkeypatch.setattr(sys, "stdout", _Unflushable())
    with pytest.raises(SystemExit) as ended:
        cli._leave(1)
    assert ended.value.code == 1


def test_a_profiler_running_ascendpatch_still_writes_its_profile(tmp_path: Path) -> None:
    """``python -m cProfile -o FILE -m ascendpatch``: cProfile is the program and writes its
    file after the run returns; ascendpatch ends the usual way there (an os._exit cut the
    file: bench/run.py's "where the time goes" found it)."""
    profile = tmp_path / "prof"
    done = _run(tmp_path, "--version",
                program=("-m", "cProfile", "-o", str(profile), "-m", "ascendpatch"))
    assert done.returncode == 0, done.stderr
    assert profile.stat().st_size > 0
    assert "module-teardown-ran" in _ran(tmp_path)  # (the interpreter's own ending)


def test_a_coverage_run_of_ascendpatch_still_saves_its_data(tmp_path: Path) -> None:
    """``coverage run -m ascendpatch``: coverage is the program and saves its data after the
    run returns (its atexit handler does not, for a run it started itself)."""
    data = tmp_path / "cov-data"
    rcfile = tmp_path / "empty.toml"  # (not the checkout's pyproject.toml settings)
    rcfile.write_text("")
    done = _run(tmp_path, "--version",
                program=("-m", "coverage", "run", "--rcfile", str(rcfile),
                         f"--data-file={data}", "-m", "ascendpatch"))
    assert done.returncode == 0, done.stderr
    assert data.exists() and data.stat().st_size > 0, done.stderr


_WAITING = ("pipe_write", "do_select", "poll_schedule_timeout")  # (the kernel's wait)


def _waits(pid: int) -> bool:
    """Whether the process waits to write: in a pipe's write (pipe_write, anon_pipe_write
    from 6.x) or in a select for room."""
    return Path(f"/proc/{pid}/wchan").read_text().split(".")[0].endswith(_WAITING)


def _ctrl_c_on_a_full_pipe(args: tuple[str, ...], *, blocking: bool = True,
                           unbuffered: bool = False, shared: bool = False) -> tuple[int, bytes]:
    """The exit code and stderr of ``ascendpatch ARGS`` whose stdout (and stderr when
    ``shared``) is a full pipe no one reads, given one SIGINT once it waits to write."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    with contextlib.suppress(BlockingIOError):
        while True:  # the pipe full: the run's first write of its output waits
            os.write(write, b"x" * 4096)
    os.set_blocking(write, blocking)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = str(REPO)
    try:
        child = subprocess.Popen([sys.executable, "-m", "ascendpatch", *args], stdout=write,
                                 stderr=write if shared else subprocess.PIPE, env=env,
                                 stdin=subprocess.DEVNULL,
                                 preexec_fn=ctrl_c_as_a_terminal_gives_it)
    finally:
        os.close(write)
    try:
        deadline = time.monotonic() + 60
        while not _waits(child.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _waits(child.pid)
        time.sleep(0.2)  # (in the write for good, not passing through a select)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
    finally:
        child.kill()
        child.wait()
        os.close(read)
    return child.returncode, err or b""


def test_ctrl_c_while_the_last_flush_waits_is_exit_130_not_a_traceback() -> None:
    """The reader stopped reading (a terminal paused with Ctrl-S, a stuck pipe) and the run's
    last flush waits on it; Ctrl-C then ends the run as an interrupt, 130, without a
    traceback and without waiting on that reader again (what it could not write is dropped)."""
    code, err = _ctrl_c_on_a_full_pipe(("--help",))
    assert code == 130, err
    assert b"Traceback" not in err


@pytest.mark.parametrize(("blocking", "unbuffered", "shared", "args"), [
    (False, False, False, ("--json", "manifests")),  # a CI runner's pipe, made non-blocking
    (False, True, True, ("manifests",)),  # ... stdout and stderr on it, unbuffered
    (True, False, True, ("manifests",)),  # a pager that stopped reading
    (True, True, False, ("--json", "manifests")),
])
def test_one_ctrl_c_ends_a_run_whose_output_no_one_reads(
        blocking: bool, unbuffered: bool, shared: bool, args: tuple[str, ...]) -> None:
    """A full pipe no one reads: the run waits to write its results, and one Ctrl-C ends it,
    130, with no traceback; what the pipe cannot take at once is dropped, never waited for
    again (before, a buffered run on a blocking pipe, or one whose stderr shared it, needed a
    second Ctrl-C, and an unbuffered one then ended with a traceback; a non-blocking pipe
    waited, since shell/streams.py waits for room there). With --json the line is on stderr:
    stdout holds part of the results, and a second document would make it no JSON."""
    code, err = _ctrl_c_on_a_full_pipe(args, blocking=blocking, unbuffered=unbuffered,
                                       shared=shared)
    assert code == 130, err
    if not shared:
        assert err == b"[FAIL] interrupted while showing the results; the command itself " \
            b"had finished\n"


def test_without_dev_null_a_closed_stream_stays_closed_and_the_run_goes_on(
        tmp_path: Path) -> None:
    """A chroot or sandbox without /dev/null: a closed descriptor cannot be opened on it, and
    is left as Python left it (the run crashed before main on the first version)."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare here")
    script = (f"mount -t tmpfs none /dev && exec {shlex.quote(sys.executable)} -m ascendpatch "
              "--version >&-")
    # (not under CI's coverage: its data file, SQLite, needs the /dev this test takes away)
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE")}
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**env, "PYTHONPATH": str(REPO)})
    if "mount" in done.stderr and done.returncode != 0 and "Traceback" not in done.stderr:
        pytest.skip(f"cannot mount a tmpfs on /dev here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def test_a_closed_stdin_reads_as_an_empty_one(tmp_path: Path) -> None:
    """``ascendpatch logs - <&-``: an empty log (its markers missing: exit 1), not exit 3 on
    sys.stdin being None."""
    done = _run(tmp_path, "logs", "-", closed=(0,))
    assert done.returncode == 1, done.stderr
    assert "missing marker" in done.stdout and "unexpected error" not in done.stdout + done.stderr
