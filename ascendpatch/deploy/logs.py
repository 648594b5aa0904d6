"""Serve-log triage: a crash is one finding named by its cause, every WARNING and ERROR line is
known-benign (with why), a known fault (with the fix), a client's error, a warning about this
deployment, or unknown (for a human); required markers are checked. Rules are data
(ascendpatch/data/log_rules.yaml, each citing the thread that taught it); manifests
(``log_rules``) and a site's own file (``logs --rules FILE``) add more.

Lines are read as vLLM writes them (:mod:`ascendpatch.deploy.logread`): the process prefix is
kept apart, a traceback's frames are detail and its last line the cause, and lines with no
level word are read too. Rules can be limited to vllm-ascend releases (``versions:``), judged
against the installed release, ``--vllm-ascend X``, or the version the log itself prints.

Logs are untrusted input of any size: lines are grouped in dicts (linear in the number of
lines) and at most ``MAX_GROUPS`` distinct unknown kinds are kept (the rest are counted).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from ascendpatch.deploy.logread import MAX_LINE, Traceback, is_exception, split_line, stream_lines
from ascendpatch.errors import InvalidInputError
from ascendpatch.manifest import schema as s

__all__ = ["MAX_GROUPS", "MAX_LINE", "Finding", "Knowledge", "Rule", "Triage", "Triager",
           "compare", "literals", "load_rules", "read_rules_file", "stream_lines", "triage"]

MAX_GROUPS = 1000
MAX_PROCESSES = 64  # distinct writers followed for tracebacks; more share one state
KEEP_CHARS = 400  # of each kept line: enough for any excerpt
BUCKETS = ("faults", "warnings", "client", "crashes", "benign", "unknown")
_LEVEL = re.compile(r"\b(?:WARNING|ERROR|CRITICAL)\b")
_TP_SIZE = re.compile(r"tensor_parallel_size=(\d+)")
_DIGITS = re.compile(r"\d+")
_HEXES = re.compile(r"0x[0-9a-fA-F]+")
_ASCEND_ENV = re.compile(r"VLLM_ASCEND_\w+")
_LOG_VERSION = re.compile(r"LLM engine \(v(\d+\.\d+[\w.+]*)\)|vLLM API server version "
                          r"(\d+\.\d+[\w.+]*)|█ +version +(\d+\.\d+[\w.+]*)")

# The line the SmoothQuant drop-in logs on every tensor-parallel rank.
SMOOTHQUANT_MARKER: dict[str, Any] = {
    "id": "smoothquant-scales", "class": "marker", "per_rank": True,
    "pattern": r"\[smooth-w8a8\] loaded (?P<count>\d+) smooth scale vectors",
    "message": "SmoothQuant scales loaded ([smooth-w8a8] loaded N smooth scale vectors)"}


_RULE_FIELDS: dict[str, s.Schema] = {
    "id": s.Str(s.identifier), "pattern": s.Str(), "fix": s.Str(), "why": s.Str(),
    "message": s.Str(), "source": s.Str(), "per_rank": s.Bool(), "check": s.Str(),
    "when": s.Str(), "versions": s.Str(s.specifier), "echo": s.Bool(), "crash_fix": s.Str()}
RULE = s.Obj(_RULE_FIELDS, frozenset({"id", "pattern"}))
RULES_FILE = s.Obj({kind: s.ListOf(RULE) for kind in ("faults", "benign", "client", "markers")})
_KINDS = {"faults": "fault", "benign": "benign", "client": "client", "markers": "marker"}


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str  # fault | benign | client | marker
    pattern: re.Pattern[str]
    text: str  # the fix, the why, or what the marker means
    per_rank: bool = False  # markers: once per tensor-parallel rank
    check: str = ""  # benign rules: "deployed-architecture" | "ascend-env"
    when: str = ""  # "quantized": only for deployments that serve quantized weights
    versions: SpecifierSet | None = None  # only for these vllm-ascend releases
    echo: bool = False  # faults: a crash's echo (EngineCore died); folded into its cause
    crash_fix: str = ""  # benign rules that explain a crash no fault rule names
    source: str = ""  # the thread that taught it


@dataclass
class Knowledge:
    """What the triage knows about this deployment. The installed vllm-ascend's envs.py and
    release are looked up only when a log line needs them."""

    architectures: frozenset[str] = frozenset()  # what the manifest deploys
    find_envs: Callable[[], Path | None] | None = None
    quantized: bool = False  # the manifest serves quantized weights
    declared_env: frozenset[str] = frozenset()  # variables the manifest's artifacts read
    adapter_classes: Mapping[str, str] = field(default_factory=dict)  # arch -> module:Class
    find_release: Callable[[], str | None] | None = None  # --vllm-ascend, else installed
    _envs: tuple[frozenset[str] | None, str] | None = field(default=None, repr=False)
    _release: tuple[Version | None] | None = field(default=None, repr=False)

    def ascend_env(self) -> tuple[frozenset[str] | None, str]:
        """The VLLM_ASCEND_* names the installed vllm-ascend knows (None: not found), and
        the file they were read from."""
        if self._envs is None:
            path = self.find_envs() if self.find_envs is not None else None
            self._envs = (ascend_env_names(path), str(path)) if path else (None, "")
        return self._envs

    def knows_env(self, name: str) -> bool:
        return name in self.declared_env or name in (self.ascend_env()[0] or frozenset())

    def release(self) -> Version | None:
        if self._release is None:
            found = self.find_release() if self.find_release is not None else None
            self._release = (_version(found),)
        return self._release[0]


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


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


def _compile(raw: Mapping[str, Any], kind: str, origin: str) -> Rule:
    try:
        pattern = re.compile(str(raw["pattern"]))
    except (KeyError, re.error) as exc:
        raise InvalidInputError(f"{origin}: log rule {raw.get('id')!r}: bad pattern ({exc})") \
            from None
    text = str(raw.get("fix") or raw.get("why") or raw.get("message") or "")
    versions = SpecifierSet(str(raw["versions"])) if raw.get("versions") else None
    return Rule(str(raw.get("id")), kind, pattern, text, bool(raw.get("per_rank", False)),
                str(raw.get("check", "")), str(raw.get("when", "")), versions,
                bool(raw.get("echo", False)), str(raw.get("crash_fix", "")),
                str(raw.get("source", "")))


def _rules_of(doc: Mapping[str, Any], origin: str) -> list[Rule]:
    return [_compile(raw, kind, origin) for key, kind in _KINDS.items()
            for raw in doc.get(key) or ()]


def _parse_yaml(text: str, path: Path) -> object:
    """The manifest loader's YAML reader (duplicate keys refused, aliases bounded). Imported
    here, not at the top: the loader imports the kinds, one of which imports this module."""
    from ascendpatch.manifest.loader import parse_yaml

    return parse_yaml(text, path)


def read_rules_file(path: Path) -> list[Rule]:
    """A site's own rules, in log_rules.yaml's format, validated like a manifest: every
    problem (with its key path, and every pattern that does not compile) is reported at once,
    as invalid input (exit 2)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"--rules {path}: cannot be read ({exc})") from None
    doc = _parse_yaml(text, path)
    problems = [f"{path}: {p}" for p in s.validate(doc, RULES_FILE)]
    if not problems and isinstance(doc, dict):
        problems = [f"{path}: {key}[{i}].pattern: {problem}" for key in _KINDS
                    for i, raw in enumerate(doc.get(key) or ())
                    if (problem := _pattern_problem(str(raw["pattern"])))]
    if problems or not isinstance(doc, dict):
        problems = problems or [f"{path}: expected a mapping of rule lists"]
        raise InvalidInputError(f"--rules: {len(problems)} problem(s): {'; '.join(problems)}",
                                fix="correct the file; its format is that of ascendpatch/data/"
                                    "log_rules.yaml (faults, benign, client, markers)")
    return _rules_of(doc, str(path))


def _pattern_problem(pattern: str) -> str | None:
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"not a regular expression ({exc})"
    return None


def load_rules(extra: Iterable[Mapping[str, Any]] = (), site: Sequence[Rule] = ()) -> list[Rule]:
    """The bundled rules, a manifest's (``extra``) and a site's (``--rules``); manifest and
    site rules come first, so they win on ties."""
    doc = yaml_doc()
    rules = [*site, *_rules_of(doc, "log_rules.yaml")]
    for raw in extra:  # manifest rules first wins on ties: put them in front
        rules.insert(0, _compile(raw, str(raw.get("class", "fault")), "manifest log_rules"))
    return rules


def yaml_doc() -> dict[str, Any]:
    text = files("ascendpatch").joinpath("data/log_rules.yaml").read_text(encoding="utf-8")
    doc = _parse_yaml(text, Path("log_rules.yaml"))
    assert isinstance(doc, dict)
    return doc


def _has_level(line: str) -> bool:
    """A WARNING / ERROR / CRITICAL line, or a Python warning (RuntimeWarning: ...)."""
    return "Warning:" in line or _LEVEL.search(line) is not None


def _normalise(line: str) -> str:
    """Lines are grouped without their prefixes, timestamps, pids, numbers and addresses."""
    body = split_line(line)[1]
    body = _LEVEL.split(body, maxsplit=1)[-1] if _LEVEL.search(body) else body
    return _DIGITS.sub("#", _HEXES.sub("#", body)).strip()[:KEEP_CHARS]


def ascend_env_names(envs_py: Path) -> frozenset[str]:
    """Every ``VLLM_ASCEND_*`` name the installed vllm-ascend's envs.py spells as a string (the
    keys of its ``env_variables`` table and its getenv calls), read without importing it."""
    tree = ast.parse(envs_py.read_text(encoding="utf-8"), str(envs_py))
    return frozenset(node.value for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str)
                     and _ASCEND_ENV.fullmatch(node.value))


def _architecture_note(match: re.Match[str], known: Knowledge) -> str:
    """'' when the registry overwrite is harmless here: another architecture, or the class
    this manifest's own adapter installs."""
    arch = match.group("arch")
    if arch not in known.architectures:
        return ""
    won = (match.groupdict().get("cls") or "").rstrip(".")
    if won and won == known.adapter_classes.get(arch):
        return ""
    return (f"the deployed architecture {arch} was overwritten: the class that won is "
            f"{won or 'the class registered last'}; check that it is the one you deploy "
            "(ascendpatch verify checks the registry)")


def _env_note(match: re.Match[str], known: Knowledge) -> str:
    name = match.group("env")
    if not name.startswith("VLLM_ASCEND_") or known.knows_env(name):
        return ""
    names, envs_file = known.ascend_env()
    if names is None:
        return (f"{name}: cannot tell whether vllm-ascend knows it (no vllm_ascend/envs.py "
                "found in the target; pass --python or --site-packages)")
    return (f"{name} is not a variable the installed vllm-ascend knows ({envs_file}) "
            "nor one this manifest declares: a typo? nothing reads it")


def _benign(rule: Rule, match: re.Match[str], known: Knowledge) -> str:
    """'' when the line is benign here, else the warning for this deployment."""
    if rule.check == "deployed-architecture":
        return _architecture_note(match, known)
    if rule.check == "ascend-env":
        return _env_note(match, known)
    return ""


_META = set(".^$*+?{}[]()|\\")
_QUANTIFIERS = set("?*{")
MIN_LITERAL = 4


def _branches(pattern: str) -> list[str]:
    """The top-level alternatives of a pattern."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 1
        elif char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "|" and depth == 0:
            out.append(pattern[start:i])
            start = i + 1
        i += 1
    return [*out, pattern[start:]]


def _longest_literal(branch: str) -> str:
    """The longest run of plain characters a match of ``branch`` must contain (outside any
    group or class); "" when there is none worth screening with."""
    best, run, depth, i = "", "", 0, 0
    while i < len(branch):
        char = branch[i]
        literal = None
        if char == "\\" and i + 1 < len(branch):
            i += 1
            literal = branch[i] if not branch[i].isalnum() else None
        elif depth == 0 and char not in _META:
            literal = char
        depth += (char in "([") - (char in ")]") if literal is None and char != "\\" else 0
        if literal is not None and depth == 0:
            nxt = branch[i + 1] if i + 1 < len(branch) else ""
            if nxt in _QUANTIFIERS:
                literal = None
            else:
                run += literal
        if literal is None:
            best, run = max(best, run, key=len), ""
        i += 1
    best = max(best, run, key=len)
    return best if len(best) >= MIN_LITERAL else ""


def literals(rule: Rule) -> tuple[str, ...] | None:
    """Plain strings one of which every line the rule matches contains, or None when the
    pattern cannot promise one (inline flags, a branch with no long enough literal)."""
    text = rule.pattern.pattern
    if text.startswith("(?") and not text.startswith(("(?:", "(?P")):
        return None
    found = tuple(_longest_literal(b) for b in _branches(text))
    return None if not all(found) else found


class _Screen:
    """Which rules can match a line, found with plain substring tests: most lines of a big log
    match no rule, and a substring test is cheaper than a regular-expression search."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.always = [r for r in rules if literals(r) is None]
        self.index = [(lit, r) for r in rules for lit in literals(r) or ()]

    def candidates(self, line: str) -> list[Rule]:
        found = [r for lit, r in self.index if lit in line]
        return [*self.always, *found] if found or self.always else []


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
        self._screen = _Screen([*self.versioned, *self.faults])
        self._tracebacks: dict[str, Traceback] = {}
        self._pending: dict[tuple[str, ...], _Pending] = {}

    def feed(self, number: int, line: str) -> None:
        self.result.lines = number
        self._config(line)
        self._marker(line)
        process, body = split_line(line)
        traceback = self._traceback(process)
        scaffolding = traceback.scaffolding(body)
        if scaffolding and traceback.open:
            self.result.crashed = True
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
            self.result.crashed = True
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
                note = _benign(rule, found, self.known)
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
        return self.known.release() or _version(self.result.log_release)

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

    def _explain_crash(self) -> None:
        result = self.result
        if result.faults or not result.crashed:
            return
        for finding in list(result.benign):
            if finding.rule is not None and finding.rule.crash_fix:
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
