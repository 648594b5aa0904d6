"""Log rules: their format (ascendpatch/data/log_rules.yaml, a manifest's ``log_rules``, a
site's ``logs --rules FILE``, validated like a manifest), how they are loaded, how a benign
rule is judged for this deployment (:class:`Knowledge`), and the substring screen that spares
most lines of a big log every regular-expression search (:class:`Screen`)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from ascendpatch.errors import InvalidInputError
from ascendpatch.manifest import schema as s
from ascendpatch.results import Hint, Phrase

_ASCEND_ENV = re.compile(r"VLLM_ASCEND_\w+")

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
            self._release = (parse_version(found),)
        return self._release[0]


def parse_version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


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
    here, not at the top: PyYAML only where a rules file is read."""
    from ascendpatch.manifest import yamlparse

    return yamlparse.parse(text, path)


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
    return Phrase(f"the deployed architecture {arch} was overwritten: the class that won is "
                  f"{won or 'the class registered last'}; check that it is the one you deploy "
                  "(", Hint(("verify",)), " checks the registry)")


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


def benign_note(rule: Rule, match: re.Match[str], known: Knowledge) -> str:
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


class Screen:
    """Which rules can match a line, found with plain substring tests: most lines of a big log
    match no rule, and a substring test is cheaper than a regular-expression search."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.always = [r for r in rules if literals(r) is None]
        self.index = [(lit, r) for r in rules for lit in literals(r) or ()]

    def candidates(self, line: str) -> list[Rule]:
        found = [r for lit, r in self.index if lit in line]
        return [*self.always, *found] if found or self.always else []
