"""``ascendpatch capture DIST [--id ID] [--output FILE] [--manifest-out FILE]``.

After a maintainer edits files of an installed distribution, produce a unified diff of every
file whose content differs from the pristine one, and add (or update) its manifest entry.
Pristine content comes from ascendpatch's own backups when it has them, else from the
distribution's wheel (a --wheelhouse, the cache, or the index), each file checked against the
installed RECORD before it is trusted. Files a catalog artifact already patched are diffed
against that patched state, so a capture never swallows an existing patch.
"""

from __future__ import annotations

import os
from argparse import ArgumentParser, Namespace
from pathlib import Path

from ascendpatch.commands import context
from ascendpatch.commands.context import Context, shared
from ascendpatch.env import releases
from ascendpatch.env.pipadapter import Source
from ascendpatch.env.target import Distribution
from ascendpatch.errors import InvalidInputError, RefusedError
from ascendpatch.hashing import sha256_bytes
from ascendpatch.inspect.audit import audit
from ascendpatch.kinds.base import ArtifactSite
from ascendpatch.kinds.diff import load_patch
from ascendpatch.manifest import edit
from ascendpatch.patchfile import diffwrite
from ascendpatch.patchfile.diffpatch import analyze, apply_forward
from ascendpatch.pipeline.planner import site_for
from ascendpatch.results import CheckResult, CommandResult, Level
from ascendpatch.shell import cliargs
from ascendpatch.store import atomic
from ascendpatch.store.ledger import Ledger, LedgerStore


def _changed(ctx: Context, dist: Distribution) -> list[str]:
    """RECORD paths whose bytes differ from RECORD or that are gone: the audit's check, for
    this one distribution (findings are relative to the target root, RECORD to dist.location)."""
    report = audit(ctx.target, {}, dists=[dist], orphans=False)
    return [(ctx.target.root / f.path).relative_to(dist.location).as_posix()
            for f in report.findings]


def _pristine(dist: Distribution, rel: str, store: LedgerStore, ledger: Ledger,
              wheel: dict[str, bytes] | None) -> bytes | None:
    expected = dist.record[rel].sha256
    key = store.rel(dist.location / rel)
    for files in ledger.values():
        record = files.get(key)
        backup = store.read_backup(record.backup) if record else None
        if backup is not None and sha256_bytes(backup) == expected:
            return backup
    if wheel is not None and rel in wheel and sha256_bytes(wheel[rel]) == expected:
        return wheel[rel]
    return None


def _base(ctx: Context, dist: Distribution, rel: str, pristine: bytes, ledger: Ledger,
          notes: list[str]) -> bytes:
    """The patched state where a catalog artifact owns this file, else the pristine one."""
    key = ctx.store.rel(dist.location / rel)
    base = pristine
    for artifact_id, files in ledger.items():
        record = files.get(key)
        artifact = ctx.manifest.artifact(artifact_id)
        if record is None or artifact is None or artifact.kind != "diff":
            continue
        site = site_for(artifact, ctx.target, ctx.env, required=False)
        if not isinstance(site, ArtifactSite) or site.source is None:
            continue
        for patch in load_patch(site.source):
            if patch.path == rel:
                patched = apply_forward(analyze(patch, base))
                if patched is not None and sha256_bytes(patched) == record.sha256_after:
                    base = patched
                    notes.append(f"{rel}: diffed against {artifact_id} (already applied)")
    return base


Item = tuple[str, bytes | None, bytes | None]  # (path, base content, current content)


def _wheel_if_needed(dist: Distribution, changed: list[str], store: LedgerStore, ledger: Ledger,
                     source: Source) -> dict[str, bytes] | None:
    if all(_pristine(dist, rel, store, ledger, None) is not None for rel in changed):
        return None  # every original is in ascendpatch's backups
    archive = releases.archive(dist.name, dist.version, source)
    if archive.suffix != ".whl":
        raise RefusedError(f"no wheel of {dist.name} {dist.version} to take the pristine files "
                           "from", fix="pass --wheelhouse DIR")
    return releases.wheel_files(archive, changed)


def _items(ctx: Context, dist: Distribution, changed: list[str], store: LedgerStore,
           ledger: Ledger, source: Source, notes: list[str]) -> list[Item]:
    wheel = _wheel_if_needed(dist, changed, store, ledger, source)
    items: list[Item] = []
    for rel in changed:
        pristine = _pristine(dist, rel, store, ledger, wheel)
        if pristine is None:
            raise RefusedError(f"{rel}: neither a backup nor the wheel holds the content the "
                               "installed RECORD describes; refusing to guess",
                               fix="pass --wheelhouse with the exact wheel installed")
        base = _base(ctx, dist, rel, pristine, ledger, notes)
        path = dist.location / rel
        current = path.read_bytes() if path.is_file() else None
        if current != base:
            items.append((rel, base, current))
    return items


def _entry(aid: str, dist: Distribution, output: Path, manifest_out: Path,
           items: list[Item]) -> dict[str, object]:
    return {"id": aid, "title": f"{aid} (captured from {dist.name} {dist.version})",
            "kind": "diff", "distribution": dist.name, "versions": f"=={dist.version}",
            "source": os.path.relpath(output.resolve(), manifest_out.resolve().parent),
            "targets": [rel for rel, _o, _n in items],
            "sha256": {rel: {"before": [sha256_bytes(old or b"")],
                             "after": [sha256_bytes(new or b"")]} for rel, old, new in items}}


def _nothing(dist: Distribution, why: str) -> CommandResult:
    return CommandResult("capture", (CheckResult("capture", "capture", Level.OK,
                                                 f"{dist.name} {dist.version}: {why}"),))


def run(ctx: Context, dist_name: str, artifact_id: str | None, output: Path | None,
        manifest_out: Path | None, source: Source) -> CommandResult:
    dist = ctx.target.get(dist_name)
    if dist is None:
        raise InvalidInputError(f"{dist_name} is not installed in {ctx.target.describe()}")
    aid = artifact_id or f"{dist.name}-local-{dist.version}".replace("+", "-")
    output = output or Path(f"{aid}.patch")
    notes: list[str] = []
    with shared(ctx) as session:
        changed = _changed(ctx, dist)
        if not changed:
            return _nothing(dist, "every file matches its RECORD; nothing to capture")
        items = _items(ctx, dist, changed, session.store, session.store.load_ledger(), source,
                       notes)
    if not items:
        return _nothing(dist, "only catalog patches differ; nothing new to capture")
    header = (f"ascendpatch capture of {dist.name} {dist.version}\n"
              f"Files: {', '.join(rel for rel, _o, _n in items)}")
    text = diffwrite.patch_text(header, items)
    lines = [CheckResult(f"file:{rel}", "capture", Level.OK,
                         f"captured {rel} ({'deleted' if new is None else 'changed'})")
             for rel, _old, new in items]
    lines += [CheckResult("note", "capture", Level.OK, note) for note in notes]
    if manifest_out is None:
        atomic.write_atomic(output, text.encode("utf-8"))
    else:  # the manifest edit is validated first; then patch and entry are written together
        manifest_text, verb = edit.put_artifact(
            manifest_out, _entry(aid, dist, output, manifest_out, items), f"captured-{dist.name}")
        edit.write_with_patch(manifest_out, manifest_text, output, text)
    lines.append(CheckResult("patch", "capture", Level.OK, f"wrote {output}"))
    if manifest_out is not None:
        lines.append(CheckResult("manifest", "capture", Level.OK,
                                 f"{verb} artifact {aid} in {manifest_out}"))
    return CommandResult("capture", tuple(lines))


def from_args(args: Namespace) -> CommandResult:
    return run(context.from_args(args), args.dist, args.artifact_id, args.output,
               args.manifest_out, context.source_from_args(args))


def configure(p: ArgumentParser) -> None:
    p.add_argument("dist", metavar="DIST", help="the installed distribution you edited")
    p.add_argument("--id", dest="artifact_id", metavar="ID",
                   help="the artifact id (default: derived from DIST)")
    p.add_argument("--output", type=cliargs.file_in_a_folder, metavar="FILE",
                   help="the patch (default ID.patch)")
    p.add_argument("--manifest-out", type=cliargs.file_in_a_folder, metavar="FILE",
                   help="add or update the artifact in this manifest")


COMMAND = cliargs.CommandSpec(
    name="capture",
    help="turn edits of an installed distribution into a patch",
    description="Turn edits of an installed distribution into a patch (and a manifest entry).",
    example=("ascendpatch --python ./ascendpatch-sandbox/bin/python capture vllm-ascend --id "
             "my-fix --output my-fix.patch"),
    run=from_args, configure=configure, source=True,
)
