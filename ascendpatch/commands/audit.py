"""``ascendpatch audit [--baseline FILE]``: every installed file against its RECORD.

Only what the audit itself needs is imported: the manifest, the planner and the artifact kinds
are loaded only when some file differs from its RECORD (to tell an expected change from an
unexpected one), so a clean repeat audit stays a stat walk. With ``--python`` the target
interpreter is started first, and the audit's own modules load while it runs.
"""

from __future__ import annotations

import os
from argparse import ArgumentParser, Namespace
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ascendpatch.commands.context import Context
from ascendpatch.results import CheckResult, CommandResult, Level, Table
from ascendpatch.shell import cliargs

if TYPE_CHECKING:
    from ascendpatch.env.target import Target
    from ascendpatch.inspect.audit import AuditReport
    from ascendpatch.store.ledgerformat import Ledger


@dataclass(frozen=True)
class AuditCounts:
    """audit's payload beside its findings: how much was looked at, and how long each step took
    (--json only; the summary line says the counts)."""

    files_checked: int
    files_hashed: int
    timings: dict[str, Any]

    def json(self) -> dict[str, object]:
        return {"files_checked": self.files_checked, "files_hashed": self.files_hashed,
                "timings": self.timings}

    def table(self) -> Table | None:
        return None


Expected = dict[str, tuple[str, str]]


def expected_changes(ctx: Context) -> Expected:
    """Files ascendpatch changed on purpose: from its ledger, then the manifest's hashes."""
    from ascendpatch.kinds.base import ArtifactSite
    from ascendpatch.pipeline.planner import site_for

    out = _from_ledger(ctx.store.load_ledger())
    for artifact in ctx.manifest.artifacts:
        site = site_for(artifact, ctx.target, ctx.env, required=False)
        if not isinstance(site, ArtifactSite) or site.dist is None:
            continue
        for rel, hashes in site.variant.sha256.items():
            path = Path(os.path.normpath(site.dist.location / rel))
            key = path.relative_to(ctx.target.root).as_posix()
            for after in hashes.after[:1]:
                out.setdefault(key, (after, f"as manifest {ctx.manifest.name} expects "
                                            f"({artifact.id})"))
    return out


def _from_ledger(ledger: Ledger) -> Expected:
    return {rel: (rec.sha256_after, f"patched by ascendpatch ({aid})")
            for aid, files in ledger.items() for rel, rec in files.items() if rec.sha256_after}


class LedgerFirst(Mapping[str, tuple[str, str]]):
    """:func:`expected_changes`, asked one file at a time: a file the ledger lists is decided
    by the ledger alone, as expected_changes gives the ledger precedence; the manifest (whose
    load imports every artifact kind: about half of a repeat audit after an apply) is loaded
    only for a file the ledger does not list. The ledger is read here with the target as its
    only tree; one that names another tree (the Hugging Face cache), or that cannot be read,
    leaves every question to expected_changes, which reads it with the manifest's trees and
    words what is wrong with it. As for a target with no changed file, a default manifest
    that does not load is then not met by an audit whose changed files the ledger all lists
    (one named with --manifest is loaded first, as always)."""

    def __init__(self, root: Path, everything: Callable[[], Expected]) -> None:
        self._everything = everything
        self._all: Expected | None = None
        self._ledger = _ledger_alone(root)

    def __getitem__(self, rel: str) -> tuple[str, str]:
        return self._answering(rel)[rel]

    def get(self, rel: str, default: Any = None) -> Any:
        """(Not Mapping's: that one would take a KeyError raised while the manifest loads
        for "not expected".)"""
        return self._answering(rel).get(rel, default)

    def __contains__(self, rel: object) -> bool:
        return rel in self._answering(rel)

    def _answering(self, rel: object) -> Expected:
        """The ledger, for a file it lists; else everything expected_changes says."""
        if self._ledger is not None and rel in self._ledger:
            return self._ledger
        return self._whole()

    def __iter__(self) -> Iterator[str]:
        return iter(self._whole())

    def __len__(self) -> int:
        return len(self._whole())

    def _whole(self) -> Expected:
        if self._all is None:
            self._all = self._everything()
        return self._all


def _ledger_alone(root: Path) -> Expected | None:
    from ascendpatch.errors import AscendpatchError
    from ascendpatch.store.ledger import LedgerStore

    try:
        return _from_ledger(LedgerStore(root).load_ledger())  # (the target its only tree)
    except AscendpatchError:
        return None


def _lines(report: AuditReport) -> list[CheckResult]:
    lines = []
    for f in report.findings:
        level = Level.OK if f.expected else Level.FAIL
        lines.append(CheckResult(f"file:{f.path}", "audit", level,
                                 f"{f.code:<8} {f.path} ({f.detail})",
                                 data={"code": f.code, "path": f.path, "package": f.package,
                                       "expected": f.expected}))
    return lines


def _load_baseline(path: Path) -> dict[str, Any]:
    from ascendpatch.inspect import snapshot  # only with --baseline: it loads the manifest model

    return snapshot.load(path)


def run(ctx: Context, *, baseline: Path | None = None, workers: int | None = None) \
        -> CommandResult:
    return run_on(ctx.target, lambda: ctx, baseline=baseline, workers=workers,
                  lock_timeout=ctx.lock_timeout, on_wait=ctx.on_wait)


def run_on(target: Target, make_context: Callable[[], Context], *,
           baseline: Path | None = None, workers: int | None = None,
           lock_timeout: float = 300.0,
           on_wait: Callable[[str], None] | None = None) -> CommandResult:
    """The audit of ``target``; ``make_context`` (the manifest) is called only when a file
    differs from its RECORD."""
    from ascendpatch.inspect.audit import audit
    from ascendpatch.store.reading import read_session

    base = _load_baseline(baseline) if baseline is not None else None
    # a live apply finishes first: a half-written state is never reported as drift (and an
    # interrupted one is refused, never rolled back: audit only reads)
    with read_session(target.root, lock_timeout, on_wait):
        report = audit(target, lambda: LedgerFirst(
            target.root, lambda: expected_changes(make_context())), workers=workers)
    results = _lines(report)
    if base is not None:
        from ascendpatch.inspect import snapshot

        current = {d.name: snapshot.describe_distribution(d)
                   for d in target.distributions.values()}
        for change, name, text in snapshot.package_changes(base["distributions"], current):
            results.append(CheckResult(f"package:{name}", "audit", Level.FAIL,
                                       f"{change:<8} {text} since the baseline",
                                       data={"code": change, "package": name}))
    bad = sum(1 for r in results if r.level is Level.FAIL)
    summary = (f"audit: {report.files_checked} files checked ({report.files_hashed} hashed), "
               f"{bad} unexpected finding(s), {len(results) - bad} expected")
    return CommandResult("audit", tuple(results), summary=summary,
                         body=AuditCounts(report.files_checked, report.files_hashed,
                                          report.timings.as_dict()))


def from_args(args: Namespace) -> CommandResult:
    from ascendpatch.commands import context

    choice = context.choose_target(args)
    if choice.value is None or context.choose_manifest(args).value != context.DEFAULT_MANIFEST:
        # discovery reads the manifest's interpreters; a manifest named here is checked now
        return run(context.from_args(args), baseline=args.baseline, workers=args.workers)
    if choice.key == "python":
        from ascendpatch.env.target import start_python

        wait = start_python(Path(choice.value))  # the target interpreter runs ...
        import ascendpatch.inspect.audit  # noqa: F401  (... while the audit's modules load)

        target = wait()
        context.said_target(target, choice)
    else:
        target = context.target_from_args(args)

    def make_context() -> Context:
        return Context(target=target, manifest=context.manifest_from_args(args),
                       env=dict(os.environ), lock_timeout=args.lock_timeout)

    def on_wait(message: str) -> None:
        from ascendpatch.shell import output

        output.progress(message, color=args.color)

    return run_on(target, make_context, baseline=args.baseline, workers=args.workers,
                  lock_timeout=args.lock_timeout, on_wait=on_wait)


def configure(p: ArgumentParser) -> None:
    p.add_argument("--baseline", type=cliargs.path, metavar="FILE",
                   help="also report packages changed since this snapshot")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="hashing threads (default: one per CPU)")


COMMAND = cliargs.CommandSpec(
    name="audit",
    help="check every installed file against its RECORD",
    description=("Check every installed file against its RECORD, rpm -V style: changed, "
                 "missing, orphans; ascendpatch's own patches are shown as expected. Exit 1 on "
                 "drift."),
    example="ascendpatch --python ./ascendpatch-sandbox/bin/python audit",
    run=from_args, configure=configure,
)
