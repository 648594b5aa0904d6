"""Serve-log triage: every WARNING and ERROR line is known-benign (with why), a known fault (with
the fix) or unknown (for a human); required markers are checked. Rules are data
(ascendpatch/data/log_rules.yaml) and manifests can extend them (``log_rules``)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any

import yaml

from ascendpatch.errors import InvalidInputError

_LEVEL = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b")
_TP_SIZE = re.compile(r"tensor_parallel_size=(\d+)")

# The line the SmoothQuant drop-in logs on every tensor-parallel rank (field note 003).
SMOOTHQUANT_MARKER: dict[str, Any] = {
    "id": "smoothquant-scales", "class": "marker", "per_rank": True,
    "pattern": r"\[smooth-w8a8\] loaded \d+ smooth scale vectors",
    "message": "SmoothQuant scales loaded ([smooth-w8a8] loaded N smooth scale vectors)"}


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str  # fault | benign | marker
    pattern: re.Pattern[str]
    text: str  # the fix, the why, or what the marker means
    per_rank: bool = False  # markers: once per tensor-parallel rank


@dataclass
class Finding:
    rule: Rule | None  # None: unknown
    line_no: int
    line: str
    count: int = 1


@dataclass
class Triage:
    faults: list[Finding] = field(default_factory=list)
    benign: list[Finding] = field(default_factory=list)
    unknown: list[Finding] = field(default_factory=list)
    markers: dict[str, int] = field(default_factory=dict)
    tp_size: int | None = None  # from the engine's config line, when the log has it


def _compile(raw: Mapping[str, Any], kind: str, origin: str) -> Rule:
    try:
        pattern = re.compile(str(raw["pattern"]))
    except (KeyError, re.error) as exc:
        raise InvalidInputError(f"{origin}: log rule {raw.get('id')!r}: bad pattern ({exc})") \
            from None
    text = str(raw.get("fix") or raw.get("why") or raw.get("message") or "")
    return Rule(str(raw.get("id")), kind, pattern, text, bool(raw.get("per_rank", False)))


def load_rules(extra: Iterable[Mapping[str, Any]] = ()) -> list[Rule]:
    doc = yaml.safe_load(files("ascendpatch").joinpath("data/log_rules.yaml").read_text())
    rules = [_compile(r, "fault", "log_rules.yaml") for r in doc["faults"]]
    rules += [_compile(r, "benign", "log_rules.yaml") for r in doc["benign"]]
    rules += [_compile(r, "marker", "log_rules.yaml") for r in doc["markers"]]
    for raw in extra:  # manifest rules first wins on ties: put them in front
        rules.insert(0, _compile(raw, str(raw.get("class", "fault")), "manifest log_rules"))
    return rules


def _add(bucket: list[Finding], rule: Rule | None, line_no: int, line: str) -> None:
    key = rule.id if rule else _normalise(line)
    for item in bucket:
        if (item.rule.id if item.rule else _normalise(item.line)) == key:
            item.count += 1
            return
    bucket.append(Finding(rule, line_no, line))


def _normalise(line: str) -> str:
    """Unknown lines are grouped without their timestamps, pids and numbers."""
    return re.sub(r"\d+", "#", _LEVEL.split(line, maxsplit=1)[-1]).strip()


def triage(lines: Sequence[str], rules: Sequence[Rule]) -> Triage:
    result = Triage()
    faults = [r for r in rules if r.kind == "fault"]
    benign = [r for r in rules if r.kind == "benign"]
    markers = [r for r in rules if r.kind == "marker"]
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\n")
        tp = _TP_SIZE.search(line)
        if tp:
            result.tp_size = max(result.tp_size or 0, int(tp.group(1)))
        for rule in markers:
            if rule.pattern.search(line):
                result.markers[rule.id] = result.markers.get(rule.id, 0) + 1
        fault = next((r for r in faults if r.pattern.search(line)), None)
        if fault is not None:
            _add(result.faults, fault, number, line)
            continue
        if not _LEVEL.search(line):
            continue
        known = next((r for r in benign if r.pattern.search(line)), None)
        _add(result.benign if known else result.unknown, known, number, line)
    return result
