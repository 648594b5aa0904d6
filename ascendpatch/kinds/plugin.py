"""Kind ``plugin``: a model adapter installed as a small distribution with a vLLM plugin.

vLLM's out-of-tree mechanism: an entry point in the ``vllm.general_plugins`` group, loaded in
every vLLM process (API server, EngineCore, workers), whose ``register()`` lazily registers the
architectures (``ModelRegistry.register_model(arch, "module:Class")``) so that no model code is
imported at start-up. It always registers, also over a class vLLM ships: an adapter may exist
to replace one (a fixed multimodal placeholder, for instance), and it says once per
process which built-in class it overrides. Because it is a distribution of its own, reinstalling
vllm does not remove it; an image rebuild does, and `verify` notices.

Files (all new, written through the transaction, removed by revert with no empty folder left):
``<module>.py`` (the adapter), ``ascendpatch_plugin_<id>.py`` (register) and the dist-info.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from ascendpatch.env import inscript
from ascendpatch.errors import InvalidInputError
from ascendpatch.hashing import record_text
from ascendpatch.inspect.checks.base import Check
from ascendpatch.inspect.checks.plugins import Adapter, RegistryCheck
from ascendpatch.kinds.base import ArtifactSite, BaseKind, Content, FileFinding, read_source
from ascendpatch.manifest import schema as s
from ascendpatch.manifest.model import Artifact
from ascendpatch.pipeline.filestate import FileState

PLUGIN_GROUP = "vllm.general_plugins"
_MODULE = r"[A-Za-z_][A-Za-z0-9_]*"

# The register() module of a plugin, around _describe() (copied from the bundled registry
# probe, env/_registry.py, so that the plugin and verify name a registry entry the same way).
# Its bytes are those of plugins already installed: a change makes them all differ.
_REGISTER_HEAD = '''"""vLLM general plugin written by ascendpatch (artifact {aid}).

register() runs in every vLLM process; it registers the architectures lazily ("module:Class"),
so the adapter is imported only when a model of that architecture is loaded. It always
registers, also over a class vLLM ships (the adapter may exist to replace it), and says once
per process which built-in class it overrides.
"""

import logging

ARCHITECTURES = {archs!r}
_ANNOUNCED = set()


'''
_REGISTER_BODY = '''


def register():
    from vllm import ModelRegistry

    models = getattr(ModelRegistry, "models", None)
    if not isinstance(models, dict):
        models = dict.fromkeys(ModelRegistry.get_supported_archs())
    for arch, target in ARCHITECTURES.items():
        if arch in models and arch not in _ANNOUNCED:
            previous = _describe(models[arch])
            if previous != target:
                _ANNOUNCED.add(arch)
                logging.getLogger("vllm.ascendpatch").info(
                    "ascendpatch adapter {aid}: %s is built into vLLM as %s; "
                    "registering %s in its place", arch, previous, target)
        ModelRegistry.register_model(arch, target)
'''


@lru_cache(maxsize=1)
def describe_source() -> str:
    """The source of ``_describe()`` as the bundled registry probe defines it."""
    script = inscript.bundled("_registry.py")
    node = next(n for n in ast.parse(script).body
                if isinstance(n, ast.FunctionDef) and n.name == "_describe")
    source = ast.get_source_segment(script, node)
    assert source is not None
    return source


def register_module(artifact_id: str, targets: dict[str, str]) -> str:
    """The plugin's register() module: ``targets`` maps architecture -> ``module:Class``."""
    return (_REGISTER_HEAD.format(aid=artifact_id, archs=targets) + describe_source()
            + _REGISTER_BODY.format(aid=artifact_id))


def slug(artifact_id: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", artifact_id.lower()).strip("_")


def plugin_module(options: dict[str, Any], source: str | Path | None) -> str:
    """The adapter's module name: ``options.module``, else the source file's stem."""
    return str(options.get("module") or Path(str(source or "")).stem)


def plugin_targets(options: dict[str, Any], module: str) -> dict[str, str]:
    """Architecture -> the ``module:Class`` the plugin registers for it."""
    archs = options.get("architectures") or []
    classes = dict(options.get("classes") or {})
    return {arch: f"{module}:{classes.get(arch, arch)}" for arch in archs}


def adapter(artifact: Artifact) -> Adapter:
    """The artifact with what its plugin registers, for verify's registry check."""
    source = next((v.source for v in artifact.variants if v.source), None)
    return Adapter(artifact, plugin_targets(artifact.options, plugin_module(artifact.options,
                                                                              source)))


def plugin_layout(site: ArtifactSite) -> dict[str, bytes]:
    """Every file of the plugin distribution, relative to site-packages, with its content."""
    options: dict[str, Any] = site.artifact.options
    archs = options.get("architectures") or []
    if not archs or not all(isinstance(a, str) for a in archs):
        raise InvalidInputError(f"artifact {site.artifact.id}: kind plugin needs "
                                "options.architectures (a list of names)")
    assert site.source is not None
    module = plugin_module(options, site.source)
    if not re.fullmatch(_MODULE, module):
        raise InvalidInputError(f"artifact {site.artifact.id}: options.module {module!r} is not "
                                "a Python module name")
    targets = plugin_targets(site.artifact.options, module)
    name = slug(site.artifact.id)
    dist_info = f"ascendpatch_plugin_{name}-1.0.dist-info"
    files = {
        f"{module}.py": read_source(site),
        f"ascendpatch_plugin_{name}.py": register_module(site.artifact.id, targets).encode(),
        f"{dist_info}/METADATA": (
            "Metadata-Version: 2.1\n"
            f"Name: ascendpatch-plugin-{name.replace('_', '-')}\nVersion: 1.0\n"
            f"Summary: vLLM plugin for {', '.join(archs)} (ascendpatch artifact "
            f"{site.artifact.id})\n").encode(),
        f"{dist_info}/INSTALLER": b"ascendpatch\n",
        f"{dist_info}/entry_points.txt": (
            f"[{PLUGIN_GROUP}]\n{site.artifact.id} = ascendpatch_plugin_{name}:register\n"
        ).encode(),
    }
    files[f"{dist_info}/RECORD"] = record_text(files, f"{dist_info}/RECORD").encode()
    return files


class PluginKind(BaseKind):
    name = "plugin"  # needs_distribution: vllm, the plugin is only meaningful next to it
    options_schema = s.Obj({
        "architectures": s.ListOf(s.Str()),  # the architectures the adapter registers
        "classes": s.MapOf(s.Str()),  # architecture -> class name, when it differs
        "module": s.Str(pattern=_MODULE, what="a Python module name"),  # default: source stem
    }, frozenset({"architectures"}))

    def checks(self, artifacts: Sequence[Artifact]) -> Sequence[Check]:
        """vLLM's ModelRegistry resolves each architecture to the adapter's own class."""
        return (RegistryCheck(tuple(adapter(a) for a in artifacts)),) if artifacts else ()

    def prepare(self, site: ArtifactSite) -> None:
        for rel in plugin_layout(site):
            site.path(rel)

    def inspect(self, site: ArtifactSite) -> list[FileFinding]:
        findings = []
        for rel, data in plugin_layout(site).items():
            path, current = site.read(rel)
            if current is None:
                state, detail = FileState.PRISTINE, f"{rel}: to be installed"
            elif current == data:
                state, detail = FileState.APPLIED, f"{rel}: installed"
            else:
                state, detail = FileState.CONFLICT, f"{rel}: exists with other content"
            findings.append(FileFinding(rel, path, state, current, Content(data), Content(None),
                                        detail, forceable=True, prune_to=site.root))
        return findings
