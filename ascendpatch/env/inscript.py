"""The one seam for running code inside the *target* interpreter.

Every script (introspection, operator probes, the plugin registry check, scale counting) is
stdlib-only Python 3.8+ and prints one JSON document as its last line. This module runs it with
``python -B -c`` (a read-only command writes nothing: no ``__pycache__`` of the target's own
modules, root-owned, appears in its site-packages), after a preamble that removes the
caller's working directory from sys.path (the target's view, and its imports, must not depend
on where the user stands: a checkout's .egg-info or a folder named torch_npu would otherwise
leak in).

Everything else the product runs as ``python -m MODULE`` (pip, venv) goes through
:func:`module_argv` for the same reason, and more: ``-m`` and ``-c`` put the current folder
first on sys.path, and root running ascendpatch from /tmp or another user's folder would
otherwise run that user's ``json.py``, ``pip.py`` or ``runpy.py`` as uid 0 (docs/security.md).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import selectors
    import subprocess

PREAMBLE = (
    "import os as _ap_os, sys as _ap_sys\n"
    "if _ap_sys.path and _ap_sys.path[0] in ('', _ap_os.getcwd()):\n"
    "    del _ap_sys.path[0]\n"
)
_RUN_MODULE = "import runpy\nrunpy.run_module({!r}, run_name='__main__', alter_sys=True)\n"
_MODULE_RUN = re.compile(r"import runpy\nrunpy\.run_module\('([\w.]+)', .*\n", re.DOTALL)
_RUN_FILE = ("import runpy\n_ap_sys.argv[:] = _ap_sys.argv[1:]\n"
             "runpy.run_path(_ap_sys.argv[0], run_name='__main__')\n")


def code_argv(python: str | Path, script: str, args: Sequence[str] = ()) -> list[str]:
    """``python -B -c script args`` after the preamble: the caller's folder is not on
    sys.path, no ``__pycache__`` is written."""
    return [str(python), "-B", "-c", PREAMBLE + script, *args]


def module_argv(python: str | Path, module: str, args: Sequence[str] = ()) -> list[str]:
    """``python -m module args`` as it runs here: ``-c`` with the preamble, then runpy runs
    the module as ``__main__`` (sys.argv[0] its file, as ``-m`` sets it), so neither runpy
    nor the module nor anything they import can come from the caller's folder."""
    return [str(python), "-c", PREAMBLE + _RUN_MODULE.format(module), *args]


def file_argv(python: str | Path, path: Path, args: Sequence[str] = ()) -> list[str]:
    """``python path args`` as it runs here: :func:`code_argv` with runpy running the file
    as ``__main__`` (sys.argv[0] its path), the caller's folder not on sys.path."""
    return code_argv(python, _RUN_FILE, [str(path), *args])


def shown(argv: Sequence[str]) -> list[str]:
    """``argv`` as a user would type it (-v output): a :func:`module_argv` command is shown
    as ``python -m module args``, a :func:`file_argv` one as ``python path args``."""
    if len(argv) > 2 and argv[1] == "-c" and argv[2].startswith(PREAMBLE):
        run = _MODULE_RUN.fullmatch(argv[2][len(PREAMBLE):])
        if run:
            return [argv[0], "-m", run.group(1), *argv[3:]]
    if len(argv) > 4 and list(argv[1:3]) == ["-B", "-c"] and argv[3] == PREAMBLE + _RUN_FILE:
        return [argv[0], *argv[4:]]
    return list(argv)


BRIEF_CHARS = 200


def brief(python: Path) -> str:
    """An interpreter's path for a one-line message: a name too long to look up (thousands
    of characters) is cut, saying how long it was."""
    text = str(python)
    if len(text) <= BRIEF_CHARS:
        return text
    return f"{text[:BRIEF_CHARS - 3]}... ({len(text)} characters)"


class ScriptError(Exception):
    """The script could not run or printed no JSON; ``str()`` says why in one line."""


class ScriptTimeout(ScriptError):
    """The interpreter ran but did not answer in time (it is a program that runs, at least)."""


# An answer is one JSON document of a few kilobytes (introspection of a 600-distribution
# environment: under 100 KiB); what the target prints beyond this is not an answer, and is not
# held in memory (nor its parse: JSON of small objects takes ~35 times its size). Of its
# standard error, only the end is kept: its last line, cut to MESSAGE_CHARS, says what failed.
ANSWER_LIMIT = 4 * 1024 * 1024
ERROR_TAIL = 64 * 1024
MESSAGE_CHARS = 300
# Once the script has exited, how long a process it left holding our pipes (a daemon a
# sitecustomize started) may keep them before the answer is taken as it stands.
EXIT_GRACE = 0.5
_POLL = 0.05


class _AnswerTooLarge(Exception):
    pass


def _exited(pid: int) -> bool:
    """Whether our child ``pid`` has exited, without reaping it (its pid, and its group's id,
    stay its own: :meth:`Running._kill` may still signal them)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _collect(proc: subprocess.Popen[bytes], timeout: float) -> tuple[bytes, bytes, bool]:
    """``communicate`` with bounds: standard output up to ANSWER_LIMIT (more raises
    _AnswerTooLarge), the last ERROR_TAIL bytes of standard error, both read until they end or,
    once the script has exited, for EXIT_GRACE more; the script must exit within ``timeout``
    (else ``subprocess.TimeoutExpired``). The flag: a process it left still holds the pipes.
    The script's exit is seen through a pidfd in the same wait as the pipes (Linux 5.3), or
    else by asking every _POLL seconds."""
    import selectors
    import subprocess
    import time

    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + timeout
    grace_ends: float | None = None
    out, err = bytearray(), bytearray()
    exit_fd = _pidfd(proc.pid)
    try:
        with selectors.DefaultSelector() as pipes:
            pipes.register(proc.stdout, selectors.EVENT_READ, out)
            pipes.register(proc.stderr, selectors.EVENT_READ, err)
            if exit_fd is not None:
                pipes.register(exit_fd, selectors.EVENT_READ, None)
            while any(key.data is not None for key in pipes.get_map().values()):
                now = time.monotonic()
                if grace_ends is None and exit_fd is None and _exited(proc.pid):
                    grace_ends = now + EXIT_GRACE
                if grace_ends is not None and now >= grace_ends:
                    # what the pipes already hold is the answer's end (a pipe can hold more
                    # than one read: 1 MiB on 64 KiB-page kernels, or as F_SETPIPE_SZ made it)
                    drained = 0
                    while drained <= ANSWER_LIMIT and (ready := pipes.select(0)):
                        drained += sum(_take(pipes, key, out, err) for key, _ in ready)
                    return bytes(out), bytes(err), True
                if grace_ends is None and now >= deadline:  # (exited: the grace decides)
                    raise subprocess.TimeoutExpired(proc.args, timeout)
                wait = (deadline if grace_ends is None else grace_ends) - now
                if exit_fd is None and grace_ends is None:
                    wait = min(wait, _POLL)
                for key, _ in pipes.select(wait):
                    if key.data is None:  # the script has exited (not reaped: a zombie)
                        pipes.unregister(key.fileobj)
                        grace_ends = time.monotonic() + EXIT_GRACE
                    else:
                        _take(pipes, key, out, err)
    finally:
        if exit_fd is not None:
            os.close(exit_fd)
    proc.wait(max(deadline - time.monotonic(), 0))
    return bytes(out), bytes(err), False


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when our child ``pid`` exits (it reaps nothing), or
    None where the kernel or Python has none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # (Python before 3.9, a kernel before 5.3, ESRCH)
        return None


def _take(pipes: selectors.BaseSelector, key: selectors.SelectorKey, out: bytearray,
          err: bytearray) -> int:
    """One read from a ready pipe into its buffer (the end unregisters it); how many bytes."""
    chunk = os.read(key.fd, 1 << 16)
    if not chunk:
        pipes.unregister(key.fileobj)
        return 0
    key.data.extend(chunk)
    if len(out) > ANSWER_LIMIT:
        raise _AnswerTooLarge
    del err[:-ERROR_TAIL]
    return len(chunk)


def _message(err: bytes, returncode: int | None) -> str:
    """What failed, in one line: the last line the script wrote to standard error."""
    said = err.decode("utf-8", "replace").strip().splitlines()
    line = (said or [f"exit code {returncode}"])[-1]
    return line if len(line) <= MESSAGE_CHARS else line[:MESSAGE_CHARS - 3] + "..."


def bundled(name: str) -> str:
    """A script shipped beside this module, read as a plain file: importing
    importlib.resources and its readers costs 6-13 ms of start-up, before the target
    interpreter can be started. Through importlib.resources only when the package is not on
    a file system (a zip)."""
    try:
        return Path(__file__).with_name(name).read_text(encoding="utf-8")
    except OSError:
        from importlib.resources import files

        return files("ascendpatch.env").joinpath(name).read_text(encoding="utf-8")


def _unreaped(pid: int) -> bool:
    """Whether ``pid`` is still our child, running or exited and not yet reaped (nothing is
    reaped by asking)."""
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


class Running:
    """A script started in the target interpreter, by default in a process group of its own
    (``own_group``: a grandchild it leaves holding our pipes is stopped with it); ``json``
    waits for its answer. Starting first and waiting later lets the caller get on with its own
    start-up (imports) while the target interpreter runs. A script with no children of its
    own (pip's configuration reader) stays in the caller's group instead, so that a signal to
    the caller's group (``timeout``, a terminal's hangup) ends it too."""

    def __init__(self, python: Path, script: str, args: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, *, own_group: bool = True) -> None:
        self._start(python, code_argv(python, script, args), env, own_group)

    @classmethod
    def program(cls, argv: Sequence[str], env: Mapping[str, str] | None = None,
                cwd: str | None = None) -> Running:
        """Any program (``argv``, named by its first word in what is said), started and read
        as a script is, in a process group of its own."""
        running = cls.__new__(cls)
        running._start(Path(argv[0]), list(argv), env, True, cwd)
        return running

    def _start(self, python: Path, argv: list[str], env: Mapping[str, str] | None,
               own_group: bool, cwd: str | None = None) -> None:
        import subprocess  # (here: a repeat audit answers from caches and starts nothing)

        self.python = python
        self.own_group = own_group
        try:
            self.proc = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                start_new_session=own_group, env=dict(env) if env is not None else None,
                cwd=cwd)
        except FileNotFoundError:
            raise ScriptError(f"{brief(python)} does not exist") from None
        except OSError as exc:
            raise ScriptError(f"cannot run {brief(python)}: {exc}") from None

    def _kill(self) -> None:
        """Only while the child is unreaped (asked of the kernel: a SIGCHLD ignored lets it
        reap the child unseen), so its pid, and its group's id, cannot have been reused: its
        whole group when it has one of its own, else the child alone."""
        proc = self.proc
        if proc.returncode is not None or not _unreaped(proc.pid):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self.own_group:
                os.killpg(proc.pid, signal.SIGKILL)  # the group's id is the child's pid
            else:
                os.kill(proc.pid, signal.SIGKILL)

    def _end(self) -> None:
        """Kill (``_kill``), close our ends of its pipes and reap it: nothing more it, or a
        process it left holding those pipes, prints is read or waited for."""
        self._kill()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        self.proc.wait()

    def json(self, timeout: float = 120.0) -> dict[str, Any]:
        """The JSON object the script printed last. On timeout (or ^C) it is killed (its
        whole group when it has one of its own, so nothing the interpreter spawned is left
        behind and no grandchild keeps our pipes open)."""
        out, err = self.output(timeout)
        # (the answer is the target's: anything its site runs may print it, as deep or as
        # undecodable as it likes: untrusted.load_json bounds both)
        from ascendpatch.untrusted import NotJsonError, UntrustedDocumentError, load_json

        try:
            doc = load_json(out.strip().splitlines()[-1], "its answer")
        except (NotJsonError, IndexError):
            raise ScriptError(_message(err, self.proc.returncode)) from None
        except UntrustedDocumentError as exc:
            raise ScriptError(str(exc)) from None
        if not isinstance(doc, dict):
            raise ScriptError("the script printed no JSON object")
        return doc

    def output(self, timeout: float) -> tuple[bytes, bytes]:
        """What it printed (:func:`_collect`'s bounds), once it has exited and is reaped;
        ScriptTimeout or ScriptError (more than ANSWER_LIMIT) once it is killed."""
        import subprocess

        with self.proc as proc:
            try:
                out, err, left_behind = _collect(proc, timeout)
            except subprocess.TimeoutExpired:
                self._end()
                raise ScriptTimeout(f"{brief(self.python)} did not answer within "
                                    f"{timeout:.0f}s (it and every process of its group were "
                                    "killed)") from None
            except _AnswerTooLarge:
                self._end()
                raise ScriptError(f"{brief(self.python)} printed more than "
                                  f"{ANSWER_LIMIT // (1024 * 1024)} MiB instead of an answer "
                                  "(it and every process of its group were killed)") from None
            except BaseException:
                self._end()
                raise
            if left_behind:  # (what it started and left holding the pipes: its group's go)
                self._end()
        return out, err

    def stop(self) -> None:
        """Not wanted after all: the script (its group, when it has one of its own) is killed
        while it is unreaped (its pid, the group's id, is still its own, even once it has
        exited: a child it left holding our pipes goes too), then it is reaped."""
        with self.proc:
            self._end()


def stop_all(running: list[Running]) -> None:
    """Stop and reap every script of ``running``, emptying it; a second Ctrl-C while one is
    being stopped still stops the others."""
    try:
        while running:
            running[-1].stop()
            running.pop()
    finally:
        while running:
            with contextlib.suppress(Exception, KeyboardInterrupt):
                running.pop().stop()


def run_bounded(argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None,
                cwd: str | None = None) -> tuple[bytes, bytes, int]:
    """Any program run as a script is (in a process group of its own, standard input empty,
    its output in :func:`_collect`'s bounds): its standard output, the end of its standard
    error, its exit code. ScriptTimeout or ScriptError (more than ANSWER_LIMIT of output) once
    its whole group is killed."""
    running = Running.program(argv, env, cwd)
    out, err = running.output(timeout)
    return out, err, running.proc.returncode


def run_json(python: Path, script: str, args: Sequence[str] = (), timeout: float = 120.0,
             env: Mapping[str, str] | None = None) -> dict[str, Any]:
    return Running(python, script, args, env).json(timeout)
