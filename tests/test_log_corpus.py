"""`ascendpatch logs` scored on serve logs users posted in public issue threads.

Every log under tests/data/logs/ is quoted from the thread its index entry names, trimmed to
the relevant part; the entry says what the thread established as the cause and which rule must
name it (or ``healthy``: no fault may be raised). The score line is printed (run with ``-s``)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from tests.kit import REPO, run_cli

CORPUS = REPO / "tests" / "data" / "logs"
NAMED_BAR = 0.9


@dataclass(frozen=True)
class Verdict:
    file: str
    expect: str
    faults: frozenset[str]
    benign: int
    held_out: bool = False

    @property
    def healthy(self) -> bool:
        return self.expect == "healthy"

    @property
    def named(self) -> bool:
        return self.expect in self.faults

    @property
    def called_benign(self) -> bool:
        """A failure the triage passed as harmless: known-benign lines and no fault at all."""
        return not self.healthy and not self.faults and self.benign > 0


def _entries() -> list[dict[str, Any]]:
    doc = yaml.safe_load((CORPUS / "index.yaml").read_text(encoding="utf-8"))
    return list(doc["logs"])


def _verdict(entry: dict[str, Any]) -> Verdict:
    run = run_cli("--json", "logs", CORPUS / entry["file"])
    assert run.code in (0, 1), run.err
    results = json.loads(run.out)["results"]
    faults = frozenset(r["id"].removeprefix("fault:") for r in results
                       if r["id"].startswith("fault:"))
    benign = sum(1 for r in results if r["id"].startswith("benign:"))
    return Verdict(entry["file"], str(entry["expect"]), faults, benign,
                   bool(entry.get("held_out", False)))


def score(verdicts: list[Verdict]) -> tuple[int, int, int, int, str]:
    failures = [v for v in verdicts if not v.healthy]
    named = sum(v.named for v in failures)
    benign = sum(v.called_benign for v in failures)
    false_alarms = sum(bool(v.faults) for v in verdicts if v.healthy)
    line = (f"{named}/{len(failures)} failures named with the thread's cause, {benign} faults "
            f"called benign, {false_alarms} faults on healthy starts")
    return named, len(failures), benign, false_alarms, line


def test_the_index_is_complete_and_sourced() -> None:
    entries = _entries()
    files = {p.name for p in CORPUS.glob("*.log")}
    assert {e["file"] for e in entries} == files
    assert len(entries) >= 60 and sum(e["expect"] == "healthy" for e in entries) >= 10
    for entry in entries:
        assert str(entry["url"]).startswith(f"https://github.com/{entry['repo']}/"), entry
        assert str(entry["url"]).endswith(f"/{entry['issue']}"), entry
        assert entry["cause"] and entry["expect"], entry


def test_the_corpus_score_meets_the_bars(capsys: pytest.CaptureFixture[str]) -> None:
    verdicts = [_verdict(e) for e in _entries()]
    named, failures, benign, false_alarms, line = score(verdicts)
    missed = [f"{v.file}: want {v.expect}, got {sorted(v.faults)}" for v in verdicts
              if not v.healthy and not v.named]
    alarms = [f"{v.file}: {sorted(v.faults)}" for v in verdicts if v.healthy and v.faults]
    with capsys.disabled():  # the score line, shown in every run (CI logs keep it)
        sys.stdout.write(f"\nlog corpus: {line}\n")
        held_out = [v for v in verdicts if v.held_out]
        if held_out:  # logs collected after the rules: the part of the score they never saw
            sys.stdout.write(f"held out ({len(held_out)} logs): {score(held_out)[4]}\n")
    assert named >= NAMED_BAR * failures, "\n".join([line, *missed])
    assert benign == 0, line
    assert false_alarms == 0, "\n".join([line, *alarms])
