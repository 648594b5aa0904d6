"""A manifest's parse is kept between runs (manifest/parsed.py): a later run that reads the
same text by the same parser takes the kept document without importing PyYAML, and gets what
PyYAML would give, type for type. Any other text, parser or kept file is parsed again; nothing
that may be a secret is ever kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascendpatch import catalog
from ascendpatch.errors import ManifestError
from ascendpatch.manifest import loader, parsed, yamlparse
from tests.kit.caches import NOBODY, plant, shared_cache

GOOD = "name: kept\nprotected: [torch, torch-npu]\nno_deps: [step-audio2]\nartifacts: []\n"


def _kept() -> list[Path]:
    folder = catalog.cache_dir() / "manifests"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def _typed(value: Any) -> Any:
    """``value`` with every scalar tagged by its exact type (1 == 1.0 == True otherwise)."""
    if isinstance(value, dict):
        return {"dict": [(_typed(k), _typed(v)) for k, v in value.items()]}
    if isinstance(value, list):
        return {"list": [_typed(v) for v in value]}
    return (type(value).__name__, value)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_second_load_takes_the_kept_parse_and_imports_no_yaml(tmp_path: Path) -> None:
    """Real processes: the first load parses (PyYAML imported), the second does not import
    it and builds the same manifest. On the code before, PyYAML was imported by every load."""
    path = _write(tmp_path / "m.yaml", GOOD)
    script = ("import sys; from ascendpatch.manifest import loader; m = loader.load(sys.argv[1]); "
              "print(repr(m)); print('yaml' in sys.modules)")

    def run() -> list[str]:
        proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                              text=True, check=True, env=os.environ)
        return proc.stdout.splitlines()

    first, second = run(), run()
    assert first[1] == "True" and second[1] == "False"
    assert first[0] == second[0]
    assert len(_kept()) == 1


@pytest.mark.parametrize("name", loader.bundled_names())
def test_every_bundled_manifest_loads_the_same_from_its_kept_parse(name: str) -> None:
    cold = loader.load(name)
    warm = loader.load(name)
    assert warm == cold
    text = loader.resolve_name(name).read_text(encoding="utf-8")
    assert _typed(parsed.document(text, loader.resolve_name(name))) == \
        _typed(yamlparse.parse(text, loader.resolve_name(name)))


def test_the_kept_parse_is_used_only_for_the_very_same_text(tmp_path: Path) -> None:
    """An edit of the same size with the old timestamps put back is still read: the key is
    the text's SHA-256, not a stat."""
    path = _write(tmp_path / "m.yaml", GOOD)
    assert loader.load(str(path)).protected == ("torch", "torch-npu")
    before = path.stat()
    _write(path, GOOD.replace("torch-npu", "torch-abc"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert loader.load(str(path)).protected == ("torch", "torch-abc")


def test_another_parser_parses_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept parse names the stats of the parser's files (ascendpatch's yamlparse.py and
    PyYAML's): an upgrade of either means the text is parsed again."""
    path = _write(tmp_path / "m.yaml", GOOD)
    parsed.document(GOOD, path)
    calls: list[str] = []
    real = yamlparse.parse
    def counted(text: str, where: Path) -> object:
        calls.append(text)
        return real(text, where)

    monkeypatch.setattr(yamlparse, "parse", counted)
    parsed.document(GOOD, path)
    assert calls == []
    stats = parsed.parser_stats()
    assert stats is not None
    monkeypatch.setattr(parsed, "parser_stats", lambda: [stats[0], [*stats[1][:-1], 1]])
    parsed.document(GOOD, path)
    assert calls == [GOOD]


@pytest.mark.parametrize(("text", "secret"), [
    ("name: x\nenv:\n  DB_PASS: hunter2hunter2\n", "hunter2hunter2"),
    ("name: x\nlaunch:\n  args: [--api-key, sk-live-0123456789]\n", "sk-live-0123456789"),
    ("name: x\nartifacts:\n- id: t\n  title: t\n  kind: env-file\n  options:\n    file: a.env\n"
     "    key: HF_TOKEN\n    value: hf_abcdefghij\n", "hf_abcdefghij"),
    ("name: x\ndescription: from https://user:pa55word@mirror.example/simple\n", "pa55word"),
    ("name: x\ndescription: https://mirror.example/simple/0a1b2c3d4e5f6a7b8c9d/x\n",
     "0a1b2c3d4e5f6a7b8c9d"),
    ("name: x\ndescription: mirror.example/simple?token=s3cr3tvalue\n", "s3cr3tvalue"),
    ("name: x\ndescription: HF_TOKEN=hf_zzzzzzzzzz\n", "hf_zzzzzzzzzz"),
    ("name: x\napi_key: 12345678\n", "12345678"),
    ("name: x\ntarget:\n  image: ops@registry.example/img\n", "ops@registry"),
])
def test_nothing_that_may_be_a_secret_is_kept(tmp_path: Path, text: str, secret: str) -> None:
    """A manifest that hands values to processes or files (env, launch, options), or holds a
    value the credential rule flags, is parsed every run: nothing of it reaches the cache."""
    path = _write(tmp_path / "m.yaml", text)
    for _ in range(2):
        assert _typed(parsed.document(text, path)) == _typed(yaml.safe_load(text))
    assert _kept() == []
    cache = catalog.cache_dir()
    assert not any(secret.encode() in f.read_bytes() for f in cache.rglob("*") if f.is_file())


@pytest.mark.parametrize("text", [
    "name: x\ndescription: 2024-01-01\n",  # a date: not JSON
    "name: x\ndescription: !!binary aGVsbG8=\n",  # bytes
    "name: x\ndescription: .nan\n",  # not finite
    "name: x\n1: one\n",  # a key that is not a string
])
def test_what_json_cannot_hold_exactly_is_parsed_every_run(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path / "m.yaml", text)
    first = parsed.document(text, path)
    assert _typed(parsed.document(text, path)) == _typed(first)
    assert _kept() == []


def test_a_malformed_or_too_deep_text_is_never_kept(tmp_path: Path) -> None:
    for text in ("name: [x\n", "a: " + "[" * 70 + "]" * 70 + "\n", "a: 1\na: 2\n"):
        path = _write(tmp_path / "m.yaml", text)
        for _ in range(2):
            with pytest.raises(ManifestError):
                parsed.document(text, path)
    assert _kept() == []


# JSON-like documents: what a kept parse must give back type for type
_keys = st.text(st.characters(codec="utf-8"), max_size=8).filter(
    lambda k: k != "<<")  # (YAML's merge key)
_scalars = (st.none() | st.booleans() | st.integers(-(10 ** 30), 10 ** 30)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(st.characters(codec="utf-8"), max_size=20))
_documents = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(_keys, inner, max_size=4), max_leaves=20)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.dictionaries(_keys, _documents, max_size=5))
def test_a_kept_parse_is_what_pyyaml_gives_type_for_type(tmp_path: Path, doc: dict[str, Any]) \
        -> None:
    text = yaml.safe_dump(doc, allow_unicode=True)
    path = tmp_path / "h.yaml"
    expected = _typed(yaml.safe_load(text))
    assert _typed(parsed.document(text, path)) == expected  # parsed (and perhaps kept)
    assert _typed(parsed.document(text, path)) == expected  # the kept one, if kept


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=300) | st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=12).map(lambda v: json.dumps(v).encode()))
def test_a_kept_file_of_any_shape_gives_the_true_parse(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "m.yaml"
    where = parsed.cache_path(path)
    where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    where.write_bytes(raw)
    assert parsed.document(GOOD, path) == yaml.safe_load(GOOD)


@pytest.mark.parametrize("document", [
    {"name": "planted"},
    {"name": float("nan")},
    json.loads("[" * 100 + "]" * 100),
])
def test_a_kept_file_with_the_right_key_but_another_shape_is_not_taken(
        tmp_path: Path, document: Any) -> None:
    """Even one naming this text's digest and parser: NaN, or too deep, is parsed again (a
    plain document naming them is taken: only this user can write the folder)."""
    path = _write(tmp_path / "m.yaml", GOOD)
    import hashlib

    kept = {"format": parsed.FORMAT, "sha256": hashlib.sha256(GOOD.encode()).hexdigest(),
            "parser": parsed.parser_stats(), "document": document}
    where = parsed.cache_path(path)
    where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    where.write_text(json.dumps(kept))
    got = parsed.document(GOOD, path)
    if isinstance(document, dict) and document["name"] == "planted":
        assert got == document
    else:
        assert got == yaml.safe_load(GOOD)


def test_a_fifo_or_link_where_the_kept_file_goes_is_parsed_around(tmp_path: Path) -> None:
    path = _write(tmp_path / "m.yaml", GOOD)
    where = parsed.cache_path(path)
    where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.mkfifo(where)
    assert parsed.document(GOOD, path) == yaml.safe_load(GOOD)  # (a FIFO would hang a read)
    where.unlink()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}")
    where.symlink_to(elsewhere)
    assert parsed.document(GOOD, path) == yaml.safe_load(GOOD)
    assert elsewhere.read_text() == "{}"


def test_a_cache_another_user_can_write_is_not_used_and_says_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real second user (uid 65534 via setpriv) owns the cache and plants a kept parse that
    names this very text: it is never taken, nothing is written there, and no line is added
    to the command's output (the cache only saves time)."""
    import hashlib

    from ascendpatch import progress

    path = _write(tmp_path / "m.yaml", GOOD)
    with shared_cache() as shared:
        monkeypatch.setenv("ASCENDPATCH_CACHE", str(shared))
        where = parsed.cache_path(path)
        kept = {"format": parsed.FORMAT, "sha256": hashlib.sha256(GOOD.encode()).hexdigest(),
                "parser": parsed.parser_stats(), "document": {"name": "planted"}}
        plant(where, json.dumps(kept).encode())
        said: list[str] = []
        monkeypatch.setattr(progress, "notice", said.append)
        assert loader.load(str(path)).name == "kept"
        assert said == []
        assert [p.name for p in where.parent.iterdir()] == [where.name]
        assert where.stat().st_uid == NOBODY


def test_the_credential_rule_is_the_one_pips_kept_settings_use() -> None:
    from ascendpatch import redact

    assert redact.may_be_credential("index-url", "https://u:p@mirror.example/simple")
    assert redact.may_be_credential("x", "https://mirror.example/simple/0a1b2c3d4e5f6a7b8c9d/")
    assert not redact.may_be_credential("index-url", "https://mirror.example/simple")
