"""Manifest errors all at once, each with its key path and the nearest known name; `manifests
--manifest FILE` validates that file (issue 25, item 5)."""

from __future__ import annotations

import ast
import re
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascendpatch.errors import MAX_PROBLEMS_SHOWN
from ascendpatch.manifest.validate import MANIFEST
from tests.kit import REPO, TRACEBACK, run_cli
from tests.kit.properties import deadline

BAD = """\
name: bad
desription: x
artifacts:
  - id: a
    title: A
    kind: dif
    distribution: vllm-ascend
    versions: ">=1"
  - id: b
    titel: B
    kind: diff
    variants:
      - versions: "==1"
        sourc: x.patch
"""
PROBLEMS = [
    "desription: unknown key; did you mean 'description'? (known keys: accepted_conflicts, "
    "artifacts, description, env, extends, launch, log_rules, name, no_deps, protected, stack, "
    "target)",
    "artifacts[0].kind: unknown kind 'dif'; did you mean 'diff'? (known: diff, dropin, "
    "env-file, file, hf-file, plugin)",
    "artifacts[1].titel: unknown key; did you mean 'title'? (known keys: description, "
    "distribution, enabled, id, kind, needed_if, not_needed, options, sha256, source, targets, "
    "title, variants, versions)",
    "artifacts[1].title: required key is missing",
    "artifacts[1].variants[0].sourc: unknown key; did you mean 'source'? (known keys: sha256, "
    "source, targets, versions)",
]


def test_manifests_validates_the_file_given_listing_every_problem(tmp_path: Path) -> None:
    """On main `manifests --manifest FILE` listed the bundled manifests (exit 0) and said
    nothing of FILE; the other commands named one problem and "(+4 more problems)"."""
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    result = run_cli("manifests", "--manifest", path)
    assert result.code == 2, result.out + result.err
    assert result.out.splitlines() == [f"[FAIL] {path}: invalid, 5 problems",
                                       *(f"    {path}: {p}" for p in PROBLEMS)]
    as_json = run_cli("--json", "manifests", "--manifest", path).json
    assert as_json["exit_code"] == 2
    assert as_json["results"][0]["data"]["problems"] == [f"{path}: {p}" for p in PROBLEMS]


def test_every_command_lists_every_problem_of_its_manifest(tmp_path: Path, site: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    result = run_cli("--site-packages", site, "--manifest", path, "status")
    assert result.code == 2
    assert result.err.splitlines() == [f"[FAIL] {path}: {PROBLEMS[0]} (+4 more problems)",
                                       *(f"    {path}: {p}" for p in PROBLEMS[1:])]
    error = run_cli("--json", "--site-packages", site, "--manifest", path, "status").json["error"]
    assert error["details"] == [f"{path}: {p}" for p in PROBLEMS[1:]]


def test_a_valid_file_is_exit_0_and_only_that_file(tmp_path: Path) -> None:
    result = run_cli("manifests", "--manifest", REPO / "manifests" / "vllm-ascend-0.18.0.yaml")
    assert result.code == 0, result.out + result.err
    assert len(result.out.splitlines()) == 1
    assert result.out.startswith("[OK] ") and "vllm-ascend==0.18.0" in result.out


def test_a_key_with_a_newline_is_quoted_on_one_line(tmp_path: Path) -> None:
    """Found by tests/test_parser_properties.py on main: `? 0\\n\\n  ...` is the key '0\\n...',
    and its key path broke the message in two."""
    path = tmp_path / "m.yaml"
    path.write_bytes(b"? 0\n\n  ...\n")
    result = run_cli("manifests", "--manifest", path)
    assert result.code == 2
    assert f"    {path}: '0\\n...': unknown key (known keys: " in result.out
    assert f"{path}: name: required key is missing" in result.out


def test_unknown_command_names_and_artifact_ids_get_a_did_you_mean(site: Path) -> None:
    command = run_cli("staus")
    assert command.code == 2
    assert "invalid choice: 'staus'; did you mean 'status'? (choose from 'apply'," in command.err
    artifact = run_cli("--site-packages", site, "status", "sampler-topk-top-fallback")
    assert artifact.code == 2
    assert "did you mean 'sampler-topk-topp-fallback'?" in artifact.err


# --------------------------------------------------------------------------- properties

_KEYS = st.sampled_from(["name", "nme", "description", "desription", "artifacts", "artifact",
                         "id", "title", "titel", "kind", "knd", "diff", "dif", "variants",
                         "versions", "version", "source", "sourc", "targets", "options",
                         "stack", "packages", "log_rules", "class", "env", "launch"]) \
    | st.text(max_size=12)
_LEAF = st.sampled_from(["diff", "dif", "plugin", ">=1", "==1", "x.patch", "fault"]) \
    | st.integers(-3, 3) | st.booleans() | st.none() | st.text(max_size=8)
_TREE = st.recursive(_LEAF, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(_KEYS, inner, max_size=5), max_leaves=40)
_DOCUMENT = st.dictionaries(_KEYS, _TREE, max_size=8)
_PATH_START = re.compile(r"(?P<key>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[\w-]+)"
                         r"(?:[.\[]|: )", re.ASCII)


def _starts_with_a_key(rest: str, keys: set[str]) -> bool:
    """Whether the key path ``rest`` starts with one of ``keys`` (quoted keys unquoted; a key
    cut short, "'abc'...", is the start of one)."""
    found = _PATH_START.match(rest)
    if found is None:
        return False
    key = found["key"]
    if key[0] not in "'\"":
        return key in keys
    text = ast.literal_eval(key)
    cut = rest[found.end("key"):].startswith("...")
    return any(k.startswith(text) if cut else k == text for k in keys)


@settings(max_examples=100, deadline=deadline(3000),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(document=_DOCUMENT)
def test_any_nested_document_is_valid_or_exit_2_with_a_key_path_per_problem(
        document: dict[object, object], tmp_path: Path) -> None:
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    path = folder / "m.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    result = run_cli("manifests", "--manifest", path)
    assert result.code in (0, 2), result.out + result.err
    assert TRACEBACK not in result.out + result.err
    lines = result.out.splitlines()
    assert len(lines) <= MAX_PROBLEMS_SHOWN + 2  # the verdict, the problems, "... and N more"
    if result.code == 0:
        assert lines[0].startswith("[OK] ")
        return
    assert lines[0].startswith(f"[FAIL] {path}: invalid, ")
    loaded = yaml.safe_load(path.read_text())  # (YAML reads '\x85' in a key as a space)
    keys = loaded if isinstance(loaded, dict) else {}
    top = {str(k) for k in keys} | set(MANIFEST.fields)  # its keys, or a missing one
    for line in lines[1:]:
        if line.startswith("    ... and "):
            continue
        assert line.startswith(f"    {path}: ") and len(line) < 700, line
        rest = line[len(f"    {path}: "):]
        assert rest.startswith("(top level)") or _starts_with_a_key(rest, top), line
