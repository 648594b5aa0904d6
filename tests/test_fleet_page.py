"""The fleet page as an operator reads it, in headless Chromium (tests/kit/browser.py): each
snapshot's age (a stale one never green), the package and both sha256 in each file's diff
line, each detail said once, and the "only drifted" view that keeps the missing and stale
hosts and the summary in sight while the page scrolls.

The fleet: real snapshots of two small targets (one healthy, one with a hand-edited patched
file), each copied to many hosts so that the page is taller than the window, one copy aged
to 2020, and one host named in --hosts without a snapshot.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.kit import browser, isolated, make_small_demo, run_cli, write_small_manifest

pytestmark = pytest.mark.integration

HEALTHY, DRIFTED = 40, 20


def _snapshot(root: Path, manifest: Path, edit: bool) -> dict[str, Any]:
    site = root / "site-packages"
    make_small_demo(site)
    assert run_cli("--site-packages", site, "--manifest", manifest, "apply").code == 0
    if edit:
        mod = site / "demo" / "mod.py"
        mod.write_text(mod.read_text().replace("a2 = 2", "a2 = 3  # local edit"))
    out = root / "snap.json"
    assert run_cli("--site-packages", site, "--manifest", manifest, "snapshot", "-o",
                   out).code == 0
    doc = json.loads(out.read_text())
    assert isinstance(doc, dict)
    return doc


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("page")
    manifest = write_small_manifest(tmp)
    with isolated(tmp / "home"):
        good = _snapshot(tmp / "good", manifest, edit=False)
        bad = _snapshot(tmp / "bad", manifest, edit=True)
    snaps = tmp / "snapshots"
    snaps.mkdir()
    for i in range(HEALTHY):
        (snaps / f"ok-{i:02d}.json").write_text(json.dumps(good))
    for i in range(DRIFTED):
        (snaps / f"edited-{i:02d}.json").write_text(json.dumps(bad))
    (snaps / "old-node.json").write_text(json.dumps({**good, "created": "2020-01-01T00:00:00Z"}))
    hosts = tmp / "hosts.txt"
    hosts.write_text("\n".join(p.stem for p in sorted(snaps.glob("*.json"))) + "\ngone-node\n")
    out = tmp / "report.html"
    run = run_cli("fleet-report", snaps, "--hosts", hosts, "-o", out)  # (stale after 24h)
    assert run.code == 1 and out.is_file(), run.err
    return out


MEASURE = """
var top = document.getElementById('summary').getBoundingClientRect();
var painted = {};
document.querySelectorAll('tr.host').forEach(function (row) {
  if (row.getClientRects().length) {
    painted[row.getAttribute('data-host')] = getComputedStyle(row.querySelector('th'))
      .backgroundColor;
  }
});
var ages = {};
document.querySelectorAll('td.cell[data-check="age"]').forEach(function (cell) {
  ages[cell.parentNode.getAttribute('data-host')] = [cell.textContent,
    getComputedStyle(cell).backgroundColor];
});
return {scrolled: window.scrollY, height: window.innerHeight, top: top.top,
        bottom: top.bottom, summary: document.getElementById('summary').textContent,
        shown: (document.getElementById('shown') || {}).textContent || '', painted: painted,
        ages: ages,
        diff: Array.prototype.map.call(document.querySelectorAll('#diff-edited-00 pre span'),
                                       function (s) { return s.textContent; }),
        details: Array.prototype.map.call(document.querySelectorAll('section.host-diff li'),
                                          function (li) { return li.textContent; })};
"""
SCROLL = "window.scrollTo(0, document.documentElement.scrollHeight);\n"


def _rgb(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", text)[:3])


def test_each_snapshots_age_is_shown_and_a_stale_one_is_not_green(page: Path) -> None:
    seen = browser.probe(page, MEASURE, "", "--window-size=1280,720")
    text, colour = seen["ages"]["old-node"]
    assert re.fullmatch(r"\d+ d", text) and int(text.split()[0]) > 365
    assert _rgb(colour) == (255, 224, 138)  # amber, not the green of a fresh one
    fresh_text, fresh_colour = seen["ages"]["ok-00"]
    assert re.fullmatch(r"\d+ (s|min)", fresh_text) and _rgb(fresh_colour) == (200, 236, 201)
    head = _rgb(seen["painted"]["old-node"])
    assert head != _rgb(seen["painted"]["ok-00"]) and head == (141, 110, 99)
    assert "1 stale" in seen["summary"]


def test_each_diff_line_names_the_package_and_both_hashes_and_details_say_each_label_once(
        page: Path) -> None:
    seen = browser.probe(page, MEASURE, "", "--window-size=1280,720")
    files = [line for line in seen["diff"] if "file demo/mod.py" in line]
    assert [line[0] for line in files] == ["-", "+"], seen["diff"]
    for line in files:
        assert re.match(r"[-+]file demo/mod\.py \[demo 1\.0\] sha256 [0-9a-f]{64}", line), line
    assert files[0].split()[-1] != files[1].split()[-2]  # the baseline's hash, then this host's
    for detail in seen["details"]:
        words = re.findall(r"[\w-]+", detail)
        repeated = [w for a, w in itertools.pairwise(words) if a == w]
        assert not repeated, detail
        assert not re.match(r"(files|artifact:[\w-]+): (\d+ )?(modified|[\w-]+): \2?\3", detail)
    assert any(d.startswith("files: 1 modified: demo/mod.py") for d in seen["details"])


def test_only_drifted_keeps_missing_and_stale_hosts_and_the_summary_in_sight(
        page: Path) -> None:
    for fragment in ("", "#only-drifted"):
        seen = browser.probe(page, SCROLL + MEASURE, fragment, "--window-size=1280,720")
        assert seen["scrolled"] > 0, "the page must be taller than the window"
        assert seen["top"] >= 0 and seen["bottom"] <= seen["height"], seen  # still in sight
    painted = set(seen["painted"])
    assert painted == {f"edited-{i:02d}" for i in range(DRIFTED)} | {"old-node", "gone-node"}
    assert seen["shown"] == (f"showing {DRIFTED + 2} of {HEALTHY + DRIFTED + 2} host(s): the "
                             "drifted, stale and missing ones")
