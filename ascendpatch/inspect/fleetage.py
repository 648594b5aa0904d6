"""How old a host's snapshot is: a snapshot older than the threshold (``fleet-report
--stale-after``), or of no known age, says what the node *was*, so its host is stale and
never shown as healthy.

The ``created`` time comes from the node's own clock and is untrusted: text that is no UTC
time of ``snapshot``'s form has no known age, and a time more than ``SKEW`` seconds ahead of
now is a clock that cannot be trusted either (else a node could claim a snapshot that never
ages).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

from ascendpatch.inspect.fleetbase import Cell
from ascendpatch.results import Level

SKEW = 300.0  # seconds a node's clock may be ahead of ours
_CREATED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")  # what snapshot.take writes
_UNITS = (("d", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0))
_SUFFIXES = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "": 1.0}


@dataclass(frozen=True)
class Age:
    created: str
    seconds: float | None  # None: unknown
    stale_after: float | None  # None: never stale

    @property
    def stale(self) -> bool:
        if self.stale_after is None:
            return False
        return self.seconds is None or self.seconds < -SKEW or self.seconds > self.stale_after

    def text(self) -> str:
        if self.seconds is None:
            return "unknown"
        if self.seconds < -SKEW:
            return "future"
        return spoken(max(self.seconds, 0.0))

    def cell(self, check: str) -> Cell:
        limit = "" if self.stale_after is None else f" (stale after {spoken(self.stale_after)})"
        when = self.created[:40] or "no time"
        if self.seconds is None:
            detail = f"snapshot age unknown: its time is {when!r}{limit}"
        elif self.seconds < -SKEW:
            detail = (f"snapshot taken {when}, {spoken(-self.seconds)} in the future: the "
                      f"node's clock is wrong{limit}")
        else:
            detail = f"snapshot taken {when}, {self.text()} ago{limit}"
        return Cell(check, Level.WARN if self.stale else Level.OK, self.text(),
                    "" if self.stale_after is None else f"<= {spoken(self.stale_after)}",
                    detail)


def judge(created: str, now: float, stale_after: float | None) -> Age:
    return Age(created, _seconds(created, now), stale_after)


def _seconds(created: str, now: float) -> float | None:
    if not _CREATED.fullmatch(created):
        return None
    try:
        when = datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    return now - when.timestamp()


def spoken(seconds: float) -> str:
    """``90000`` -> ``1 d``; the largest unit that fits once (``45 s``, ``12 min``, ``3 h``)."""
    for unit, size in _UNITS:
        if seconds >= size or unit == "s":
            return f"{int(seconds // size)} {unit}"
    raise AssertionError("unreachable")


def parse_duration(text: str) -> float:
    """``24h``, ``90m``, ``2d``, ``30s`` or seconds: a finite number >= 0 (ValueError else)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([dhms]?)\s*", text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration (e.g. 24h, 90m, 2d, 3600)")
    return float(match.group(1)) * _SUFFIXES[match.group(2)]
