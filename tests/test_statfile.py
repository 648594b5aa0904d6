"""The stat cache's file (inspect/audit/statfile.py, cache format 5): what is written reads back
exactly, whatever the numbers and names a file system reports; anything else in the file is no
cache at all (a full audit), never a crash nor a wrong answer."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendpatch import progress
from ascendpatch.inspect.audit import StatCache, stat_and_hash, statcache, statfile

signed = st.integers(min_value=-(2**63), max_value=2**63 - 1)
entries = st.dictionaries(
    st.text(min_size=1, max_size=40),  # any str: NULs and lone surrogates too
    st.tuples(st.integers(0, 2**63 - 1), signed, st.integers(0, 2**64 - 1), signed,
              st.text(max_size=60)),
    max_size=30)
HEADER = {"format": statfile.FORMAT, "target": "/site", "verified_ns": 7, "orphans": {},
          "summary": {}}
REFUSED = (ValueError, TypeError, KeyError)


def _writable(key: str, entry: statfile.Entry) -> bool:
    """The entries a cache file can hold, said again from the file's description: a path that
    is a file system name and a digest in ASCII, neither with a NUL."""
    try:
        name = os.fsencode(key)
    except UnicodeError:
        return False
    return b"\0" not in name and entry[4].isascii() and "\0" not in entry[4]


@given(entries)
@settings(max_examples=300, deadline=None)
def test_what_is_written_reads_back_exactly(files: dict[str, statfile.Entry]) -> None:
    header, columns = statfile.load(statfile.dump(HEADER, files))
    kept = {key: entry for key, entry in files.items() if _writable(key, entry)}
    assert columns.entries() == kept
    assert len(columns) == len(kept)
    assert list(columns.rows()) == [(os.fsencode(k), *e[:4]) for k, e in kept.items()]
    assert {k: header[k] for k in HEADER} == HEADER


def test_numbers_that_do_not_fit_are_left_out_not_wrapped() -> None:
    """An inode above 2**64 or a size above 2**63 (no real file system has them, a FUSE one
    could say so): that file is not cached, and hashed again next time."""
    files: dict[str, statfile.Entry] = {
        "ok": (1, 2, 2**64 - 1, 4, "d"), "big": (2**63, 2, 3, 4, "d"),
        "ino": (1, 2, 2**64, 4, "d"), "neg": (1, 2, -1, 4, "d")}
    assert statfile.load(statfile.dump(HEADER, files))[1].entries() == {"ok": files["ok"]}


def test_an_undecodable_name_keeps_its_bytes() -> None:
    """A file name that is not UTF-8 (os.fsdecode's surrogates) is stat'ed by its own bytes."""
    name = os.fsdecode(b"caf\xe9.py")
    columns = statfile.load(statfile.dump(HEADER, {name: (1, 2, 3, 4, "sha256=x")}))[1]
    assert next(iter(columns.rows()))[0] == b"caf\xe9.py"
    assert list(columns.entries()) == [name]


GOOD = statfile.dump(HEADER, {"a": (1, 2, 3, 4, "sha256=x"), "b": (5, 6, 7, 8, "sha256=y")})
HEAD_END = GOOD.index(b"\n", len(statfile.MAGIC))
GOOD_HEAD = json.loads(GOOD[len(statfile.MAGIC):HEAD_END])
BODY = GOOD[HEAD_END + 1:]


def _with(**changes: Any) -> bytes:
    line = json.dumps({**GOOD_HEAD, **changes}).encode()
    return statfile.MAGIC + line + b"\n" + BODY


@pytest.mark.parametrize("data", [
    b"", b"x", b'{"format": 4}', GOOD[:len(statfile.MAGIC) + 3],  # no header line
    GOOD.replace(b"stat cache 5", b"stat cache 6"),
    statfile.MAGIC + b"[]\n" + BODY, statfile.MAGIC + b"nope\n" + BODY,
    statfile.MAGIC + b"[" * 100_000 + b"\n",  # nested too deep for the parser
    GOOD[:-1], GOOD + b"\0",  # a cut file, one with more than its sections
    _with(count=3), _with(count=1), _with(count=-2), _with(count="2"), _with(count=True),
    _with(count=10**30),
    _with(keys=GOOD_HEAD["keys"] + 1),  # sizes that do not add up
    _with(keys=None), {k: v for k, v in GOOD_HEAD.items() if k != "digests"},
    GOOD.replace(b"sha256=x", b"sha256=\xe9"),  # a digest that is not ASCII
    GOOD.replace(b"a\0b", b"a/b"),  # two keys run together
    GOOD.replace(b"a\0b", b"a\0a"),  # a path named twice
])
def test_a_file_of_another_shape_is_refused(data: bytes | dict[str, Any]) -> None:
    if isinstance(data, dict):
        data = statfile.MAGIC + json.dumps(data).encode() + b"\n" + BODY
    with pytest.raises(REFUSED):
        statfile.load(data)


@given(st.binary(max_size=200), st.integers(0, len(GOOD)))
@settings(max_examples=300, deadline=None)
def test_any_bytes_are_refused_or_read_never_a_crash(junk: bytes, at: int) -> None:
    """Whatever the file holds (any bytes spliced into a good one, or after the first line),
    load refuses it with one of its three errors or gives columns that make entries."""
    for data in (GOOD[:at] + junk + GOOD[at:], statfile.MAGIC + junk):
        try:
            _header, columns = statfile.load(data)
        except REFUSED:
            continue
        assert len(columns.entries()) == len(columns)


@given(st.lists(st.binary(max_size=12), max_size=6), st.binary(max_size=60),
       st.binary(max_size=200), st.integers(0, 7))
@settings(max_examples=400, deadline=None)
def test_sections_under_a_header_that_adds_up_are_refused_or_consistent(
        keys: list[bytes], digests: bytes, numbers: bytes, count: int) -> None:
    """Past the size check: any path, digest and number sections, under a header whose sizes
    add up to the file's, load into columns that agree with each other, or are refused."""
    paths = b"\0".join(keys)
    body = paths + digests + numbers[:32 * count].ljust(32 * count, b"\0")
    head = dict(HEADER, count=count, keys=len(paths), digests=len(digests))
    data = statfile.MAGIC + json.dumps(head).encode() + b"\n" + body
    try:
        _header, columns = statfile.load(data)
    except REFUSED:
        return
    entries = columns.entries()
    assert len(entries) == len(columns) == count
    assert [os.fsencode(k) for k in entries] == [row[0] for row in columns.rows()]


def test_a_file_that_cannot_hold_every_entry_keeps_no_summary() -> None:
    """An entry left out (an mtime past 2262 does not fit) would be a file a repeat audit
    never looks at: the file is written with the partial header, whose summary is empty."""
    files: dict[str, statfile.Entry] = {"ok": (1, 2, 3, 4, "d"), "late": (1, 2**63, 3, 4, "d")}
    whole = dict(HEADER, summary={"records": "x"})
    header, columns = statfile.load(statfile.dump(whole, files, dict(whole, summary={})))
    assert header["summary"] == {} and list(columns.entries()) == ["ok"]
    header, _columns = statfile.load(statfile.dump(whole, {"ok": files["ok"]},
                                                   dict(whole, summary={})))
    assert header["summary"] == {"records": "x"}


def _cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) \
        -> tuple[StatCache, list[tuple[str, str, int | None]]]:
    monkeypatch.setenv("ASCENDPATCH_CACHE", str(tmp_path / "cache"))
    target = tmp_path / "site"
    target.mkdir()
    (target / "a").write_text("a\n")
    items: list[tuple[str, str, int | None]] = [("a", str(target / "a"), 2)]
    first = StatCache(target)
    assert stat_and_hash(items, first, workers=1).hashed == 1
    first.save()
    return first, items


@pytest.mark.parametrize("data", [
    GOOD[:-8],  # cut
    GOOD.replace(b'"target":"/site"', b'"target":"/elsewhere"'),  # another target's
    b'{"format":4,"files":{"a":[1,2,3,4,"x"]}}',  # format 4's JSON under format 5's name
    statfile.MAGIC + b'{"format":5,"target":"/site","count":0,"keys":0,"digests":0,'
                     b'"orphans":[1],"summary":7}\n',
    # a start that is not a time before now would vouch for racy entries
    *(GOOD.replace(b'"verified_ns":7', b'"verified_ns":' + bad)
      for bad in (b"Infinity", b"1e300", b'"7"', b"-1", b"true", str(2**62).encode())),
])
def test_a_cache_file_of_another_shape_means_a_full_audit(
        tmp_path: Path, data: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    first, items = _cached(tmp_path, monkeypatch)
    first.path.write_bytes(data.replace(b'"/site"', json.dumps(first.root).encode()))
    broken = StatCache(tmp_path / "site")
    assert broken.entries == {} and len(broken) == 0
    assert stat_and_hash(items, broken, workers=1).hashed == 1  # hashed again, no crash


def test_the_file_is_format_5_and_what_the_audit_saved(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    first, _items = _cached(tmp_path, monkeypatch)
    header, columns = statfile.load(first.path.read_bytes())
    assert header["format"] == statcache.CACHE_FORMAT == 5
    assert header["target"] == os.path.realpath(tmp_path / "site")
    assert columns.entries() == first.entries
    again = StatCache(tmp_path / "site")
    assert list(again.rows()) == [(b"a", *first.entries["a"][:4])]  # walked as loaded
    assert again.entries == first.entries


@pytest.mark.parametrize("old_name", ["statcache.json", "statcache.v5"])
def test_an_older_cache_is_not_read_and_the_next_save_removes_its_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old_name: str) -> None:
    """A cache written before format 5 (statcache.json), or in the folder each target had
    before its cache was one file of audit/, costs one full audit, which writes the new file
    and removes the old one and its folder (they are never read again), and every other
    target's old folder (a target audited once is never saved again)."""
    monkeypatch.setenv("ASCENDPATCH_CACHE", str(tmp_path / "cache"))
    target = tmp_path / "site"
    target.mkdir()
    (target / "a").write_text("a\n")
    path = statcache.cache_path(target)
    folder = path.with_name(path.name.partition(".")[0])
    folder.mkdir(parents=True, mode=0o700)
    folder.parent.chmod(0o700)
    folder.parent.parent.chmod(0o700)
    old = folder / old_name
    old.write_text(json.dumps({"format": 4, "target": os.path.realpath(target), "files": {
        "keys": ["a"], "digests": ["sha256=x"], "stats": "", "inodes": ""}}))
    cache = StatCache(target)
    assert cache.entries == {}
    assert stat_and_hash([("a", str(target / "a"), 2)], cache, workers=1).hashed == 1
    another = folder.with_name("0123456789abcdef01234567")  # (a target never saved again)
    another.mkdir(mode=0o700)
    (another / old_name).write_text("{}")
    theirs = folder.with_name("notes")  # (not a cache's folder: left alone)
    theirs.mkdir(mode=0o700)
    shared = folder.with_name("fedcba9876543210fedcba98")  # (open to others: left, quietly)
    shared.mkdir(mode=0o700)
    (shared / old_name).write_text("{}")
    shared.chmod(0o777)
    notices: list[str] = []
    monkeypatch.setattr(progress, "notice", notices.append)
    cache.save()
    assert not folder.exists() and not another.exists() and path.exists()
    assert sorted(p.name for p in path.parent.iterdir()) == sorted(
        [path.name, "notes", shared.name])
    assert (shared / old_name).exists() and notices == []


def test_the_audit_folder_keeps_the_stat_caches_of_the_last_targets_audited(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One stat cache per target, each about 150 bytes per file: the folder keeps the
    statcache.KEEP most recently written (a CI job's fresh venv each run left one for good)."""
    monkeypatch.setenv("ASCENDPATCH_CACHE", str(tmp_path / "cache"))
    for i in range(statcache.KEEP + 3):
        target = tmp_path / f"site{i}"
        target.mkdir()
        (target / "a").write_text("a\n")
        cache = StatCache(target)
        stat_and_hash([("a", str(target / "a"), 2)], cache, workers=1)
        cache.save()
        os.utime(cache.path, ns=(10**18 + i, 10**18 + i))  # (one stamp each)
    kept = sorted(p.name for p in cache.path.parent.iterdir())
    assert kept == sorted(statcache.cache_path(tmp_path / f"site{i}").name
                          for i in range(3, statcache.KEEP + 3))


def test_a_clock_stepped_back_during_an_audit_saves_nothing_as_verified(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written after the clock stepped back may look older than the audit's start: the
    file then records no start (0), so the next audit hashes every entry again."""
    first, _items = _cached(tmp_path, monkeypatch)
    assert statfile.load(first.path.read_bytes())[0]["verified_ns"] == first.started_ns
    again = StatCache(tmp_path / "site")
    again.dirty = True
    monkeypatch.setattr(time, "time_ns", lambda: again.started_ns - 10**9)
    again.save()
    assert statfile.load(again.path.read_bytes())[0]["verified_ns"] == 0
