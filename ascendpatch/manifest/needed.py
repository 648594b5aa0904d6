"""The condition for the bug a diff artifact fixes, checked on a release's own file content.

A manifest artifact may declare it next to its version ranges::

    needed_if:
      file: vllm_ascend/sample/sampler.py
      calls_unguarded: [torch_npu.npu_top_k_top_p, torch.ops._C_ascend.npu_apply_top_k_top_p]

The bug is present when the file calls one of the named functions outside a ``try`` block that
handles exceptions. This is read from the syntax tree (never imported: the file needs the NPU
stack), so comments, strings and wrapped lines do not fool it. It lets ``apply``, ``status``,
``port`` and ``catalog-check`` decide a release the catalog does not list yet: still affected,
or fixed upstream.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Condition:
    file: str
    calls_unguarded: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.file} calls {' or '.join(self.calls_unguarded)} without a guard"


@dataclass(frozen=True)
class Finding:
    """``needed`` None: the content cannot tell (file missing, not Python)."""

    needed: bool | None
    reason: str


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


class _Calls(ast.NodeVisitor):
    """Line numbers of calls to ``names``, split by whether a ``try``/``except`` wraps them."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = set(names)
        self.depth = 0
        self.unguarded: list[tuple[int, str]] = []
        self.guarded: list[tuple[int, str]] = []

    def visit_Try(self, node: ast.Try) -> None:
        self._try(node)

    def visit_TryStar(self, node: ast.AST) -> None:  # except* (Python >= 3.11)
        self._try(node)

    def _try(self, node: ast.AST) -> None:
        handled = bool(getattr(node, "handlers", ()))
        self.depth += handled
        for stmt in getattr(node, "body", ()):
            self.visit(stmt)
        self.depth -= handled
        for name in ("handlers", "orelse", "finalbody"):
            for stmt in getattr(node, name, ()):
                self.visit(stmt)

    def visit_Call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        if name in self.names:
            (self.guarded if self.depth else self.unguarded).append((node.lineno, name))
        self.generic_visit(node)


def evaluate(condition: Condition, content: bytes | None) -> Finding:
    """Is the bug present in this content of ``condition.file``?"""
    if content is None:
        return Finding(None, f"{condition.file} is not in this release")
    try:
        tree = ast.parse(content, filename=condition.file)
    except (SyntaxError, ValueError) as exc:
        return Finding(None, f"{condition.file} cannot be parsed as Python ({exc})")
    calls = _Calls(condition.calls_unguarded)
    calls.visit(tree)
    if calls.unguarded:
        where = ", ".join(f"{name} at line {line}" for line, name in calls.unguarded)
        return Finding(True, f"{condition.file} calls {where} without a guard")
    if calls.guarded:
        return Finding(False, f"{condition.file} guards every call to "
                              f"{' / '.join(sorted({n for _l, n in calls.guarded}))}")
    return Finding(False, f"{condition.file} calls none of "
                          f"{', '.join(condition.calls_unguarded)}")
