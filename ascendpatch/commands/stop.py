"""``ascendpatch stop [--pidfile F | --pid N] [--grace SECONDS]``."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

from ascendpatch.deploy import procs
from ascendpatch.deploy.stop import stop
from ascendpatch.errors import InvalidInputError
from ascendpatch.results import CheckResult, CommandResult, Level


def _pid(pidfile: Path | None, pid: int | None) -> int | None:
    if pidfile is None:
        return pid
    try:
        text = pidfile.read_text().strip()
    except OSError as exc:
        raise InvalidInputError(f"--pidfile {pidfile} cannot be read ({exc})") from None
    if not text.isdigit():
        raise InvalidInputError(f"--pidfile {pidfile} does not hold a process id ({text!r})")
    return int(text)


def run(pidfile: Path | None, pid: int | None, grace: float, everything: bool = False) \
        -> CommandResult:
    if grace < 0:
        raise InvalidInputError("--grace must be 0 or more seconds")
    report = stop(_pid(pidfile, pid), grace, everything=everything)
    results = [CheckResult(f"stop:{i}", "stop", Level(level), text)
               for i, (level, text) in enumerate(report.events)]
    for proc in report.zombies:
        parent = procs.read(proc.ppid)
        name = f"PID {proc.ppid} ({parent.title if parent else 'gone'})"
        results.append(CheckResult(
            f"zombie:{proc.pid}", "stop", Level.WARN,
            f"PID {proc.pid} ({proc.title}) is a zombie (state Z): it has ended and holds no "
            f"memory; only its parent {name} can reap it (kill -9 cannot)"))
    for proc in report.survivors:
        results.append(CheckResult(f"survivor:{proc.pid}", "stop", Level.FAIL,
                                   f"PID {proc.pid} ({proc.title}) is still running after "
                                   "KILL (uninterruptible I/O on the device?)"))
    if not report.survivors:
        results.append(CheckResult("stopped", "stop", Level.OK,
                                   "no process of the server and no vLLM process is running"))
    if report.npu_smi:
        results.append(CheckResult("npu-smi", "stop", Level.OK,
                                   "npu-smi info afterwards:\n" + report.npu_smi))
    return CommandResult("stop", tuple(results))


def from_args(args: Namespace) -> CommandResult:
    return run(args.pidfile, args.pid, args.grace, args.all_vllm)
