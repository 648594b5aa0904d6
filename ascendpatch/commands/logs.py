"""``ascendpatch logs FILE...``: triage vLLM / vllm-ascend / vllm-omni serve logs."""

from __future__ import annotations

import re
from argparse import ArgumentParser, Namespace
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ascendpatch import cliargs
from ascendpatch.commands import context
from ascendpatch.deploy.logs import (
    MAX_GROUPS,
    SMOOTHQUANT_MARKER,
    Finding,
    Knowledge,
    Rule,
    Triage,
    Triager,
    load_rules,
    stream_lines,
)
from ascendpatch.deploy.text import printable
from ascendpatch.errors import AscendpatchError
from ascendpatch.manifest.model import Artifact, Manifest
from ascendpatch.results import CheckResult, CommandResult, Hint, Level, Phrase


def _excerpt(line: str, width: int = 160) -> str:
    text = printable(re.sub(r"\s+", " ", line).strip())
    return text if len(text) <= width else text[:width - 1] + "…"


def _times(finding: Finding) -> str:
    return f" ({finding.count}x)" if finding.count > 1 else ""


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
                       data={"line": f.line_no, "count": f.count}, fix=fix)


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


def _lines(name: str, result: Triage, rules: list[Rule], required: set[str],
           tp_size: int, expected: dict[str, int]) -> list[CheckResult]:
    out = []
    for f in result.faults:
        assert f.rule is not None
        out.append(_finding(f"fault:{f.rule.id}", Level.FAIL, name, f, f.rule.id,
                            f": {_excerpt(f.line)}", fix=_hinted(f.rule.text)))
    for f in result.warnings:
        assert f.rule is not None
        out.append(_finding(f"warn:{f.rule.id}", Level.WARN, name, f, f.rule.id,
                            Phrase(": ", _printable(f.note))))
    for f in result.benign:
        assert f.rule is not None
        out.append(_finding(f"benign:{f.rule.id}", Level.OK, name, f, "known-benign",
                            Phrase(f": {_excerpt(f.line, 100)} (", _hinted(f.rule.text), ")")))
    for f in result.unknown:
        out.append(_finding("unknown", Level.WARN, name, f, "unknown",
                            f", for a human: {_excerpt(f.line)}"))
    if result.unknown_dropped:
        out.append(CheckResult("unknown-more", "logs", Level.WARN,
                               f"{name}: {result.unknown_dropped} more unknown line(s) of kinds "
                               f"beyond the first {MAX_GROUPS}, not listed"))
    for rule in rules:
        if rule.kind == "marker" and rule.id in required:
            out.append(_marker(name, rule, result, tp_size, expected.get(rule.id)))
    return out


def _active(manifest: Manifest, enabled_extra: tuple[str, ...]) -> list[Artifact]:
    return [a for a in manifest.artifacts if a.enabled or a.id in enabled_extra]


def knowledge(manifest: Manifest, find_envs: Callable[[], Path | None] | None,
              enabled_extra: tuple[str, ...] = ()) -> Knowledge:
    active = _active(manifest, enabled_extra)
    archs = {str(arch) for a in manifest.artifacts
             for arch in a.options.get("architectures") or ()}
    declared = {str(a.options["scales_env"]) for a in active if a.options.get("scales_env")}
    return Knowledge(frozenset(archs), find_envs, bool(manifest.launch.get("quantization")),
                     frozenset(declared))


def run(manifest: Manifest, paths: list[Path], enabled_extra: tuple[str, ...] = (),
        find_envs: Callable[[], Path | None] | None = None) -> CommandResult:
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
    rules = load_rules(extra)
    known = knowledge(manifest, find_envs, enabled_extra)
    results: list[CheckResult] = []
    for path in paths:
        triager = Triager(rules, known)
        for number, line in enumerate(stream_lines(path), start=1):
            triager.feed(number, line.rstrip("\r\n"))
        result = triager.result
        # a file name is anyone's choice on a shared host (logs *.log): shown escaped
        results += _lines(printable(str(path)), result, rules, required,
                          result.tp_size or manifest.tp_size, expected)
    faults = sum(1 for r in results if r.level is Level.FAIL)
    summary = (f"logs: {faults} fault(s) or missing marker(s)" if faults else
               "logs: no known fault; markers present")
    return CommandResult("logs", tuple(results), summary=summary)


def target_envs_py(args: Namespace) -> Path | None:
    """The installed vllm-ascend's envs.py, when a target with vllm-ascend can be found."""
    try:
        target = context.target_from_args(args)
    except AscendpatchError:
        return None
    dist = target.get("vllm-ascend")
    if dist is None:
        return None
    path = dist.location / "vllm_ascend" / "envs.py"
    return path if path.is_file() else None


def from_args(args: Namespace) -> CommandResult:
    manifest = context.manifest_from_args(args)
    context.check_with(manifest, tuple(args.with_ids))  # an unknown --with id: exit 2
    return run(manifest, args.files, tuple(args.with_ids), lambda: target_envs_py(args))


def configure(p: ArgumentParser) -> None:
    p.add_argument("files", nargs="+", type=cliargs.path, metavar="FILE",
                   help="vLLM serve logs (one per TP rank or node)")
    cliargs.with_option(p, "also require the markers of this optional artifact")


COMMAND = cliargs.CommandSpec(
    name="logs",
    help="triage serve logs: known-benign, known faults, unknown",
    description=("Triage vLLM serve logs: known-benign lines (why), known faults (fix), unknown "
                 "lines for a human, and the markers the manifest requires."),
    example="ascendpatch logs serve-rank0.log serve-rank1.log",
    run=from_args, configure=configure,
)
