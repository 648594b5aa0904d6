"""``ascendpatch logs FILE...``: triage vLLM / vllm-ascend / vllm-omni serve logs, or compare a
start with a known-good one (``--baseline good.log``)."""

from __future__ import annotations

import functools
import re
from argparse import ArgumentParser, Namespace
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from ascendpatch.commands import context
from ascendpatch.deploy.logs import (
    MAX_GROUPS,
    SMOOTHQUANT_MARKER,
    Difference,
    Finding,
    Knowledge,
    Rule,
    Triage,
    Triager,
    compare,
    load_rules,
    read_rules_file,
    stream_lines,
)
from ascendpatch.deploy.text import printable
from ascendpatch.env.target import Target
from ascendpatch.errors import AscendpatchError
from ascendpatch.kinds.plugin import plugin_module, plugin_targets
from ascendpatch.manifest import loader
from ascendpatch.manifest.model import Artifact, Manifest
from ascendpatch.results import CheckResult, CommandResult, Hint, Level, Phrase
from ascendpatch.shell import cliargs


@dataclass(frozen=True)
class Options:
    """What a logs run reads besides the files: a site's rules, the release to judge
    version-limited rules by, and a known-good start to compare with."""

    rules_file: Path | None = None
    vllm_ascend: str | None = None
    baseline: Path | None = None


def _excerpt(line: str, width: int = 160) -> str:
    text = printable(re.sub(r"\s+", " ", line).strip())
    return text if len(text) <= width else text[:width - 1] + "…"


def _times(finding: Finding) -> str:
    return f" ({finding.count}x)" if finding.count > 1 else ""


def _where(finding: Finding) -> str:
    """Who raised it, who echoed it, and how many lines of the same crash it stands for."""
    parts = []
    if finding.process:
        others = sorted(finding.echoed_by)[:4]
        echoed = f"; echoed by {', '.join(map(printable, others))}" if others else ""
        parts.append(f"raised in {printable(finding.process)}{echoed}")
    if finding.folded:
        parts.append(f"{finding.folded} more line(s) of the same crash folded in")
    return f" ({'; '.join(parts)})" if parts else ""


@functools.cache
def stack_pins() -> str:
    """The version sets the bundled manifests pin, for the fixes that name them."""
    sets: list[tuple[Version, str]] = []
    for name in loader.bundled_names():
        try:
            stack = loader.load(name).stack
        except AscendpatchError:
            continue
        plugin = stack.pin("vllm-ascend")
        if plugin is None:
            continue
        parts = [f"{p} {pin.specifier.lstrip('=')}" for p in ("vllm", "torch", "torch-npu")
                 if (pin := stack.pin(p)) is not None]
        parts += [f"CANN {stack.cann}"] if stack.cann else []
        release = plugin.specifier.lstrip("=")
        sets.append((_release_key(release), f"vllm-ascend {release} with {', '.join(parts)}"))
    return "; ".join(text for _, text in sorted(sets)) or \
        "the vllm-ascend release notes' version table"


def _release_key(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def _fix(rule: Rule) -> str:
    return rule.text.replace("{stack_pins}", stack_pins()) if "{stack_pins}" in rule.text \
        else rule.text


def _hinted(text: str) -> str:
    """A log rule's text (data, not code) with each ``ascendpatch COMMAND`` it names held as a
    Hint, so that the renderer repeats the --python / --manifest given, as for any suggestion."""
    names = "|".join(re.escape(command.name) for command in cliargs.COMMANDS)
    parts: list[str | Hint] = []
    last = 0
    for match in re.finditer(rf"(?<![\w/.-])ascendpatch ({names})\b", text):
        parts += [text[last:match.start()], Hint((match.group(1),))]
        last = match.end()
    return Phrase(*parts, text[last:]) if parts else text


def _printable(text: str) -> str:
    """printable() of each text part, keeping a Phrase's hints."""
    if isinstance(text, Phrase):
        return Phrase(*(printable(p) if isinstance(p, str) else p for p in text.parts))
    return printable(text)


def _finding(cid: str, level: Level, name: str, f: Finding, what: str, tail: str,
             fix: str = "") -> CheckResult:
    return CheckResult(cid, "logs", level, Phrase(f"{name}:{f.line_no}: {what}{_times(f)}", tail),
                       data={"line": f.line_no, "count": f.count,
                             "process": f.process, "folded": f.folded}, fix=fix)


def _marker(name: str, rule: Rule, result: Triage, tp_size: int, expected: int | None) \
        -> CheckResult:
    seen = result.markers.get(rule.id, 0)
    need = tp_size if rule.per_rank else 1
    ranks = f" on {need} TP rank(s)" if rule.per_rank else ""
    values = result.marker_values.get(rule.id, [])
    wrong = [v for v in values if v == 0 or (expected is not None and v != expected)]
    want = f", expected {expected} per rank" if expected is not None else ""
    if seen < need:
        text = f"{name}: missing marker{ranks}: {rule.text} (seen {seen}, need {need})"
    elif wrong:
        text = (f"{name}: {rule.text}: a rank loaded {wrong[0]}{want} (all ranks: "
                f"{', '.join(map(str, values))}); the scales file does not match the weights")
    else:
        counts = f" ({', '.join(map(str, values))} vectors{want})" if values else ""
        return CheckResult(f"marker:{rule.id}", "logs", Level.OK,
                           f"{name}: {rule.text}{ranks}{counts}")
    return CheckResult(f"marker:{rule.id}", "logs", Level.FAIL, text)


def _rule_of(f: Finding) -> Rule:
    assert f.rule is not None
    return f.rule


def _fault_lines(name: str, result: Triage) -> list[CheckResult]:
    out = []
    for f in result.faults:
        rule = _rule_of(f)
        out.append(_finding(f"fault:{rule.id}", Level.FAIL, name, f, rule.id,
                            f": {_excerpt(f.line)}{_where(f)}", fix=_hinted(_fix(rule))))
    for f in result.crashes:
        out.append(_finding("crash", Level.WARN, name, f, "an exception no rule names",
                            f"{_where(f)}, for a human: {_excerpt(f.line)}"))
    return out


def _other_lines(name: str, result: Triage) -> list[CheckResult]:
    out = []
    for f in result.client:
        rule = _rule_of(f)
        out.append(_finding(f"client:{rule.id}", Level.WARN, name, f,
                            f"a client's error, not a server fault ({rule.id})",
                            f": {_excerpt(f.line)}", fix=_hinted(_fix(rule))))
    for f in result.warnings:
        out.append(_finding(f"warn:{_rule_of(f).id}", Level.WARN, name, f, _rule_of(f).id,
                            Phrase(": ", _printable(f.note))))
    for f in result.benign:
        out.append(_finding(f"benign:{_rule_of(f).id}", Level.OK, name, f, "known-benign",
                            Phrase(f": {_excerpt(f.line, 100)} (", _hinted(_rule_of(f).text),
                                   ")")))
    for f in result.unknown:
        out.append(_finding("unknown", Level.WARN, name, f, "unknown",
                            f", for a human: {_excerpt(f.line)}"))
    if result.unknown_dropped:
        out.append(CheckResult("unknown-more", "logs", Level.WARN,
                               f"{name}: {result.unknown_dropped} more unknown line(s) of kinds "
                               f"beyond the first {MAX_GROUPS}, not listed"))
    return out


def _lines(name: str, result: Triage, rules: list[Rule], required: set[str],
           tp_size: int, expected: dict[str, int]) -> list[CheckResult]:
    out = _fault_lines(name, result) + _other_lines(name, result)
    for rule in rules:
        if rule.kind == "marker" and rule.id in required:
            out.append(_marker(name, rule, result, tp_size, expected.get(rule.id)))
    return out


def _active(manifest: Manifest, enabled_extra: tuple[str, ...]) -> list[Artifact]:
    from ascendpatch.pipeline.planner import select

    select(manifest, [], enabled_extra)  # refuses an unknown --with id (exit 2)
    return [a for a in manifest.artifacts if a.enabled or a.id in enabled_extra]


def _adapter_classes(manifest: Manifest) -> dict[str, str]:
    """Architecture -> the ``module:Class`` this manifest's own adapters register."""
    classes: dict[str, str] = {}
    for artifact in manifest.artifacts:
        if artifact.kind == "plugin" and artifact.options.get("architectures"):
            source = next((v.source for v in artifact.variants if v.source), None)
            module = plugin_module(artifact.options, source)
            classes.update(plugin_targets(artifact.options, module))
    return classes


def knowledge(manifest: Manifest, find_envs: Callable[[], Path | None] | None,
              enabled_extra: tuple[str, ...] = (),
              find_release: Callable[[], str | None] | None = None) -> Knowledge:
    active = _active(manifest, enabled_extra)
    archs = {str(arch) for a in manifest.artifacts
             for arch in a.options.get("architectures") or ()}
    declared = {str(a.options["scales_env"]) for a in active if a.options.get("scales_env")}
    return Knowledge(frozenset(archs), find_envs, bool(manifest.launch.get("quantization")),
                     frozenset(declared), _adapter_classes(manifest), find_release)


@dataclass(frozen=True)
class _Setup:
    rules: list[Rule]
    known: Knowledge
    required: set[str]
    expected: dict[str, int]


def _setup(manifest: Manifest, enabled_extra: tuple[str, ...],
           find_envs: Callable[[], Path | None] | None, options: Options,
           find_release: Callable[[], str | None] | None) -> _Setup:
    extra: list[dict[str, Any]] = [dict(r) for r in manifest.log_rules]
    required = {"startup-complete"}
    expected: dict[str, int] = {}
    smooth = [a for a in _active(manifest, enabled_extra) if a.options.get("scales_env")]
    if smooth:
        extra.append(SMOOTHQUANT_MARKER)
        required.add(str(SMOOTHQUANT_MARKER["id"]))
        vectors = smooth[0].options.get("scale_vectors")
        if vectors is not None:
            expected[str(SMOOTHQUANT_MARKER["id"])] = int(vectors)
    required |= {str(r["id"]) for r in manifest.log_rules if r.get("class") == "marker"}
    site = read_rules_file(options.rules_file) if options.rules_file else []
    release = (lambda: options.vllm_ascend) if options.vllm_ascend else find_release
    return _Setup(load_rules(extra, site), knowledge(manifest, find_envs, enabled_extra,
                                                     release), required, expected)


def _read(path: Path, setup: _Setup) -> Triage:
    triager = Triager(setup.rules, setup.known)
    for number, line in enumerate(stream_lines(path), start=1):
        triager.feed(number, line.rstrip("\r\n"))
    return triager.finish()


def _difference(name: str, base: str, d: Difference) -> CheckResult:
    f = d.finding
    what = f.rule.id if f.rule is not None else "unknown" if f.line_no else "marker"
    text = _excerpt(f.line, 120)
    if d.new:
        level = Level.FAIL if d.serious else Level.OK
        return CheckResult(f"new:{what}", "logs", level,
                           f"{name}:{f.line_no}: new since {base}: {what}{_times(f)}: {text}",
                           data={"line": f.line_no, "count": f.count},
                           fix=_fix(f.rule) if f.rule is not None and d.serious else "")
    level = Level.FAIL if d.serious else Level.OK
    return CheckResult(f"gone:{what}", "logs", level,
                       f"{name}: gone since {base}: {what}: {text}")


def _compare(paths: Sequence[Path], setup: _Setup, baseline: Path) -> CommandResult:
    base = _read(baseline, setup)
    shown = printable(str(baseline))
    results: list[CheckResult] = []
    for path in paths:
        diffs = compare(base, _read(path, setup))
        results += [_difference(printable(str(path)), shown, d) for d in diffs]
    worse = sum(1 for r in results if r.level is Level.FAIL)
    summary = (f"logs: {worse} new error(s) or warning(s) since {shown}" if worse else
               f"logs: nothing new since {shown} ({len(results)} difference(s) that are not "
               "errors or warnings)" if results else f"logs: the same as {shown}")
    return CommandResult("logs", tuple(results), summary=summary)


def run(manifest: Manifest, paths: list[Path], enabled_extra: tuple[str, ...] = (),
        find_envs: Callable[[], Path | None] | None = None, options: Options = Options(),
        find_release: Callable[[], str | None] | None = None) -> CommandResult:
    setup = _setup(manifest, enabled_extra, find_envs, options, find_release)
    if options.baseline is not None:
        return _compare(paths, setup, options.baseline)
    results: list[CheckResult] = []
    for path in paths:
        result = _read(path, setup)
        # a file name is anyone's choice on a shared host (logs *.log): shown escaped
        results += _lines(printable(str(path)), result, setup.rules, setup.required,
                          result.tp_size or manifest.tp_size, setup.expected)
    faults = sum(1 for r in results if r.level is Level.FAIL)
    summary = (f"logs: {faults} fault(s) or missing marker(s)" if faults else
               "logs: no known fault; markers present")
    return CommandResult("logs", tuple(results), summary=summary)


def _target(args: Namespace, cache: dict[str, Target | None]) -> Target | None:
    if "target" not in cache:
        cache["target"] = context.optional_target(args)
    return cache["target"]


def target_envs_py(args: Namespace, cache: dict[str, Target | None] | None = None) \
        -> Path | None:
    """The installed vllm-ascend's envs.py, when a target with vllm-ascend can be found."""
    target = _target(args, {} if cache is None else cache)
    dist = target.get("vllm-ascend") if target is not None else None
    if dist is None:
        return None
    path = dist.location / "vllm_ascend" / "envs.py"
    return path if path.is_file() else None


def target_release(args: Namespace, cache: dict[str, Target | None]) -> str | None:
    """The installed vllm-ascend's version, when a target with vllm-ascend can be found."""
    target = _target(args, cache)
    dist = target.get("vllm-ascend") if target is not None else None
    return dist.version if dist is not None else None


def from_args(args: Namespace) -> CommandResult:
    cache: dict[str, Target | None] = {}
    options = Options(getattr(args, "rules", None), getattr(args, "vllm_ascend", None),
                      getattr(args, "baseline", None))
    manifest = context.manifest_from_args(args)
    context.check_with(manifest, tuple(args.with_ids))  # an unknown --with id: exit 2
    # a target named (flag, $ASCENDPATCH_PYTHON, config) is checked now, whether a rule needs
    # it or not: a wrong --python is exit 2 here as in every other command
    if context.choose_target(args).value is not None:
        _target(args, cache)
    return run(manifest, args.files, tuple(args.with_ids), lambda: target_envs_py(args, cache),
               options, lambda: target_release(args, cache))


def configure(p: ArgumentParser) -> None:
    p.add_argument("files", nargs="+", type=cliargs.path, metavar="FILE",
                   help="vLLM serve logs (one per TP rank or node); - reads standard input")
    cliargs.with_option(p, "also require the markers of this optional artifact")
    p.add_argument("--rules", type=cliargs.path, metavar="FILE",
                   help="a site's own log rules, in the format of ascendpatch/data/"
                        "log_rules.yaml (validated like a manifest)")
    p.add_argument("--vllm-ascend", metavar="VERSION",
                   help="judge version-limited rules for this vllm-ascend release (default: "
                        "the installed one, else the version the log prints)")
    p.add_argument("--baseline", type=cliargs.path, metavar="GOOD_LOG",
                   help="report only what is new or gone compared with this known-good start "
                        "(exit 1 when a new error or warning appears)")


COMMAND = cliargs.CommandSpec(
    name="logs",
    help="triage serve logs: known-benign, known faults, unknown",
    description=("Triage vLLM serve logs: known faults (cause and fix), known-benign lines "
                 "(why), client errors, unknown lines for a human, and the markers the "
                 "manifest requires. --baseline GOOD_LOG reports only what changed. Exit 1 on "
                 "a fault or a missing marker (with --baseline: on a new error or warning)."),
    example="ascendpatch logs serve-rank0.log serve-rank1.log",
    run=from_args, configure=configure,
)
