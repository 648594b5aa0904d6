"""Function lengths and modules per package, for notes on the package's shape.

    python tools/layout_stats.py [PACKAGE_DIR]      (default: ascendpatch)

A function's length is its lines from ``def`` to its last line, docstring included (nested
functions count on their own too). A package's modules include its ``__init__.py``.
"""

from __future__ import annotations

import ast
import statistics
import sys
from collections import Counter
from pathlib import Path

BUCKETS = ((1, 5), (6, 10), (11, 20), (21, 30), (31, 40), (41, 60), (61, 10**6))


def function_lengths(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.end_lineno - node.lineno + 1 for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno is not None]


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
    return out


if __name__ == "__main__":
    print("\n".join(report(Path(sys.argv[1] if len(sys.argv) > 1 else "ascendpatch"))))
