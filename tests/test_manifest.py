"""Manifest loading: safe YAML, every problem at once with its key path, extends, ${VAR}."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from ascendpatch.errors import InvalidInputError, ManifestError
from ascendpatch.manifest import loader
from ascendpatch.manifest.model import version_in
from tests.kit import TRACEBACK, run_cli, tree_digest


def _write(tmp_path: Path, text: str, name: str = "m.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_malformed_yaml_names_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: x\nartifacts: [\n  - id: a\n")
    with pytest.raises(ManifestError, match=r"m.yaml: malformed YAML at line \d+"):
        loader.load(str(path))


def test_yaml_is_loaded_safely(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(ManifestError, match="malformed YAML"):
        loader.load(str(path))


def test_every_problem_is_reported_at_once_with_key_paths(tmp_path: Path) -> None:
    path = _write(tmp_path, """
name: ok
colour: blue
stack:
  packages:
    torch: "=>2.9"
artifacts:
  - id: first
    title: fine
    kind: diff
    versions: ">=1"
  - id: Bad ID
    title: 3
    kind: teleport
    versions: ">=1"
    targets: notalist
    surprise: true
  - id: first
    title: duplicate
    kind: diff
""")
    with pytest.raises(ManifestError) as info:
        loader.load(str(path))
    problems = info.value.problems
    expected = [
        "colour: unknown key",
        "stack.packages.torch: '=>2.9' is not a valid PEP 440 version specifier",
        "artifacts[1].id: 'Bad ID' is not a valid id",
        "artifacts[1].title: expected a string, got integer",
        "artifacts[1].kind: unknown kind 'teleport'",
        "artifacts[1].targets: expected a list, got string",
        "artifacts[1].surprise: unknown key",
        "artifacts[2].id: duplicate id 'first'",
        "artifacts[2].versions: required key is missing",
    ]
    for fragment in expected:
        assert any(fragment in p for p in problems), (fragment, problems)
    assert all(p.startswith(f"{path}: ") for p in problems)


def test_cli_reports_bad_manifest_with_exit_2_and_a_line_per_problem(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: x\nartifacts:\n  - id: a\n    kind: diff\n    sneaky: 1\n")
    site = tmp_path / "sp"
    site.mkdir()
    before = tree_digest(tmp_path)
    result = run_cli("--site-packages", site, "--manifest", path, "apply")
    assert result.code == 2
    head, *rest = result.err.strip().splitlines()
    assert head.startswith("[FAIL] ") and "(+2 more problems)" in head
    assert len(rest) == 2 and all(line.startswith(f"    {path}: artifacts[0].") for line in rest)
    assert TRACEBACK not in result.err
    assert tree_digest(tmp_path) == before


def test_extends_layers_child_over_parent(tmp_path: Path) -> None:
    _write(tmp_path, """
name: base
protected: [torch]
stack: {packages: {torch: "==2.9.0", vllm: "==0.18.0"}}
artifacts:
  - {id: a, title: A, kind: diff, distribution: x, versions: ">=1", source: a.patch}
  - {id: b, title: B, kind: diff, distribution: x, versions: ">=1", source: b.patch}
""", "base.yaml")
    child = _write(tmp_path, """
name: child
extends: [base]
protected: [torch-npu]
stack: {packages: {vllm: "==0.18.1"}}
artifacts:
  - {id: b, title: B2, kind: diff, distribution: x, versions: ">=2", source: b2.patch}
""", "child.yaml")
    manifest = loader.load(str(child))
    assert manifest.protected == ("torch", "torch-npu")
    assert {p.name: p.specifier for p in manifest.stack.packages} == {
        "torch": "==2.9.0", "vllm": "==0.18.1"}
    assert [(a.id, a.title) for a in manifest.artifacts] == [("a", "A"), ("b", "B2")]


def test_extends_cycle_is_an_error(tmp_path: Path) -> None:
    _write(tmp_path, "name: a\nextends: [b]\n", "a.yaml")
    _write(tmp_path, "name: b\nextends: [a]\n", "b.yaml")
    with pytest.raises(ManifestError, match="cycle"):
        loader.load(str(tmp_path / "a.yaml"))


def test_source_variables_expand_and_missing_ones_name_the_fix(tmp_path: Path) -> None:
    path = _write(tmp_path, """
name: model
artifacts:
  - id: adapter
    title: adapter
    kind: dropin
    distribution: x
    versions: ">=1"
    source: ${MODEL_DIR}/patches/muse_glimmer.py
    targets: [x/y.py]
""")
    artifact = loader.load(str(path)).artifacts[0]
    source = artifact.variants[0].source
    assert source is not None
    resolved = loader.resolve_source(artifact, source, {"MODEL_DIR": "/models/mg"})
    assert resolved == Path("/models/mg/patches/muse_glimmer.py")
    with pytest.raises(InvalidInputError, match=r"needs \$\{MODEL_DIR\}.*export MODEL_DIR"):
        loader.resolve_source(artifact, source, {})


def test_unknown_bundled_name_lists_what_exists() -> None:
    with pytest.raises(InvalidInputError, match="no bundled manifest named 'nope'"):
        loader.load("nope")


@pytest.mark.parametrize("spec, version, expected", [
    (">=0.14.0rc1,<0.23.0", "0.22.1rc2", True),
    # PEP 440: "<0.23.0" never admits 0.23.0's own pre-releases; ranges must say <=0.23.0rc1.
    (">=0.14.0rc1,<0.23.0", "0.23.0rc1", False),
    (">=0.14.0rc1,<=0.23.0rc1", "0.23.0rc1", True),
    (">=0.14.0rc1,<0.23.0", "0.23.0", False),
    ("==2.10.0", "2.10.0+cpu", True),
    (">=0.23.0,<0.25.1rc1", "0.23.0.post1", True),
    ("<0.14.0rc1", "0.13.0", True),
])
def test_versions_with_pre_releases_and_local_labels(spec: str, version: str,
                                                     expected: bool) -> None:
    assert version_in(spec, Version(version)) is expected


# ---------------------------------------------------------------- issue 11 item 14: bad input


@pytest.mark.parametrize(("text", "cause"), [
    ("name: x\nlaunch:\n  deep: " + "[" * 5000 + "]" * 5000 + "\n", "nesting depth"),
    ("name: x\nlaunch:\n  deep: " + "{a: " * 80 + "1" + "}" * 80 + "\n", "more than 64 levels"),
    ("name: x\nartifacts:\n- id: [x]\n  title: t\n  kind: diff\n  versions: '>=1'\n",
     "artifacts[0].id: expected a string, got list"),
    ("name: x\nlaunch:\n  tensor_parallel_size: four\n",
     "launch.tensor_parallel_size: expected a whole number >= 1"),
    ("name: x\nenv:\n  A: '1'\n  A: '2'\n", "duplicate key 'A'"),
    ("name: x\nartifacts:\n- id: a\n  id: b\n  title: t\n  kind: diff\n  versions: '>=1'\n",
     "duplicate key 'id'"),
])
def test_hostile_manifests_exit_2_with_a_named_cause(tmp_path: Path, site: Path, text: str,
                                                      cause: str) -> None:
    path = _write(tmp_path, text)
    for command in ("status", "logs"):
        extra = [tmp_path / "serve.log"] if command == "logs" else []
        (tmp_path / "serve.log").write_text("INFO: Application startup complete.\n")
        result = run_cli("--site-packages", site, "--manifest", path, command, *extra)
        assert result.code == 2, (command, result.err)
        assert cause in result.err and str(path) in result.err
        assert "unexpected error" not in result.err


def test_the_c_loader_is_used_and_merge_keys_still_work(tmp_path: Path) -> None:
    import yaml

    from ascendpatch.manifest import yamlparse

    assert yamlparse._Loader.__mro__[1] is getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    path = _write(tmp_path, "name: x\nlaunch:\n  base: &b {a: 1}\n  more:\n    <<: *b\n"
                            "    c: 2\n")
    assert loader.load(str(path)).launch["more"] == {"a": 1, "c": 2}


@pytest.mark.parametrize(("args", "cause"), [
    (["--lock-timeout", "nan", "status"], "--lock-timeout: 'nan' is not a finite number"),
    (["--lock-timeout", "-1", "status"], "--lock-timeout: '-1' is not a finite number"),
    (["status", "--site-packages", ""], "--site-packages: an empty path is not a folder"),
    (["apply", "--with", "no-such-fix"], "--with no-such-fix: no such artifact"),
    (["verify", "--with", "no-such-fix"], "--with no-such-fix: no such artifact"),
])
def test_hostile_cli_inputs_exit_2(tmp_path: Path, site: Path, args: list[str],
                                   cause: str) -> None:
    manifest = _write(tmp_path, "name: x\n")
    before = tree_digest(site)
    result = run_cli("--manifest", manifest, *(["--site-packages", str(site)]
                                                if "--site-packages" not in args else []), *args)
    assert result.code == 2 and cause in result.err, result.err
    assert tree_digest(site) == before


def test_snapshot_output_and_sandbox_folder_are_checked_first(tmp_path: Path,
                                                              site: Path) -> None:
    manifest = _write(tmp_path, "name: x\n")
    base: list[str | Path] = ["--site-packages", site, "--manifest", manifest]
    at_dir = run_cli(*base, "snapshot", "-o", tmp_path)
    assert at_dir.code == 2 and "is a folder, not a file" in at_dir.err
    missing = run_cli(*base, "snapshot", "-o", tmp_path / "no" / "such" / "s.json")
    assert missing.code == 2 and "does not exist" in missing.err and "mkdir -p" in missing.err
    assert not (tmp_path / "no").exists()
    a_file = tmp_path / "file.txt"
    a_file.write_text("keep\n")
    sandbox = run_cli("sandbox", a_file)
    assert sandbox.code == 2 and "is a file, not a folder" in sandbox.err
    assert a_file.read_text() == "keep\n"


@pytest.mark.parametrize("artifacts", ["1", "true", "'x'", "{a: 1}"])
def test_artifacts_that_are_not_a_list_are_one_clear_error(tmp_path: Path, artifacts: str) -> None:
    """`artifacts: 1` made the duplicate-id check iterate an int (exit 3); the Hypothesis
    manifest suite found it."""
    path = tmp_path / "m.yaml"
    path.write_text(f"name: bad\nartifacts: {artifacts}\n")
    (tmp_path / "site").mkdir()
    result = run_cli("--site-packages", tmp_path / "site", "--manifest", path, "status")
    assert result.code == 2, result.out + result.err
    assert "artifacts" in result.err and "unexpected error" not in result.err


def test_a_manifest_without_from_metadata_loads_no_requirement_parser() -> None:
    """PEP 508's parser (packaging.requirements, whose markers load logging, platform and
    sysconfig) only where stack.from_metadata is checked: status and apply of the default
    manifest start 8 ms sooner. A real process, each bundled manifest that has none."""
    import subprocess
    import sys

    script = ("import sys; from ascendpatch.manifest import loader\n"
              "for name in loader.bundled_names():\n"
              "    if 'from_metadata' not in loader.resolve_name(name).read_text():\n"
              "        loader.load(name)\n"
              "print('packaging.requirements' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    assert proc.stdout.strip() == "False"


def test_a_bad_from_metadata_is_still_named_as_pep_508(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: x\nstack:\n  from_metadata: 'vllm-ascend ==='\n")
    with pytest.raises(ManifestError, match="is not a valid PEP 508 requirement"):
        loader.load(str(path))
