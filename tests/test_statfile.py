"""The stat cache's packed columns (inspect/audit/statfile.py, cache format 4): what is written
reads back exactly, whatever the numbers a file system reports; anything else in the file is
no cache at all (a full audit), never a crash nor a wrong answer."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendpatch.inspect.audit import StatCache, stat_and_hash, statcache, statfile

signed = st.integers(min_value=-(2**63), max_value=2**63 - 1)
entries = st.dictionaries(
    st.text(min_size=1, max_size=40),  # any str: lone surrogates too (undecodable names)
    st.tuples(st.integers(0, 2**63 - 1), signed, st.integers(0, 2**64 - 1), signed,
              st.text(max_size=60)),
    max_size=30)


@given(entries)
@settings(max_examples=200, deadline=None)
def test_what_is_written_reads_back_exactly(files: dict[str, statfile.Entry]) -> None:
    text = json.dumps(statfile.encode(files))  # through JSON, as the cache file is
    assert statfile.decode(json.loads(text)) == files


def test_numbers_that_do_not_fit_are_left_out_not_wrapped() -> None:
    """An inode above 2**64 or a size above 2**63 (no real file system has them, a FUSE one
    could say so): that file is not cached, and hashed again next time."""
    files: dict[str, statfile.Entry] = {
        "ok": (1, 2, 2**64 - 1, 4, "d"), "big": (2**63, 2, 3, 4, "d"),
        "ino": (1, 2, 2**64, 4, "d"), "neg": (1, 2, -1, 4, "d")}
    assert statfile.decode(statfile.encode(files)) == {"ok": files["ok"]}


GOOD = statfile.encode({"a": (1, 2, 3, 4, "sha256=x"), "b": (5, 6, 7, 8, "sha256=y")})


@pytest.mark.parametrize("doc", [
    [], "x", None, {},
    {**GOOD, "keys": "a"},
    {**GOOD, "keys": ["a"]},  # columns of other lengths
    {**GOOD, "digests": ["sha256=x", 3]},
    {**GOOD, "keys": ["a", None]},
    {**GOOD, "stats": GOOD["stats"][:-4]},  # a cut column
    {**GOOD, "stats": "!!not base64!!"},
    {**GOOD, "inodes": 12},
    {k: v for k, v in GOOD.items() if k != "inodes"},
])
def test_a_column_of_another_shape_is_refused(doc: Any) -> None:
    with pytest.raises((ValueError, TypeError, KeyError)):
        statfile.decode(doc)


@pytest.mark.parametrize("files", [
    {"keys": ["a"], "digests": ["x"], "stats": "AAAA", "inodes": "AAAA"},  # partial items
    {"a": [1, 2, 3, 4, "x"]},  # format 3's shape under format 4's number
    [1, 2, 3],
])
def test_a_cache_file_of_another_shape_means_a_full_audit(tmp_path: Path, files: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCENDPATCH_CACHE", str(tmp_path / "cache"))
    target = tmp_path / "site"
    target.mkdir()
    (target / "a").write_text("a\n")
    items = [("a", str(target / "a"), 2)]
    first = StatCache(target)
    assert stat_and_hash(items, first, workers=1).hashed == 1
    first.save()
    doc = json.loads(first.path.read_bytes())
    assert doc["format"] == statcache.CACHE_FORMAT == 4
    doc["files"] = files
    first.path.write_text(json.dumps(doc))
    broken = StatCache(target)
    assert broken.entries == {} and broken.summary is None
    assert stat_and_hash(items, broken, workers=1).hashed == 1  # hashed again, no crash


def test_a_format_3_cache_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache written before format 4 costs one full audit (which rewrites it), nothing else."""
    monkeypatch.setenv("ASCENDPATCH_CACHE", str(tmp_path / "cache"))
    target = tmp_path / "site"
    target.mkdir()
    path = statcache.cache_path(target)
    path.parent.mkdir(parents=True, mode=0o700)
    path.parent.parent.chmod(0o700)
    path.write_text(json.dumps({"format": 3, "target": os.path.realpath(target),
                                "files": {"a": [1, 2, 3, 4, "sha256=x"]}}))
    assert StatCache(target).entries == {}
