"""Function lengths and modules per package, for notes on the package's shape.

    python tools/layout_stats.py [PACKAGE_DIR]      (default: ascendpatch)

A function's length is its lines from ``def`` to its last line, docstring included (nested
functions count on their own too). A package's modules include its ``__init__.py``. The
lists at the end (modules over 400 lines, the package's top-level modules, functions over 40
lines) are the figures a before/after note of a restructuring quotes.
"""

from __future__ import annotations

import ast
import statistics
import sys
from collections import Counter
from pathlib import Path

BUCKETS = ((1, 5), (6, 10), (11, 20), (21, 30), (31, 40), (41, 60), (61, 10**6))
LONG_MODULE = 400
LONG_FUNCTION = 40


def functions(path: Path) -> list[tuple[str, int]]:
    """(qualified name, length) of every function, methods as ``Class.method``."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef) and child.end_lineno is not None:
                    found.append((name, child.end_lineno - child.lineno + 1))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


def function_lengths(path: Path) -> list[int]:
    return [length for _, length in functions(path)]


def _quantile(values: list[int], q: float) -> int:
    return values[min(len(values) - 1, int(q * len(values)))]


def report(package: Path) -> list[str]:
    lengths: list[int] = []
    modules: Counter[str] = Counter()
    lines: Counter[str] = Counter()
    for path in sorted(package.rglob("*.py")):
        folder = str(path.parent.relative_to(package.parent))
        modules[folder] += 1
        lines[folder] += len(path.read_text(encoding="utf-8").splitlines())
        lengths += function_lengths(path)
    lengths.sort()
    out = [f"functions {len(lengths)}: median {statistics.median(lengths):g}, "
           f"p75 {_quantile(lengths, .75)}, p90 {_quantile(lengths, .9)}, "
           f"p99 {_quantile(lengths, .99)}, max {lengths[-1]}",
           "  " + ", ".join(f"{low}-{high if high < 10**6 else ''}: "
                            f"{sum(low <= n <= high for n in lengths)}" for low, high in BUCKETS)]
    total = sum(lines.values())
    out += [f"  {folder:28} {modules[folder]:3} modules {lines[folder]:6} lines "
            f"({100 * lines[folder] / total:.0f}%)" for folder in sorted(modules)]
    out.append(f"  total {sum(modules.values())} modules, {total} lines")
    return out + long_modules(package) + top_level(package) + long_functions(package)


def _module_name(path: Path, package: Path) -> str:
    return path.relative_to(package.parent).as_posix()


def long_modules(package: Path) -> list[str]:
    sized = [(_module_name(p, package), len(p.read_text(encoding="utf-8").splitlines()))
             for p in sorted(package.rglob("*.py"))]
    long = sorted(((n, size) for n, size in sized if size > LONG_MODULE), key=lambda m: -m[1])
    return [f"modules over {LONG_MODULE} lines: {len(long)}",
            *(f"  {name:40} {size:5}" for name, size in long)]


def top_level(package: Path) -> list[str]:
    """The modules directly in the package and its subpackages, which is what a reader sees
    first (``__init__`` and ``__main__`` are the package itself, not counted)."""
    names = sorted(p.stem for p in package.glob("*.py") if not p.name.startswith("__"))
    subpackages = sorted(p.name for p in package.iterdir() if (p / "__init__.py").is_file())
    return [f"top-level modules of {package.name}/ (besides __init__, __main__): {len(names)}",
            "  " + " ".join(names),
            f"subpackages of {package.name}/: {len(subpackages)}", "  " + " ".join(subpackages)]


def long_functions(package: Path) -> list[str]:
    long = sorted(((f"{_module_name(p, package)}:{name}", size)
                   for p in sorted(package.rglob("*.py")) for name, size in functions(p)
                   if size > LONG_FUNCTION), key=lambda f: (-f[1], f[0]))
    return [f"functions over {LONG_FUNCTION} lines: {len(long)}",
            *(f"  {name:60} {size:4}" for name, size in long)]


if __name__ == "__main__":
    print("\n".join(report(Path(sys.argv[1] if len(sys.argv) > 1 else "ascendpatch"))))
