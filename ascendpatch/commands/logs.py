"""``ascendpatch logs FILE...``: triage vLLM / vllm-ascend / vllm-omni serve logs."""

from __future__ import annotations

import re
from argparse import Namespace
from pathlib import Path

from ascendpatch.commands import context
from ascendpatch.deploy.logs import Finding, Rule, Triage, load_rules, triage
from ascendpatch.errors import InvalidInputError
from ascendpatch.manifest.model import Manifest
from ascendpatch.results import CheckResult, CommandResult, Level

SMOOTH_MARKER = {"id": "smoothquant-scales", "class": "marker", "per_rank": True,
                 "pattern": r"\[smooth-w8a8\] loaded \d+ smooth scale vectors",
                 "message": "SmoothQuant scales loaded ([smooth-w8a8] loaded N smooth scale "
                            "vectors)"}


def _excerpt(line: str, width: int = 160) -> str:
    text = re.sub(r"\s+", " ", line).strip()
    return text if len(text) <= width else text[:width - 1] + "…"


def _times(finding: Finding) -> str:
    return f" ({finding.count}x)" if finding.count > 1 else ""


def _lines(name: str, result: Triage, rules: list[Rule], required: set[str]) \
        -> list[CheckResult]:
    out = []
    for f in result.faults:
        assert f.rule is not None
        out.append(CheckResult(f"fault:{f.rule.id}", "logs", Level.FAIL,
                               f"{name}:{f.line_no}: {f.rule.id}{_times(f)}: "
                               f"{_excerpt(f.line)}; fix: {f.rule.text}",
                               data={"line": f.line_no, "count": f.count}))
    for f in result.benign:
        assert f.rule is not None
        out.append(CheckResult(f"benign:{f.rule.id}", "logs", Level.OK,
                               f"{name}:{f.line_no}: known-benign{_times(f)}: "
                               f"{_excerpt(f.line, 100)} ({f.rule.text})",
                               data={"line": f.line_no, "count": f.count}))
    for f in result.unknown:
        out.append(CheckResult("unknown", "logs", Level.WARN,
                               f"{name}:{f.line_no}: unknown{_times(f)}, for a human: "
                               f"{_excerpt(f.line)}", data={"line": f.line_no,
                                                            "count": f.count}))
    for rule in rules:
        if rule.kind != "marker" or rule.id not in required:
            continue
        seen = result.markers.get(rule.id, 0)
        need = result.tp_size if rule.per_rank else 1
        ok = seen >= need
        ranks = f" on {need} TP rank(s)" if rule.per_rank else ""
        text = (f"{name}: {rule.text}{ranks}" if ok else
                f"{name}: missing marker{ranks}: {rule.text} (seen {seen}, need {need})")
        out.append(CheckResult(f"marker:{rule.id}", "logs", Level.OK if ok else Level.FAIL,
                               text))
    return out


def run(manifest: Manifest, paths: list[Path], enabled_extra: tuple[str, ...] = ()) \
        -> CommandResult:
    extra = list(manifest.log_rules)
    required = {"startup-complete"}
    smooth = [a for a in manifest.artifacts if a.options.get("scales_env")
              and (a.enabled or a.id in enabled_extra)]
    if smooth:
        extra.append(SMOOTH_MARKER)
        required.add(str(SMOOTH_MARKER["id"]))
    required |= {str(r["id"]) for r in manifest.log_rules if r.get("class") == "marker"}
    rules = load_rules(extra)
    results: list[CheckResult] = []
    for path in paths:
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            raise InvalidInputError(f"log {path} cannot be read ({exc})") from None
        results += _lines(str(path), triage(lines, rules), rules, required)
    faults = sum(1 for r in results if r.level is Level.FAIL)
    summary = (f"logs: {faults} fault(s) or missing marker(s)" if faults else
               "logs: no known fault; markers present")
    return CommandResult("logs", tuple(results), summary=summary)


def from_args(args: Namespace) -> CommandResult:
    return run(context.manifest_from_args(args), args.files, tuple(args.with_ids))
