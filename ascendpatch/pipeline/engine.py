"""Act on artifact plans: apply, revert, report status. All writes go through LedgerStore.commit."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ascendpatch.hashing import sha256_optional
from ascendpatch.kinds import KINDS
from ascendpatch.kinds.base import ArtifactSite, Content, FileFinding, Skip
from ascendpatch.manifest.model import Artifact
from ascendpatch.pipeline.filestate import FileState
from ascendpatch.pipeline.planner import ArtifactPlan, evaluate
from ascendpatch.results import ArtifactResult, FileChange, FileResult, Hint, Level, Phrase, Status
from ascendpatch.store.ledger import Change, Ledger, LedgerFile, LedgerStore, now


def _file_results(files: Sequence[FileFinding], after: dict[str, Content] | None = None,
                  state: FileState | None = None) -> tuple[FileResult, ...]:
    out = []
    for finding in files:
        now = finding.current_sha256
        new = after[finding.rel].sha256 if after is not None and finding.rel in after else now
        out.append(FileResult(finding.rel, state or finding.state, now, new))
    return tuple(out)


def _details(plan: ArtifactPlan) -> tuple[str, ...]:
    return tuple(finding.detail for finding in plan.files if finding.detail)


def _result(plan: ArtifactPlan, status: Status, level: Level, message: str, **kw: object) \
        -> ArtifactResult:
    return ArtifactResult(plan.artifact.id, plan.artifact.kind, status, level, message,
                          **kw)  # type: ignore[arg-type]


def _package(plan: ArtifactPlan) -> str:
    dist = plan.site.dist if plan.site else None
    return f"{dist.name}=={dist.version}" if dist else "<package>"


def _reinstall(plan: ArtifactPlan) -> Phrase:
    """The command that puts the package's own files back, with the target's own pip."""
    argv = ("install", "--force-reinstall", "--no-deps", _package(plan))
    pip = plan.site.pip if plan.site else ()
    if pip:
        return Phrase("reinstall the package (", Hint(argv, runner=pip), ")")
    return Phrase("reinstall the package with the pip of the image's own python (",
                  Hint(argv, runner=("python", "-m", "pip")), ")")


def skipped(plan: ArtifactPlan) -> ArtifactResult:
    assert plan.skip is not None
    return _result(plan, Status.SKIPPED, plan.skip.level,
                   f"{plan.artifact.title}: {plan.skip.reason}", fix=plan.skip.fix)


def nothing_to_do(plan: ArtifactPlan) -> ArtifactResult | None:
    """A kind that finds no file to act on (e.g. no cached snapshot) says why: [SKIP]."""
    if plan.files or plan.site is None:
        return None
    reason = KINDS[plan.artifact.kind].nothing_to_do(plan.site)
    return _result(plan, Status.SKIPPED, Level.SKIP, f"{plan.artifact.title}: {reason}")


def recognise(plan: ArtifactPlan, ledger: Ledger, store: LedgerStore) -> ArtifactPlan:
    """Conflicts on files the ledger says this artifact wrote. Content ascendpatch wrote
    itself (the record's sha256_after) is no stranger's file: what it should hold changed
    since (the source was edited), so it is OUTDATED and apply replaces it (revert restores
    the original the ledger keeps). Content changed since ascendpatch wrote it stays a
    conflict, whose detail names the edit applying would lose."""
    records = ledger.get(plan.artifact.id)
    if not records or not any(f.state is FileState.CONFLICT for f in plan.files):
        return plan
    return replace(plan, files=tuple(_recognised(f, records.get(store.rel(f.path)))
                                     for f in plan.files))


def _recognised(finding: FileFinding, record: LedgerFile | None) -> FileFinding:
    if finding.state is not FileState.CONFLICT or record is None or finding.current is None:
        return finding
    if record.sha256_after == finding.current_sha256 and finding.desired.known:
        return replace(finding, state=FileState.OUTDATED,
                       detail=f"{finding.rel}: installed by ascendpatch ({record.time}), and "
                              "what it should hold has changed since (an edited source): "
                              "applying installs the new content")
    return replace(finding, detail=f"{finding.rel}: changed by someone since ascendpatch wrote "
                                   f"it ({record.time}): applying would lose that edit")


def blocked(plan: ArtifactPlan, force: bool) -> ArtifactResult | None:
    """The failure result when ``plan`` cannot be applied as it stands, else None."""
    title, aid = plan.artifact.title, plan.artifact.id
    state = plan.state
    if state is FileState.CONFLICT:
        conflicts = [f for f in plan.files if f.state is FileState.CONFLICT]
        if force and all(f.forceable and f.desired.known for f in conflicts):
            return None
        hint = ("--force overwrites it (a backup is kept)" if all(f.forceable for f in conflicts)
                else _reinstall(plan) + " and apply again, or port the patch to this content")
        names = ", ".join(f.rel for f in conflicts)
        return _result(plan, Status.CONFLICT, Level.FAIL,
                       f"{title}: conflict in {names}", fix=hint,
                       files=_file_results(plan.files), details=_details(plan))
    completable = KINDS[plan.artifact.kind].independent_files
    if state is FileState.PARTIAL and not force and not completable:
        return _result(plan, Status.PARTIAL, Level.FAIL,
                       f"{title}: partially applied",
                       fix=Phrase("'", Hint(("revert", aid)), "' then '", Hint(("apply", aid)),
                                  "', or '", Hint(("apply", "--force", aid)),
                                  "' to complete it"),
                       files=_file_results(plan.files), details=_details(plan))
    return None


def unified_diff(plan: ArtifactPlan) -> str:
    """The diff of every change the plan makes, as its kind displays the content (an env
    file's secret values masked, in context lines too)."""
    show = KINDS[plan.artifact.kind].for_display
    chunks: list[str] = []
    for finding in plan.files:
        if finding.state is FileState.APPLIED or not finding.desired.known:
            continue
        old, new = (show(data or b"").decode("utf-8", "replace").splitlines(keepends=True)
                    for data in (finding.current, finding.desired.data))
        chunks.extend(difflib.unified_diff(old, new, f"a/{finding.rel}", f"b/{finding.rel}"))
    return "".join(chunks)


# ---------------------------------------------------------------------------- apply


@dataclass(frozen=True)
class Writes:
    """One artifact's changes, waiting in a transaction; ``diff``: apply --diff's text."""

    plan: ArtifactPlan
    changes: list[Change]
    keep: list[bytes]  # the pristine originals revert will need, backed up first
    diff: str = ""


class _Transaction:
    """The writes of several artifacts as one transaction: one journal, one ledger write.

    ``apply`` of a whole catalog collects each artifact's changes here and commits them
    together (a crash rolls back the batch; re-running is safe). An artifact that touches a
    file already in the batch makes :func:`execute` commit first, so it is evaluated on the
    file as the earlier artifacts left it.
    """

    def __init__(self, store: LedgerStore) -> None:
        self.store = store
        self._writes: list[Writes] = []
        self._paths: set[str] = set()

    def touches(self, plan: ArtifactPlan) -> bool:
        return any(_real(f.path) in self._paths for f in plan.files)

    def add(self, writes: Writes) -> None:
        self._writes.append(writes)
        self._paths.update(_real(f.path) for f in writes.plan.files)

    def commit(self) -> Iterator[ArtifactResult]:
        """Commit everything added, then yield each artifact's re-checked result."""
        if not self._writes:
            return
        writes, self._writes, self._paths = self._writes, [], set()

        def update(ledger: Ledger) -> Ledger:
            for each in writes:
                ledger = _record(ledger, each.plan, self.store)
            return ledger

        self.store.commit([c for each in writes for c in each.changes], update,
                          keep=[k for each in writes for k in each.keep])
        for each in writes:
            yield _recheck(each.plan, "applied", each.diff)


def _real(path: Path) -> str:
    """A file's real name: two names of one file (an in-tree symlink) are one shared file."""
    return os.path.realpath(path)


def execute(prepared: Iterable[tuple[Artifact, ArtifactSite | Skip]], store: LedgerStore, *,
            force: bool = False, dry_run: bool = False, diff: bool = False) \
        -> Iterator[ArtifactResult]:
    """Apply each artifact, in one transaction for the whole run (a catalog: < 1 s); yield
    each result once it is final: at once when nothing is to be written, else once its
    transaction is committed and re-checked. ``diff``: a result applied now carries the
    unified diff of its change (apply --diff, like Ansible)."""
    batch = _Transaction(store)
    ledger = store.load_ledger()
    for artifact, site in prepared:
        plan = recognise(evaluate(artifact, site), ledger, store)
        if batch.touches(plan):  # an earlier artifact shares a file: write it first,
            yield from batch.commit()
            ledger = store.load_ledger()
            plan = recognise(evaluate(artifact, site), ledger, store)  # then look again
        outcome = apply_artifact(plan, force=force, dry_run=dry_run, diff=diff)
        if isinstance(outcome, Writes):
            batch.add(outcome)
        else:
            yield outcome
    yield from batch.commit()


def apply_artifact(plan: ArtifactPlan, *, force: bool, dry_run: bool, diff: bool = False) \
        -> ArtifactResult | Writes:
    """The final result when nothing is to be written (or ``dry_run``), else the writes."""
    if plan.skip is not None:
        return skipped(plan)
    empty = nothing_to_do(plan)
    if empty is not None:
        return empty
    title = plan.artifact.title
    if plan.state is FileState.APPLIED:
        return _result(plan, Status.ALREADY_APPLIED, Level.OK, f"{title} already applied",
                       files=_file_results(plan.files))
    failure = blocked(plan, force)
    if failure is not None:
        return failure
    pending = [f for f in plan.files if f.state is not FileState.APPLIED]
    after = {f.rel: f.desired for f in pending}
    if dry_run:
        return _result(plan, Status.PENDING, Level.WARN, f"{title}: would be applied",
                       files=_file_results(plan.files, after, FileState.PRISTINE),
                       diff=unified_diff(plan))
    changes = [Change(f.path, f.current, f.desired.data, link=f.desired.link,
                      mode=f.desired.mode) for f in pending]
    befores = [c.before for c in changes]  # backed up anyway: each content once
    originals = [f.original.data for f in plan.files if f.original.known
                 and f.original.data is not None and f.original.data not in befores]
    return Writes(plan, changes, originals, unified_diff(plan) if diff else "")


def _record(ledger: Ledger, plan: ArtifactPlan, store: LedgerStore) -> Ledger:
    files = dict(ledger.get(plan.artifact.id, {}))
    for finding in plan.files:
        rel = store.rel(finding.path)
        previous = files.get(rel)
        if previous is not None:
            before = previous.sha256_before
        elif finding.original.known:
            before = finding.original.sha256
        else:
            before = finding.current_sha256
        files[rel] = LedgerFile(before, finding.desired.sha256, before, now())
    return {**ledger, plan.artifact.id: files}


def _recheck(plan: ArtifactPlan, verb: str, diff: str = "") -> ArtifactResult:
    """Re-read the target after writing: report what is really there, not what we hoped;
    ``diff``: the change as written, kept on a result that is applied."""
    assert plan.site is not None
    fresh = evaluate(plan.artifact, plan.site)
    title = plan.artifact.title
    now_by_path = {f.path: f for f in fresh.files}
    files = []
    for old in plan.files:  # paired by path: a kind may list fewer files once applied
        new = now_by_path.get(old.path)
        current = new.current if new else (old.path.read_bytes() if old.path.is_file() else None)
        state: FileState | FileChange = new.state if new else (
            FileChange.REMOVED if current is None else FileState.APPLIED)
        files.append(FileResult(old.rel, state, old.current_sha256,
                                new.current_sha256 if new else sha256_optional(current)))
    if verb == "applied" and fresh.state in (FileState.APPLIED, None):
        updated = ", ".join(f.rel for f in plan.files if f.state is FileState.OUTDATED)
        also = f" (new content in {updated}, which it had installed before)" if updated else ""
        return _result(plan, Status.APPLIED, Level.OK, f"Applied {title}{also}",
                       files=tuple(files), diff=diff)
    if verb == "reverted":
        return _result(plan, Status.REVERTED, Level.OK, f"Reverted {title}", files=tuple(files))
    return _result(plan, Status.FAILED, Level.FAIL,
                   f"{title}: written, but the re-check finds it {_word(fresh.state)}",
                   fix=Phrase("report this as a bug with '", Hint(("status", "--json")), "'"),
                   files=tuple(files),
                   details=_details(fresh))


def _word(state: FileState | None) -> str:
    """A state as users read it ("pristine"), never an enum's repr."""
    return "without files" if state is None else state.value


# ---------------------------------------------------------------------------- revert


@dataclass(frozen=True)
class _Restore:
    finding: FileFinding
    data: bytes | None


def _ledger_only(plan: ArtifactPlan, store: LedgerStore, records: dict[str, LedgerFile]) \
        -> list[Change]:
    """Files the ledger says this artifact changed but the kind no longer lists (a deleted
    marker file, say): restore each one that is still as ascendpatch left it."""
    listed = {store.rel(f.path) for f in plan.files}
    changes = []
    for rel, record in records.items():
        path = store.abs(rel)
        current = path.read_bytes() if path.is_file() else None
        if rel in listed or sha256_optional(current) != record.sha256_after:
            continue
        original = None if record.sha256_before is None else store.read_backup(record.backup)
        if record.sha256_before is not None and original is None:
            continue
        changes.append(Change(path, current, original))
    return changes


def revert_all(prepared: Sequence[tuple[Artifact, ArtifactSite | Skip]], store: LedgerStore, *,
               dry_run: bool = False) -> Iterator[ArtifactResult]:
    """Revert each artifact in reverse order of application, one transaction each; yield
    each result once it is final (written and re-checked)."""
    for artifact, site in reversed(prepared):
        yield revert_artifact(evaluate(artifact, site), store, store.load_ledger(),
                              dry_run=dry_run)


def revert_artifact(plan: ArtifactPlan, store: LedgerStore, ledger: Ledger, *,
                dry_run: bool = False) -> ArtifactResult:
    if plan.skip is not None:
        return skipped(plan)
    title, aid = plan.artifact.title, plan.artifact.id
    records = ledger.get(aid, {})
    extra = _ledger_only(plan, store, records)
    restores: list[_Restore] = []
    for finding in plan.files:
        if finding.state is FileState.PRISTINE:
            continue
        data = _original(finding, records.get(store.rel(finding.path)), store)
        if data is None:
            return _result(plan, Status.FAILED, Level.FAIL,
                           f"{title}: cannot restore {finding.rel}: {_why_not(finding)}",
                           fix=_reinstall(plan), files=_file_results(plan.files),
                           details=_details(plan))
        restores.append(_Restore(finding, data[0]))
    if not restores and not extra:
        if aid in ledger and not dry_run:
            store.commit([], lambda led: {k: v for k, v in led.items() if k != aid})
        return _result(plan, Status.NOT_APPLIED, Level.OK,
                       f"{title} is not applied; nothing to revert",
                       files=_file_results(plan.files))
    if dry_run:
        names = ", ".join([r.finding.rel for r in restores] + [store.rel(c.path) for c in extra])
        return _result(plan, Status.PENDING, Level.WARN, f"{title}: would be reverted ({names})",
                       files=_file_results(plan.files))
    root = plan.site.root if plan.site else None  # a file the patch created goes with
    changes = [Change(r.finding.path, r.finding.current, r.data,  # the folders it emptied
                      prune_to=r.finding.prune_to or (root if r.data is None else None))
               for r in restores] + extra
    store.commit(changes, lambda led: {k: v for k, v in led.items() if k != aid})
    return _recheck(plan, "reverted")


def _original(finding: FileFinding, record: LedgerFile | None, store: LedgerStore) \
        -> tuple[bytes | None] | None:
    """The content to restore, wrapped in a 1-tuple (its data may be None = remove)."""
    if record is not None and record.sha256_after == finding.current_sha256:
        if record.sha256_before is None:
            return (None,)
        backup = store.read_backup(record.backup)
        if backup is not None:
            return (backup,)
    if finding.state is not FileState.CONFLICT and finding.original.known and \
            finding.revert_refusal is None:
        return (finding.original.data,)
    return None


def _why_not(finding: FileFinding) -> str:
    if finding.revert_refusal is not None and finding.state is not FileState.CONFLICT:
        return finding.revert_refusal
    if finding.state is FileState.CONFLICT:
        return "it was changed after ascendpatch wrote it (unrecognised content)"
    return "its backup is gone and the original cannot be reconstructed from the patch"


# ---------------------------------------------------------------------------- status


def status_of(plan: ArtifactPlan, ledger: Ledger, store: LedgerStore) -> ArtifactResult:
    if plan.skip is not None:
        return skipped(plan)
    empty = nothing_to_do(plan)
    if empty is not None and plan.artifact.id not in ledger:
        return empty
    plan = recognise(plan, ledger, store)
    title, aid = plan.artifact.title, plan.artifact.id
    files = _file_results(plan.files)
    state = plan.state
    if state is FileState.APPLIED:
        return _result(plan, Status.ALREADY_APPLIED, Level.OK, f"{title} applied", files=files)
    if state is FileState.OUTDATED:
        names = ", ".join(f.rel for f in plan.files if f.state is FileState.OUTDATED)
        return _result(plan, Status.NOT_APPLIED, Level.WARN,
                       Phrase(f"{title}: applied from an earlier source; {names} now differ: "
                              "run: ", Hint(("apply", aid))), files=files, details=_details(plan))
    if state is FileState.PRISTINE:
        if aid in ledger:  # applied once; the files are back to their originals
            dist = plan.site.dist.name if plan.site and plan.site.dist else "the package"
            return _result(plan, Status.NOT_APPLIED, Level.WARN,
                           Phrase(f"{title}: {dist} was reinstalled and the patch is gone; "
                                  "run: ", Hint(("apply", aid))), files=files)
        return _result(plan, Status.NOT_APPLIED, Level.WARN,
                       Phrase(f"{title} not applied; run: ", Hint(("apply", aid))), files=files)
    failure = blocked(plan, force=False)
    assert failure is not None
    return failure
