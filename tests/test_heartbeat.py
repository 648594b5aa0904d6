"""Off a terminal a long step says it is alive on stderr (issue 25: pip resolving for 25-94 s
in silence in CI logs), never on stdout, never with --json. The interval is injected
($ASCENDPATCH_HEARTBEAT) and each test waits for the lines themselves, not for a time."""

from __future__ import annotations

import http.server
import io
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ascendpatch import progress
from ascendpatch.shell import output
from tests.kit import wheels

BEAT = re.compile(r"\.\.\. (?P<label>.+): still running \((?P<seconds>\d+) s\)")


class _Watched(io.StringIO):
    """A non-terminal stderr that writes a byte into ``pipe`` at the second heartbeat line,
    which is what the slow subprocess waits for."""

    def __init__(self, pipe: int) -> None:
        super().__init__()
        self.pipe = pipe

    def write(self, text: str) -> int:
        written = super().write(text)
        if self.getvalue().count("still running") == 2:
            os.write(self.pipe, b"x")
        return written


def test_a_slow_subprocess_off_a_terminal_gets_a_line_on_stderr_per_interval(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On main nothing was shown: no spinner off a terminal, and no line either."""
    monkeypatch.setenv("ASCENDPATCH_HEARTBEAT", "0.2")
    read, write = os.pipe()
    err, out = _Watched(write), io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", out)
    reporter = output.ConsoleReporter(color="auto")
    try:
        with progress.reporting(reporter), progress.task("pip install --dry-run six"):
            subprocess.run([sys.executable, "-c", "import sys; sys.stdin.buffer.read(1)"],
                           stdin=read, check=True, timeout=120)  # until the second beat
    finally:
        os.close(read)
        os.close(write)
    lines = err.getvalue().splitlines()
    assert len(lines) >= 2 and out.getvalue() == ""
    for line in lines:
        found = BEAT.fullmatch(line)
        assert found is not None and found["label"] == "pip install --dry-run six", line


@pytest.mark.parametrize("options", [("--json",), ("-q",)])
def test_json_and_quiet_runs_get_no_heartbeat(monkeypatch: pytest.MonkeyPatch,
                                              options: tuple[str, ...]) -> None:
    monkeypatch.setenv("ASCENDPATCH_HEARTBEAT", "0.01")
    reporter = output.ConsoleReporter(color="never", as_json="--json" in options,
                                      quiet="-q" in options)
    assert reporter.beat == 0  # no thread is even started


@pytest.mark.parametrize(("value", "seconds"), [("", 10.0), ("30", 30.0), ("0", 0.0),
                                                ("nan", 10.0), ("-1", 10.0), ("inf", 10.0),
                                                ("ten", 10.0)])
def test_the_interval_is_a_finite_number_or_the_default(value: str, seconds: float) -> None:
    assert progress.heartbeat_interval({"ASCENDPATCH_HEARTBEAT": value}) == seconds


# --------------------------------------------------------------------------- real pip


class _SlowIndex(http.server.BaseHTTPRequestHandler):
    """An index that answers (404) only once ``release`` is set, or after 5 s."""

    release = threading.Event()

    def do_GET(self) -> None:
        _SlowIndex.release.wait(5)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def slow_index() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowIndex)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        _SlowIndex.release.set()
        server.shutdown()


def _install(python: Path, index: str, *options: str) -> tuple[subprocess.Popen[str], str]:
    """`install six --dry-run` as a process on a pipe, while pip waits on the slow index: the
    index is released as soon as stderr shows a heartbeat (or after 5 s without one)."""
    _SlowIndex.release.clear()
    env = {**os.environ, "PIP_INDEX_URL": index, "ASCENDPATCH_HEARTBEAT": "0.3"}
    proc = subprocess.Popen([sys.executable, "-m", "ascendpatch", *options, "--python",
                             str(python), "install", "six", "--dry-run"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            stdin=subprocess.DEVNULL)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "still running" in line:
            _SlowIndex.release.set()
    return proc, "".join(seen)


@pytest.mark.integration
def test_pip_waiting_on_an_index_says_it_is_alive_off_a_terminal(
        tmp_path: Path, slow_index: str) -> None:
    python = wheels.make_venv(tmp_path / "venv")
    proc, err = _install(python, slow_index)
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode == 1, out + err  # the index has no six
    beats = [BEAT.fullmatch(line) for line in err.splitlines() if "still running" in line]
    # pip's, or uv's when ascendpatch[fast] is installed (--resolver auto)
    assert beats and all(b is not None and b["label"].startswith(
        ("pip install --dry-run", "uv pip install --dry-run")) for b in beats), err
    assert "still running" not in out

    quiet, err = _install(python, slow_index, "--json")
    doc = quiet.communicate(timeout=300)[0]
    assert "still running" not in err + doc and doc.startswith("{")
