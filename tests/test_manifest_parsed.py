"""A manifest's parse is kept between runs (manifest/parsed.py): a later run that reads the
same file, unchanged by its stat, with the same parser, takes the kept parse without importing
PyYAML, and gets what PyYAML gives, type for type. The kept file holds no word of the
manifest: only where each value is in the text. Any other file, parser or kept file is parsed
again; an invalid manifest, or a cache that is not there or not this user's, is left as it
is."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascendpatch import catalog
from ascendpatch.errors import ManifestError
from ascendpatch.manifest import loader, parsed, yamlparse
from ascendpatch.paths import read_regular_with_stat
from tests.kit import REPO, past_racy_window, seconduid
from tests.kit.caches import NOBODY, plant, shared_cache

GOOD = "name: kept\nprotected: [torch, torch-npu]\nno_deps: [step-audio2]\nartifacts: []\n"


@pytest.fixture(autouse=True)
def cache_root() -> Path:
    """The cache root exists (a run that has used any cache made it): the kept parse is
    written only into one that does."""
    root = catalog.cache_dir()
    root.mkdir(parents=True, mode=0o700)
    return root


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


def _write(path: Path, text: str, settle: bool = True) -> Path:
    path.write_text(text, encoding="utf-8")
    if settle:
        past_racy_window(path)
    return path


def _read(path: Path, settled: bool = False) -> parsed.Reading:
    """The loader's read of ``path`` (``settled``: as if the file were minutes old, for the
    property tests that cannot wait out the racy window for every example)."""
    since = time.time_ns()
    data, info = read_regular_with_stat(path, 1 << 30)
    if settled:
        since = max(info.st_mtime_ns, info.st_ctime_ns) + 10**10
    return parsed.read(data.decode("utf-8"), path, info, since)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the parser (PyYAML) parses."""
    calls: list[str] = []
    real = yamlparse.parse

    def counted(text: str, where: Path, spans: parsed.Spans | None = None) -> object:
        calls.append(text)
        return real(text, where, spans)

    monkeypatch.setattr(yamlparse, "parse", counted)
    return calls


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
def test_every_bundled_manifest_loads_the_same_from_its_kept_parse(
        name: str, parses: list[str]) -> None:
    """Every one, the serving manifests with env, launch and options among them."""
    cold = loader.load(name)
    assert parses
    parses.clear()
    assert loader.load(name) == cold
    assert parses == []


def test_the_kept_file_holds_no_word_of_the_manifest(tmp_path: Path) -> None:
    """A manifest with a token in env, a key and a number in launch, a password in a
    description and a reason: kept, and not one of them, nor a digest of the text, is in the
    cache. The document still comes back whole."""
    secrets = ["hf_QWxhZGRpbjpvcGVuIHNlc2FtZQ", "sk-live-51HsD8K", "hunter2hunter2",
               "Pa55w0rd!", "80123456"]
    text = (f"name: secretive\ndescription: ops password {secrets[3]}\n"
            f"env:\n  HF_TOKEN: {secrets[0]}\n  DB_PASS: {secrets[2]}\n"
            f"launch:\n  args: [--api-key, {secrets[1]}]\n  pin: {secrets[4]}\n"
            f"stack:\n  packages:\n    torch: {{version: '==2.1.0', reason: 'key {secrets[2]}'}}\n")
    path = _write(tmp_path / "m.yaml", text)
    manifest = loader.load(str(path))
    assert manifest.env["HF_TOKEN"] == secrets[0] and manifest.launch["pin"] == 80123456
    kept = _kept()
    assert len(kept) == 1
    found = kept[0].read_bytes()
    for word in [*secrets, "HF_TOKEN", "DB_PASS", "api-key", "secretive",
                 hashlib.sha256(text.encode()).hexdigest()]:
        assert word.encode() not in found, word
    assert loader.load(str(path)) == manifest


def test_a_same_size_edit_with_the_old_timestamps_is_read_again(
        tmp_path: Path, parses: list[str]) -> None:
    """The key is the file's stat, ctime among it, which no one can set back."""
    path = _write(tmp_path / "m.yaml", GOOD)
    assert loader.load(str(path)).protected == ("torch", "torch-npu")
    before = path.stat()
    path.write_text(GOOD.replace("torch-npu", "torch-abc"), encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert loader.load(str(path)).protected == ("torch", "torch-abc")


def test_manifests_in_fresh_folders_each_run_keep_a_bounded_cache(
        tmp_path: Path, parses: list[str]) -> None:
    """One kept parse per manifest path: a manifest copied into a fresh temp folder by each
    CI run or playbook would add one for good each time. The cache keeps the most recently
    written (cachedir.KEEP) and the newest manifest still loads from its kept parse."""
    from ascendpatch import cachedir

    paths = []
    for i in range(cachedir.KEEP + 6):
        (tmp_path / f"run{i}").mkdir()
        paths.append(tmp_path / f"run{i}" / "m.yaml")
        _write(paths[-1], GOOD, settle=False)
        before = set(_kept())
        _read(paths[-1], settled=True).keep()
        (new,) = set(_kept()) - before
        os.utime(new, ns=(10**18 + i, 10**18 + i))  # (one stamp each, whatever the clock)
    assert len(_kept()) == cachedir.KEEP
    parses.clear()
    assert _read(paths[-1], settled=True).document == yaml.safe_load(GOOD)
    assert parses == []  # the newest: from its kept parse
    _read(paths[0], settled=True)
    assert parses == [GOOD]  # the oldest: its kept parse was the one to go


def test_a_file_changed_within_the_racy_window_is_not_kept(tmp_path: Path) -> None:
    path = _write(tmp_path / "m.yaml", GOOD, settle=False)
    loader.load(str(path))
    assert _kept() == []


def test_another_parser_parses_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     parses: list[str]) -> None:
    """The kept parse names the stats of the parser's files: an upgrade of PyYAML (any of
    its files) or of ascendpatch's reading means the text is parsed again."""
    path = _write(tmp_path / "m.yaml", GOOD)
    loader.load(str(path))
    loader.load(str(path))
    assert parses == [GOOD]
    stats = parsed.parser_stats()
    assert stats is not None and any(s[0] == "constructor.py" for s in stats)
    changed = [*stats[:-1], [*stats[-1][:-1], 1]]
    monkeypatch.setattr(parsed, "parser_stats", lambda: changed)
    loader.load(str(path))
    assert parses == [GOOD, GOOD]


@pytest.mark.parametrize("text", [
    "name: x\nbogus: 1\n",  # a validation problem
    "name: [x\n",  # malformed
    "name: x\nname: y\n",  # a duplicate key
    "a: " + "[" * 70 + "]" * 70 + "\n",  # too deep
])
def test_an_invalid_manifest_leaves_nothing_behind(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path / "m.yaml", text)
    for _ in range(2):
        with pytest.raises(ManifestError):
            loader.load(str(path))
    assert _kept() == []


@pytest.mark.parametrize(("text", "kept"), [
    ('name: "caf\\u00e9"\n', False),  # an escape: a word not in the text as itself
    ("name: x\ndescription: 1.0e+3\n", False),  # 1000.0, spelt otherwise
    ("name: x\ndescription: 2024-01-01\n", False),  # a date
    ("name: x\ndescription: !!binary aGVsbG8=\n", False),
    ('name: "tab\\there"\n', True),  # an escaped white space
    ('name: "unit\\x1fsep"\n', False),  # white space only an escape gives
    ("name: >\n  folded\n  lines\n", True),  # folded from several lines: kept as its words
    ("name: a plain scalar\n  over two lines\n", True),
    ("name: 'quoted\n\n  with a break'\n", True),
])
def test_a_value_not_in_the_text_as_itself_is_kept_only_as_words_found_there(
        tmp_path: Path, text: str, kept: bool) -> None:
    path = _write(tmp_path / "m.yaml", text)
    first = _read(path)
    first.keep()
    assert len(_kept()) == kept
    assert not any(word in f.read_bytes() for f in _kept()
                   for word in (b"over", b"lines", b"folded", b"tab"))
    assert _typed(_read(path).document) == _typed(first.document) == \
        _typed(yaml.safe_load(text))


def test_a_small_text_whose_aliases_repeat_a_huge_string_is_kept_small(tmp_path: Path) -> None:
    """400 KB of text whose one string 40,000 aliases repeat: written out, 16 GB (a
    MemoryError, exit 3, when the kept file held the words); as places, a few hundred KB."""
    text = ("name: amp\ndescription: &a " + "A" * 400_000 + "\nlaunch:\n  notes: [" +
            ", ".join(["*a"] * 40_000) + "]\n")
    path = _write(tmp_path / "m.yaml", text)
    manifest = loader.load(str(path))
    assert len(manifest.launch["notes"]) == 40_000
    assert len(_kept()) == 1 and _kept()[0].stat().st_size < 1 << 20
    assert loader.load(str(path)) == manifest


def test_a_folded_string_that_aliases_repeat_past_the_bound_is_not_kept(tmp_path: Path) -> None:
    """Its 50,000 words, written out for each of 2,000 references, would be 10^8 places:
    past MAX_KEPT_NODES, the document is not kept (and is loaded as before)."""
    words = " ".join(["w"] * 25_000)
    text = (f"name: amp\ndescription: &a {words}\n  {words}\nlaunch:\n  notes: [" +
            ", ".join(["*a"] * 2_000) + "]\n")
    path = _write(tmp_path / "m.yaml", text)
    manifest = loader.load(str(path))
    assert len(manifest.launch["notes"]) == 2_000
    assert _kept() == []


# JSON-like documents, as PyYAML writes them out
_keys = st.text(st.characters(codec="utf-8"), max_size=8) | st.integers(-5, 5) | st.booleans()
_scalars = (st.none() | st.booleans() | st.integers(-(10 ** 30), 10 ** 30)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(st.characters(codec="utf-8"), max_size=20))
_documents = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(_keys, inner, max_size=4), max_leaves=20)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=_documents, style=st.sampled_from([None, "'", '"']), flow=st.booleans())
def test_a_kept_parse_is_what_pyyaml_gives_type_for_type(
        tmp_path: Path, doc: Any, style: str | None, flow: bool) -> None:
    text = yaml.safe_dump(doc, allow_unicode=True, default_style=style,
                          default_flow_style=flow)
    path = tmp_path / "h.yaml"
    path.write_text(text, encoding="utf-8")
    expected = _typed(yaml.safe_load(text))
    first = _read(path, settled=True)
    assert _typed(first.document) == expected
    first.keep()
    assert _typed(_read(path, settled=True).document) == expected  # kept, where it could be
    spans: parsed.Spans = {}
    document = yamlparse.parse(text, path, spans)
    places = parsed.encoded(document, text, spans)
    if places is not None:
        assert _typed(parsed.decoded(places, text)) == expected


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=300) | st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=12).map(lambda v: json.dumps(v).encode()))
def test_a_kept_file_of_any_shape_gives_the_true_parse(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(GOOD, encoding="utf-8")
    where = _where(path)
    where.parent.mkdir(exist_ok=True, mode=0o700)
    where.write_bytes(raw)
    assert _read(path, settled=True).document == yaml.safe_load(GOOD)


def _where(path: Path) -> Path:
    from ascendpatch.env.introcache import checksums

    return catalog.cache_dir() / "manifests" / f"{checksums(str(path.absolute()))}.json"


def _kept_of(folder: Path, text: str) -> tuple[Path, Path, dict[str, Any]]:
    """A manifest of ``text`` read and kept (as if minutes old): its path, where its kept
    parse is, and that kept file's JSON, for a test to change and write back."""
    path = folder / "m.yaml"
    path.write_text(text, encoding="utf-8")
    _read(path, settled=True).keep()
    where = _where(path)
    return path, where, json.loads(where.read_text())


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(node=st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3) | st.tuples(
        st.sampled_from(["s", "i", "f", "x"]), st.integers(-3, 40), st.integers(-3, 40)
    ).map(list) | st.tuples(st.just("w"), st.integers(-1, 2)).map(list),
    lambda inner: st.tuples(st.sampled_from(["l", "m"]), st.lists(
        inner | st.tuples(inner, inner).map(list), max_size=3)).map(list), max_leaves=10))
def test_a_kept_document_of_the_right_key_but_any_shape_is_parsed_again(
        tmp_path: Path, node: Any) -> None:
    """Even one naming this very file's stat and parser: places outside the text, numbers
    that are not, keys that are lists; never an exception, and only the true parse or a
    document the places spell."""
    path, where, kept = _kept_of(tmp_path, GOOD)
    kept["document"] = node
    kept["words"] = [[[0, 4], " ", [6, 4]], ["x"]]  # "name kept"; a word kept as itself
    where.write_text(json.dumps(kept))
    document = _read(path, settled=True).document
    try:
        spelt = parsed.decoded(kept, GOOD)
    except (ValueError, TypeError, IndexError, KeyError):
        spelt = None
    assert document in (yaml.safe_load(GOOD), spelt)


def test_a_place_never_points_into_another_value(tmp_path: Path) -> None:
    """Each value is looked for only inside the text of the nodes that made it: short values
    (1, 8, 2, z, q) that also occur inside a token are kept at their own places, so the kept
    file tells nothing of the token's letters (the first version kept the first occurrence
    anywhere: three of the token's characters)."""
    token = "hf_k2Rz8q1"
    text = (f"name: x\nenv:\n  HF_TOKEN: {token}\nlaunch:\n  a: 1\n  b: 8\n  c: 2\n"
            "  d: [z, q, R]\n  e: >\n    q z\n    8 1\n"
            # a block scalar's header comment, an anchor, a tag, quotes (the third review:
            # node marks cover them, and places pointed into them)
            "  f: > # zq8 1R\n    z\n    q\n  g: &z8q1 z\n  h: !!str 8\n  i: 'q'\n")
    path = _write(tmp_path / "m.yaml", text)
    manifest = loader.load(str(path))
    start = text.index(token)
    quoted = text.index("'q'")
    forbidden = [range(start, start + len(token)), range(quoted, quoted + 1),
                 range(quoted + 2, quoted + 3)] + [
        range(at, at + len(word)) for word in ("# zq8 1R", "&z8q1", "!!str")
        for at in [text.index(word)]]
    kept = json.loads(_kept()[0].read_text())
    places: list[list[int]] = []

    def collect(node: Any) -> None:
        if isinstance(node, list) and node and node[0] in ("s", "i", "f"):
            places.append(node[1:])
        elif isinstance(node, list) and node and node[0] in ("l", "m"):
            for item in node[1]:
                collect(item)
        elif isinstance(node, list):
            for item in node:
                collect(item)

    collect(kept["document"])
    places += [part for parts in kept["words"] for part in parts if isinstance(part, list)]
    assert len(places) > 10
    assert all(at not in inside or text[at:at + n] == token
               for at, n in places for inside in forbidden)
    assert loader.load(str(path)) == manifest


@pytest.mark.parametrize(("value", "kept"), [
    ("1" + "0" * 400, True),  # past a float's range: isfinite(int) raised, exit 3 each run
    ("0x" + "f" * 4000, False),  # 4800 decimal digits: str() cannot spell it
])
def test_a_huge_whole_number_is_kept_or_not_and_loads_every_time(
        tmp_path: Path, value: str, kept: bool) -> None:
    path = _write(tmp_path / "m.yaml", f"name: x\nlaunch:\n  seed: {value}\n")
    first = loader.load(str(path))
    assert len(_kept()) == kept
    assert loader.load(str(path)) == loader.load(str(path)) == first


def test_a_whole_number_python_will_not_read_is_exit_2_in_one_line(tmp_path: Path) -> None:
    """5000 decimal digits: PyYAML's int() raises ValueError (exit 3 before, with a log)."""
    from tests.kit import run_cli

    path = _write(tmp_path / "m.yaml", "name: x\nlaunch:\n  seed: " + "1" * 5000 + "\n")
    (tmp_path / "site").mkdir()
    done = run_cli("--manifest", path, "status", "--site-packages", tmp_path / "site")
    assert done.code == 2
    assert "a value that cannot be read: Exceeds the limit (4300" in done.err  # (3.10: no "digits")
    assert len(done.err.strip().splitlines()) == 1 and "unexpected" not in done.err


def test_a_kept_parse_larger_than_four_times_its_text_is_not_kept(tmp_path: Path) -> None:
    """200,000 one-letter words folded into one string: their places would take 2 MB for a
    400 KB text, and reading them back is slower than parsing it."""
    text = "name: x\ndescription: " + " ".join(["a"] * 100_000) + "\n  " + \
        " ".join(["b"] * 100_000) + "\n"
    path = _write(tmp_path / "m.yaml", text)
    assert loader.load(str(path)).description.startswith("a a")
    assert _kept() == []


def test_a_text_with_a_byte_order_mark_is_not_kept(tmp_path: Path) -> None:
    """libyaml's marks are one character short after a BOM."""
    path = _write(tmp_path / "m.yaml", "\ufeff" + GOOD)
    assert loader.load(str(path)).name == "kept"
    assert _kept() == []


def test_a_kept_file_that_spells_more_than_the_text_holds_is_parsed_again(
        tmp_path: Path) -> None:
    """A kept file of 64 KiB whose word table repeats the whole text 5,000 times (4 GB made
    for a 1 MB manifest, found by a review): given up once the characters made pass four
    times the text, and the text is parsed."""
    text = GOOD + "description: " + "x" * 200_000 + "\n"
    path, where, kept = _kept_of(tmp_path, text)
    for words, document in (
            ([[[0, len(text) - i]] for i in range(5_000)], ["l", [["w", i] for i in range(5_000)]]),
            ([[[0, len(text)]] * 5_000], ["w", 0])):  # one entry, one place 5,000 times
        kept["words"], kept["document"] = words, document
        where.write_text(json.dumps(kept))
        assert _read(path, settled=True).document == yaml.safe_load(text)


def test_a_fifo_or_link_where_the_kept_file_goes_is_parsed_around(tmp_path: Path) -> None:
    path = _write(tmp_path / "m.yaml", GOOD)
    where = _where(path)
    where.parent.mkdir(mode=0o700)
    os.mkfifo(where)
    assert loader.load(str(path)).name == "kept"  # (a FIFO would hang a read)
    where.unlink()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}")
    where.symlink_to(elsewhere)
    assert loader.load(str(path)).name == "kept"
    assert elsewhere.read_text() == "{}"


def test_no_cache_root_means_nothing_is_created(tmp_path: Path, cache_root: Path) -> None:
    """A command run with another user's HOME (sudo -E) creates no folder there for this
    cache alone."""
    cache_root.rmdir()
    cache_root.parent.rmdir()
    path = _write(tmp_path / "m.yaml", GOOD)
    loader.load(str(path))
    loader.load(str(path))
    assert not cache_root.exists() and not cache_root.parent.exists()


def test_a_cache_another_user_can_write_is_not_used_and_says_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real second user (uid 65534 via setpriv) owns the cache and plants a kept parse that
    names this very file's stat: it is never taken, nothing is written there, and no line
    is added to the command's output (the cache only saves time)."""
    from ascendpatch import progress

    path = _write(tmp_path / "m.yaml", GOOD)
    with shared_cache() as shared:
        monkeypatch.setenv("ASCENDPATCH_CACHE", str(shared))
        info = path.stat()
        kept = {"format": parsed.FORMAT, "parser": parsed.parser_stats(),
                "stat": [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns,
                         info.st_ctime_ns], "document": ["m", [[["s", 0, 4], ["s", 0, 4]]]],
                "words": []}
        where = _where(path)
        plant(where, json.dumps(kept).encode())
        said: list[str] = []
        monkeypatch.setattr(progress, "notice", said.append)
        assert loader.load(str(path)).name == "kept"
        assert said == []
        assert [p.name for p in where.parent.iterdir()] == [where.name]
        assert where.stat().st_uid == NOBODY


def test_a_user_with_no_home_loads_manifests_as_before(tmp_path: Path) -> None:
    """A container uid with no passwd entry and HOME unset: the cache cannot be found
    (Path.home raises RuntimeError); the manifest loads, exit 0, nothing said. It was a
    traceback (exit 1) with the first version of the kept parse."""
    interpreter = seconduid.python()
    with seconduid.open_folder() as folder:
        path = _write(folder / "m.yaml", GOOD)
        site = folder / "site"
        site.mkdir()
        env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": os.pathsep.join(dict.fromkeys(p for p in (str(REPO), *sys.path)
                                                           if p))}
        proc = subprocess.run([seconduid.require(), "--reuid=54321", "--regid=54321",
                               "--clear-groups", interpreter, "-m", "ascendpatch",
                               "--manifest", path, "status", "--site-packages", site],
                              capture_output=True, text=True, timeout=120, env=env,
                              check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
