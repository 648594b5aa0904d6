"""`ascendpatch serve` without a server (fast tier): the real CLI's refusals, the pid file and
log guards, the stage shown while starting. The real vLLM server's runs are in
tests/test_serve_realserver.py."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ascendpatch.deploy import procs, serve_start, serve_supervise, smoke
from ascendpatch.errors import InvalidInputError
from tests.kit import run_cli, seconduid, write_manifest
from tests.kit.pipes import non_blocking_pipe, read_slowly


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
        for _ in range(200):  # (until the child has exec'd: before, /proc shows our argv)
            if b"vllm" in Path(f"/proc/{fake.pid}/cmdline").read_bytes():
                break
            time.sleep(0.025)
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


@pytest.fixture()
def sticky() -> Iterator[Path]:
    """A folder like /tmp (1777) that uid 65534 can plant things in."""
    with seconduid.open_folder("ascendpatch-serve-log-") as folder:
        folder.chmod(0o1777)
        yield folder


def test_a_fifo_planted_at_the_log_path_is_refused_not_waited_on(sticky: Path) -> None:
    log = sticky / "s.log"
    planted = seconduid.run("mkfifo", log)
    assert planted.returncode == 0, planted.stderr
    reader = os.open(log, os.O_RDONLY | os.O_NONBLOCK)  # with a reader, main's open returns
    try:
        with pytest.raises(InvalidInputError, match="not a regular file"):
            os.close(serve_start.open_log(log))
    finally:
        os.close(reader)
    said: list[BaseException] = []

    def opening() -> None:  # no reader: main's blocking open never returned
        try:
            os.close(serve_start.open_log(log))
        except InvalidInputError as exc:
            said.append(exc)
    thread = threading.Thread(target=opening, daemon=True)
    thread.start()
    thread.join(60)  # a hang guard, not a timing assertion
    assert not thread.is_alive() and "FIFO" in str(said[0])


def test_a_file_another_uid_planted_at_the_log_path_gets_nothing(sticky: Path) -> None:
    log = sticky / "s.log"
    planted = seconduid.run("sh", "-c", f"echo theirs > {log}")
    assert planted.returncode == 0, planted.stderr
    with pytest.raises(InvalidInputError, match=f"owned by uid {seconduid.NOBODY}"):
        os.close(serve_start.open_log(log))
    assert log.read_text() == "theirs\n"


def test_a_log_swapped_before_the_watch_opens_it_ends_the_wait_at_once(sticky: Path) -> None:
    """serve opens its log, then watches it by name: a file another uid put there in between
    is not read, and the start is not waited on for --ready-timeout (30 min) in silence: the
    wait ends at once, saying why, and serve then stops what it started."""
    log = sticky / "s.log"
    planted = seconduid.run("sh", "-c", f"echo theirs > {log}")
    assert planted.returncode == 0, planted.stderr
    server = subprocess.Popen(["sleep", "600"], start_new_session=True)
    endpoint = smoke.Endpoint("http", "127.0.0.1", 9, "")
    said: list[serve_start.Outcome] = []
    try:
        waiting = threading.Thread(target=lambda: said.append(
            serve_start.wait_ready(server, log, endpoint, 1800.0)), daemon=True)
        waiting.start()
        waiting.join(60)  # a hang guard, not a timing assertion
        assert said, "wait_ready waited on a log it cannot read"
    finally:
        server.kill()
        server.wait()
    outcome = said[0]
    assert not outcome.ready and outcome.exit_code is None
    assert f"owned by uid {seconduid.NOBODY}" in outcome.unwatched, outcome


def test_the_log_watch_reads_what_it_opened_not_what_the_name_is_later(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    os.close(serve_start.open_log(log))
    watch = serve_start.LogWatch(log)
    log.rename(tmp_path / "old.log")
    (tmp_path / "s.log").write_text(f"{serve_start.READY_MARKER}\n")
    watch.poll()
    assert not watch.ready
    (tmp_path / "old.log").write_text(f"INFO 12-01 10:00:00 [x] {serve_start.READY_MARKER}\n")
    watch.poll()
    watch.close()
    assert watch.ready


def test_another_users_runtime_dir_is_not_used_nor_a_folder_in_it(tmp_path: Path) -> None:
    with seconduid.open_folder() as parent:
        theirs = seconduid.home_for_nobody(parent)
        assert serve_start.runtime_dir({"XDG_RUNTIME_DIR": str(theirs)}) == \
            Path("/run/ascendpatch")  # su and sudo -E keep the other user's
        with pytest.raises(InvalidInputError, match=f"owned by uid {seconduid.NOBODY}"):
            serve_start.private_dir(theirs / "ascendpatch")
        (theirs / "made").mkdir(0o700)  # root's own 0700 folder, in their folder
        with pytest.raises(InvalidInputError, match=f"owned by uid {seconduid.NOBODY}"):
            serve_start.private_dir(theirs / "made")
        moved = seconduid.run("mv", theirs / "made", theirs / "gone")
        assert moved.returncode == 0, moved.stderr  # the danger is real: uid 65534 did it
    assert serve_start.runtime_dir({"XDG_RUNTIME_DIR": str(tmp_path)}) == \
        tmp_path / "ascendpatch"


@contextlib.contextmanager
def _group(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A leader that exits at once (code 3) and leaves a member of its group running."""
    process = serve_start.spawn(["sh", "-c", "sleep 60 & exit 3"], dict(os.environ),
                                tmp_path / "g.log")
    try:
        yield process
    finally:
        serve_start.stop_group(process, grace=1.0)


def _leader_is_a_zombie(pid: int) -> bool:
    proc = procs.read(pid)
    return proc is not None and proc.zombie


def test_the_leader_stays_unreaped_until_its_group_is_stopped(tmp_path: Path) -> None:
    """A zombie leader keeps its group's id: killpg can never reach a group that took it."""
    endpoint = smoke.Endpoint("http", "127.0.0.1", 9, "")
    with _group(tmp_path) as process:
        outcome = serve_start.wait_ready(process, tmp_path / "g.log", endpoint, 60.0)
        assert outcome.exit_code == 3 and _leader_is_a_zombie(process.pid)
        assert serve_start.members(process.pid)  # the sleep still runs in the group
        serve_start.stop_group(process, grace=1.0)
        assert procs.read(process.pid) is None and not serve_start.members(process.pid)


def test_the_reaper_keeps_the_leader_for_last(tmp_path: Path) -> None:
    with _group(tmp_path) as process:
        reaper = serve_supervise.Reaper(process)
        while process.returncode is None:
            reaper()
            serve_supervise._pause()
        assert process.returncode == 3 and _leader_is_a_zombie(process.pid)
        serve_start.stop_group(process, grace=1.0, reap=reaper)
        assert procs.read(process.pid) is None and process.returncode == 3


def test_supervise_passes_the_code_through_and_stops_the_group_left(tmp_path: Path) -> None:
    with _group(tmp_path) as process:
        code, left = serve_supervise.supervise(process, serve_supervise.Reaper(process), 1.0)
        assert code == 3 and len(left) == 1  # the background sleep (or its shell before exec)
        assert procs.read(process.pid) is None and not serve_start.members(process.pid)


def test_a_server_killed_by_a_signal_has_the_shells_code_on_every_path(tmp_path: Path) -> None:
    """128 + N for signal N (137 for a KILL), as docs/serving.md says and a shell reports it:
    on c1737ba a death while starting said "exited with code -9" (waitid's and Popen's -N)
    while the supervisor's reaper said 137, and a leader Popen had reaped made serve exit -9
    (247 to the shell)."""
    endpoint = smoke.Endpoint("http", "127.0.0.1", 9, "")
    killed = ["sh", "-c", "kill -KILL $$"]
    process = serve_start.spawn(killed, dict(os.environ), tmp_path / "a.log")
    try:  # seen unreaped (waitid, WNOWAIT)
        assert serve_start.wait_ready(process, tmp_path / "a.log", endpoint, 60.0).exit_code \
            == 137
    finally:
        serve_start.stop_group(process, grace=1.0)
    assert process.returncode == 137
    process = serve_start.spawn(killed, dict(os.environ), tmp_path / "b.log")
    process.wait()  # reaped by Popen: its returncode is -9
    assert serve_start.wait_ready(process, tmp_path / "b.log", endpoint, 60.0).exit_code == 137
    assert serve_supervise.supervise(process, serve_supervise.Reaper(process), 1.0)[0] == 137
    process = serve_start.spawn(killed, dict(os.environ), tmp_path / "c.log")
    assert serve_supervise.supervise(process, serve_supervise.Reaper(process), 1.0)[0] == 137


def test_a_foreground_servers_echo_on_a_full_non_blocking_pipe_is_whole(tmp_path: Path) -> None:
    """serve --foreground shows the server's output as it logs it. On a pipe another process
    made non-blocking (a CI runner's), read slowly, the echo waits for room and is whole, as
    the log is; before, each chunk the pipe could not take at once was dropped without a
    word (here 230 KB of the server's output shown as its first few KiB)."""
    lines = "import sys\nfor i in range(5000): print(f'INFO line {i:05d} ' + 'x' * 30)\n"
    expected = "".join(f"INFO line {i:05d} {'x' * 30}\n" for i in range(5000)).encode()
    with read_slowly() as (write, got):
        process = serve_start.spawn([sys.executable, "-c", lines], dict(os.environ),
                                    tmp_path / "s.log", echo=write)
        assert process.wait(timeout=60) == 0
        deadline = time.monotonic() + 60  # (the echo's thread writes on after the exit)
        while len(got) < len(expected) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # (nothing more comes)
    assert (tmp_path / "s.log").read_bytes() == expected
    assert bytes(got) == expected


@pytest.mark.parametrize(("blocking", "name"), [(False, "s.log"), (True, "s.log"),
                                               (False, os.fsdecode(b"s\xff\x1b.log"))])
def test_a_foreground_terminal_that_stops_reading_never_holds_the_server(
        tmp_path: Path, blocking: bool, name: str) -> None:
    """A terminal that stops reading (a hung session; a pipe no one reads, made non-blocking
    or not) never holds the log or the server: the server writes 6 MB and exits, the log has
    all of it, and the echo shows what it could hold (serve_start.ECHO_HELD), then where
    what it did not show is, the log's name made printable (one that is not UTF-8 killed
    the tee, and the server with it). Before, the log and the server waited with the echo
    (the server killed as 'did not start' when the ready line never reached the log)."""
    read, write = non_blocking_pipe(4096)
    os.set_blocking(write, blocking)
    log = tmp_path / name
    lines = "for i in range(6000): print(f'INFO line {i:05d} ' + 'x' * 1000)\nprint('READY')\n"
    expected = "".join(f"INFO line {i:05d} {'x' * 1000}\n" for i in range(6000)) + "READY\n"
    got = bytearray()

    def to_the_end() -> None:
        while chunk := os.read(read, 1 << 16):
            got.extend(chunk)

    reader = threading.Thread(target=to_the_end)
    try:
        process = serve_start.spawn([sys.executable, "-c", lines], dict(os.environ), log,
                                    echo=write)
        assert process.wait(timeout=60) == 0 and process.tee is not None
        process.tee.thread.join(60)  # (the server's output read to its end)
        assert log.read_text() == expected
        reader.start()  # (the terminal reads again: the echo shows what it held, and the rest)
        process.tee.echo.thread.join(60)
        assert not process.tee.echo.thread.is_alive()
    finally:
        os.close(write)
        if reader.ident is not None:
            reader.join()
        os.close(read)
    # what it held, a note where what it could not hold was (on a line of its own), ...
    parts = re.split(r"\n\[ascendpatch\] (\d+) bytes of the server's output not shown here "
                     r"\(the terminal did not keep up\): read .*?\.log\n", bytes(got).decode())
    assert len(parts) > 1 and len(parts[0]) <= serve_start.ECHO_HELD + 65536
    at = 0
    for index, part in enumerate(parts):
        if index % 2:
            at += int(part)  # (a note's count: what it did not show there)
        else:
            assert expected[at:at + len(part)] == part
            at += len(part)
    assert at == len(expected)


_CHATTY = """import sys
for i in range(3000):
    print(f"INFO line {i:05d} " + "x" * 200)
print("Traceback (most recent call last): THE LAST LINE")
sys.exit(7)
"""


def test_a_foreground_servers_last_words_are_shown_before_ascendpatchs(
        target: list[str], tmp_path: Path) -> None:
    """serve --foreground on a terminal slower than the server (read at 200 KB/s): the server
    dies after 620 KB, and every line of it is shown, its last (the traceback a user needs)
    included, before ascendpatch's own lines say it did not start. The echo holds what the
    terminal has not taken yet; before, the run's end dropped it (514 of 3000 lines shown,
    not the last), and ascendpatch's lines came in the middle of the server's."""
    (tmp_path / "server.py").write_text(_CHATTY)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with read_slowly() as (write, got):
        done = subprocess.run(
            [sys.executable, "-m", "ascendpatch", "--color", "never", *target, "serve",
             "--foreground", "--force", "--log", str(tmp_path / "s.log"), "--pidfile",
             str(tmp_path / "s.pid"), "--ready-timeout", "60", "--", sys.executable,
             str(tmp_path / "server.py")], stdout=write, stderr=subprocess.PIPE, env=env,
            timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    lines = bytes(got).decode().splitlines()
    server = [line for line in lines if not line.startswith(("[", "serve:"))]
    assert server == [f"INFO line {i:05d} {'x' * 200}" for i in range(3000)] + [
        "Traceback (most recent call last): THE LAST LINE"]
    assert lines.index(server[-1]) == len(lines) - 3  # then [FAIL] ... and the summary
    assert lines[-1] == "serve: the server did not start; nothing is left running"


def test_an_echo_given_up_on_at_the_end_writes_nothing_after_its_note(tmp_path: Path) -> None:
    """A terminal more than serve_start.ECHO_DRAIN behind when the server is gone: the echo
    stops (at most the piece it was writing still goes), a note says how much it did not
    show, and ascendpatch's own lines come after. Before, the echo's thread wrote on after
    them (180 KB here) and the note was lost in the full pipe."""
    from ascendpatch.fdwrite import write_all

    with read_slowly(65536, blocking=True, piece=4096, pause=0.05) as (write, got):
        echo = serve_start._Echo(write, tmp_path / "s.log")
        for i in range(20):
            echo.put(bytes([65 + i]) * 65536)
        echo.close()
        echo.finish(0.5)
        write_all(write, b"OWN LINE\n")
        time.sleep(0.5)
    text = bytes(got).decode()
    shown, note, after = re.fullmatch(
        r"(.*)\n\[ascendpatch\] (\d+) bytes of the server's output not shown here \(the "
        r"terminal did not keep up\): read .*s\.log\n(.*)", text, re.DOTALL).groups()  # type: ignore[union-attr]
    before_own, _, after_own = after.partition("OWN LINE\n")
    assert len(shown) + len(before_own) + len(after_own) + int(note) == 20 * 65536
    assert len(before_own) + len(after_own) <= 4096  # (the piece it was writing)
