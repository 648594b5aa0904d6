"""Serve-log triage: every WARNING and ERROR line is known-benign (with why), a known fault (with
the fix), a warning about this deployment, or unknown (for a human); required markers are
checked. Rules are data (ascendpatch/data/log_rules.yaml) and manifests can extend them
(``log_rules``).

Logs are untrusted input of any size: they are streamed line by line (lines longer than
``MAX_LINE`` are cut), grouped in dicts (linear in the number of lines), and at most
``MAX_GROUPS`` distinct unknown kinds are kept (the rest are counted). Only regular files are
read: a FIFO or a device such as /dev/zero is refused before anything is read.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from ascendpatch.deploy.text import printable
from ascendpatch.errors import InvalidInputError
from ascendpatch.paths import NotRegularFileError, open_regular
from ascendpatch.results import Hint, Phrase

MAX_LINE = 64 * 1024
MAX_GROUPS = 1000
KEEP_CHARS = 400  # of each kept line: enough for any excerpt
_LEVEL = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b")
_TP_SIZE = re.compile(r"tensor_parallel_size=(\d+)")
_DIGITS = re.compile(r"\d+")
_ASCEND_ENV = re.compile(r"VLLM_ASCEND_\w+")

# The line the SmoothQuant drop-in logs on every tensor-parallel rank.
SMOOTHQUANT_MARKER: dict[str, Any] = {
    "id": "smoothquant-scales", "class": "marker", "per_rank": True,
    "pattern": r"\[smooth-w8a8\] loaded (?P<count>\d+) smooth scale vectors",
    "message": "SmoothQuant scales loaded ([smooth-w8a8] loaded N smooth scale vectors)"}


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str  # fault | benign | marker
    pattern: re.Pattern[str]
    text: str  # the fix, the why, or what the marker means
    per_rank: bool = False  # markers: once per tensor-parallel rank
    check: str = ""  # benign rules: "deployed-architecture" | "ascend-env"
    when: str = ""  # "quantized": only for deployments that serve quantized weights


@dataclass
class Knowledge:
    """What the triage knows about this deployment. The installed vllm-ascend's envs.py is
    looked up (``find_envs``) only when a log line needs it."""

    architectures: frozenset[str] = frozenset()  # what the manifest deploys
    find_envs: Callable[[], Path | None] | None = None
    quantized: bool = False  # the manifest serves quantized weights
    declared_env: frozenset[str] = frozenset()  # variables the manifest's artifacts read
    _envs: tuple[frozenset[str] | None, str] | None = field(default=None, repr=False)

    def ascend_env(self) -> tuple[frozenset[str] | None, str]:
        """The VLLM_ASCEND_* names the installed vllm-ascend knows (None: not found), and
        the file they were read from."""
        if self._envs is None:
            path = self.find_envs() if self.find_envs is not None else None
            self._envs = (ascend_env_names(path), str(path)) if path else (None, "")
        return self._envs

    def knows_env(self, name: str) -> bool:
        return name in self.declared_env or name in (self.ascend_env()[0] or frozenset())


@dataclass
class Finding:
    rule: Rule | None  # None: unknown
    line_no: int
    line: str
    count: int = 1
    note: str = ""  # warnings: what is wrong for this deployment


@dataclass
class Triage:
    faults: list[Finding] = field(default_factory=list)
    benign: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    unknown: list[Finding] = field(default_factory=list)
    markers: dict[str, int] = field(default_factory=dict)
    marker_values: dict[str, list[int]] = field(default_factory=dict)  # (?P<count>) per line
    tp_size: int | None = None  # from the engine's config line, when the log has it
    unknown_dropped: int = 0  # lines of unknown kinds beyond MAX_GROUPS
    lines: int = 0
    _groups: dict[tuple[str, str], Finding] = field(default_factory=dict, repr=False)

    def add(self, bucket: str, rule: Rule | None, line_no: int, line: str,
            note: str = "") -> None:
        key = (bucket, note or (rule.id if rule else _normalise(line)))
        found = self._groups.get(key)
        if found is not None:
            found.count += 1
            return
        target: list[Finding] = getattr(self, bucket)
        if bucket == "unknown" and len(target) >= MAX_GROUPS:
            self.unknown_dropped += 1
            return
        finding = Finding(rule, line_no, line[:KEEP_CHARS], note=note)
        self._groups[key] = finding
        target.append(finding)


def _compile(raw: Mapping[str, Any], kind: str, origin: str) -> Rule:
    try:
        pattern = re.compile(str(raw["pattern"]))
    except (KeyError, re.error) as exc:
        raise InvalidInputError(f"{origin}: log rule {raw.get('id')!r}: bad pattern ({exc})") \
            from None
    text = str(raw.get("fix") or raw.get("why") or raw.get("message") or "")
    return Rule(str(raw.get("id")), kind, pattern, text, bool(raw.get("per_rank", False)),
                str(raw.get("check", "")), str(raw.get("when", "")))


def load_rules(extra: Iterable[Mapping[str, Any]] = ()) -> list[Rule]:
    doc = yaml.safe_load(files("ascendpatch").joinpath("data/log_rules.yaml").read_text())
    rules = [_compile(r, "fault", "log_rules.yaml") for r in doc["faults"]]
    rules += [_compile(r, "benign", "log_rules.yaml") for r in doc["benign"]]
    rules += [_compile(r, "marker", "log_rules.yaml") for r in doc["markers"]]
    for raw in extra:  # manifest rules first wins on ties: put them in front
        rules.insert(0, _compile(raw, str(raw.get("class", "fault")), "manifest log_rules"))
    return rules


def _normalise(line: str) -> str:
    """Unknown lines are grouped without their timestamps, pids and numbers."""
    return _DIGITS.sub("#", _LEVEL.split(line, maxsplit=1)[-1]).strip()[:KEEP_CHARS]


def ascend_env_names(envs_py: Path) -> frozenset[str]:
    """Every ``VLLM_ASCEND_*`` name the installed vllm-ascend's envs.py spells as a string (the
    keys of its ``env_variables`` table and its getenv calls), read without importing it."""
    tree = ast.parse(envs_py.read_text(encoding="utf-8"), str(envs_py))
    return frozenset(node.value for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str)
                     and _ASCEND_ENV.fullmatch(node.value))


def _benign(rule: Rule, match: re.Match[str], known: Knowledge) -> str:
    """'' when the line is benign here, else the warning for this deployment."""
    if rule.check == "deployed-architecture":
        arch = match.group("arch")
        if arch in known.architectures:
            won = match.groupdict().get("cls") or "the class registered last"
            return Phrase(f"the deployed architecture {arch} was overwritten: the class that "
                          f"won is {won}; check that it is the one you deploy (",
                          Hint(("verify",)), " checks the registry)")
    if rule.check == "ascend-env":
        name = match.group("env")
        if not name.startswith("VLLM_ASCEND_") or known.knows_env(name):
            return ""
        names, envs_file = known.ascend_env()
        if names is None:
            return (f"{name}: cannot tell whether vllm-ascend knows it (no vllm_ascend/envs.py "
                    "found in the target; pass --python or --site-packages)")
        return (f"{name} is not a variable the installed vllm-ascend knows ({envs_file}) "
                "nor one this manifest declares: a typo? nothing reads it")
    return ""


class Triager:
    """Feeds lines one at a time; rules are split by kind once."""

    def __init__(self, rules: Sequence[Rule], known: Knowledge | None = None) -> None:
        known = known or Knowledge()
        active = [r for r in rules if r.when != "quantized" or known.quantized]
        self.faults = [r for r in active if r.kind == "fault"]
        self.benign = [r for r in active if r.kind == "benign"]
        self.markers = [r for r in active if r.kind == "marker"]
        self.known = known
        self.result = Triage()

    def feed(self, number: int, line: str) -> None:
        result = self.result
        result.lines = number
        if "tensor_parallel_size=" in line:
            tp = _TP_SIZE.search(line)
            if tp:
                result.tp_size = max(result.tp_size or 0, int(tp.group(1)))
        for rule in self.markers:
            found = rule.pattern.search(line)
            if found:
                result.markers[rule.id] = result.markers.get(rule.id, 0) + 1
                if "count" in found.groupdict():
                    result.marker_values.setdefault(rule.id, []).append(int(found["count"]))
        fault = next((r for r in self.faults if r.pattern.search(line)), None)
        if fault is not None:
            result.add("faults", fault, number, line)
            return
        if not _LEVEL.search(line):
            return
        for rule in self.benign:
            found = rule.pattern.search(line)
            if found:
                note = _benign(rule, found, self.known)
                result.add("warnings" if note else "benign", rule, number, line, note)
                return
        result.add("unknown", None, number, line)


def triage(lines: Iterable[str], rules: Sequence[Rule], known: Knowledge | None = None) \
        -> Triage:
    triager = Triager(rules, known)
    for number, raw in enumerate(lines, start=1):
        triager.feed(number, raw.rstrip("\n"))
    return triager.result


def stream_lines(path: Path) -> Iterator[str]:
    """The lines of a regular file, streamed, up to the size it had when opened (a log that is
    still being written, faster than it is read, would never end); a line longer than
    MAX_LINE is cut there."""
    shown = printable(str(path))  # file names are anyone's choice on a shared host
    try:
        handle, info = open_regular(path)
    except OSError as exc:
        raise InvalidInputError(f"log {shown} cannot be read ({exc.strerror})") from None
    except NotRegularFileError as exc:
        raise InvalidInputError(f"log {shown} is {exc.what}, not a regular file: refusing to "
                                "read it",
                                fix="save the log to a file first (vllm serve ... > serve.log "
                                    "2>&1) and triage that file") from None
    left = info.st_size  # a live log keeps growing: read what it held when opened
    with handle:
        while left > 0:
            chunk = handle.readline(min(MAX_LINE, left))
            if not chunk:
                return
            left -= len(chunk)
            if len(chunk) == MAX_LINE and not chunk.endswith(b"\n"):
                while left > 0:  # skip the rest of an overlong line
                    rest = handle.readline(min(MAX_LINE, left))
                    left -= len(rest)
                    if not rest or rest.endswith(b"\n"):
                        break
            yield chunk.decode("utf-8", errors="replace")
