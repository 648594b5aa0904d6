"""``ascendpatch audit [--baseline FILE]``: every installed file against its RECORD."""

from __future__ import annotations

import os
from argparse import Namespace
from pathlib import Path

from ascendpatch.audit import AuditReport, audit
from ascendpatch.commands import context
from ascendpatch.commands.context import Context
from ascendpatch.kinds.base import KindContext
from ascendpatch.planner import context_for
from ascendpatch.results import CheckResult, CommandResult, Level


def expected_changes(ctx: Context) -> dict[str, tuple[str, str]]:
    """Files ascendpatch changed on purpose: from its ledger, then the manifest's hashes."""
    store = ctx.store
    out: dict[str, tuple[str, str]] = {}
    for aid, files in store.load_ledger().items():
        for rel, rec in files.items():
            if rec.sha256_after:
                out[rel] = (rec.sha256_after, f"patched by ascendpatch ({aid})")
    for artifact in ctx.manifest.artifacts:
        kctx = context_for(artifact, ctx.target, ctx.env, required=False)
        if not isinstance(kctx, KindContext) or kctx.dist is None:
            continue
        for rel, hashes in kctx.variant.sha256.items():
            path = Path(os.path.normpath(kctx.dist.location / rel))
            key = path.relative_to(ctx.target.root).as_posix()
            for after in hashes.after[:1]:
                out.setdefault(key, (after, f"as manifest {ctx.manifest.name} expects "
                                            f"({artifact.id})"))
    return out


def _lines(report: AuditReport) -> list[CheckResult]:
    lines = []
    for f in report.findings:
        level = Level.OK if f.expected else Level.FAIL
        lines.append(CheckResult(f"file:{f.path}", "audit", level,
                                 f"{f.code:<8} {f.path} ({f.detail})",
                                 data={"code": f.code, "path": f.path, "package": f.package,
                                       "expected": f.expected}))
    return lines


def run(ctx: Context, *, baseline: Path | None = None, workers: int | None = None) \
        -> CommandResult:
    from ascendpatch import snapshot  # only with --baseline

    base = snapshot.load(baseline) if baseline is not None else None
    with context.shared(ctx):  # a live apply finishes first: no half-written state as drift
        report = audit(ctx.target, expected_changes(ctx), workers=workers)
    results = _lines(report)
    if base is not None:
        current = {d.name: snapshot.describe_distribution(d)
                   for d in ctx.target.distributions.values()}
        for change, name, text in snapshot.package_changes(base["distributions"], current):
            results.append(CheckResult(f"package:{name}", "audit", Level.FAIL,
                                       f"{change:<8} {text} since the baseline",
                                       data={"code": change, "package": name}))
    bad = sum(1 for r in results if r.level is Level.FAIL)
    summary = (f"audit: {report.files_checked} files checked ({report.files_hashed} hashed), "
               f"{bad} unexpected finding(s), {len(results) - bad} expected")
    return CommandResult("audit", tuple(results), summary=summary,
                         extra={"files_checked": report.files_checked,
                                "files_hashed": report.files_hashed})


def from_args(args: Namespace) -> CommandResult:
    return run(context.from_args(args), baseline=args.baseline, workers=args.workers)
