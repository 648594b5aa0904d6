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

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ascendpatch.shell import cli
from tests.kit import REPO

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
if os.environ.get("EXIT_PROBE_THREAD"):
    def late():
        time.sleep(0.5)
        mark("thread-finished")
    threading.Thread(target=late).start()  # not a daemon: the interpreter waits for it
"""


def _run(tmp_path: Path, *args: str, thread: bool = False,
         stdout: int | None = subprocess.PIPE,
         program: tuple[str, ...] = ("-m", "ascendpatch")) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_SITE)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
           "EXIT_PROBE_DIR": str(out), "EXIT_PROBE_THREAD": "1" if thread else ""}
    return subprocess.run([sys.executable, *program, *args], env=env, text=True,
                          stdout=stdout, stderr=subprocess.PIPE, timeout=60, check=False,
                          stdin=subprocess.DEVNULL)


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


def test_output_to_a_pipe_that_is_gone_ends_as_before(tmp_path: Path) -> None:
    """``ascendpatch --help`` into a pipe whose reader has gone: exit 0, nothing on stderr,
    the exit handlers run, as before cli.entry."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = _run(tmp_path, "--help", stdout=write)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "")
    assert {"atexit-ran", "finalize-ran"} <= _ran(tmp_path)


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
