"""The CLI shell: every way a run can end goes through the renderer, so --json always gets JSON."""

from __future__ import annotations

import inspect
import json
import os
import pkgutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

import ascendpatch.commands
from ascendpatch.shell import cliargs
from tests.kit import REPO, TRACEBACK, ctrl_c_as_a_terminal_gives_it, run_process


def test_every_command_module_declares_its_command() -> None:
    """The one list of commands is the list of their modules: each module's COMMAND names the
    command its file name says, and hands the CLI a typed from_args-style function of its own."""
    for command in cliargs.COMMANDS:
        spec = cliargs.load(command)
        assert spec.name == command.module.replace("_", "-")
        assert spec.run.__module__ == f"ascendpatch.commands.{command.module}", command.name
        assert list(inspect.signature(spec.run).parameters) == ["args"], command.name


def test_every_module_of_the_commands_package_is_a_command() -> None:
    """One verb per module: a new module in commands/ is a command in COMMANDS (context.py,
    what every command needs, is the one exception)."""
    modules = {info.name for info in pkgutil.iter_modules(ascendpatch.commands.__path__)}
    assert modules - {"context"} == {command.module for command in cliargs.COMMANDS}


def test_a_module_whose_command_is_not_its_own_is_refused(monkeypatch: pytest.MonkeyPatch) \
        -> None:
    from ascendpatch.commands import diff

    monkeypatch.setattr(diff, "COMMAND", diff.COMMAND._replace(name="snapshot"))
    with pytest.raises(TypeError, match="not the CommandSpec of 'diff'"):
        cliargs.load(cliargs.Command("diff"))


def _modules_after(code: str) -> list[str]:
    """The command modules imported after running ``code`` in a fresh process (context, which
    is no command, is left out)."""
    done = subprocess.run([sys.executable, "-c", f"import sys\n{code}\n"
                           "print(' '.join(sorted(sys.modules)))"],
                          capture_output=True, text=True, timeout=60, check=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    return [m for m in done.stdout.split("\n")[-2].split()
            if m.startswith("ascendpatch.commands.") and m != "ascendpatch.commands.context"]


@pytest.mark.parametrize(("argv", "imported"), [
    (["--site-packages", "x", "status"], ["ascendpatch.commands.status"]),
    (["catalog-check", "0.18.0", "--json"], ["ascendpatch.commands.catalog_check"]),
    (["--json", "check-launch", "--", "vllm", "serve", "status"],
     ["ascendpatch.commands.check_launch"]),
])
def test_parsing_one_command_imports_only_its_module(argv: list[str],
                                                     imported: list[str]) -> None:
    code = ("from ascendpatch.shell.cli import build_parser\n"
            f"build_parser(lazy=True).parse_args({argv!r})")
    assert _modules_after(code) == imported


def test_a_command_s_help_imports_only_its_module_and_the_top_help_all() -> None:
    run = ("from ascendpatch.shell.cli import main\ntry:\n    main({!r})\n"
           "except SystemExit:\n    pass")
    assert _modules_after(run.format(["apply", "--help"])) == ["ascendpatch.commands.apply"]
    every = {f"ascendpatch.commands.{c.module}" for c in cliargs.COMMANDS}
    assert every <= set(_modules_after(run.format(["--help"])))


def test_the_top_help_lists_every_command_in_order_whichever_was_loaded_first() -> None:
    from ascendpatch.shell.cli import build_parser

    eager = build_parser().format_help()
    lazy = build_parser(lazy=True)
    lazy.parse_args(["--site-packages", "x", "status"])  # status's parser is built first
    assert lazy.format_help() == eager
    (sub,) = [a for a in lazy._actions if isinstance(a, cliargs.Commands)]
    assert list(sub.choices) == [c.name for c in cliargs.COMMANDS]


def test_version_imports_no_command_module_and_nothing_heavy() -> None:
    """What `ascendpatch --version` pays for (python -S: no site, so nothing but our imports;
    the bench goal is <= 0.33 x `pip --version`): no command module, no rich, and neither
    dataclasses (which pulls in inspect, ast, dis) nor pathlib."""
    code = ("import sys\nfrom ascendpatch.shell.cli import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            "print(' '.join(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                          timeout=60, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    modules = done.stdout.split("\n")[-2].split()
    assert "ascendpatch.shell.cliargs" in modules
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
    assert TRACEBACK not in done.stderr


def test_ctrl_c_without_json_is_a_fail_line(silent_server: socket.socket) -> None:
    done = _interrupted_smoke(silent_server, "--color", "never")
    assert done.returncode == 130 and done.stdout == ""
    assert done.stderr == "[FAIL] interrupted; any change in progress was rolled back\n"


def _render_raises(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    from ascendpatch.shell import output

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


@pytest.mark.parametrize("began", [False, True])
def test_ctrl_c_while_rendering_json_is_one_document_or_one_line(
        monkeypatch: pytest.MonkeyPatch, began: bool) -> None:
    """--json and a Ctrl-C after the command returned: before anything was written, the
    interrupt is the one JSON document (as before); once part of the results is on stdout,
    a second document would make it no JSON at all, so the interrupt is a line on stderr."""
    import json

    from ascendpatch.shell import output
    from tests.kit import run_cli

    def broken(*args: object, **kwargs: object) -> None:
        if began:
            sys.stdout.write('{"format": ')
        raise KeyboardInterrupt

    monkeypatch.setattr(output, "render", broken)
    done = run_cli("--json", "manifests")
    assert done.code == 130
    if began:
        assert done.out == '{"format": '
        assert done.err == ("[FAIL] interrupted while showing the results; the command "
                            "itself had finished\n")
    else:
        assert json.loads(done.out)["exit_code"] == 130 and done.err == ""


def test_a_second_ctrl_c_while_the_first_is_answered_ends_the_run_quietly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two Ctrl-C in a row: the second arrives while the first is being answered (its line
    written, what was started stopped). The run ends at once, 130, with no traceback (it was
    one, and a death by signal)."""
    from ascendpatch.shell import streams
    from tests.kit import run_cli

    _render_raises(monkeypatch, KeyboardInterrupt())

    def again() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(streams, "stop_waiting", again)
    done = run_cli("--color", "never", "manifests")
    assert (done.code, done.out, done.err) == (130, "", "")


def test_a_bug_while_building_the_parser_is_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.kit import run_cli

    def broken(parser: object, suppress: bool) -> None:
        raise AttributeError("no such option group")

    monkeypatch.setattr(cliargs, "global_options", broken)
    done = run_cli("--color", "never", "manifests")
    assert done.code == 3
    assert done.err.startswith("[FAIL] unexpected error: AttributeError: no such option group")
