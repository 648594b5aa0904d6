"""Start ``vllm serve`` for ``ascendpatch serve`` and wait until it is ready.

The server is a new session and process-group leader (its PID is its group's: the pid file
names the whole group), with no terminal and its output in the log file. Ready means both
``Application startup complete`` in the log and ``GET /v1/models`` answering 200: the first
start compiles for minutes ("don't call it dead too early"), so only the process's death or
the ready timeout ends the wait.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import re
import select
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ascendpatch import progress
from ascendpatch.deploy import procs, serve_env, smoke
from ascendpatch.deploy.launch import flag_value
from ascendpatch.deploy.text import printable
from ascendpatch.errors import InvalidInputError
from ascendpatch.fdwrite import write_all, write_within
from ascendpatch.paths import NotRegularFileError, foreign_owner, open_regular, open_to_others
from ascendpatch.store.atomic import write_atomic

READY_MARKER = "Application startup complete"
DEFAULT_PORT = 8000  # vllm serve's own default
STOP_GRACE = 10.0
POLL = 0.5
TAIL_BYTES = 64 * 1024
_PREFIX = re.compile(r"^(?:\([^)]*\)\s*)?(?:[A-Z]+\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s*)?"
                     r"(?:\[[^\]]*\]\s*)?")


def port_of(argv: Sequence[str]) -> int:
    value = flag_value(argv, "--port")
    try:
        port = int(value) if value is not None else DEFAULT_PORT
    except ValueError:
        raise InvalidInputError(f"--port {printable(str(value))} of the serve command is not a "
                                "number") from None
    if not 0 < port < 65536:
        raise InvalidInputError(f"--port {port} of the serve command is not a TCP port")
    return port


def host_of(argv: Sequence[str]) -> str:
    host = flag_value(argv, "--host")
    return "127.0.0.1" if host in (None, "", "0.0.0.0", "::") else str(host)


def runtime_dir(env: Mapping[str, str]) -> Path:
    """$XDG_RUNTIME_DIR/ascendpatch when that is a folder (not a link) of the effective uid
    (``su`` and ``sudo -E`` keep another user's), else /run/ascendpatch."""
    base = env.get("XDG_RUNTIME_DIR")
    try:
        info = os.lstat(base) if base else None
    except OSError:
        info = None
    ours = info is not None and stat.S_ISDIR(info.st_mode) and \
        foreign_owner(info, root_ok=False) is None
    return Path(str(base)) / "ascendpatch" if ours else Path("/run/ascendpatch")


def _refuse_folder(folder: Path, why: str) -> InvalidInputError:
    return InvalidInputError(f"{folder} is not a folder of yours that only you can write "
                             f"({why})", fix="remove it, or pass --pidfile and --log elsewhere")


def private_dir(folder: Path) -> Path:
    """``folder`` created (mode 0700) or checked: ours, no other user may write it, and no
    other user can replace it or a folder above it (``serve_env.walk_problem``)."""
    existing = next(p for p in (folder, *folder.parents) if os.path.lexists(p))
    _, problem = serve_env.walk_problem(existing)
    if problem is None:
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700, parents=True)
        _, problem = serve_env.walk_problem(folder)
    if problem is not None:
        raise _refuse_folder(folder, problem)
    info = folder.lstat()
    why = foreign_owner(info, root_ok=False) or open_to_others(info) \
        if stat.S_ISDIR(info.st_mode) else f"not a folder (mode {stat.filemode(info.st_mode)})"
    if why is not None:
        raise _refuse_folder(folder, f"it is {why}")
    return folder


def running_pid(pidfile: Path) -> int | None:
    """The live vLLM server a pid file names (None: no file, or it names no live server)."""
    try:
        handle, _ = open_regular(pidfile, follow_links=False)
    except (OSError, NotRegularFileError):  # an unreadable file names no server
        return None
    with handle:
        text = handle.read(64).decode("ascii", errors="replace").strip()
    proc = procs.read(int(text)) if text.isdigit() and 1 < int(text) < 1 << 22 else None
    return proc.pid if proc is not None and proc.is_vllm_server and not proc.zombie else None


def write_pidfile(pidfile: Path, pid: int) -> None:
    write_atomic(pidfile, f"{pid}\n".encode(), 0o644)


def _open_own(path: Path, flags: int) -> int:
    """``path`` opened without following a link or waiting (a FIFO planted at its name would
    block the open forever), then checked on the descriptor: a regular file of ours."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY,
                     0o640)
    except OSError as exc:
        why = "a FIFO or socket, not a regular file" if exc.errno == errno.ENXIO else \
            exc.strerror
        raise InvalidInputError(f"--log {path} cannot be written ({why})",
                                fix="remove it, or pass another --log") from None
    info = os.fstat(fd)
    why = foreign_owner(info, root_ok=False) if stat.S_ISREG(info.st_mode) else \
        "not a regular file"
    if why is not None:
        os.close(fd)
        raise InvalidInputError(f"--log {path} cannot be written (it is {why})",
                                fix="remove it, or pass another --log")
    os.set_blocking(fd, True)
    return fd


def open_log(path: Path) -> int:
    """A new log file, emptied: a link, a FIFO or another user's file planted at its name is
    refused, exit 2 (:func:`_open_own`)."""
    fd = _open_own(path, os.O_WRONLY | os.O_CREAT)
    os.ftruncate(fd, 0)
    return fd


ECHO_HELD = 4 << 20  # bytes the echo may fall behind the log before what comes is not shown
ECHO_DRAIN = 5.0  # seconds the terminal gets, once the server is gone, to show what is held


class _Echo:
    """The server's output on the foreground's terminal, on a thread of its own: a terminal
    that stops reading (a paused or hung session, a pipe no one reads) never holds the log
    or the server, which vLLM run directly there would not be held by either (its writes
    fail, and it goes on). Up to ECHO_HELD bytes of it wait for the terminal; past them,
    chunks are not shown, and a note where they were says how much and where to read it."""

    def __init__(self, fd: int, log: Path) -> None:
        self.fd = fd
        self.where = printable(str(log))  # (a name that is not UTF-8, a control character)
        # (a note of what was not shown before it, and a chunk of the server's output)
        self.queue: queue.SimpleQueue[tuple[bytes, bytes] | None] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.held = 0  # bytes of the server's output queued and not yet handed to a write
        self.dropped = 0  # bytes not shown since the last chunk queued (the tee's alone)
        self.stopped = False  # finish gave up on the terminal: nothing more is written
        self.thread = threading.Thread(target=self._show, daemon=True)
        self.thread.start()

    def put(self, chunk: bytes) -> None:
        """``chunk`` to be shown, after the note of what was not, if anything was."""
        with self.lock:
            if self.held + len(chunk) > ECHO_HELD:
                self.dropped += len(chunk)
                return
            self.held += len(chunk)
        self.queue.put((self._note(self.dropped), chunk))
        self.dropped = 0

    def close(self) -> None:
        """The end of the output: the note of what was not shown last, if anything was."""
        self.queue.put((self._note(self.dropped), b""))
        self.queue.put(None)

    def finish(self, seconds: float) -> None:
        """What is held shown within ``seconds`` (ascendpatch's own last lines come after
        it, and the process's end would drop it). A terminal that has not taken it all by
        then gets nothing more but a note of how much it did not show (given a second for
        room: a terminal that takes nothing at all does not get it)."""
        self.thread.join(seconds)
        with self.lock:
            if not self.thread.is_alive():
                return
            self.stopped = True
            left = self.held
        write_within(self.fd, self._note(left), 1.0)

    def _note(self, count: int) -> bytes:
        if not count:
            return b""
        # (on a line of its own: the chunk before it may have ended in the middle of one)
        return (f"\n[ascendpatch] {count} bytes of the server's output not shown here (the "
                f"terminal did not keep up): read {self.where}\n").encode()

    def _show(self) -> None:
        while (item := self.queue.get()) is not None:
            note, chunk = item
            for part, output in _pieces(note, chunk):
                with self.lock:
                    if self.stopped:
                        return
                    self.held -= len(part) if output else 0
                with contextlib.suppress(OSError):  # (a closed terminal: the log goes on)
                    write_all(self.fd, part)


def _pieces(note: bytes, chunk: bytes) -> list[tuple[bytes, bool]]:
    """The note, then the chunk a pipe's atomic size at a time, each with whether it is the
    server's output: the echo stops between two of them when finish gives up (so its note
    never lands inside a piece)."""
    return [(note, False)] * bool(note) + [(chunk[i:i + select.PIPE_BUF], True)
                                           for i in range(0, len(chunk), select.PIPE_BUF)]


class _Tee:
    """The server's output into its log, whole (fdwrite: a short write lost the rest of a
    chunk), and to the echo. Nothing stops the reading: a log that fails (a full disk) or an
    echo that does, so the server is never left blocked on its output."""

    def __init__(self, source: IO[bytes], log: int, echo: _Echo) -> None:
        self.echo = echo
        self.thread = threading.Thread(target=self._run, args=(source, log), daemon=True)
        self.thread.start()

    def _run(self, source: IO[bytes], log: int) -> None:
        with source:
            for chunk in iter(lambda: os.read(source.fileno(), 65536), b""):
                with contextlib.suppress(OSError):
                    write_all(log, chunk)
                with contextlib.suppress(Exception):  # (a courtesy: never the log's end)
                    self.echo.put(chunk)
        os.close(log)
        self.echo.close()

    def finish(self, seconds: float) -> None:
        """The server's output read to its end and shown (:meth:`_Echo.finish`) within
        ``seconds``."""
        deadline = time.monotonic() + seconds
        self.thread.join(seconds)
        self.echo.finish(max(0.0, deadline - time.monotonic()))


class Server(subprocess.Popen[bytes]):
    """The server's process; with --foreground, the tee of its output (:func:`echo_done`)."""

    tee: _Tee | None = None


def echo_done(process: Server, seconds: float = ECHO_DRAIN) -> None:
    """Once the server's group is gone, before ascendpatch's own last lines: what the echo
    holds shown, within ``seconds``."""
    if process.tee is not None:
        process.tee.finish(seconds)


def spawn(argv: Sequence[str], env: Mapping[str, str], log: Path,
          echo: int | None = None) -> Server:
    """``argv`` as a new session's leader, stdout and stderr to ``log`` (and to the file
    descriptor ``echo`` too, when given)."""
    fd = open_log(log)
    try:
        process = Server(list(argv), env=dict(env), stdin=subprocess.DEVNULL,
                         stdout=fd if echo is None else subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        os.close(fd)
        raise InvalidInputError(f"cannot start {printable(argv[0])} ({exc.strerror})",
                                fix="check the serve command after --") from None
    if echo is None:
        os.close(fd)
    else:
        assert process.stdout is not None
        process.tee = _Tee(process.stdout, fd, _Echo(echo, log))
    return process


def stage(line: str) -> str:
    """What a log line says the server is doing, without vLLM's prefix."""
    text = printable(_PREFIX.sub("", line.strip()))
    return text if len(text) <= 70 else text[:69] + "…"


class LogWatch:
    """The log as the server writes it: whether the ready marker came, the last line."""

    def __init__(self, path: Path) -> None:
        self.offset, self.ready, self.last, self._rest = 0, False, "", b""
        self.refused = ""  # why the log could not be opened: the start cannot be watched
        try:  # once, checked like the writer's (a name swapped later is not read)
            self.fd: int | None = _open_own(path, os.O_RDONLY)
        except InvalidInputError as exc:
            self.fd, self.refused = None, str(exc)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def poll(self) -> None:
        if self.fd is None:
            return
        data = os.pread(self.fd, TAIL_BYTES, self.offset)
        self.offset += len(data)
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()[-TAIL_BYTES:]
        for raw in lines:
            line = raw.decode("utf-8", errors="replace").rstrip("\r")
            if line.strip():
                self.last = line
            self.ready = self.ready or READY_MARKER in line


@dataclass(frozen=True)
class Outcome:
    ready: bool
    seconds: float
    exit_code: int | None = None  # the server exited before it was ready (None: it did not)
    stage: str = ""
    unwatched: str = ""  # why its log could not be read (then it is not waited for)


def wait_ready(process: subprocess.Popen[bytes], log: Path, endpoint: smoke.Endpoint,
               timeout: float, reap: Callable[[], None] = lambda: None,
               sleep: Callable[[float], None] = time.sleep) -> Outcome:
    """Wait for the marker and /v1/models, the process's exit, or ``timeout`` seconds."""
    watch, start = LogWatch(log), time.monotonic()
    shown = ""
    task: contextlib.ExitStack = contextlib.ExitStack()
    if watch.refused:  # the name was swapped since serve opened it: nothing to wait on
        return Outcome(False, 0.0, None, "", watch.refused)
    with task, contextlib.closing(watch):
        while True:
            reap()
            watch.poll()
            elapsed = time.monotonic() - start
            code = shell_code(process.returncode) if process.returncode is not None \
                else exited(process.pid)
            if code is not None:  # left unreaped: its zombie keeps the group's id ours
                return Outcome(False, elapsed, code, stage(watch.last))
            if watch.ready and smoke.models(endpoint, 5.0)[0].ok:
                return Outcome(True, elapsed, None, stage(watch.last))
            if elapsed > timeout:
                return Outcome(False, elapsed, None, stage(watch.last))
            now = stage(watch.last) or "starting"
            if now != shown:  # a progress line per stage: elapsed so far, what it does
                shown = now
                task.close()
                task = contextlib.ExitStack()
                task.enter_context(progress.task(f"vllm serve, {elapsed:.0f} s: {now}"))
            sleep(POLL)


def stop_group(process: subprocess.Popen[bytes], grace: float = STOP_GRACE,
               reap: Callable[[], None] = lambda: None) -> list[procs.Proc]:
    """TERM the server's group, KILL what is left after ``grace``, until no member is left
    (its EngineCore outlives a killed API server: pit 2); returns the members found."""
    group = process.pid
    found = members(group)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        if not members(group) and exited(group) is None and process.returncode is not None:
            break  # the leader is reaped and the group empty: its id may be another's now
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, sig)
        deadline = time.monotonic() + wait
        while members(group) and time.monotonic() < deadline:
            reap()
            time.sleep(0.1)
    reap_leader(process)
    return found


def exited(pid: int) -> int | None:
    """The exit code of our child ``pid`` once it has ended (:func:`shell_code`), without
    reaping it: as long as its zombie is there, no other process or group can take its id."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None
    if info is None or info.si_pid == 0:
        return None
    return waited_code(info)


# An exit code as a shell reports it is the one convention serve shows and exits with: a
# process ended by signal N is 128 + N (137 for a KILL), never Popen's -N.
def waited_code(info: os.waitid_result) -> int:
    """The exit code of a ``waitid`` answer: its exit status, or 128 + N for signal N."""
    return info.si_status if info.si_code == os.CLD_EXITED else 128 + info.si_status


def shell_code(returncode: int) -> int:
    """Popen's ``returncode`` (-N for signal N) as a shell reports it."""
    return 128 - returncode if returncode < 0 else returncode


def reap_leader(process: subprocess.Popen[bytes]) -> None:
    """Reap the server's leader, last, once its group is stopped; its code kept."""
    code = exited(process.pid)
    if code is None:
        process.poll()
        return
    with contextlib.suppress(ChildProcessError):
        os.waitpid(process.pid, 0)
    if process.returncode is None:
        process.returncode = code


def members(group: int) -> list[procs.Proc]:
    """The processes of ``group`` that still run (zombies do not count)."""
    return [p for p in procs.all_procs() if p.pgid == group and not p.zombie]
