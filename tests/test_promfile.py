"""``verify --prometheus FILE`` and ``fleet-report --prometheus FILE``: a textfile for
node_exporter's textfile collector, read back with the real Prometheus text-format parser
(prometheus_client's ``text_string_to_metric_families``), written whole, and a path that is
hostile (a link, a FIFO, a folder, a missing folder, a folder another uid writes: tested with
uid 65534 through setpriv) refused in one line with nothing written, or written safely.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from ascendpatch.inspect import promfile
from tests.kit import (
    TRACEBACK,
    isolated,
    make_small_demo,
    run_cli,
    seconduid,
    tree_digest,
    write_small_manifest,
)
from tests.kit.properties import deadline


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge"
        out[family.name] = [(dict(s.labels), s.value) for s in family.samples]
    return out


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(manifest, a patched site-packages, a folder of three hosts' snapshots: node-c's
    patched file hand-edited)."""
    tmp = tmp_path_factory.mktemp("prom")
    manifest = write_small_manifest(tmp)
    snaps = tmp / "snapshots"
    snaps.mkdir()
    sites = {}
    with isolated(tmp / "home"):
        for host in ("node-a", "node-b", "node-c"):
            site = tmp / host / "site-packages"
            make_small_demo(site)
            assert run_cli("--site-packages", site, "--manifest", manifest, "apply").code == 0
            if host == "node-c":
                mod = site / "demo" / "mod.py"
                mod.write_text(mod.read_text() + "debug = True\n")
            assert run_cli("--site-packages", site, "--manifest", manifest, "snapshot", "-o",
                           snaps / f"{host}.json").code == 0
            sites[host] = site
    return manifest, sites["node-a"], snaps


def test_verify_writes_one_gauge_per_artifact_state(fleet: tuple[Path, Path, Path],
                                                    tmp_path: Path) -> None:
    manifest, site, _ = fleet
    out = tmp_path / "ascendpatch.prom"
    with isolated(tmp_path / "home"):
        run = run_cli("--site-packages", site, "--manifest", manifest, "verify", "--no-probes",
                      "--prometheus", out)
    assert run.code in (0, 1) and TRACEBACK not in run.err, run.err
    found = _samples(out.read_text(encoding="utf-8"))
    states = {s["state"]: v for s, v in found["ascendpatch_artifact_state"]
              if s["artifact"] == "demo-fix"}
    assert states["already-applied"] == 1 and sum(states.values()) == 1
    assert {"pending", "conflict", "not-applied"} <= set(states)
    assert all(s["manifest"] == "test" for s, _ in found["ascendpatch_artifact_state"])
    ok = found["ascendpatch_verify_ok"]
    assert ok == [({"manifest": "test"}, 1.0 if run.code == 0 else 0.0)]
    assert {s["level"] for s, _ in found["ascendpatch_verify_checks"]} == {
        "OK", "SKIP", "WARN", "FAIL"}
    assert not list(tmp_path.glob(".*ascendpatch-tmp"))


def test_fleet_report_writes_host_states_and_findings(fleet: tuple[Path, Path, Path],
                                                      tmp_path: Path) -> None:
    _, _, snaps = fleet
    out = tmp_path / "fleet.prom"
    out.write_text("old metrics\n")
    before = out.stat().st_ino
    run = run_cli("fleet-report", snaps, "--prometheus", out)
    assert run.code == 1, run.err
    assert out.stat().st_ino != before  # replaced whole (os.replace), never rewritten in place
    found = _samples(out.read_text(encoding="utf-8"))
    status = {(s["host"], s["state"]): v for s, v in found["ascendpatch_fleet_host_status"]}
    assert status[("node-c", "drift")] == 1 and status[("node-a", "ok")] == 1
    assert status[("node-a", "drift")] == 0
    findings = {(s["host"], s["check"], s["level"]) for s, _ in
                found["ascendpatch_fleet_finding"]}
    assert ("node-c", "artifact:demo-fix", "FAIL") in findings
    assert ("node-c", "files", "FAIL") in findings
    assert not any(host == "node-a" for host, _, _ in findings)
    artifact = {(s["host"], s["state"]) for s, _ in found["ascendpatch_fleet_artifact_state"]}
    assert ("node-c", "already-applied") in artifact
    ages = {s["host"]: v for s, v in found["ascendpatch_fleet_snapshot_age_seconds"]}
    assert set(ages) == {"node-a", "node-b", "node-c"} and all(0 <= v < 3600
                                                                for v in ages.values())
    assert "metrics written to" in run.out + run.err


def test_host_names_with_quotes_backslashes_and_newlines_are_escaped(
        fleet: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, _, snaps = fleet
    folder = tmp_path / "odd"
    folder.mkdir()
    names = ['say "hi"', "back\\slash", "new\nline"]
    for name in names:
        shutil.copy(snaps / "node-a.json", folder / f"{name}.json")
    out = tmp_path / "odd.prom"
    assert run_cli("fleet-report", folder, "--prometheus", out).code == 0
    found = _samples(out.read_text(encoding="utf-8"))
    hosts = {s["host"] for s, _ in found["ascendpatch_fleet_host_status"]}
    assert hosts == set(names)


LABEL_TEXT = st.text(st.characters(codec="utf-8"), max_size=40) | st.sampled_from(
    ['"', "\\", "\n", '\\"', "\\n", 'a"b\\c\nd', "}", "{", ",", "=", "# HELP x"])


@settings(max_examples=300, deadline=deadline(2000))
@given(manifest=LABEL_TEXT, artifact=LABEL_TEXT, state=LABEL_TEXT, host=LABEL_TEXT)
def test_any_label_value_round_trips_through_the_real_parser(manifest: str, artifact: str,
                                                             state: str, host: str) -> None:
    families = [
        promfile.state_set("ascendpatch_artifact_state", "help with \\ and\nnewline",
                           [((("manifest", manifest), ("artifact", artifact)), state)],
                           ["applied", "conflict"]),
        promfile.Family("ascendpatch_fleet_host_drift", "drift", (((("host", host),), 3.0),)),
    ]
    found = _samples(promfile.render(families))
    states = found["ascendpatch_artifact_state"]
    assert next(labels for labels, _ in states) == {"manifest": manifest, "artifact": artifact,
                                                  "state": "applied"}
    assert sum(v for labels, v in states if labels["state"] == state) == 1
    assert found["ascendpatch_fleet_host_drift"] == [({"host": host}, 3.0)]


@settings(max_examples=100, deadline=deadline(2000))
@given(st.text(max_size=20))
def test_text_that_is_not_utf8_is_written_as_its_escape(text: str) -> None:
    odd = text + "\udcff"  # a lone surrogate, as a node's JSON may spell one out
    rendered = promfile.render([promfile.Family("m", "h", (((("host", odd),), 1.0),))])
    rendered.encode("utf-8")  # always UTF-8 for the collector
    [(labels, _)] = _samples(rendered)["m"]
    assert labels["host"] == text + "\\udcff"


def _both(tmp_path: Path, fleet: tuple[Path, Path, Path], target: Path) \
        -> list[tuple[int, str]]:
    """(exit code, stderr) of verify and of fleet-report, each writing to ``target``."""
    manifest, site, snaps = fleet
    with isolated(tmp_path / "home"):
        verify = run_cli("--site-packages", site, "--manifest", manifest, "verify",
                         "--no-probes", "--prometheus", target)
    report = run_cli("fleet-report", snaps, "--prometheus", target)
    return [(verify.code, verify.err), (report.code, report.err)]


def _one_line(runs: list[tuple[int, str]], words: str) -> None:
    for code, err in runs:
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and words in lines[0], err


def test_a_link_a_folder_or_a_missing_folder_is_refused_and_nothing_written(
        fleet: tuple[Path, Path, Path], tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    link = tmp_path / "link.prom"
    link.symlink_to(victim)
    (tmp_path / "dir.prom").mkdir()
    (tmp_path / "own-link").symlink_to(tmp_path / "dir.prom")  # even this user's own link
    before = tree_digest(tmp_path)
    _one_line(_both(tmp_path, fleet, tmp_path / "own-link" / "x.prom"),
              f"(give the real folder, {tmp_path / 'dir.prom'})")
    _one_line(_both(tmp_path, fleet, link), "is a symbolic link")
    _one_line(_both(tmp_path, fleet, tmp_path / "dir.prom"), "is not a regular file")
    _one_line(_both(tmp_path, fleet, tmp_path / "nodir" / "x.prom"),
              f"the folder {tmp_path / 'nodir'} does not exist")
    after = {k: v for k, v in tree_digest(tmp_path).items() if not k.startswith("home/")}
    assert after == {k: v for k, v in before.items() if not k.startswith("home/")}


def test_a_fifo_is_refused_never_waited_on(fleet: tuple[Path, Path, Path],
                                           tmp_path: Path) -> None:
    """A real process: opening a FIFO for writing would block until a reader comes."""
    _, _, snaps = fleet
    fifo = tmp_path / "metrics.prom"
    os.mkfifo(fifo)
    run = subprocess.run([sys.executable, "-m", "ascendpatch", "fleet-report", str(snaps),
                          "--prometheus", str(fifo)], capture_output=True, text=True,
                         timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert run.returncode == 2 and "is not a regular file" in run.stderr, run.stderr
    assert fifo.is_fifo() and run.stderr.count("\n") == 1


def test_a_folder_swapped_for_a_link_after_the_check_is_refused_never_followed(
        fleet: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The check-then-write race, won every time: uid 65534 owns the textfile folder and the
    folder holding it; right after the path check looked, it (as itself, via setpriv) swaps
    the textfile folder for a link to a folder of root's. Root's write reaches the folder
    from / without following links: refused in one line, nothing lands in root's folder."""
    with seconduid.open_folder() as shared:
        parent = shared / "node_exporter"
        textfiles = parent / "textfile"
        for folder in (parent, textfiles):
            folder.mkdir()
            os.chown(folder, seconduid.NOBODY, seconduid.NOBODY)
        secret = shared / "root-only"
        secret.mkdir(mode=0o755)
        checked = promfile.check_path
        swapped: list[Path] = []

        def check_then_swap(path: Path) -> None:
            if swapped:
                return  # later looks happened before the swap too (the race's winning case)
            checked(path)
            swap = seconduid.run("sh", "-c", f'mv "{textfiles}" "{parent}/was" && '
                                             f'ln -s "{secret}" "{textfiles}"')
            assert swap.returncode == 0, swap.stderr
            swapped.append(path)

        monkeypatch.setattr(promfile, "check_path", check_then_swap)
        _, _, snaps = fleet
        run = run_cli("fleet-report", snaps, "--prometheus", textfiles / "ascendpatch.prom")
        assert swapped and textfiles.is_symlink()
        assert list(secret.iterdir()) == [] and list((parent / "was").iterdir()) == []
        _one_line([(run.code, run.err)], "became a symlink or a file")


def test_in_a_folder_another_uid_writes_its_links_are_refused_and_its_hard_link_replaced(
        fleet: tuple[Path, Path, Path]) -> None:
    """uid 65534 owns the textfile folder and plants what it can, as itself: a link where the
    file goes (to a file of root's), a link to another folder on the way, a hard link to a
    file of its own. Root's run refuses the links (root's file untouched) and writes through
    none of them: the hard-linked file of uid 65534 keeps its bytes."""
    with seconduid.open_folder() as shared:
        textfiles = shared / "textfile"
        textfiles.mkdir()
        os.chown(textfiles, seconduid.NOBODY, seconduid.NOBODY)
        secret = shared / "root-only"
        secret.mkdir(mode=0o755)
        victim = secret / "victim"
        victim.write_text("root's\n")
        as_nobody = [seconduid.run("ln", "-s", victim, textfiles / "ascendpatch.prom"),
                     seconduid.run("ln", "-s", secret, textfiles / "sub")]
        assert all(r.returncode == 0 for r in as_nobody), [r.stderr for r in as_nobody]
        _one_line(_both(shared, fleet, textfiles / "ascendpatch.prom"), "is a symbolic link")
        _one_line(_both(shared, fleet, textfiles / "sub" / "x.prom"),
                  "is a symbolic link owned by uid 65534")
        assert victim.read_text() == "root's\n" and [p.name for p in secret.iterdir()] == ["victim"]
        mine = textfiles / "nobody-owned"
        made = [seconduid.run("rm", textfiles / "ascendpatch.prom"),
                seconduid.run("sh", "-c", f"echo nobody > {mine}"),
                seconduid.run("ln", mine, textfiles / "ascendpatch.prom")]
        assert all(r.returncode == 0 for r in made), [r.stderr for r in made]
        for code, err in _both(shared, fleet, textfiles / "ascendpatch.prom"):
            assert code in (0, 1) and TRACEBACK not in err, err
        written = textfiles / "ascendpatch.prom"
        assert mine.read_text() == "nobody\n"  # the hard link was replaced, not written into
        info = written.lstat()
        assert info.st_uid == 0 and info.st_nlink == 1 and oct(info.st_mode & 0o777) == "0o644"
        assert "ascendpatch_fleet_host_status" in written.read_text()
        assert sorted(p.name for p in textfiles.iterdir()) == ["ascendpatch.prom",
                                                              "nobody-owned", "sub"]

