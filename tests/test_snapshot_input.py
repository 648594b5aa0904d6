"""Snapshots come from nodes: every reader of them (fleet-report, its --baseline, diff,
audit --baseline) gets hostile files and ends with exit 0/1/2 and one line (issue 22 item 6).

Each reader goes through inspect/snapshot.load: a regular file only (a FIFO would hang it), at
most snapshot.MAX_BYTES, JSON through untrusted.load_json (a RecursionError used to be exit 3),
then ascendpatch/data/snapshot.schema.json (a digest that is a list was ``unhashable type``,
exit 3). A file name that is not UTF-8 used to make ``fleet-report -o`` exit 3.
"""

from __future__ import annotations

import copy
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kit import TRACEBACK, isolated, make_small_demo, run_cli, write_small_manifest
from tests.kit.properties import deadline


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real snapshot of a small patched target, its site-packages and manifest (built
    once)."""
    tmp = tmp_path_factory.mktemp("snap")
    site = tmp / "site-packages"
    make_small_demo(site)
    manifest = write_small_manifest(tmp)
    with isolated(tmp / "home"):
        assert run_cli("--site-packages", site, "--manifest", manifest, "apply").code == 0
        done = run_cli("--site-packages", site, "--manifest", manifest, "snapshot", "-o",
                       tmp / "good.json")
    assert done.code == 0, done.err
    return {"doc": json.loads((tmp / "good.json").read_text()), "site": site,
            "manifest": manifest}


def _readers(good: Path, bad: Path, made: dict[str, Any]) -> dict[str, tuple[str | Path, ...]]:
    """Every command that reads a snapshot, with ``bad`` in the place of one."""
    return {
        "fleet-report": ("fleet-report", good, bad),
        "fleet-report --baseline": ("fleet-report", good, "--baseline", bad),
        "diff": ("diff", good, bad),
        "audit --baseline": ("--site-packages", made["site"], "--manifest", made["manifest"],
                             "audit", "--baseline", bad),
    }


def _one_line_verdict(args: tuple[str | Path, ...]) -> tuple[int, str]:
    """Run the command in-process: its exit code, and its error line (or '')."""
    run = run_cli("--color", "never", *args)
    everything = run.out + run.err
    assert TRACEBACK not in everything and "unexpected error" not in everything, everything
    assert run.code in (0, 1, 2), everything
    if run.code == 2:
        errors = [line for line in run.err.splitlines() if line.startswith("[FAIL]")]
        assert len(errors) == 1, run.err
        return run.code, errors[0]
    return run.code, ""


def _write_pair(tmp_path: Path, made: dict[str, Any], bad: bytes) -> tuple[Path, Path]:
    folder = tmp_path / "nodes"
    folder.mkdir(exist_ok=True)
    good, hostile = folder / "node-1.json", folder / "node-2.json"
    good.write_text(json.dumps(made["doc"]))
    hostile.write_bytes(bad)
    return good, hostile


HOSTILE: dict[str, tuple[bytes | dict[str, Any], str]] = {
    "deep": (b'{"kind": "ascendpatch-snapshot", "format": 1, "x": ' + b"[" * 100_000
             + b"]" * 100_000 + b"}", "nested deeper than 64 levels"),
    "digest list": ({"files": {"demo/mod.py": ["x"]}}, 'files["demo/mod.py"]: expected a string'),
    "version int": ({"distributions": {"demo": {"version": 3}}},
                    "distributions.demo.version: expected a string, got an integer"),
    "files a list": ({"files": ["demo/mod.py"]}, "files: expected an object, got a list"),
    "size text": ({"sizes": {"demo/mod.py": "12"}}, 'sizes["demo/mod.py"]: expected an integer'),
    "artifacts null": ({"artifacts": None}, "artifacts: expected an object, got null"),
    "no files": ({"files": None}, "files: expected an object"),
}


def _hostile_bytes(made: dict[str, Any], change: bytes | dict[str, Any]) -> bytes:
    if isinstance(change, bytes):
        return change
    doc = copy.deepcopy(made["doc"])
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key].update(value)
        else:
            doc[key] = value
    return json.dumps(doc).encode()


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_snapshot_is_one_line_in_every_reader(case: str, made: dict[str, Any],
                                                        tmp_path: Path) -> None:
    change, words = HOSTILE[case]
    good, bad = _write_pair(tmp_path, made, _hostile_bytes(made, change))
    for reader, args in _readers(good, bad, made).items():
        code, line = _one_line_verdict(args)
        if reader == "fleet-report":  # that host is shown missing, the rest is covered
            run = run_cli("--json", *args)
            fleet = run.json["results"]
            assert code == 1 and any("node-2: missing" in r["message"] and words in r["message"]
                                     for r in fleet), fleet
        else:
            assert code == 2 and words in line, (reader, line)


def test_a_file_name_that_is_not_utf8_is_shown_escaped(made: dict[str, Any],
                                                       tmp_path: Path) -> None:
    folder = tmp_path / "nodes"
    folder.mkdir()
    for name in (b"node-1.json", b"node-\xff\xfe.json"):
        (folder / os.fsdecode(name)).write_text(json.dumps(made["doc"]))
    page = tmp_path / "fleet.html"
    code, _line = _one_line_verdict(("fleet-report", folder, "-o", page))
    assert code == 0
    assert "node-\\xff\\xfe" in page.read_text(encoding="utf-8")
    doc = run_cli("--json", "fleet-report", folder).json
    assert sorted(doc["fleet"]["hosts"][i]["host"] for i in range(2)) == ["node-1",
                                                                          "node-\\xff\\xfe"]


def test_text_a_node_spelled_with_lone_surrogates_is_printed_escaped(
        made: dict[str, Any], tmp_path: Path) -> None:
    """JSON may spell a lone surrogate (``"\\ud800"``): a strict UTF-8 stdout and the page
    still take every line."""
    doc = copy.deepcopy(made["doc"])
    doc["distributions"]["\ud800evil"] = {"version": "1\udcff"}
    good, _bad = _write_pair(tmp_path, made, json.dumps(doc).encode())
    page = tmp_path / "fleet.html"
    run = subprocess.run([sys.executable, "-m", "ascendpatch", "--color", "never",
                          "fleet-report", good.parent, "-o", page], capture_output=True,
                         env={**os.environ, "PYTHONIOENCODING": "utf-8:strict"}, check=False)
    assert run.returncode == 1, run.stderr
    assert b"\\ud800evil" in run.stdout and TRACEBACK.encode() not in run.stderr
    assert "\\ud800evil" in page.read_text(encoding="utf-8")


def test_a_fifo_snapshot_or_hosts_file_is_refused_not_waited_on(made: dict[str, Any],
                                                                tmp_path: Path) -> None:
    good, fifo = tmp_path / "node-1.json", tmp_path / "node-3.json"
    good.write_text(json.dumps(made["doc"]))
    os.mkfifo(fifo)
    hosts = tmp_path / "hosts.txt"
    os.mkfifo(hosts)
    tool = [sys.executable, "-m", "ascendpatch", "--color", "never", "fleet-report"]
    # (a process with a timeout: on the code before the fix, both waited for a writer)
    node = subprocess.run([*tool, str(good), str(fifo)], capture_output=True, text=True,
                          timeout=20, check=False)
    assert node.returncode == 1 and "node-3.json is a FIFO, not a regular file" in node.stdout
    listed = subprocess.run([*tool, str(good), "--hosts", str(hosts)], capture_output=True,
                            text=True, timeout=20, check=False)
    assert listed.returncode == 2, listed.stderr
    assert listed.stderr.count("\n") == 1 and "hosts.txt is a FIFO" in listed.stderr


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (768 << 20, 768 << 20))


def test_a_huge_snapshot_is_refused_before_it_is_read(made: dict[str, Any],
                                                      tmp_path: Path) -> None:
    """A 2 GiB node-2.json (sparse) against a 768 MiB address-space limit: refused after
    snapshot.MAX_BYTES, never read whole (that was MemoryError, exit 3)."""
    good, huge = _write_pair(tmp_path, made, b'{"kind": "ascendpatch-snapshot", "x": "')
    with huge.open("r+b") as handle:
        handle.truncate(2 << 30)
    run = subprocess.run([sys.executable, "-m", "ascendpatch", "--color", "never",
                          "fleet-report", good.parent], capture_output=True, text=True,
                         preexec_fn=_limit_memory, timeout=120, check=False)
    assert run.returncode == 1, run.stderr
    assert "node-2.json cannot be read (larger than 64 MiB" in run.stdout


# --------------------------------------------------------------------------- properties

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=10)
_PLACES = [("kind",), ("format",), ("distributions",), ("distributions", "demo"),
           ("distributions", "demo", "version"), ("artifacts",), ("artifacts", "demo-fix"),
           ("files",), ("files", "demo/mod.py"), ("sizes",), ("sizes", "demo/mod.py"),
           ("all_files",), ("target",), ("target", "site_packages"), ("new-key",)]


@st.composite
def snapshot_bytes(draw: st.DrawFn, base: dict[str, Any]) -> bytes:
    """A real snapshot with values replaced by any JSON at the places readers look, then
    perhaps cut short, spliced with random bytes or wrapped in deep nesting."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(0, 3))):
        *parents, last = draw(st.sampled_from(_PLACES))
        node: Any = doc
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node[last] = draw(_JSON)
    data = json.dumps(doc).encode()
    how = draw(st.sampled_from(["as is", "cut", "splice", "deep"]))
    if how == "cut":
        data = data[:draw(st.integers(0, len(data)))]
    elif how == "splice":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(max_size=12)) + data[at:]
    elif how == "deep":
        depth = draw(st.integers(1, 3000))
        data = b'{"kind": "ascendpatch-snapshot", "format": 1, "files": ' + b"[" * depth + \
            b"]" * depth + b"}"
    return data


@settings(max_examples=150, deadline=deadline(2000),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_any_snapshot_bytes_end_in_exit_0_1_2_and_one_line(data: st.DataObject,
                                                           made: dict[str, Any],
                                                           tmp_path: Path) -> None:
    """Bounds: 150 examples, each within Hypothesis' 2 s deadline for all four readers."""
    bad = data.draw(snapshot_bytes(made["doc"]))
    good, hostile = _write_pair(tmp_path, made, bad)
    for args in _readers(good, hostile, made).values():
        _one_line_verdict(args)
