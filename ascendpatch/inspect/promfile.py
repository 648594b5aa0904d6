"""Metrics as a Prometheus textfile, for node_exporter's textfile collector
(``--collector.textfile.directory``): ``verify --prometheus FILE`` and ``fleet-report
--prometheus FILE``.

The text is the Prometheus text exposition format 0.0.4: per family a ``# HELP`` and a
``# TYPE ... gauge`` line, then its samples; label values escape ``\\``, ``"`` and newlines
as the format asks (names come from nodes and manifests: they may hold any of them), and text
that is not UTF-8 (a lone surrogate a node's JSON spelled out) is written as its ``\\udcxx``
escape, so the file is always UTF-8 the collector reads.

The file is written whole (:func:`ascendpatch.store.atomic.write_atomic`: a temp file in the
same folder, fsync, ``os.replace``), so the collector, which reads the folder at every scrape,
never reads half a file. Its path is checked first (:func:`check_path`): a symbolic link, a
FIFO, a device or a folder at the path, or a symbolic link anywhere on the way to its folder,
is refused (exit 2, nothing written). The folder is then reached again from ``/`` one
component at a time with ``O_NOFOLLOW`` (:func:`ascendpatch.store.root.open_unlinked`) and
written through that held descriptor: a folder on the way that another uid controls (the
node_exporter user owns the textfile folder, often its parent too) swapped for a link after
the check is refused, never followed. Writing into a folder another uid owns or can write is
safe only that way, and it is: the temp file is created ``O_EXCL | O_NOFOLLOW`` under an
unpredictable name in the held folder and renamed over the final name relative to it
(``renameat``), never opened by name, so a link, FIFO or hard link planted (or swapped in
after the check) is replaced, never followed or written into.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ascendpatch.errors import InvalidInputError
from ascendpatch.inspect.fleet import FleetReport, HostStatus
from ascendpatch.paths import shown
from ascendpatch.results import ArtifactResult, CheckResult, Level, Status

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Family:
    """One metric family: a gauge, its help text and its samples (labels, value)."""

    name: str
    help: str
    samples: tuple[tuple[Labels, float], ...]


def _utf8(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def label_value(text: str) -> str:
    """``text`` as a label value between double quotes."""
    return _utf8(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _sample(name: str, labels: Labels, value: float) -> str:
    inside = ",".join(f'{key}="{label_value(text)}"' for key, text in labels)
    return f"{name}{{{inside}}} {_number(value)}" if labels else f"{name} {_number(value)}"


def render(families: Iterable[Family]) -> str:
    lines: list[str] = []
    for family in families:
        help_text = _utf8(family.help).replace("\\", "\\\\").replace("\n", "\\n")
        lines += [f"# HELP {family.name} {help_text}", f"# TYPE {family.name} gauge"]
        lines += [_sample(family.name, labels, value) for labels, value in family.samples]
    return "\n".join(lines) + "\n"


def state_set(name: str, help_text: str, items: Sequence[tuple[Labels, str]],
              states: Sequence[str]) -> Family:
    """One gauge per (item, state): 1 for the state each item is in, 0 for the others (a
    state no list names, from an untrusted snapshot, gets its own sample of 1)."""
    samples: list[tuple[Labels, float]] = []
    for labels, current in items:
        every = (*states, current) if current not in states else states
        samples += [((*labels, ("state", s)), 1.0 if s == current else 0.0) for s in every]
    return Family(name, help_text, tuple(samples))


def _refuse(path: Path, why: str) -> InvalidInputError:
    return InvalidInputError(f"--prometheus {shown(path)}: {why}; nothing written",
                             fix="give a regular file's path in node_exporter's textfile "
                                 "folder (e.g. /var/lib/node_exporter/textfile/ascendpatch.prom)")


def _link_on_the_way(folder: Path) -> Path | None:
    """The first folder on the way to ``folder`` (as spelled, ``..`` folded) that is a
    symbolic link, if any: the write reaches the folder through no link at all."""
    from ascendpatch.store.root import as_spelled

    current = as_spelled(folder)
    for step in [*reversed(current.parents), current]:
        try:
            info = os.lstat(step)
        except OSError:
            return None
        if stat.S_ISLNK(info.st_mode):
            return step
    return None


def check_path(path: Path) -> None:
    """Refuse (InvalidInputError, exit 2) a path the textfile may not be written to."""
    if not path.parent.is_dir():
        raise _refuse(path, f"the folder {shown(path.parent)} does not exist")
    link = _link_on_the_way(path.parent)
    if link is not None:
        owner = os.lstat(link).st_uid
        if owner not in (0, os.geteuid()):
            raise _refuse(path, f"{shown(link)} is a symbolic link owned by uid {owner}, "
                                "not by this user or root")
        raise _refuse(path, f"{shown(link)} is a symbolic link, which ascendpatch does not "
                            f"follow to the textfile folder (give the real folder, "
                            f"{shown(Path(os.path.realpath(path.parent)))})")
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _refuse(path, f"cannot be looked at ({exc.strerror})") from None
    if stat.S_ISLNK(info.st_mode):
        raise _refuse(path, "is a symbolic link, which ascendpatch does not write through")
    if not stat.S_ISREG(info.st_mode):
        raise _refuse(path, "is not a regular file (a FIFO, a device or a folder)")


def write(path: Path, families: Iterable[Family]) -> None:
    """The families as ``path``, whole or not at all (see the module's docstring)."""
    from ascendpatch.store import atomic

    check_path(path)
    try:
        atomic.write_atomic(path, render(families).encode("utf-8"), 0o644, unlinked=True)
    except OSError as exc:
        raise _refuse(path, f"cannot be written ({exc.strerror or exc})") from None


def verify_families(manifest: str, artifacts: Sequence[ArtifactResult],
                    results: Sequence[CheckResult | ArtifactResult]) -> list[Family]:
    """What ``verify`` found on this node: whether it is in the manifest's state, how many
    checks ended at each level, and each artifact's state."""
    counts = Counter(r.level for r in results)
    failed = counts[Level.FAIL]
    where = (("manifest", manifest),)
    return [
        Family("ascendpatch_verify_ok", "1 when verify found the target in the state the "
               "manifest describes, else 0", ((where, 0.0 if failed else 1.0),)),
        Family("ascendpatch_verify_checks", "verify's checks that ended at each level",
               tuple(((*where, ("level", level.value)), float(counts[level]))
                     for level in Level)),
        state_set("ascendpatch_artifact_state", "each artifact's state on this target (1: the "
                  "state it is in)", [((*where, ("artifact", a.id)), a.status.value)
                                      for a in artifacts], [s.value for s in Status]),
    ]


def fleet_families(report: FleetReport) -> list[Family]:
    """The fleet against its baseline: each host's status and drift, each finding that is not
    as the baseline (per host and check), each artifact's state per host, snapshot ages."""
    rows = report.rows
    present = [r for r in rows if r.status is not HostStatus.MISSING]
    return [
        state_set("ascendpatch_fleet_host_status", "each host against the baseline (1: its "
                  "status)", [((("host", r.host),), r.status.value) for r in rows],
                  [s.value for s in HostStatus]),
        Family("ascendpatch_fleet_host_drift", "how many differences from the baseline each "
               "host has", tuple(((("host", r.host),), float(r.drift)) for r in present)),
        Family("ascendpatch_fleet_finding", "1 for each check of a host that is not as the "
               "baseline (level WARN: outlier or stale, FAIL: drift)",
               tuple(((("host", r.host), ("check", c.check), ("level", c.level.value)), 1.0)
                     for r in present for c in r.cells if c.level is not Level.OK)),
        Family("ascendpatch_fleet_artifact_state", "each artifact's state on each host, as its "
               "snapshot says", tuple(((("host", r.host), ("artifact", c.check.split(":", 1)[1]),
                                        ("state", c.value)), 1.0)
                                      for r in present for c in r.cells
                                      if c.check.startswith("artifact:"))),
        Family("ascendpatch_fleet_snapshot_age_seconds", "how old each host's snapshot is (hosts "
               "whose snapshot has no known time are left out)",
               tuple(((("host", r.host),), r.age) for r in present if r.age is not None)),
    ]
