"""The Kind protocol: every kind is complete (no optional methods found by getattr), declares
its options schema, and the manifest validator checks that schema with key paths."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from packaging.version import Version

from ascendpatch.commands.context import store_roots
from ascendpatch.env import inscript
from ascendpatch.env.target import Distribution, Target
from ascendpatch.errors import ManifestError
from ascendpatch.kinds import KINDS
from ascendpatch.kinds.base import BaseKind, Skip
from ascendpatch.kinds.hffile import hub_cache
from ascendpatch.kinds.plugin import register_module
from ascendpatch.manifest import loader
from ascendpatch.manifest.model import Artifact, Variant
from ascendpatch.pipeline import planner
from ascendpatch.results import Level
from tests.kit import REPO, run_cli, tree_digest, write_manifest


def test_every_kind_is_a_complete_base_kind() -> None:
    for name, kind in KINDS.items():
        assert isinstance(kind, BaseKind), name
        assert kind.name == name
        for method in ("root_for", "prepare", "inspect", "nothing_to_do"):
            assert callable(getattr(kind, method))
        assert set(kind.options_schema.required) <= set(kind.options_schema.fields)


def test_no_code_asks_a_kind_whether_it_has_a_method() -> None:
    """root_for and nothing_to_do are in the protocol: nothing probes for them any more."""
    offenders = []
    for path in (REPO / "ascendpatch").rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"getattr\([^)]*\b(kind|KINDS\[)", line) or \
                    re.search(r"getattr\([^)]*\"(root_for|nothing_to_do)\"", line):
                offenders.append(f"{path.relative_to(REPO)}:{number}")
    assert not offenders


def _manifest(tmp_path: Path, artifacts: list[dict[str, object]]) -> Path:
    return write_manifest(tmp_path / "m.yaml", artifacts)


def test_options_are_checked_per_kind_with_key_paths(tmp_path: Path) -> None:
    path = _manifest(tmp_path, [
        {"id": "a", "title": "t", "kind": "diff", "versions": ">=1", "options": {"colour": 1}},
        {"id": "b", "title": "t", "kind": "hf-file",
         "options": {"repos": ["not a repo"], "filename": "a/b", "content": 3}},
        {"id": "c", "title": "t", "kind": "plugin", "versions": ">=1",
         "options": {"module": "1bad", "classes": {"X": 2}}},
        {"id": "d", "title": "t", "kind": "dropin", "versions": ">=1",
         "options": {"scales_env": "NOT-A-VAR", "scale_vectors": "many",
                     "requires_env": ["OK_VAR"]}},
    ])
    with pytest.raises(ManifestError) as info:
        loader.load(str(path))
    problems = info.value.problems
    expected = [
        "artifacts[0].options.colour: unknown key (known keys: requires_env)",
        "artifacts[1].options.repos[0]: 'not a repo' is not an 'org/name' Hugging Face repo id",
        "artifacts[1].options.filename: 'a/b' is not a plain file name",
        "artifacts[1].options.content: expected dict or str, got integer",
        "artifacts[2].options.architectures: required key is missing",
        "artifacts[2].options.module: '1bad' is not a Python module name",
        "artifacts[2].options.classes.X: expected a string, got integer",
        "artifacts[3].options.scales_env: 'NOT-A-VAR' is not a valid environment variable",
        "artifacts[3].options.scale_vectors: expected an integer, got string",
    ]
    for fragment in expected:
        assert any(p == f"{path}: {fragment}" or p.startswith(f"{path}: {fragment}")
                   for p in problems), (fragment, problems)
    assert len(problems) == len(expected), problems


def test_bad_options_exit_2_naming_the_manifest_and_change_nothing(tmp_path: Path,
                                                                   site: Path) -> None:
    path = _manifest(tmp_path, [{"id": "b", "title": "t", "kind": "hf-file",
                                 "options": {"filename": 7}}])
    before = tree_digest(tmp_path)
    result = run_cli("--site-packages", site, "--manifest", path, "apply")
    assert result.code == 2
    assert f"{path}: artifacts[0].options.filename: expected a string, got integer" in result.err
    assert tree_digest(tmp_path) == before


def test_versions_is_required_only_where_a_distribution_is_acted_on(tmp_path: Path) -> None:
    fine = _manifest(tmp_path, [{"id": "b", "title": "t", "kind": "hf-file"}])
    (artifact,) = loader.load(str(fine)).artifacts
    assert artifact.variants[0].versions is None
    assert artifact.covered_versions() == "any"
    missing = write_manifest(tmp_path / "n.yaml", [
        {"id": "a", "title": "t", "kind": "diff"},
        {"id": "c", "title": "t", "kind": "dropin", "variants": [{"versions": ">=1"}, {}]}])
    with pytest.raises(ManifestError) as info:
        loader.load(str(missing))
    assert [p.split(": ", 2)[1] for p in info.value.problems] == [
        "artifacts[0].versions", "artifacts[1].variants[1].versions"]


def test_store_roots_come_from_the_manifests_artifacts(tmp_path: Path) -> None:
    """root_for sees the artifact: only kinds the manifest uses add a root to trust."""
    env = {"HF_HOME": str(tmp_path / "hf")}
    with_hf = loader.load(str(_manifest(tmp_path, [{"id": "b", "title": "t",
                                                    "kind": "hf-file"}])))
    assert store_roots(with_hf.artifacts, env) == (hub_cache(env),)
    assert store_roots((), env) == ()


def _describe_of(source: str) -> Callable[[object], str]:
    namespace: dict[str, Any] = {"__name__": "not-main"}  # the probe defines, does not run
    exec(compile(source, "<target script>", "exec"), namespace)
    describe: Callable[[object], str] = namespace["_describe"]
    return describe


def test_the_plugin_and_the_registry_probe_describe_an_entry_alike() -> None:
    """The plugin's register() and verify's registry probe share one bundled _describe()."""
    class Model:
        pass

    lazy = SimpleNamespace(module_name="adapter", class_name="Model")
    imported = SimpleNamespace(model_cls=Model)
    for source in (register_module("a", {"X": "adapter:Model"}), inscript.bundled("_registry.py")):
        describe = _describe_of(source)
        assert describe(lazy) == "adapter:Model"
        assert describe(imported) == f"{Model.__module__}:{Model.__qualname__}"


def test_the_plugin_register_module_is_byte_for_byte_what_installed_plugins_hold() -> None:
    """A plugin installed by an earlier ascendpatch must still read as installed (not a
    conflict): the register() module it holds is exactly what would be written now."""
    text = register_module("my-id", {"A": "m:A", "B": "m:C"})
    assert hashlib.sha256(text.encode()).hexdigest() == \
        "7b44e7d44f2bd037c5de54ba4707af77c86a2a5555657a928b81fb3058d4dbea"


def _release(version: str) -> tuple[Distribution, Target]:
    dist = cast(Distribution, SimpleNamespace(name="pkg", version=version,
                                              parsed_version=Version(version)))
    return dist, cast(Target, SimpleNamespace(get=lambda name: dist))


def test_the_kind_chooses_the_variant_and_the_planner_acts_on_its_choice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    old, new = Variant("<2", None, (), {}), Variant(">=2", None, (), {})
    artifact = Artifact("a", "A", "file", "pkg", (old, new))
    dist, target = _release("2.1")
    assert BaseKind().choose_variant(artifact, dist, {}) is new  # the default: by version

    class Refusing(BaseKind):
        name = "file"

        def choose_variant(self, artifact: Artifact, dist: Distribution,
                           env: Mapping[str, str]) -> Variant | Skip | None:
            return Skip("the kind says no", Level.WARN)

    monkeypatch.setitem(KINDS, "file", Refusing())
    assert planner.site_for(artifact, target, {}) == Skip("the kind says no", Level.WARN)


_LOADED_KINDS = """
import sys
from ascendpatch.manifest import loader
loader.load(sys.argv[1])
print(sorted(m for m in sys.modules if m.startswith(("ascendpatch.kinds.", "ascendpatch.patchfile",
                                                     "dotenv", "ascendpatch.deploy.log"))))
"""


@pytest.mark.parametrize(("artifacts", "loaded"), [
    ([], []),
    ([{"id": "f", "title": "f", "kind": "file", "distribution": "six", "versions": ">=1",
       "source": "f.py", "targets": ["six.py"]}],
     ["ascendpatch.kinds.base", "ascendpatch.kinds.file"]),
])
def test_a_manifest_loads_only_the_kinds_its_artifacts_name(
        tmp_path: Path, artifacts: list[dict[str, object]], loaded: list[str]) -> None:
    """kinds.KINDS makes a kind when first asked for: validating a manifest without a diff
    does not load the patch matcher, without a drop-in not the log rules, without an env-file
    not python-dotenv (install's plan waits for these imports before its resolver starts)."""
    (tmp_path / "f.py").write_text("x = 1\n")
    manifest = write_manifest(tmp_path / "m.yaml", artifacts)
    proc = subprocess.run([sys.executable, "-c", _LOADED_KINDS, str(manifest)],
                          capture_output=True, text=True, check=True, cwd=REPO)
    assert proc.stdout.strip() == repr(loaded)


def test_the_registry_is_every_kind_in_verifys_order_and_only_those() -> None:
    assert list(KINDS) == ["diff", "plugin", "dropin", "file", "hf-file", "env-file"]
    assert [kind.name for kind in KINDS.values()] == list(KINDS)
    assert "nope" not in KINDS and KINDS.get("nope") is None
    with pytest.raises(KeyError):
        KINDS["nope"] = KINDS["file"]
    assert KINDS["diff"] is KINDS["diff"]  # made once
    assert not hasattr(KINDS, "clear") and not hasattr(KINDS, "pop")  # nothing removes one


def test_a_kind_that_cannot_load_is_an_error_not_an_unknown_kind(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyError while a kind's module loads must not read as "no such kind" to ``get``
    (validate and store_roots would then take a real kind for a planned one, silently)."""
    import importlib

    from ascendpatch import kinds

    registry = kinds._Registry()
    real = importlib.import_module

    def broken(name: str) -> object:
        if name == "ascendpatch.kinds.file":
            raise KeyError("a bug in the module")
        return real(name)

    monkeypatch.setattr(importlib, "import_module", broken)
    with pytest.raises(RuntimeError, match="kind 'file' cannot be loaded"):
        registry.get("file")
    assert registry.get("nope") is None
