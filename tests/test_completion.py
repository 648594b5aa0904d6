"""python -m ascendpatch.shell.completion SHELL: the script from the parser, or one clear error."""

from __future__ import annotations

import sys

import pytest

from ascendpatch.shell import completion


def test_a_shell_gets_the_script_from_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("shtab")
    assert completion.main(["bash"]) == 0
    out = capsys.readouterr().out
    assert "catalog-check" in out and "--grace-timeout" in out


@pytest.mark.parametrize("argv", [[], ["fish"], ["bash", "zsh"]])
def test_anything_but_one_known_shell_is_a_usage_error(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert completion.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "usage: python -m ascendpatch.shell.completion {bash,zsh,tcsh}\n"


def test_without_shtab_it_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "shtab", None)  # what an install without the extra sees
    assert completion.main(["bash"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ("[FAIL] shell completion needs shtab: pip install "
                            "'ascendpatch[completion]'\n")
