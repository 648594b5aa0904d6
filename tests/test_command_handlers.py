"""Every command module imports and every handler the CLI dispatches to resolves (fast tier).

The CLI imports a command's module only when that command runs, so a module that fails to
import, or a table entry naming a function that does not exist, would otherwise only show when
a user runs that one command. The table is read from the parser the CLI really builds (each
subcommand's ``handler`` default), whatever form a handler takes there: a ``"module:function"``
string, an object with ``load()``, or the function itself.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
from collections.abc import Callable
from typing import Any, cast

import pytest

import ascendpatch.commands
from ascendpatch.shell import cli

MODULES = sorted(info.name for info in pkgutil.iter_modules(ascendpatch.commands.__path__))


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def resolve(ref: object) -> Callable[..., Any]:
    """The function a handler reference stands for, imported the way the CLI would."""
    if isinstance(ref, str):
        module, sep, name = ref.partition(":")
        assert sep and name, f"not a 'module:function' reference: {ref!r}"
        function: object = getattr(importlib.import_module(module), name)
    else:
        load = getattr(ref, "load", None)
        function = load() if callable(load) else ref
    assert callable(function), ref
    return cast("Callable[..., Any]", function)


def test_the_commands_package_is_found() -> None:
    assert {"apply", "revert", "status", "verify", "install"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_every_command_module_imports(name: str) -> None:
    module = importlib.import_module(f"ascendpatch.commands.{name}")
    assert module.__name__ == f"ascendpatch.commands.{name}"


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_every_handler_in_the_cli_table_resolves_to_a_command_function(command: str) -> None:
    ref = _subcommands()[command].get_default("handler")
    assert ref is not None, f"{command} has no handler"
    function = resolve(ref)
    module = getattr(function, "__module__", "")
    assert module.startswith("ascendpatch.commands."), (command, module)
    assert module.rsplit(".", 1)[1] in MODULES
    assert len(inspect.signature(function).parameters) == 1, "handlers take the parsed args"


@pytest.mark.parametrize(("ref", "error"), [
    ("ascendpatch.commands.aply:from_args", ModuleNotFoundError),
    ("ascendpatch.commands.apply:from_arg", AttributeError),
    ("ascendpatch.commands.apply", AssertionError),
])
def test_a_misspelt_reference_fails(ref: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        resolve(ref)


def test_every_form_of_reference_resolves_to_the_same_function() -> None:
    from ascendpatch.commands.apply import from_args

    class Loader:
        def load(self) -> Callable[..., Any]:
            return from_args

    for ref in ("ascendpatch.commands.apply:from_args", Loader(), from_args):
        assert resolve(ref) is from_args
