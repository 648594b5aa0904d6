"""``ascendpatch port ID --to VERSION [--from VERSION] [--write]``."""

from __future__ import annotations

import os
from argparse import ArgumentParser, Namespace

from packaging.version import InvalidVersion, Version

from ascendpatch.commands import context
from ascendpatch.env.pipadapter import Source
from ascendpatch.errors import InvalidInputError
from ascendpatch.hashing import sha256_bytes
from ascendpatch.inspect.portcheck import LEVEL, release_reader, verdicts
from ascendpatch.kinds.diff import load_patch
from ascendpatch.manifest import edit, needed
from ascendpatch.manifest.loader import resolve_source
from ascendpatch.manifest.model import Artifact, Manifest, Variant, version_in
from ascendpatch.patchfile import diffwrite, porting
from ascendpatch.patchfile.diffpatch import analyze, apply_forward
from ascendpatch.patchfile.porting import Verdict
from ascendpatch.results import CheckResult, CommandResult, Hint, Level, Phrase
from ascendpatch.shell import cliargs
from ascendpatch.store import atomic


def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise InvalidInputError(f"{text!r} is not a PEP 440 version") from None


def _artifact(manifest: Manifest, artifact_id: str) -> Artifact:
    artifact = manifest.artifact(artifact_id)
    if artifact is None:
        raise InvalidInputError(f"no artifact {artifact_id!r} in manifest {manifest.name}")
    if artifact.kind != "diff" or not artifact.distribution:
        raise InvalidInputError(f"artifact {artifact_id} is of kind {artifact.kind}; only diff "
                                "artifacts can be ported")
    return artifact


def choose_variant(artifact: Artifact, to: Version, start: str | None) -> Variant:
    if start is not None:
        found = artifact.variant_for(_version(start))
        if found is None:
            raise InvalidInputError(f"no variant of {artifact.id} covers --from {start}")
        return found
    return artifact.variant_for(to) or artifact.variants[-1]


def fixed_upstream(artifact: Artifact, version: str, source: Source) -> str | None:
    """The reason when the artifact's ``needed_if`` is false for this release's content."""
    if artifact.needed_if is None:
        return None
    read = release_reader(artifact, version, source)
    finding = needed.evaluate(artifact.needed_if, read(artifact.needed_if.file))
    return finding.reason if finding.needed is False else None


def run(manifest: Manifest, artifact_id: str, to: str, source: Source, *,
        start: str | None = None, write: bool = False) -> CommandResult:
    artifact = _artifact(manifest, artifact_id)
    version = _version(to)
    if artifact.not_needed and version_in(artifact.not_needed[0], version):
        return CommandResult("port", (CheckResult(
            f"port:{artifact.id}", "port", Level.SKIP,
            f"{artifact.title}: not needed for {artifact.distribution} {to} "
            f"({artifact.not_needed[1]})"),))
    variant = choose_variant(artifact, version, start)
    found, files = verdicts(artifact, variant, to, source, dict(os.environ))
    word = porting.summary(found)
    reason = None if word is Verdict.OBSOLETE else fixed_upstream(artifact, to, source)
    if reason is not None:
        return CommandResult("port", (CheckResult(
            f"port:{artifact.id}", "port", Level.SKIP,
            f"{artifact.title}: not needed for {artifact.distribution} {to}: fixed upstream "
            f"({reason})", data={"verdict": Verdict.NOT_NEEDED.value}),))
    lines = [CheckResult(f"hunk:{v.path}:{v.index}", "port", LEVEL[v.verdict], v.describe())
             for v in found]
    lines.append(CheckResult(f"port:{artifact.id}", "port", LEVEL[word],
                             f"{artifact.title} from variant {variant.versions} to "
                             f"{artifact.distribution} {to}: {_meaning(word)}"))
    if write:
        lines.append(_write(manifest, artifact, variant, to, word, files))
    return CommandResult("port", tuple(lines))


def _meaning(word: Verdict) -> str:
    return {Verdict.EXACT: "applies exactly", Verdict.OFFSET: "applies at an offset",
            Verdict.OBSOLETE: "already fixed upstream: retire the patch for this release",
            Verdict.CONFLICT: "conflicts: port it by hand (see the nearest code above)"}[word]


def _before(variant: Variant, path: str) -> tuple[str, ...]:
    hashes = variant.sha256.get(path)
    return hashes.before if hashes else ()


def _write(manifest: Manifest, artifact: Artifact, variant: Variant, to: str, word: Verdict,
           files: dict[str, bytes | None]) -> CheckResult:
    if word not in (Verdict.EXACT, Verdict.OFFSET):
        return CheckResult("write", "port", Level.WARN if word is Verdict.OBSOLETE
                           else Level.FAIL, f"nothing written: the patch {_meaning(word)}")
    covering = artifact.variant_for(_version(to))
    if covering is not None:  # the first variant that admits a version decides it
        return _covered(artifact, covering, variant, to)
    if artifact.origin is None:
        raise InvalidInputError(f"artifact {artifact.id} has no manifest file to update")
    assert variant.source is not None
    source_path = resolve_source(artifact, variant.source, dict(os.environ))
    patches = load_patch(source_path)
    same = all(sha256_bytes(files[p.path] or b"") in _before(variant, p.path) for p in patches)
    new_variant: dict[str, object] = {"versions": f"=={to}"}
    out, text = None, ""
    if same:  # identical upstream content: the same patch serves, the specifier widens
        new_variant.update(source=variant.source, targets=list(variant.targets),
                           sha256={k: {"before": list(h.before), "after": list(h.after)}
                                   for k, h in variant.sha256.items()})
    else:  # new content: a patch of its own, made for exactly that content
        items = []
        for p in patches:
            old = files[p.path]
            items.append((p.path, old, apply_forward(analyze(p, old))))
        header = (f"ascendpatch: {artifact.title} for {artifact.distribution} {to}\n"
                  f"Ported by 'ascendpatch port {artifact.id} --to {to}' from variant "
                  f"{variant.versions}.")
        out = source_path.with_name(f"{to}.patch")
        text = diffwrite.patch_text(header, items)
        rel = os.path.relpath(out, artifact.origin.parent)
        new_variant.update(source=rel, targets=[p for p, _o, _n in items],
                           sha256={p: {"before": [sha256_bytes(o or b"")],
                                       "after": [sha256_bytes(n or b"")]} for p, o, n in items})
    manifest_text = edit.add_variant(artifact.origin, artifact.id, new_variant)
    if out is None:
        atomic.write_atomic(artifact.origin, manifest_text.encode("utf-8"))
    else:
        edit.write_with_patch(artifact.origin, manifest_text, out, text)
    return CheckResult("write", "port", Level.OK,
                       f"added variant =={to} to {artifact.id} in {artifact.origin}"
                       + ("" if same else f" (new patch {new_variant['source']})"))


def _covered(artifact: Artifact, covering: Variant, ported: Variant, to: str) -> CheckResult:
    """A variant that would change nothing: one already admits ``to`` (and, listed first,
    decides it), so the manifest is left byte for byte as it is."""
    where = f"{artifact.id} in {artifact.origin}"
    if covering is ported:
        return CheckResult("write", "port", Level.OK,
                           f"variant {covering.versions} of {where} already covers {to}: "
                           "nothing written")
    return CheckResult("write", "port", Level.WARN,
                       f"nothing written: variant {covering.versions} of {where} already "
                       f"covers {to} and decides it, not the ported {ported.versions}",
                       fix=Phrase("check that one: '", Hint(("port", artifact.id, "--to", to)),
                                  "', or narrow its versions by hand"))


def from_args(args: Namespace) -> CommandResult:
    return run(context.manifest_from_args(args), args.artifact_id, args.to,
               context.source_from_args(args), start=args.start, write=args.write)


def configure(p: ArgumentParser) -> None:
    p.add_argument("artifact_id", metavar="ID", help="a diff artifact of the manifest")
    p.add_argument("--to", required=True, metavar="VERSION",
                   help="the vllm-ascend release to port to")
    p.add_argument("--from", dest="start", metavar="VERSION",
                   help="the variant to port (default: the one covering --to, else newest)")
    p.add_argument("--write", action="store_true",
                   help="write the patch and the manifest variant when every hunk applies "
                        "(nothing when a variant already covers --to)")


COMMAND = cliargs.CommandSpec(
    name="port",
    help="check (and --write) a diff artifact against another release",
    description=("Check a diff artifact against another vllm-ascend release, hunk by hunk; "
                 "--write adds the ported variant."),
    example="ascendpatch port sampler-topk-topp-fallback --to 0.27.1rc1",
    run=from_args, configure=configure, source=True,
)
