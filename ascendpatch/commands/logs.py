"""``ascendpatch logs FILE...``: triage vLLM / vllm-ascend / vllm-omni serve logs."""

from __future__ import annotations

import re
from argparse import Namespace
from pathlib import Path

from ascendpatch.commands import context
from ascendpatch.deploy.logs import SMOOTHQUANT_MARKER, Finding, Rule, Triage, load_rules, triage
from ascendpatch.errors import InvalidInputError
from ascendpatch.manifest.model import Manifest
from ascendpatch.results import CheckResult, CommandResult, Level


def _excerpt(line: str, width: int = 160) -> str:
    text = re.sub(r"\s+", " ", line).strip()
    return text if len(text) <= width else text[:width - 1] + "…"


def _times(finding: Finding) -> str:
    return f" ({finding.count}x)" if finding.count > 1 else ""


def _finding(cid: str, level: Level, name: str, f: Finding, what: str, tail: str) \
        -> CheckResult:
    return CheckResult(cid, "logs", level, f"{name}:{f.line_no}: {what}{_times(f)}{tail}",
                       data={"line": f.line_no, "count": f.count})


def _lines(name: str, result: Triage, rules: list[Rule], required: set[str],
           tp_size: int) -> list[CheckResult]:
    out = []
    for f in result.faults:
        assert f.rule is not None
        out.append(_finding(f"fault:{f.rule.id}", Level.FAIL, name, f, f.rule.id,
                            f": {_excerpt(f.line)}; fix: {f.rule.text}"))
    for f in result.benign:
        assert f.rule is not None
        out.append(_finding(f"benign:{f.rule.id}", Level.OK, name, f, "known-benign",
                            f": {_excerpt(f.line, 100)} ({f.rule.text})"))
    for f in result.unknown:
        out.append(_finding("unknown", Level.WARN, name, f, "unknown",
                            f", for a human: {_excerpt(f.line)}"))
    for rule in rules:
        if rule.kind != "marker" or rule.id not in required:
            continue
        seen = result.markers.get(rule.id, 0)
        need = tp_size if rule.per_rank else 1
        ok = seen >= need
        ranks = f" on {need} TP rank(s)" if rule.per_rank else ""
        text = (f"{name}: {rule.text}{ranks}" if ok else
                f"{name}: missing marker{ranks}: {rule.text} (seen {seen}, need {need})")
        out.append(CheckResult(f"marker:{rule.id}", "logs", Level.OK if ok else Level.FAIL,
                               text))
    return out


def manifest_tp_size(manifest: Manifest) -> int:
    return int(manifest.launch.get("tensor_parallel_size") or 1)


def run(manifest: Manifest, paths: list[Path], enabled_extra: tuple[str, ...] = ()) \
        -> CommandResult:
    extra = list(manifest.log_rules)
    required = {"startup-complete"}
    smooth = [a for a in manifest.artifacts if a.options.get("scales_env")
              and (a.enabled or a.id in enabled_extra)]
    if smooth:
        extra.append(SMOOTHQUANT_MARKER)
        required.add(str(SMOOTHQUANT_MARKER["id"]))
    required |= {str(r["id"]) for r in manifest.log_rules if r.get("class") == "marker"}
    rules = load_rules(extra)
    results: list[CheckResult] = []
    for path in paths:
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            raise InvalidInputError(f"log {path} cannot be read ({exc})") from None
        result = triage(lines, rules)
        results += _lines(str(path), result, rules, required,
                          result.tp_size or manifest_tp_size(manifest))
    faults = sum(1 for r in results if r.level is Level.FAIL)
    summary = (f"logs: {faults} fault(s) or missing marker(s)" if faults else
               "logs: no known fault; markers present")
    return CommandResult("logs", tuple(results), summary=summary)


def from_args(args: Namespace) -> CommandResult:
    return run(context.manifest_from_args(args), args.files, tuple(args.with_ids))
