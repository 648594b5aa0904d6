"""The test suite's own layout: what tests share lives in tests/kit/, and no test imports another.

A test module that imports another one runs that module's fixtures and its import-time work,
and couples two files that different people edit. The rule is read from the source with
``ast`` (every import statement, also those inside functions), so it holds without running
anything.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
KIT = "kit"
# What may sit directly in tests/ besides test modules.
FRAMEWORK = {"__init__.py", "conftest.py"}


def _imported(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """Every dotted module name an import statement can bind (``from a import b`` -> a, a.b).

    Relative imports are spelled out from ``package``, the package of the file.
    """
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parent = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join([*parent, base] if base else parent)
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def foreign_imports(source: str, local_modules: set[str], package: str = "tests") -> list[str]:
    """The imports of ``source`` (a module of ``package``) that reach tests/ outside the kit.

    ``local_modules`` are the module names directly in tests/ (``test_apply``, ...), refused
    also as bare top-level imports (``import test_apply`` works when tests/ is on sys.path).
    """
    bad: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.ImportFrom) and node.level > package.count(".") + 1:
            bad.append(f"line {node.lineno}: relative import leaving tests/")
            continue
        names = [name for name in _imported(node, package) if _reaches_a_test(name, local_modules)]
        bad += [f"line {node.lineno}: {names[0]}"] if names else []
    return sorted(set(bad))


def _reaches_a_test(name: str, local_modules: set[str]) -> bool:
    parts = name.split(".")
    inside = parts[0] == "tests" and len(parts) > 1 and parts[1] != KIT
    return inside or parts[0] in local_modules


def _package(path: Path) -> str:
    return ".".join(["tests", *path.parent.relative_to(TESTS).parts])


def _local_modules() -> set[str]:
    return {p.stem for p in TESTS.glob("*.py") if p.name not in FRAMEWORK}


@pytest.mark.parametrize(("source", "expected"), [
    ("from tests.kit import run_cli\nfrom tests.kit.wheels import wheel\n", []),
    ("from tests import kit\nimport tests.kit.sshnode\n", []),
    ("import os\nfrom ascendpatch import cli\n", []),
    ("from tests.test_install import world\n", ["line 1: tests.test_install"]),
    ("from tests import test_verify\n", ["line 1: tests.test_verify"]),
    ("def f():\n    import tests.test_apply\n", ["line 2: tests.test_apply"]),
    ("import test_apply\n", ["line 1: test_apply"]),
    ("from .test_apply import x\n", ["line 1: tests.test_apply"]),
    ("from . import test_apply\n", ["line 1: tests.test_apply"]),
    ("from .. import anything\n", ["line 1: relative import leaving tests/"]),
    ("from tests import wheels\n", ["line 1: tests.wheels"]),
])
def test_the_checker_tells_kit_imports_from_test_imports(source: str,
                                                         expected: list[str]) -> None:
    assert foreign_imports(source, {"test_apply", "test_verify"}) == expected


@pytest.mark.parametrize(("source", "expected"), [
    ("from .wheels import wheel\nfrom . import realvllm\n", []),
    ("from .. import test_apply\n", ["line 1: tests.test_apply"]),
    ("from ..test_verify import x\n", ["line 1: tests.test_verify"]),
    ("from ... import anything\n", ["line 1: relative import leaving tests/"]),
])
def test_relative_imports_in_the_kit_are_read_from_the_kit(source: str,
                                                           expected: list[str]) -> None:
    assert foreign_imports(source, {"test_apply", "test_verify"}, "tests.kit") == expected


def test_no_test_module_imports_another_test_module() -> None:
    local = _local_modules()
    modules = [*sorted(TESTS.glob("test_*.py")), TESTS / "conftest.py"]
    modules += sorted((TESTS / KIT).rglob("*.py"))
    assert len(modules) > 30, "the glob found the test modules"
    found = {str(p.relative_to(TESTS)): foreign_imports(p.read_text(), local, _package(p))
             for p in modules}
    assert {name: bad for name, bad in found.items() if bad} == {}, (
        "move what tests share into tests/kit/ and import it from there")


def test_tests_folder_holds_only_tests_and_the_kit() -> None:
    strays = sorted(p.name for p in TESTS.glob("*.py")
                    if p.name not in FRAMEWORK and not p.name.startswith("test_"))
    assert strays == [], f"shared helpers belong in tests/{KIT}/: {strays}"
    assert (TESTS / KIT / "__init__.py").is_file()
