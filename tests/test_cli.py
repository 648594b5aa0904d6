"""The CLI shell: every way a run can end goes through the renderer, so --json always gets JSON."""

from __future__ import annotations

import inspect
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from ascendpatch import cliargs
from tests.kit import REPO, ctrl_c_as_a_terminal_gives_it, run_process


def test_every_command_handler_is_an_object_that_loads_its_function() -> None:
    """The table refers to handler objects (a misspelt one fails when cliargs is imported);
    loading each imports its command module and finds a typed from_args-style function."""
    loaded = {}
    for command in cliargs.COMMANDS:
        assert isinstance(command.handler, cliargs.Handler), command.name
        function = command.handler.load()
        assert function.__module__.startswith("ascendpatch.commands."), command.name
        assert list(inspect.signature(function).parameters) == ["args"], command.name
        loaded[command.name] = f"{function.__module__}:{function.__name__}"
    assert len(set(loaded.values())) == len(cliargs.COMMANDS)  # no two commands share one
    assert loaded["diff"] == "ascendpatch.commands.diff:from_args"
    assert loaded["catalog-check"] == "ascendpatch.commands.catalog_check:from_args"


def test_version_imports_no_command_module_and_nothing_heavy() -> None:
    """What `ascendpatch --version` pays for (python -S: no site, so nothing but our imports;
    the bench goal is <= 0.33 x `pip --version`): no command module, no rich, and neither
    dataclasses (which pulls in inspect, ast, dis) nor pathlib."""
    code = ("import sys\nfrom ascendpatch.cli import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            "print(' '.join(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                          timeout=60, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    modules = done.stdout.split("\n")[-2].split()
    assert "ascendpatch.cliargs" in modules
    assert not [m for m in modules if m.startswith(("rich", "ascendpatch.commands"))], modules
    assert not {"dataclasses", "inspect", "pathlib"} & set(modules), modules


@pytest.mark.parametrize("args", [
    ("--json", "smoke"),  # a required option missing
    ("smoke", "--json", "--url", "ftp://127.0.0.1"),  # a value refused by the command
    ("--json", "no-such-command"),
    ("--json", "apply", "--no-such-option"),
])
def test_a_usage_error_with_json_is_a_json_document(args: tuple[str, ...]) -> None:
    run = run_process(*args, timeout=60)
    assert run.code == 2, run.err
    doc = json.loads(run.out)
    assert (doc["ok"], doc["exit_code"], doc["results"]) == (False, 2, [])
    assert doc["error"]["message"] and doc["command"] in (None, args[0], args[1])
    assert run.err == ""  # no usage text or [FAIL] line beside the document


def test_a_usage_error_without_json_is_a_fail_line_after_the_usage() -> None:
    run = run_process("smoke", timeout=60)
    assert run.code == 2 and run.out == ""
    usage, fail = run.err.splitlines()[0], run.err.splitlines()[-1]
    assert usage.startswith("usage: ascendpatch smoke")
    assert fail.startswith("[FAIL] ascendpatch smoke: ") and "--url" in fail


@pytest.fixture
def silent_server() -> Iterator[socket.socket]:
    """A 127.0.0.1 port that accepts connections and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        server.settimeout(60)
        yield server


def _interrupted_smoke(server: socket.socket, *options: str) -> subprocess.CompletedProcess[str]:
    """Start a real smoke run, wait until its request is in flight, then Ctrl-C it."""
    port = server.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "ascendpatch", *options, "smoke", "--url",
                             f"http://127.0.0.1:{port}", "--timeout", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, preexec_fn=ctrl_c_as_a_terminal_gives_it)
    try:
        connection, _ = server.accept()  # the command is now waiting for an answer
        with connection:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_ctrl_c_with_json_is_a_json_document_and_exit_130(silent_server: socket.socket) -> None:
    done = _interrupted_smoke(silent_server, "--json")
    assert done.returncode == 130, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["command"], doc["ok"], doc["exit_code"]) == ("smoke", False, 130)
    assert doc["error"]["message"].startswith("interrupted")
    assert "Traceback" not in done.stderr


def test_ctrl_c_without_json_is_a_fail_line(silent_server: socket.socket) -> None:
    done = _interrupted_smoke(silent_server, "--color", "never")
    assert done.returncode == 130 and done.stdout == ""
    assert done.stderr == "[FAIL] interrupted; any change in progress was rolled back\n"


def _render_raises(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    from ascendpatch import output

    def broken(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(output, "render", broken)


def test_a_bug_in_the_renderer_is_exit_3_with_a_log_in_one_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The boundary is around all of main: rendering too, not only the command."""
    from pathlib import Path

    from tests.kit import run_cli

    _render_raises(monkeypatch, KeyError("level"))
    done = run_cli("--color", "never", "manifests")
    assert done.code == 3 and done.out == ""
    (line,) = done.err.splitlines()
    assert line.startswith("[FAIL] unexpected error: KeyError: 'level' (details: ")
    assert "Traceback" in Path(line.split("(details: ")[1].rstrip(")")).read_text()
    as_json = run_cli("--json", "manifests")
    doc = json.loads(as_json.out)
    assert (as_json.code, doc["exit_code"], doc["command"]) == (3, 3, "manifests")
    assert Path(doc["error"]["log"]).is_file()


def test_ctrl_c_while_rendering_is_exit_130_and_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.kit import run_cli

    _render_raises(monkeypatch, KeyboardInterrupt())
    done = run_cli("--color", "never", "manifests")
    assert done.code == 130 and done.out == ""
    assert done.err == ("[FAIL] interrupted while showing the results; the command itself "
                        "had finished\n")


def test_a_bug_while_building_the_parser_is_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.kit import run_cli

    def broken(parser: object, suppress: bool) -> None:
        raise AttributeError("no such option group")

    monkeypatch.setattr(cliargs, "global_options", broken)
    done = run_cli("--color", "never", "manifests")
    assert done.code == 3
    assert done.err.startswith("[FAIL] unexpected error: AttributeError: no such option group")
