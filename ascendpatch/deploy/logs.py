"""Serve-log triage: a crash is one finding named by its cause, every WARNING and ERROR line is
known-benign (with why), a known fault (with the fix), a client's error, a warning about this
deployment, or unknown (for a human); required markers are checked. Rules are data
(ascendpatch/data/log_rules.yaml, each citing the thread that taught it); manifests
(``log_rules``) and a site's own file (``logs --rules FILE``) add more
(:mod:`ascendpatch.deploy.logrules`).

Lines are read as vLLM writes them (:mod:`ascendpatch.deploy.logread`): the process prefix is
kept apart, a traceback's frames are detail and its last line the cause, and lines with no
level word are read too. Rules can be limited to vllm-ascend releases (``versions:``), judged
against the installed release, ``--vllm-ascend X``, or the version the log itself prints.

Logs are untrusted input of any size: lines are grouped in dicts (linear in the number of
lines) and at most ``MAX_GROUPS`` distinct unknown kinds are kept (the rest are counted).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from packaging.version import Version

from ascendpatch.deploy.logread import MAX_LINE, Traceback, is_exception, split_line, stream_lines
from ascendpatch.deploy.logrules import (
    SMOOTHQUANT_MARKER,
    Knowledge,
    Rule,
    Screen,
    benign_note,
    load_rules,
    parse_version,
    read_rules_file,
)

# the rules' names too: a triage's callers (commands/logs.py, inspect/checks/smoothquant.py)
# need both, from one place
__all__ = ["MAX_GROUPS", "MAX_LINE", "SMOOTHQUANT_MARKER", "Finding", "Knowledge", "Rule",
           "Triage", "Triager", "compare", "load_rules", "read_rules_file", "stream_lines",
           "triage"]

MAX_GROUPS = 1000
MAX_PROCESSES = 64  # distinct writers followed for tracebacks; more share one state
KEEP_CHARS = 400  # of each kept line: enough for any excerpt
BUCKETS = ("faults", "warnings", "client", "crashes", "benign", "unknown")
_LEVEL = re.compile(r"\b(?:WARNING|ERROR|CRITICAL)\b")
_TP_SIZE = re.compile(r"tensor_parallel_size=(\d+)")
_DIGITS = re.compile(r"\d+")
_HEXES = re.compile(r"0x[0-9a-fA-F]+")
_LOG_VERSION = re.compile(r"LLM engine \(v(\d+\.\d+[\w.+]*)\)|vLLM API server version "
                          r"(\d+\.\d+[\w.+]*)|█ +version +(\d+\.\d+[\w.+]*)")

@dataclass
class Finding:
    rule: Rule | None  # None: unknown
    line_no: int
    line: str
    count: int = 1
    note: str = ""  # warnings: what is wrong for this deployment
    process: str = ""  # who wrote it first
    echoed_by: set[str] = field(default_factory=set)  # other processes with the same finding
    folded: int = 0  # faults, crashes: lines of the same crash folded into this finding
    key: str = ""  # its shape: what --baseline compares


@dataclass
class Triage:
    faults: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    client: list[Finding] = field(default_factory=list)  # a client's error, not the server's
    crashes: list[Finding] = field(default_factory=list)  # exceptions no rule names
    benign: list[Finding] = field(default_factory=list)
    unknown: list[Finding] = field(default_factory=list)
    # indented ERROR lines (an exception message's body, a CANN error dump): held until the
    # end, then folded into their process's fault or crash, or left unknown
    details: list[Finding] = field(default_factory=list, repr=False)
    markers: dict[str, int] = field(default_factory=dict)
    marker_values: dict[str, list[int]] = field(default_factory=dict)  # (?P<count>) per line
    tp_size: int | None = None  # from the engine's config line, when the log has it
    log_release: str | None = None  # the version the log prints (vLLM's, same major.minor)
    unknown_dropped: int = 0  # lines of unknown kinds beyond MAX_GROUPS
    lines: int = 0
    crashed: bool = False  # a traceback or an exception line was seen
    _groups: dict[tuple[str, str], Finding] = field(default_factory=dict, repr=False)

    def add(self, bucket: str, rule: Rule | None, line_no: int, line: str, note: str = "",
            process: str = "") -> Finding | None:
        key = (bucket, note or (rule.id if rule else _normalise(line)))
        found = self._groups.get(key)
        if found is not None:
            found.count += 1
            if process and process != found.process and len(found.echoed_by) < MAX_PROCESSES:
                found.echoed_by.add(process)
            return found
        target: list[Finding] = getattr(self, bucket)
        if bucket in ("unknown", "crashes", "details") and len(target) >= MAX_GROUPS:
            self.unknown_dropped += 1
            return None
        finding = Finding(rule, line_no, line[:KEEP_CHARS], note=note, process=process,
                          key=f"{bucket}:{key[1]}")
        self._groups[key] = finding
        target.append(finding)
        return finding

    def findings(self) -> Iterable[Finding]:
        for bucket in BUCKETS:
            yield from getattr(self, bucket)


def _has_level(line: str) -> bool:
    """A WARNING / ERROR / CRITICAL line, or a Python warning (RuntimeWarning: ...). The
    substring tests first: most lines of a big log are INFO, and three of them cost less than
    one search of the word-bounded pattern."""
    if "Warning:" in line:
        return True
    return (("WARNING" in line or "ERROR" in line or "CRITICAL" in line)
            and _LEVEL.search(line) is not None)


def _normalise(line: str) -> str:
    """Lines are grouped without their prefixes, timestamps, pids, numbers and addresses."""
    body = split_line(line)[1]
    body = _LEVEL.split(body, maxsplit=1)[-1] if _LEVEL.search(body) else body
    return _DIGITS.sub("#", _HEXES.sub("#", body)).strip()[:KEEP_CHARS]


@dataclass
class _Pending:
    """A line only version-limited rules match: judged once the release is known."""

    rules: tuple[Rule, ...]
    line_no: int
    line: str
    process: str
    count: int = 1


class Triager:
    """Feeds lines one at a time; rules are split by kind once; :meth:`finish` settles what
    needs the whole log (the release, a crash's echoes)."""

    def __init__(self, rules: Sequence[Rule], known: Knowledge | None = None) -> None:
        known = known or Knowledge()
        active = [r for r in rules if r.when != "quantized" or known.quantized]
        self.versioned = [r for r in active if r.versions is not None and r.kind != "marker"]
        plain = [r for r in active if r.versions is None]
        self.faults = [r for r in plain if r.kind == "fault"]
        self.client = [r for r in plain if r.kind == "client"]
        self.benign = [r for r in plain if r.kind == "benign"]
        self.markers = [r for r in active if r.kind == "marker"]
        self.known = known
        self.result = Triage()
        self._screen = Screen([*self.versioned, *self.faults])
        self._tracebacks: dict[str, Traceback] = {}
        self._pending: dict[tuple[str, ...], _Pending] = {}
        self._crashed_until = 0  # the last line of a crash seen (a traceback's, an exception's)

    def feed(self, number: int, line: str) -> None:
        self.result.lines = number
        self._config(line)
        self._marker(line)
        process, body = split_line(line)
        traceback = self._traceback(process)
        scaffolding = traceback.scaffolding(body)
        if scaffolding and traceback.open:
            self._crash(number)
        candidates = self._screen.candidates(line)
        if candidates and self._versioned(number, line, process, candidates):
            return
        fault = next((r for r in self.faults if r in candidates and r.pattern.search(line)),
                     None) if candidates else None
        if fault is not None:
            self.result.add("faults", fault, number, line, process=process)
            traceback.close()
        elif not scaffolding:
            self._plain(number, line, process, body, traceback)

    def _plain(self, number: int, line: str, process: str, body: str,
               traceback: Traceback) -> None:
        if is_exception(body):
            self._crash(number)
            traceback.close()
            self.result.add("crashes", None, number, line, process=process)
            return
        if not _has_level(line):
            return
        if body[:1].isspace() and body.strip():
            self.result.add("details", None, number, line, process=process)
            return
        client = next((r for r in self.client if r.pattern.search(line)), None)
        if client is not None:
            self.result.add("client", client, number, line, process=process)
            return
        for rule in self.benign:
            found = rule.pattern.search(line)
            if found:
                note = benign_note(rule, found, self.known)
                self.result.add("warnings" if note else "benign", rule, number, line, note,
                                process)
                return
        self.result.add("unknown", None, number, line, process=process)

    def _traceback(self, process: str) -> Traceback:
        state = self._tracebacks.get(process)
        if state is None:
            if len(self._tracebacks) >= MAX_PROCESSES:
                return self._tracebacks.setdefault("", Traceback())
            state = self._tracebacks[process] = Traceback()
        return state

    def _config(self, line: str) -> None:
        result = self.result
        if "tensor_parallel_size=" in line:
            tp = _TP_SIZE.search(line)
            if tp:
                result.tp_size = max(result.tp_size or 0, int(tp.group(1)))
        if result.log_release is None and ("version" in line or "engine (v" in line):
            found = _LOG_VERSION.search(line)
            if found:
                result.log_release = next(g for g in found.groups() if g)

    def _marker(self, line: str) -> None:
        for rule in self.markers:
            found = rule.pattern.search(line)
            if found:
                self.result.markers[rule.id] = self.result.markers.get(rule.id, 0) + 1
                if "count" in found.groupdict():
                    self.result.marker_values.setdefault(rule.id, []).append(
                        int(found["count"]))

    def _versioned(self, number: int, line: str, process: str,
                   candidates: Sequence[Rule]) -> bool:
        matched = tuple(r for r in self.versioned if r in candidates and r.pattern.search(line))
        if not matched:
            return False
        key = tuple(r.id for r in matched)
        pending = self._pending.get(key)
        if pending is None:
            self._pending[key] = _Pending(matched, number, line, process)
        else:
            pending.count += 1
        return True

    def finish(self) -> Triage:
        """Judge version-limited lines, promote a benign line that explains an unnamed crash,
        and fold a crash's echoes into the fault that names it."""
        self._settle_versions()
        self._explain_crash()
        self._fold_details()
        self._fold_echoes()
        return self.result

    def release(self) -> Version | None:
        return self.known.release() or parse_version(self.result.log_release)

    def _settle_versions(self) -> None:
        if not self._pending:
            return
        release = self.release()
        for pending in self._pending.values():
            if release is None:
                self._unjudged(pending)
                continue
            rule = next((r for r in pending.rules if r.versions is not None
                         and r.versions.contains(release, prereleases=True)), None)
            if rule is not None:
                bucket = {"fault": "faults", "benign": "benign"}.get(rule.kind, "client")
                self._add_pending(bucket, rule, pending)

    def _unjudged(self, pending: _Pending) -> None:
        """A line whose meaning depends on a release nobody named: a warning that says so."""
        ranges = " / ".join(f"{r.kind} for {r.versions}" for r in pending.rules)
        note = ("its meaning depends on the vllm-ascend release "
                f"({ranges}), and none is known: pass --vllm-ascend X, or --python / "
                "--site-packages to read the installed one")
        self._add_pending("warnings", pending.rules[0], pending, note)

    def _add_pending(self, bucket: str, rule: Rule, pending: _Pending, note: str = "") -> None:
        found = self.result.add(bucket, rule, pending.line_no, pending.line, note,
                                pending.process)
        if found is not None:
            found.count += pending.count - 1

    def _crash(self, number: int) -> None:
        self.result.crashed = True
        self._crashed_until = number

    def _explain_crash(self) -> None:
        """A crash no rule names is explained by a benign line with a ``crash_fix`` seen
        before the crash ended (vllm-omni's version warning at start-up, or another process's
        printed between a traceback's lines), never by one that came after every crash:
        what a stop prints once the server is going cannot be why it went."""
        result = self.result
        if result.faults or not result.crashed:
            return
        for finding in list(result.benign):
            if finding.rule is not None and finding.rule.crash_fix \
                    and finding.line_no < self._crashed_until:
                result.benign.remove(finding)
                finding.rule = replace(finding.rule, kind="fault", text=finding.rule.crash_fix)
                finding.key = f"faults:{finding.rule.id}"
                result.faults.append(finding)
                return

    def _fold_details(self) -> None:
        """An indented line continues the message of its process's error: fold it there."""
        result = self.result
        for detail in result.details:
            owner = next((f for f in [*result.faults, *result.crashes]
                          if detail.process in (f.process, *f.echoed_by)), None)
            if owner is not None:
                owner.folded += detail.count
            elif len(result.unknown) < MAX_GROUPS:
                detail.key = "unknown:" + detail.key.split(":", 1)[1]
                result.unknown.append(detail)
            else:
                result.unknown_dropped += detail.count
        result.details = []

    def _fold_echoes(self) -> None:
        result = self.result
        causes = [f for f in result.faults if f.rule is not None and not f.rule.echo]
        if not causes:
            return
        echoes = [f for f in result.faults if f.rule is not None and f.rule.echo]
        causes[0].folded += sum(f.count + f.folded for f in [*echoes, *result.crashes])
        result.faults = causes
        result.crashes = []


def triage(lines: Iterable[str], rules: Sequence[Rule], known: Knowledge | None = None) \
        -> Triage:
    triager = Triager(rules, known)
    for number, raw in enumerate(lines, start=1):
        triager.feed(number, raw.rstrip("\r\n"))
    return triager.finish()


@dataclass(frozen=True)
class Difference:
    """What ``--baseline`` reports: a finding's shape that is new in (or gone from) a start,
    compared with a known-good one."""

    finding: Finding
    new: bool  # False: gone
    serious: bool  # new and an error or warning: the start is worse than the baseline


def compare(baseline: Triage, new: Triage) -> list[Difference]:
    """The shapes (text without numbers, timestamps or pids) found in only one of the two
    starts; markers count as shapes, so a start that no longer completes is a difference."""
    before = {f.key: f for f in baseline.findings()}
    after = {f.key: f for f in new.findings()}
    serious = {"faults", "crashes", "warnings", "unknown"}
    found = [Difference(f, True, key.split(":", 1)[0] in serious)
             for key, f in after.items() if key not in before]
    found += [Difference(f, False, False) for key, f in before.items() if key not in after]
    found += [Difference(Finding(None, 0, f"marker {marker}", key=f"markers:{marker}"), False,
                         True) for marker in baseline.markers if marker not in new.markers]
    return found
