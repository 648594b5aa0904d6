"""The package's layout is its design: these rules keep the layers apart.

- The shell (cli, cliargs, output, completion, __main__, commands/) sits on top: no core module
  imports it, so core code can never print or parse arguments.
- A command module uses the core and ``commands.context``, never another verb's internals.
- rich is imported by the renderer only.
- patchfile/ (diffs and bytes) never imports what sits above it: manifests, kinds, the planner.
- Generic code (the planner, the engine, verify and its checks) never imports a concrete kind:
  it reaches every kind through ``kinds.KINDS`` and the Kind protocol (a kind's own checks
  come from ``Kind.checks``), so what one kind knows stays in its module.
- The README's Layout section names every package and every top-level module, and nothing else.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ascendpatch"
SHELL = {"ascendpatch.shell", "ascendpatch.shell.cli", "ascendpatch.shell.cliargs",
         "ascendpatch.shell.output", "ascendpatch.shell.completion", "ascendpatch.shell.crashlog",
         "ascendpatch.__main__"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every ascendpatch module the file imports, at any depth (lazy imports count)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] in {"ascendpatch", "rich"}}


def _modules() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def _is_shell(name: str) -> bool:
    return name in SHELL or name.startswith(("ascendpatch.shell.", "ascendpatch.commands.")) \
        or name == "ascendpatch.commands"


def test_core_never_imports_the_shell() -> None:
    offenders = {name: sorted(n for n in imports if _is_shell(n))
                 for name, imports in _modules().items() if not _is_shell(name)}
    assert {k: v for k, v in offenders.items() if v} == {}


# serve is the one verb made of verbs: it runs the run() of these (pre-flight, triage, smoke)
COMPOSED = {"ascendpatch.commands.serve": {"check_launch", "logs", "smoke", "verify"}}


def test_a_command_never_imports_another_command() -> None:
    allowed = {"ascendpatch.commands", "ascendpatch.commands.context"}
    offenders = {}
    for name, imports in _modules().items():
        if name.startswith("ascendpatch.commands."):
            composed = {f"ascendpatch.commands.{verb}" for verb in COMPOSED.get(name, ())}
            others = sorted(n for n in imports if n.startswith("ascendpatch.commands.")
                            and n not in allowed and not n.startswith(f"{name}.")
                            and n not in composed and n.rsplit(".", 1)[0] not in composed
                            and not n.startswith("ascendpatch.commands.context."))
            if others:
                offenders[name] = others
    assert offenders == {}


def test_only_the_renderer_imports_rich() -> None:
    users = sorted(name for name, imports in _modules().items()
                   if any(n == "rich" or n.startswith("rich.") for n in imports))
    assert users == ["ascendpatch.shell.output"]


def _offenders(modules: set[str], forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    """Of ``modules``, those that import a name starting with one of ``forbidden``."""
    found = {name: sorted(n for n in imports if n.startswith(forbidden))
             for name, imports in _modules().items() if name in modules}
    return {name: names for name, names in found.items() if names}


def test_the_patch_layer_never_imports_manifests_or_kinds() -> None:
    patch_layer = {name for name in _modules() if name.startswith("ascendpatch.patchfile")}
    above = ("ascendpatch.manifest", "ascendpatch.kinds", "ascendpatch.pipeline.planner",
             "ascendpatch.pipeline.engine")
    assert patch_layer and _offenders(patch_layer, above) == {}


CONCRETE_KINDS = {f"ascendpatch.kinds.{p.stem}" for p in (PACKAGE / "kinds").glob("*.py")
                  if p.stem not in {"__init__", "base"}}
GENERIC = {"ascendpatch.pipeline.planner", "ascendpatch.pipeline.engine",
           "ascendpatch.commands.verify"} | {
    f"ascendpatch.inspect.checks.{p.stem}" for p in (PACKAGE / "inspect/checks").glob("*.py")}


def test_generic_code_never_imports_a_concrete_kind() -> None:
    assert CONCRETE_KINDS and _offenders(GENERIC, tuple(sorted(CONCRETE_KINDS))) == {}


def _readme_layout() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Layout\n", 1)[1]
    return section.split("```text\n", 1)[1].split("```", 1)[0]


def test_readme_layout_names_every_package_and_top_level_module() -> None:
    named = set(re.findall(r"(?<![\w/.*])([a-z_]+(?:/|\.py))(?!\w)", _readme_layout()))
    packages = {p.name + "/" for p in PACKAGE.rglob("*") if (p / "__init__.py").is_file()}
    modules = {p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    missing = sorted((packages | modules) - named)
    assert missing == [], f"README's Layout section does not name {missing}"
    everything = {p.name + ("/" if p.is_dir() else "") for p in ROOT.rglob("*")
                  if ".git" not in p.parts}
    unknown = sorted(named - everything)
    assert unknown == [], f"README's Layout section names {unknown}, which do not exist"
