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
class Decision:
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


# A release's sampler.py is ~30 kB; a file far larger than any source file is not one to parse.
MAX_SOURCE_BYTES = 4 * 1024 * 1024
_TRY_TYPES = tuple(t for t in (getattr(ast, "Try", None), getattr(ast, "TryStar", None)) if t)


def _calls(tree: ast.AST, names: tuple[str, ...]) \
        -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(unguarded, guarded): line numbers of calls to ``names``, split by whether a
    ``try``/``except`` (or ``except*``) wraps them. Walked with an explicit stack, not by
    recursion, so a file nested thousands deep (a 3,000-term expression) is read, not a
    RecursionError."""
    wanted = set(names)
    unguarded: list[tuple[int, str]] = []
    guarded: list[tuple[int, str]] = []
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in wanted:
                (guarded if depth else unguarded).append((node.lineno, name))
        if isinstance(node, _TRY_TYPES):
            handled = int(bool(getattr(node, "handlers", ())))
            children = [(stmt, depth + handled) for stmt in getattr(node, "body", ())]
            for field in ("handlers", "orelse", "finalbody"):
                children += [(stmt, depth) for stmt in getattr(node, field, ())]
        else:
            children = [(child, depth) for child in ast.iter_child_nodes(node)]
        stack.extend(reversed(children))
    return sorted(unguarded), sorted(guarded)


def evaluate(condition: Condition, content: bytes | None) -> Decision:
    """Is the bug present in this content of ``condition.file``?"""
    if content is None:
        return Decision(None, f"{condition.file} is not in this release")
    if len(content) > MAX_SOURCE_BYTES:
        return Decision(None, f"{condition.file} is {len(content)} bytes, larger than any "
                             f"source file ({MAX_SOURCE_BYTES} at most): not parsed")
    try:
        tree = ast.parse(content, filename=condition.file)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        why = str(exc) or type(exc).__name__  # ast.parse's own "too deeply nested" limits
        return Decision(None, f"{condition.file} cannot be parsed as Python ({why})")
    unguarded, guarded = _calls(tree, condition.calls_unguarded)
    if unguarded:
        where = ", ".join(f"{name} at line {line}" for line, name in unguarded)
        return Decision(True, f"{condition.file} calls {where} without a guard")
    if guarded:
        return Decision(False, f"{condition.file} guards every call to "
                              f"{' / '.join(sorted({n for _l, n in guarded}))}")
    return Decision(False, f"{condition.file} calls none of "
                          f"{', '.join(condition.calls_unguarded)}")
