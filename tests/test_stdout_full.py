"""A standard output that cannot be written (shell/streams.py): a full disk, an I/O error.

``ascendpatch audit --json > report.json`` on a full volume: before, the run ended as an
unexpected error (exit 3, a crash log written to the same full disk), and ``--version >
/dev/full`` ended silently with 0, as if the version had been shown. Now the command runs to
its end, writes nothing more to stdout once it has failed, and ends with one [FAIL] line on
stderr (with --json too) and an exit code of at least 1. A reader that has gone (a closed
pipe) is still no failure. Every run here is the real CLI writing to the kernel's /dev/full.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ascendpatch.shell import cli
from tests.kit import make_demo_target, run_cli
from tests.kit.pipes import non_blocking_pipe, read_slowly
from tests.kit.smallfs import small_fs

SAID = ("[FAIL] cannot write to standard output (No space left on device): what the command "
        "printed is incomplete; fix: free space where standard output goes, or send it to "
        "another file, and run the command again\n")


def _into_full(*args: str | Path) -> subprocess.CompletedProcess[str]:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        return subprocess.run([sys.executable, "-m", "ascendpatch", *map(str, args)],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
                              check=False, env=os.environ)


@pytest.fixture
def logs() -> Path:
    return Path(os.environ["ASCENDPATCH_LOG_DIR"])


@pytest.mark.parametrize("args", [
    ("--version",),  # silent, exit 0 before
    ("--help",),
    ("manifests",),  # exit 3 and a crash log before
    ("--site-packages", "{site}", "status"),
    ("--json", "--site-packages", "{site}", "status"),  # the failure on stderr, not in JSON
    ("--site-packages", "{site}", "verify"),
])
def test_an_output_that_cannot_be_written_is_said_once_on_stderr(
        site: Path, logs: Path, args: tuple[str, ...]) -> None:
    done = _into_full(*(word.replace("{site}", str(site)) for word in args))
    assert done.returncode == 1
    assert done.stderr == SAID
    assert not logs.exists() or not list(logs.iterdir())  # no crash log: not a bug of ours


def test_a_command_whose_output_fails_runs_to_its_end(site: Path, tmp_path: Path) -> None:
    """apply streams each result as it commits: the first write fails, the fix is still
    applied in full, and the run says its output is incomplete."""
    manifest = make_demo_target(site, tmp_path)
    done = _into_full("--site-packages", site, "--manifest", manifest, "apply")
    assert done.returncode == 1
    assert done.stderr == "recap: ok=0 changed=1 skipped=0 failed=0\n" + SAID  # (stderr's)
    status = run_cli("--site-packages", site, "--manifest", manifest, "status")
    assert status.code == 0 and "[OK]" in status.out and "applied" in status.out


def test_a_reader_that_has_gone_is_still_no_failure(site: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "ascendpatch", "--site-packages", str(site),
                             "status"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=os.environ)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes before the first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0
    assert err == ""


class _Full(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError(28, "No space left on device")


def test_in_process_each_run_says_only_its_own_failure(
        site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """main() called twice in one process (a test, a tool embedding it): the second run,
    whose output is fine, does not inherit the first one's failure."""
    with monkeypatch.context() as patched:
        patched.setattr(sys, "stdout", _Full())
        assert cli.main(["--site-packages", str(site), "status"]) == 1
    assert capsys.readouterr().err == SAID
    assert cli.main(["--site-packages", str(site), "status"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_a_short_write_to_a_small_disk_is_said_unbuffered_too(
        tmp_path: Path, unbuffered: str) -> None:
    """An 8 KiB tmpfs takes 8192 of the JSON document's 10,000-odd bytes: the write is short,
    not an error. With PYTHONUNBUFFERED (set in many containers, and here) CPython's text
    layer dropped the rest silently: exit 0, a cut document, nothing said (a review found it
    on the first version)."""
    with small_fs(tmp_path / "small", size_kb=8) as small:
        with (small / "out.json").open("w") as out:
            done = subprocess.run([sys.executable, "-m", "ascendpatch", "--json", "manifests"],
                                  stdout=out, stderr=subprocess.PIPE, text=True, timeout=120,
                                  check=False, env={**os.environ,
                                                    "PYTHONUNBUFFERED": unbuffered})
        written = (small / "out.json").stat().st_size
    assert written < len(run_cli("--json", "manifests").out.encode())
    assert done.returncode == 1
    assert done.stderr == SAID


def test_a_failure_of_stderr_is_not_said_to_be_stdouts(site: Path, tmp_path: Path) -> None:
    """apply's recap goes to stderr; stderr on /dev/full, stdout a file that takes it all:
    the output is whole, and nothing says it is not (the first version said stdout had
    failed, and pointed the caller's stdout at /dev/null)."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    manifest = make_demo_target(site, tmp_path)
    with (tmp_path / "out.txt").open("w") as out, open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "ascendpatch", "--site-packages",
                               str(site), "--manifest", str(manifest), "apply"], stdout=out,
                              stderr=full, timeout=120, check=False, env=os.environ)
    assert done.returncode == 0
    assert "[OK]" in (tmp_path / "out.txt").read_text()


def test_an_error_that_is_not_a_full_disk_is_worded_for_itself(
        site: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    class _Gone(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(5, "Input/output error")

    with monkeypatch.context() as patched:
        patched.setattr(sys, "stdout", _Gone())
        assert cli.main(["--site-packages", str(site), "status"]) == 1
    assert capsys.readouterr().err == (
        "[FAIL] cannot write to standard output (Input/output error): what the command "
        "printed is incomplete; fix: send standard output to a file or a pipe that takes it, "
        "and run the command again\n")


_ORDER = """
import subprocess, sys
from ascendpatch.shell import streams
if sys.argv[1] == "whole":
    streams.whole_writes()
print("out1"); print("err1", file=sys.stderr)
print("out2"); sys.stderr.write("x"); print("err2", file=sys.stderr)
subprocess.run(["echo", "child"])
print("out3")
"""


def test_whole_writes_keep_an_unbuffered_runs_order(tmp_path: Path) -> None:
    """Unbuffered stays unbuffered: lines of stdout, stderr and a child on one pipe come in
    the order they were written, as with the interpreter's own -u streams (the first
    version's one-byte buffer held print's lone newline back: `out1err1`)."""
    def run(mode: str) -> str:
        return subprocess.run([sys.executable, "-c", _ORDER, mode], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, check=True, timeout=60,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"}).stdout

    assert run("whole") == run("as-is") == "out1\nerr1\nout2\nxerr2\nchild\nout3\n"


@pytest.mark.parametrize("unbuffered", ["1", None])
def test_a_full_non_blocking_pipe_is_waited_on_not_cut(unbuffered: str | None) -> None:
    """A non-blocking pipe of 4 KiB (CI runners and process managers share one pipe for
    stdout and stderr and set O_NONBLOCK on it), read slowly: the run waits for room and
    writes the whole document. Before, unbuffered, it kept 4096 of its 10,947 bytes and
    exited 0; buffered (the default), it kept 4096 and exited 1, "cannot write to standard
    output (write could not complete without blocking)"."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered
    with read_slowly() as (write, got):
        done = subprocess.run([sys.executable, "-m", "ascendpatch", "--json", "manifests"],
                              stdout=write, stderr=write, timeout=120, check=False, env=env)
    assert (done.returncode, bytes(got).decode()) == (0, run_cli("--json", "manifests").out)


_ATTRIBUTES = """
import sys
def seen():
    return [(s.name, s.mode, s.encoding, s.errors, s.line_buffering, s.isatty())
            for s in (sys.stdout, sys.stderr)]
before = seen()
from ascendpatch.shell import streams
streams.whole_writes()
print(before == seen(), seen())
"""


@pytest.mark.parametrize("unbuffered", ["1", None])
def test_whole_writes_keep_the_streams_as_the_interpreter_made_them(
        unbuffered: str | None) -> None:
    """Name, mode, encoding, errors and line buffering stay the interpreter's own."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered
    out = subprocess.run([sys.executable, "-c", _ATTRIBUTES], capture_output=True, text=True,
                         check=True, timeout=60, env=env).stdout
    assert out.startswith("True [('<stdout>', 'w', "), out


def test_a_ctrl_c_stops_the_waiting_of_its_own_run_only() -> None:
    """After a Ctrl-C a full pipe takes what it can at once and the rest is dropped; the next
    run in the same process (a tool running main twice) waits for room again."""
    import threading

    from ascendpatch.shell import streams

    read, write = non_blocking_pipe(4096)
    whole = streams._Whole(write, "<pipe>")
    try:
        with streams.guarded():
            streams.stop_waiting()
            assert whole.write(b"x" * 10_000) == 10_000  # at once
        assert os.read(read, 65_536) == b"x" * 4096
        with streams.guarded():
            writer = threading.Thread(target=whole.write, args=(b"y" * 10_000,))
            writer.start()
            got = b""
            while len(got) < 10_000:
                got += os.read(read, 65_536)
            writer.join(timeout=60)
        assert got == b"y" * 10_000 and not writer.is_alive()
    finally:
        os.close(write)
        os.close(read)


def test_a_ctrl_c_in_the_middle_of_a_write_shows_nothing_twice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C while a buffered stream's write waits, after part of it was written: that part
    is not written again when the buffer above, which met the interrupt, writes it all again
    (the reader saw a line twice), and the rest goes as far as the pipe takes it at once."""
    from ascendpatch import fdwrite
    from ascendpatch.shell import streams

    read, write = os.pipe()
    calls: list[int] = []
    real = fdwrite.write_some

    def interrupted(fd: int, view: memoryview) -> int:
        calls.append(len(view))
        if len(calls) == 1:
            return real(fd, view[:3])  # a short write ...
        raise KeyboardInterrupt  # ... then a Ctrl-C while waiting for room

    monkeypatch.setattr(streams, "write_some", interrupted)
    buffered = io.BufferedWriter(streams._Whole(write, "<pipe>", buffered=True), 64)
    try:
        with streams.guarded():
            buffered.write(b"0123456789abcdef")
            with pytest.raises(KeyboardInterrupt):
                buffered.flush()
            buffered.write(b"XYZ")
            buffered.flush()
        assert os.read(read, 100) == b"0123456789abcdefXYZ"
    finally:
        os.close(write)
        os.close(read)


def test_without_dev_null_a_failed_output_is_dropped_not_raised(
        site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A chroot without /dev/null: stdout cannot be pointed there once it fails, and later
    writes are dropped by the guard itself, never raised into the command."""
    real_open = os.open

    def no_devnull(path: str | bytes | os.PathLike[str], *args: int) -> int:
        if os.fsdecode(path) == os.devnull:
            raise FileNotFoundError(2, "No such file or directory", os.devnull)
        return real_open(path, *args)

    with monkeypatch.context() as patched:
        patched.setattr(os, "open", no_devnull)
        patched.setattr(sys, "stdout", _Full())
        assert cli.main(["--site-packages", str(site), "status"]) == 1
    assert capsys.readouterr().err == SAID


def test_remember_into_a_full_disk_writes_the_config_and_says_only_stdout_failed(
        tmp_path: Path) -> None:
    """install.sh's helper (python -m ascendpatch.shell.remember) wrote the config, then took
    its own stdout's OSError for the config's: a traceback, and "config ... not written"."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    env.pop("XDG_CONFIG_HOME", None)
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "ascendpatch.shell.remember", "--python",
                               sys.executable], stdout=full, stderr=subprocess.PIPE, text=True,
                              timeout=120, check=False, env=env)
    assert done.returncode == 1
    assert done.stderr == SAID
    assert (home / ".config" / "ascendpatch" / "config.toml").is_file()
