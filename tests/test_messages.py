"""User-facing words are self-contained: no message points at a document users do not have.

Our field notes (the team's internal write-ups) are where many rules come from, but a user who
reads "see field note 003, pitfall 4" cannot look it up. Every string a user can see (the rule
data files, the manifests' texts, string literals in the code; comments and docstrings are for
maintainers) must say the reason itself.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ascendpatch"
POINTER = re.compile(r"field[ -]?note|\bnote \d{3}\b|\bpitfall\b|§", re.IGNORECASE)


def _yaml_strings(value: object, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _yaml_strings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _yaml_strings(item, f"{where}[{index}]")


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _code_strings(path: Path) -> Iterator[tuple[str, str]]:
    """(file:line, text) of every string literal that is not a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield f"{path.name}:{node.lineno}", node.value


def _data_files() -> list[Path]:
    return sorted([*(PACKAGE / "data").glob("*.yaml"), *(ROOT / "manifests").glob("*.yaml")])


def test_data_files_and_manifests_explain_themselves() -> None:
    files = _data_files()
    assert any(p.name == "log_rules.yaml" for p in files) and len(files) >= 3
    pointing = [f"{path.name}{where}: {text!r}" for path in files
                for where, text in _yaml_strings(yaml.safe_load(path.read_text()), "")
                if POINTER.search(text)]
    assert pointing == []


def test_messages_in_the_code_explain_themselves() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 50
    pointing = [f"{where}: {text!r}" for path in modules for where, text in _code_strings(path)
                if POINTER.search(text)]
    assert pointing == []


def test_the_scan_finds_a_pointer_where_there_is_one(tmp_path: Path) -> None:
    """The scanner itself: a string literal is caught, a docstring and a comment are not."""
    sample = tmp_path / "m.py"
    sample.write_text('"""From field note 003."""\n# field note 000 §2.1\n'
                      'def f() -> str:\n    """pitfall 4"""\n'
                      '    return "OOM (field note 003, pitfall 4)"\n')
    assert [text for _, text in _code_strings(sample) if POINTER.search(text)] == [
        "OOM (field note 003, pitfall 4)"]
    assert list(_yaml_strings(yaml.safe_load("a: [x, {b: 'see pitfall 3'}]"), ""))[-1] == (
        ".a[1].b", "see pitfall 3")

