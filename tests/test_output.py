"""The renderer: the words, prefixes and styles of every line come from
ascendpatch/shell/output.py."""

from __future__ import annotations

import ast
import io
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from ascendpatch.results import (
    ArtifactResult,
    Cell,
    CheckResult,
    CommandResult,
    Hint,
    Level,
    Phrase,
    Status,
    Table,
    Tone,
)
from ascendpatch.shell import output, wording

PACKAGE = Path(output.__file__).parents[1]

DIFF = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"


def _pending(diff: str = DIFF) -> ArtifactResult:
    return ArtifactResult("fix", "diff", Status.NOT_APPLIED, Level.WARN, "fix: would be applied",
                          diff=diff, details=("hunk 1 applies",))


def _plain(result: CommandResult) -> str:
    out = io.StringIO()
    output.render(result, as_json=False, color="never", stream=out)
    return out.getvalue()


def test_the_result_says_whether_its_diffs_are_shown() -> None:
    """Not the command's name: any command whose result asks for diffs gets them."""
    shown = _plain(CommandResult("apply --dry-run", (_pending(),), show_diff=True))
    assert shown == ("[WARN] fix: would be applied\n    hunk 1 applies\n"
                     "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n")
    hidden = _plain(CommandResult("plan", (_pending(),)))
    assert hidden == "[WARN] fix: would be applied\n    hunk 1 applies\n"


def _coloured(result: CommandResult) -> str:
    out = io.StringIO()
    output.render(result, as_json=False, color="always", stream=out)
    return out.getvalue()


MARKUP = "x [bold]y[/] \\[red] [link=http://evil.example]z[/link] \\\\[b]"


def test_text_that_looks_like_markup_is_shown_as_is_in_both_modes() -> None:
    """Lines are styled spans, never parsed markup: nothing to escape, nothing to unescape."""
    item = CheckResult("c", "probe", Level.FAIL, MARKUP, details=(MARKUP,))
    result = CommandResult("verify", (item,), notes=(MARKUP,), summary=MARKUP)
    expected = f"[WARN] {MARKUP}\n[FAIL] {MARKUP}\n    {MARKUP}\n{MARKUP}\n"
    assert _plain(result) == expected
    coloured = _coloured(result)
    assert "\x1b]8;" not in coloured  # no OSC 8 hyperlink was opened
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == expected
    assert "\x1b[1;31m[FAIL]\x1b[0m" in coloured and "\x1b[33m[WARN]\x1b[0m" in coloured


def test_escape_sequences_and_newlines_are_neutralised_on_every_line() -> None:
    """A message cannot colour the terminal, set its title or start a forged [OK] line."""
    evil = "a\x1b]0;pwned\x07\x1b[2Jb\n[OK] forged \u202e"
    item = CheckResult("c", "probe", Level.FAIL, evil, details=("d\x1b[31m",))
    result = CommandResult("verify", (item,), notes=(evil,))
    for shown in (_plain(result), re.sub(r"\x1b\[[0-9;]*m", "", _coloured(result))):
        assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
        assert "\n[OK]" not in shown
        assert "a\\x1b]0;pwned\\x07\\x1b[2Jb\\x0a[OK] forged \\u202e" in shown
        assert "    d\\x1b[31m\n" in shown


def test_the_prefix_of_a_level_is_made_in_one_place() -> None:
    assert [output.prefix(level) for level in Level] == ["[OK]", "[SKIP]", "[WARN]", "[FAIL]"]
    assert output.plain_line(Level.SKIP, "x") == "[SKIP] x"


def test_no_other_module_writes_a_level_prefix() -> None:
    """Every line that starts "[OK]"/"[FAIL]"/... comes from output.prefix (help text that
    names the prefixes, "show only [FAIL] and [WARN] lines", is prose, not a line)."""
    pattern = re.compile(r"(^|\n)\[(OK|SKIP|WARN|FAIL)\] ")
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "output.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        found += [f"{path.name}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and id(node) not in docstrings and pattern.search(node.value)]
    assert found == []


def test_a_fix_is_data_that_the_renderer_words() -> None:
    """Items carry what to do as data; the line and JSON "message" end with "; fix: ..." and
    JSON also has it alone; hints in it repeat the --python given."""
    item = CheckResult("pin:vllm", "pin", Level.FAIL, "vllm 0.9 does not match ==0.18",
                       fix=Phrase(Hint(("install",))))
    result = CommandResult("verify", (item,))
    assert _plain(result) == "[FAIL] vllm 0.9 does not match ==0.18; fix: ascendpatch install\n"
    doc = wording.item_json(item, "ascendpatch --python /p")
    assert doc["message"] == "vllm 0.9 does not match ==0.18; fix: ascendpatch --python /p install"
    assert doc["fix"] == "ascendpatch --python /p install"
    assert "fix" not in wording.item_json(CheckResult("x", "pin", Level.OK, "fine"))
    schema = json.loads((PACKAGE / "data" / "output.schema.json").read_text())
    jsonschema = pytest.importorskip("jsonschema")
    document = wording.to_json(CommandResult("verify", (item, replace(item, fix=""))))
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(document)) == []


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("env", "stream", "coloured"), [
    ({"NO_COLOR": "1"}, _Terminal, False),
    ({"FORCE_COLOR": "1"}, io.StringIO, True),
    ({}, _Terminal, True),
    ({}, io.StringIO, False),
])
def test_the_fleet_table_follows_the_same_colour_rule_as_every_line(
        monkeypatch: pytest.MonkeyPatch, env: dict[str, str], stream: type[io.StringIO],
        coloured: bool) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    table = Table("fleet against the majority", ("host", "torch", "drift"),
                  ((Cell("node-1", Tone.BAD), Cell("2.1.0", Tone.BAD), Cell("1")),))
    out = stream()
    output.wide_table(table, out, "auto")
    assert "node-1" in out.getvalue()
    assert ("\x1b[" in out.getvalue()) is coloured


def test_a_hint_repeats_the_target_options_only_for_a_command_that_acts_on_a_target() -> None:
    fix = Phrase("run: ", Hint(("apply", "x")), " or ", Hint(("port", "x", "--to", "2")))
    assert fix == "run: ascendpatch apply x or ascendpatch port x --to 2"  # as plain text
    given = "ascendpatch --python '/my env/python' --manifest m.yaml"
    assert wording.say(fix, given) == (
        "run: ascendpatch --python '/my env/python' --manifest m.yaml apply x or "
        "ascendpatch --manifest m.yaml port x --to 2")
    joined = "[" + fix + "]"  # adding text keeps the hints
    assert wording.say(joined, given).startswith("[run: ascendpatch --python '/my env/python' ")
    assert wording.say("ascendpatch apply x", given) == "ascendpatch apply x"  # only hints change


def test_json_names_the_commands_a_fix_suggests_as_argv_lists() -> None:
    """"fix_commands": each Hint of the fix as the argv to run, with this run's options where
    the command takes them (a folder with a space stays one element), another program's
    runner as it is; none for a fix that names no command."""
    given = "ascendpatch --python '/my env/python' --manifest m.yaml"
    fix = Phrase("run ", Hint(("apply", "sampler fix")), ", then ", Hint(("port", "x")),
                 " or ", Hint(("install", "-U", "six"), runner=("/t/python", "-m", "pip")))
    item = CheckResult("pin:six", "pin", Level.FAIL, "six is old", fix=fix)
    doc = wording.item_json(item, given)
    assert doc["fix_commands"] == [
        ["ascendpatch", "--python", "/my env/python", "--manifest", "m.yaml", "apply",
         "sampler fix"],
        ["ascendpatch", "--manifest", "m.yaml", "port", "x"],
        ["/t/python", "-m", "pip", "install", "-U", "six"]]
    plain = wording.item_json(replace(item, fix="chmod go-w the file"), given)
    assert plain["fix"] == "chmod go-w the file" and "fix_commands" not in plain
    schema = json.loads((PACKAGE / "data" / "output.schema.json").read_text())
    jsonschema = pytest.importorskip("jsonschema")
    document = wording.to_json(CommandResult("verify", (item,)), given)
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(document)) == []


def test_every_command_in_the_reach_table_exists() -> None:
    from ascendpatch.shell.cliargs import COMMANDS, REACH

    assert set(REACH) <= {command.name for command in COMMANDS}


def test_no_fix_or_message_spells_a_command_as_plain_text() -> None:
    """A suggested command is a Hint, so that the renderer repeats --python / --manifest."""
    from ascendpatch.shell.cliargs import COMMANDS

    names = "|".join(re.escape(command.name) for command in COMMANDS)
    pattern = re.compile(rf"(?<![\w/.-])ascendpatch ({names})\b")
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg in ("fix", "message"):
                found += [f"{path.name}:{text.lineno}" for text in ast.walk(node.value)
                          if isinstance(text, ast.Constant) and isinstance(text.value, str)
                          and pattern.search(text.value)]
    assert found == []


def test_a_payload_brings_its_json_keys_and_its_table_whatever_the_command() -> None:
    class Counts:
        def json(self) -> dict[str, object]:
            return {"counted": 2}

        def table(self) -> Table:
            return Table("counts", ("name", "count"), ((Cell("a", Tone.GOOD), Cell("2")),),
                         stands_in=True)

    result = CommandResult("any-command", (CheckResult("a", "x", Level.OK, "a: 2"),),
                           summary="a=2", body=Counts())
    assert wording.to_json(result)["counted"] == 2
    term = _Terminal()
    output.render(result, as_json=False, color="always", stream=term)
    assert "a: 2" not in term.getvalue() and "count" in term.getvalue()  # the table says it
    assert _plain(result) == "[OK] a: 2\na=2\n"  # a pipe gets the lines and the summary


def test_a_command_a_log_rule_names_repeats_the_options_given() -> None:
    """log_rules.yaml is data: commands/logs turns the commands its texts name into Hints."""
    from ascendpatch.commands.logs import _hinted

    text = _hinted("run: ascendpatch apply fix-x, then restart (ascendpatch sampler fallback)")
    assert text == "run: ascendpatch apply fix-x, then restart (ascendpatch sampler fallback)"
    assert wording.say(text, "ascendpatch --manifest m.yaml") == (
        "run: ascendpatch --manifest m.yaml apply fix-x, then restart (ascendpatch sampler "
        "fallback)")


def test_every_hint_names_a_command_that_exists() -> None:
    from ascendpatch.shell.cliargs import COMMANDS

    names = {command.name for command in COMMANDS}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "Hint":
                if any(k.arg == "runner" for k in node.keywords):
                    continue  # another program's command line (the target's pip)
                argv = node.args[0]
                assert isinstance(argv, ast.Tuple)
                if path.name == "logs.py" and not isinstance(argv.elts[0], ast.Constant):
                    continue  # commands/logs._hinted: a name matched against COMMANDS
                assert isinstance(argv.elts[0], ast.Constant), f"{path.name}:{node.lineno}"
                found.append(argv.elts[0].value)
    assert found and set(found) <= names
