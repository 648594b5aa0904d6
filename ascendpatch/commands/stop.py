"""``ascendpatch stop [--pidfile F | --pid N | --port P] [--grace SECONDS] [--all-vllm]
[--force-user]``."""

from __future__ import annotations

import errno
import re
from argparse import ArgumentParser, Namespace
from pathlib import Path

from ascendpatch.deploy import procs
from ascendpatch.deploy.stop import PID_MAX_LIMIT, REAP_WAIT, StopReport, stop
from ascendpatch.errors import InvalidInputError, RefusedError
from ascendpatch.paths import NotRegularFileError, foreign_owner, open_regular
from ascendpatch.results import CheckResult, CommandResult, Hint, Level, Phrase
from ascendpatch.shell import cliargs

PIDFILE_MAX = 64  # "4194303\n" with room for whitespace; anything longer is no pid file
_ASCII_PID = re.compile(r"[0-9]+", re.ASCII)


def _read_pidfile(pidfile: Path, force_user: bool = False) -> tuple[str, float]:
    """The pid file's text and when it was last written, refusing symbolic links, FIFOs,
    devices, large or binary files, and (unless ``force_user``) files another user owns: pid
    files often live in /tmp, where anyone can plant one. Its content is never echoed."""
    try:
        handle, info = open_regular(pidfile, follow_links=False)
    except NotRegularFileError:
        raise InvalidInputError(f"--pidfile {pidfile} is not a regular file",
                                fix="point --pidfile at the file the server's PID was "
                                    "written to") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidInputError(
                f"--pidfile {pidfile} is a symbolic link: refusing to follow it (it may point "
                "at another service's pid file)",
                fix="point --pidfile at the file the server's PID was written to") from None
        raise InvalidInputError(f"--pidfile {pidfile} cannot be read ({exc.strerror})") \
            from None
    with handle:
        owner = foreign_owner(info)
        if owner is not None and not force_user:
            raise InvalidInputError(
                f"--pidfile {pidfile} is {owner}: anyone may have written it",
                fix="if that user's server is really the one to stop, rerun with --force-user")
        data = handle.read(PIDFILE_MAX + 1)
    if len(data) > PIDFILE_MAX:
        raise InvalidInputError(f"--pidfile {pidfile} is not a pid file (more than "
                                f"{PIDFILE_MAX} bytes)")
    text = data.decode("ascii", errors="replace")
    if any(not (char.isprintable() or char in " \t\r\n") or char == "\ufffd" for char in text):
        raise InvalidInputError(f"--pidfile {pidfile} is not a pid file (binary or non-ASCII "
                                "content)")
    return text, info.st_mtime


def check_pid(pid: int, origin: str) -> int:
    if pid <= 0 or pid >= PID_MAX_LIMIT:
        raise InvalidInputError(f"{origin}: {pid} is not a process id (1 to "
                                f"{PID_MAX_LIMIT - 1})")
    if pid == 1:  # a process id, refused as every process stop will not signal is: exit 1
        raise RefusedError(
            f"{origin}: refusing PID 1: it is the init process (in a container, the container "
            "itself); stopping it would stop everything",
            fix=Phrase("run `", Hint(("stop",)), "` without --pid to stop leftover vLLM processes, "
                       "or --all-vllm for every vLLM process"))
    return pid


def _pid(pidfile: Path | None, pid: int | None, force_user: bool = False) \
        -> tuple[int | None, float | None]:
    """The PID to stop, and when the pid file naming it was written."""
    if pidfile is None:
        return (check_pid(pid, "--pid") if pid is not None else None), None
    text, written = _read_pidfile(pidfile, force_user)
    text = text.strip()
    if not _ASCII_PID.fullmatch(text):
        raise InvalidInputError(f"--pidfile {pidfile} does not hold a process id (expected "
                                "ASCII digits only)")
    return check_pid(int(text), f"--pidfile {pidfile}"), written


def _zombie(proc: procs.Proc) -> CheckResult:
    parent = procs.read(proc.ppid)
    name = f"PID {proc.ppid} ({parent.title if parent else 'gone'})"
    if proc.ppid != 1:
        who = (f"only its parent {name} can reap it: the memory is released when that parent "
               "reaps it or exits (stop it if it hangs), then check npu-smi info")
    elif parent is not None and procs.reaps_children(parent):
        who = (f"its parent is {name}, the init process of this PID namespace (in a container, "
               "the container's init), which reaps exited children: the memory is released "
               "when it does; check npu-smi info again in a moment")
    else:
        who = (f"its parent is {name}, the init process of this PID namespace (in a container, "
               "the container's entry point), which never reaps the processes left to it (it "
               "does not handle SIGCHLD): the zombie and its memory stay until the container "
               "is restarted (run it with --init, or tini, so that an init reaps)")
    return CheckResult(
        f"zombie:{proc.pid}", "stop", Level.WARN,
        f"PID {proc.pid} ({proc.title}) is still a zombie (state Z) after {REAP_WAIT:g}s: it has "
        "exited, but the NPU driver may keep its device memory until it is reaped "
        f"(vllm-project/vllm-ascend#9888), which kill -9 cannot do; {who}")


def _remaining(found: list[procs.Proc]) -> CheckResult:
    names = ", ".join(f"PID {p.pid} ({p.title}, uid {p.uid})" for p in found)
    return CheckResult("remaining", "stop", Level.WARN,
                       f"still running, of the server or orphaned, and not stopped by this run: "
                       f"{names}", fix=Phrase("run ", Hint(("stop",)), " again; add "
                                              "--force-user for another user's"))


def _survivor(proc: procs.Proc, report: StopReport) -> CheckResult:
    if proc.pid in report.denied:
        why = "KILL was not permitted (EPERM: another user's process, or protected by the " \
              "kernel or a security module)"
    elif proc.state == "D":
        why = "state D: uninterruptible I/O, probably waiting on the device driver"
    else:
        why = f"state {proc.state}"
    return CheckResult(f"survivor:{proc.pid}", "stop", Level.FAIL,
                       f"PID {proc.pid} ({proc.title}) is still running after KILL: {why}")


def run(pidfile: Path | None, pid: int | None, grace: float, everything: bool = False,
        force_user: bool = False, port: int | None = None) -> CommandResult:
    if not grace >= 0:  # also NaN
        raise InvalidInputError("--grace must be 0 or more seconds")
    if port is not None and not 0 < port < 65536:
        raise InvalidInputError(f"--port {port} is not a TCP port (1 to 65535)")
    target, written = _pid(pidfile, pid, force_user)
    report = stop(target, grace, everything=everything, force_user=force_user, written=written,
                  port=port)
    results = [CheckResult(f"stop:{i}", "stop", level, text)
               for i, (level, text) in enumerate(report.events)]
    if report.refused:
        return CommandResult("stop", tuple(results))
    results += [_zombie(proc) for proc in report.zombies]
    results += [_survivor(proc, report) for proc in report.survivors]
    if report.remaining:
        results.append(_remaining(report.remaining))
    elif not report.survivors:
        results.append(CheckResult("stopped", "stop", Level.OK,
                                   "nothing of the server and no leftover vLLM process is "
                                   "running"))
    if report.npu_smi:
        results.append(CheckResult("npu-smi", "stop", Level.OK,
                                   "npu-smi info afterwards:\n" + report.npu_smi))
    return CommandResult("stop", tuple(results))


def from_args(args: Namespace) -> CommandResult:
    return run(args.pidfile, args.pid, args.grace, args.all_vllm,
               getattr(args, "force_user", False), args.port)


def configure(p: ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument("--pidfile", type=cliargs.path, metavar="FILE",
                       help="a file holding the server's PID")
    which.add_argument("--pid", type=int, metavar="N", help="the server's PID")
    which.add_argument("--port", type=int, metavar="PORT",
                       help="the TCP port the server listens on (its PID is found from the "
                            "listening socket, as ss -ltnp does)")
    p.add_argument("--grace-timeout", "--grace", dest="grace", type=float, default=5.0,
                   metavar="SECONDS",
                   help="how long to wait after TERM before KILL (default 5; --grace is an "
                        "alias)")
    p.add_argument("--all-vllm", action="store_true",
                   help="also stop every vLLM process of this user, even with a live parent "
                        "(default: only the server's own and re-parented ones)")
    p.add_argument("--force-user", action="store_true",
                   help="also signal processes of other users (refused by default)")


COMMAND = cliargs.CommandSpec(
    name="stop",
    help="stop a server: TERM its group, wait, KILL, then leftovers",
    description=("Stop a vLLM server: TERM its process group, wait, KILL, then its leftover "
                 "EngineCore / Worker processes. Exit 1 when it refuses a process (PID 1, "
                 "itself or an ancestor, another user's) and signals nothing; 2 when --pid or "
                 "--port is no process id or port, or --pidfile cannot be trusted to name "
                 "one."),
    example="ascendpatch stop --pidfile serve.pid",
    run=from_args, configure=configure,
)
