"""``ascendpatch fleet-report SNAPSHOT... [--baseline FILE] [--hosts FILE] [-o report.html]``.

Bad input, as documented in the README:

* two snapshot files for the same host: refused, exit 2 (which one is true is not ours to
  guess), nothing written;
* a snapshot that cannot be read, is truncated or foreign JSON, or has another format version:
  a ``[WARN]`` naming the file and why; that host is shown as *missing* (never as healthy) and
  the report covers the rest;
* a host listed in ``--hosts`` (the Ansible playbooks write ``hosts.txt``) without a snapshot,
  e.g. a node that was unreachable: shown as missing;
* a bad ``--baseline``, or no readable snapshot at all: exit 2;
* a snapshot older than ``--stale-after`` (default 24h), or of no known age: that host is
  stale, never healthy;
* ``--prometheus FILE`` a link, a FIFO, a folder, or in a missing folder: exit 2 before any
  snapshot is read, nothing written (:mod:`ascendpatch.inspect.promfile`).

Exit 1 when any host drifts, is an outlier, stale or missing, 0 when every host matches the
baseline.
"""

from __future__ import annotations

from argparse import ArgumentParser, ArgumentTypeError, Namespace
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ascendpatch.errors import EXIT_OK, EXIT_PROBLEMS, InvalidInputError
from ascendpatch.inspect import fleet, fleetage, promfile
from ascendpatch.inspect.fleet import FleetReport, HostRow, HostSnapshot, HostStatus
from ascendpatch.paths import NotRegularFileError, read_regular, shown
from ascendpatch.results import Cell, CheckResult, CommandResult, Hint, Level, Phrase, Table, Tone
from ascendpatch.shell import cliargs


def expand(paths: Sequence[Path]) -> list[Path]:
    """Snapshot files; a folder stands for the ``*.json`` files in it."""
    out: list[Path] = []
    for path in paths:
        out.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    return out


MAX_HOSTS_BYTES = 4 << 20  # 100,000 host names of 40 characters
STALE_AFTER = 24 * 3600.0  # a day: an older snapshot may no longer say what the node is


def read_hosts(path: Path) -> list[str]:
    """The host names in ``path``, a regular file (a FIFO would hang the report)."""
    try:
        text = read_regular(path, MAX_HOSTS_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError, NotRegularFileError) as exc:
        raise InvalidInputError(f"hosts file {shown(path)} cannot be read ({exc})",
                                fix="one host name per line") from None
    return [s for s in (line.split("#", 1)[0].strip() for line in text.splitlines()) if s]


def load_all(paths: Sequence[Path]) -> tuple[list[HostSnapshot], list[HostRow], list[str]]:
    duplicates = fleet.duplicate_hosts(paths)
    if duplicates:
        host, files = sorted(duplicates.items())[0]
        raise InvalidInputError(f"two snapshots of host {host}: {' and '.join(files)}",
                                fix="keep one snapshot per host (hosts are named by the file "
                                    "name without .json)")
    intern = fleet.Interner()
    good: list[HostSnapshot] = []
    missing: list[HostRow] = []
    warnings: list[str] = []
    for path in paths:
        try:
            good.append(fleet.read(path, intern))
        except InvalidInputError as exc:
            warnings.append(f"skipped {exc}; host {fleet.host_name(path)} is shown as missing")
            missing.append(fleet.missing_row(fleet.host_name(path), str(exc), shown(path)))
    return good, missing, warnings


def _baseline(path: Path | None, hosts: Sequence[HostSnapshot],
              owners: fleet.Owners) -> fleet.Baseline:
    if path is None:
        return fleet.majority_baseline(hosts, owners)
    try:
        return fleet.baseline_from(fleet.read(path))
    except InvalidInputError as exc:
        raise InvalidInputError(f"baseline: {exc}",
                                fix=Phrase("pass a snapshot written by '",
                                           Hint(("snapshot",)), "'")) from None


def _unanswered(expected: Sequence[str], rows: Sequence[HostRow],
                hosts: Sequence[HostSnapshot]) -> list[HostRow]:
    seen = {h.host for h in hosts} | {r.host for r in rows}
    return [fleet.missing_row(h, "no snapshot (the node did not answer or was not reached)")
            for h in dict.fromkeys(expected) if h not in seen]


def report(paths: Sequence[Path], baseline: Path | None = None,
           hosts_file: Path | None = None, stale_after: float | None = None) -> FleetReport:
    files = expand(paths)
    expected = read_hosts(hosts_file) if hosts_file is not None else []
    good, missing, warnings = load_all(files)
    owners = fleet.Owners()
    if not good:
        raise InvalidInputError("no readable snapshot among " + ", ".join(map(shown, files)),
                                fix=Phrase("fetch them with the audit playbook or '",
                                           Hint(("snapshot", "-o", "HOST.json")), "'"))
    missing += _unanswered(expected, missing, good)
    return fleet.build(good, _baseline(baseline, good, owners), missing, warnings, owners,
                       stale_after=stale_after)


@dataclass(frozen=True)
class FleetRows:
    """fleet-report's payload: the report as --json's "fleet" document and as a terminal table
    (hosts x the report's columns, then the drift count)."""

    report: FleetReport

    def json(self) -> dict[str, object]:
        return {"fleet": fleet.to_json(self.report)}

    def table(self) -> Table:
        columns = ("host", *(c.split(":", 1)[-1] for c in self.report.columns), "drift")
        return Table(f"fleet against the {self.report.baseline.source}", columns,
                     tuple(self._row(r) for r in self.report.rows),
                     right=frozenset({len(columns) - 1}))

    def _row(self, row: HostRow) -> tuple[Cell, ...]:
        host = Cell(row.host, _HOST_TONE[row.status])
        if row.status is HostStatus.MISSING:
            return (host, *[Cell("missing")] * len(self.report.columns), Cell("-"))
        return (host, *(Cell(c.value, Tone.of(c.level)) for c in row.cells), Cell(str(row.drift)))


_HOST_TONE = {HostStatus.OK: Tone.GOOD, HostStatus.OUTLIER: Tone.CAUTION,
              HostStatus.DRIFT: Tone.BAD, HostStatus.STALE: Tone.CAUTION,
              HostStatus.MISSING: Tone.ABSENT}
_WHAT = {HostStatus.DRIFT: "drifted", HostStatus.OUTLIER: "outlier",
         HostStatus.STALE: "stale snapshot"}


def _host_line(row: HostRow) -> CheckResult:
    if row.status is HostStatus.MISSING:
        return CheckResult(f"host:{row.host}", "fleet", Level.FAIL,
                           f"{row.host}: missing ({row.reason})")
    if row.status is HostStatus.OK:
        return CheckResult(f"host:{row.host}", "fleet", Level.OK,
                           f"{row.host}: as the baseline")
    level = Level.FAIL if row.status is HostStatus.DRIFT else Level.WARN
    bad = [c.detail for c in row.cells if c.level is level]
    if row.status is HostStatus.STALE:  # the age first: why the rest cannot be vouched for
        bad.sort(key=lambda detail: not detail.startswith("snapshot "))
    return CheckResult(f"host:{row.host}", "fleet", level,
                       f"{row.host}: {_WHAT[row.status]}, {row.drift} difference(s) from the "
                       "baseline: " + "; ".join(bad[:3]), details=row.diff[:20])


def run(paths: Sequence[Path], baseline: Path | None = None, hosts_file: Path | None = None,
        output: Path | None = None, *, stale_after: float | None = STALE_AFTER,
        prometheus: Path | None = None) -> CommandResult:
    if prometheus is not None:
        promfile.check_path(prometheus)  # before any snapshot is read
    rep = report(paths, baseline, hosts_file, stale_after)
    if prometheus is not None:
        promfile.write(prometheus, promfile.fleet_families(rep))
    page = _page(rep, output) if output is not None else None
    summary = (f"fleet: {len(rep.rows)} host(s) against the {rep.baseline.source}: "
               f"{len(rep.drifted)} drifted, {len(rep.outliers)} outlier(s), "
               f"{len(rep.stale)} stale, {len(rep.missing)} missing"
               + (f"; report written to {'stdout' if page else output}" if output else "")
               + (f"; metrics written to {prometheus}" if prometheus else ""))
    code = EXIT_OK if all(r.status is HostStatus.OK for r in rep.rows) else EXIT_PROBLEMS
    return CommandResult("fleet-report", tuple(_host_line(r) for r in rep.rows),
                         notes=rep.warnings, summary=summary, exit_code_override=code,
                         body=FleetRows(rep), payload=page)


def _page(rep: FleetReport, output: Path) -> str | None:
    """Write the HTML page to ``output``; ``-o -``: the page itself, for stdout."""
    from ascendpatch.inspect import fleethtml
    from ascendpatch.store import atomic

    page = fleethtml.render(fleet.to_json(rep))
    if str(output) == "-":
        return page
    # (every text in it is valid UTF-8 but a lone surrogate a node's JSON spelled out)
    atomic.write_atomic(output, page.encode("utf-8", "backslashreplace"))
    return None


def from_args(args: Namespace) -> CommandResult:
    return run(args.snapshots, args.baseline, args.hosts, args.output,
               stale_after=args.stale_after, prometheus=args.prometheus)


def _duration(text: str) -> float | None:
    if text == "never":
        return None
    try:
        return fleetage.parse_duration(text)
    except ValueError as exc:
        raise ArgumentTypeError(str(exc)) from None


def configure(p: ArgumentParser) -> None:
    p.add_argument("snapshots", nargs="+", type=cliargs.path, metavar="SNAPSHOT",
                   help="snapshot files (HOST.json) or folders of them")
    p.add_argument("--baseline", type=cliargs.path, metavar="FILE",
                   help="compare with this snapshot (default: the majority per package/patch)")
    p.add_argument("--hosts", type=cliargs.path, metavar="FILE",
                   help="every host expected, one per line: those without a snapshot are missing")
    p.add_argument("-o", "--output", type=cliargs.output_file, metavar="report.html",
                   help="also write a self-contained HTML page ('-' for stdout)")
    p.add_argument("--stale-after", type=_duration, default=STALE_AFTER, metavar="AGE",
                   help="a snapshot older than this (24h, 90m, 2d, seconds; 'never') makes its "
                        "host stale, never healthy (default 24h)")
    p.add_argument("--prometheus", type=cliargs.path, metavar="FILE",
                   help="also write the report as gauges in a Prometheus textfile (for "
                        "node_exporter's textfile collector), atomically")


COMMAND = cliargs.CommandSpec(
    name="fleet-report",
    help="drift of many hosts' snapshots against a baseline",
    description=("Compare many hosts' snapshots against a baseline (the majority per package / "
                 "patch, or --baseline): a table per host, drift in red, an optional HTML page "
                 "and Prometheus textfile. Exit 1 on drift, an outlier, a stale snapshot or a "
                 "missing host."),
    example="ascendpatch fleet-report snapshots/ --hosts hosts.txt -o fleet.html",
    run=from_args, configure=configure,
)
