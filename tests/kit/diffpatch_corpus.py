"""A corpus of real upstream diffs, and the matcher compared with ``git apply`` on it.

Every text file that changed between consecutive vllm-ascend releases (real wheels, from
``tests/kit/wheels.py``'s cache) becomes one per-file patch in four forms: ``git diff -U0``,
``-U1``, ``-U3`` and ``diff -uN``, all written by those tools in a temp dir. Each patch is
applied to the release it was made from, to the release it leads to (re-apply), and to the
neighbouring releases (cross-apply), by the matcher (in memory) and by ``git apply`` (the
reference, ``--unidiff-zero`` for the ``-U0`` form). Used by the integration test and by
``bench/matcher.py``; the product itself never runs git.
"""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import zipfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ascendpatch.patchfile.diffpatch import (
    FilePatch,
    analyze,
    apply_forward,
    apply_reverse,
    parse_patch,
)
from ascendpatch.pipeline.filestate import FileState
from tests.kit.wheels import wheel

CHAINS = (("0.15.0rc1", "0.16.0rc1", "0.17.0rc1"), ("0.18.0rc1", "0.18.0", "0.19.1rc1"))
FORMS = ("git -U0", "git -U1", "git -U3", "diff -uN")
PACKAGE = "vllm_ascend/"
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}


def _run(args: Sequence[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, **GIT_ENV, "GIT_CEILING_DIRECTORIES": str(cwd.parent)}
    return subprocess.run(list(args), cwd=cwd, capture_output=True, check=check, env=env)


def release_files(version: str) -> dict[str, bytes]:
    """The package's text files in the real wheel (binaries left out: no diff for them)."""
    out = {}
    with zipfile.ZipFile(wheel(version)) as archive:
        for name in archive.namelist():
            if name.startswith(PACKAGE) and not name.endswith("/"):
                data = archive.read(name)
                if b"\0" not in data:
                    out[name] = data
    return out


def _write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def _split(text: bytes, marker: bytes) -> Iterator[bytes]:
    chunks = text.split(b"\n" + marker)
    for index, chunk in enumerate(chunks):
        if chunk.strip():
            yield chunk + b"\n" if index == 0 else marker + chunk + b"\n"


@dataclass(frozen=True)
class CorpusPatch:
    old: str  # the release it was made from
    new: str  # the release it leads to
    form: str
    path: str
    text: bytes


def make_patches(work: Path, chain: Sequence[str], releases: dict[str, dict[str, bytes]]) \
        -> list[CorpusPatch]:
    """Per-file patches between consecutive releases of ``chain``, written by git and diff."""
    repo = work / "repo"
    repo.mkdir(parents=True)
    _run(["git", "init", "-q"], repo)
    commits = {}
    for version in chain:
        for child in repo.iterdir():
            if child.name != ".git":
                subprocess.run(["rm", "-rf", str(child)], check=True)
        _write_tree(repo, releases[version])
        _run(["git", "add", "-A"], repo)
        _run(["git", "commit", "-q", "--allow-empty", "-m", version], repo)
        commits[version] = _run(["git", "rev-parse", "HEAD"], repo).stdout.decode().strip()
    patches: list[CorpusPatch] = []
    for old, new in itertools.pairwise(chain):
        for context in (0, 1, 3):
            out = _run(["git", "diff", f"-U{context}", "--no-renames", "--no-color",
                        commits[old], commits[new]], repo).stdout
            for chunk in _split(out, b"diff --git "):
                path = chunk.split(b"\n", 1)[0].split(b" b/", 1)[1].decode()
                patches.append(CorpusPatch(old, new, f"git -U{context}", path, chunk))
        pair = work / f"{old}_{new}"
        _write_tree(pair / "a", releases[old])
        _write_tree(pair / "b", releases[new])
        out = subprocess.run(["diff", "-ruN", "a", "b"], cwd=pair, capture_output=True,
                             check=False).stdout
        for chunk in _split(out, b"diff -ruN "):
            path = chunk.split(b"\n", 1)[0].split(b" b/", 1)[1].decode()
            body = b"\n".join(line for line in chunk.split(b"\n")[1:])  # the diff -ruN line
            patches.append(CorpusPatch(old, new, "diff -uN", path, body))
    return patches


@dataclass
class Outcome:
    """One patch on one release: what the matcher did and what git apply did."""

    patch: CorpusPatch
    target: str
    relation: str  # own, reapply, neighbour
    matcher: str  # pristine, applied, partial, conflict, error
    git_forward: bool
    git_reverse: bool
    same_bytes: bool | None = None  # both applied: identical output
    reapply_ok: bool | None = None  # the matcher's result is "applied" afterwards
    revert_ok: bool | None = None  # reversing the matcher's result gives the input back
    note: str = ""

    @property
    def category(self) -> str:
        if self.matcher == "pristine":
            if not self.git_forward:
                return "matcher applies, git refuses"
            return "both apply, identical bytes" if self.same_bytes else \
                "both apply, different bytes"
        if self.matcher == "applied":
            return "matcher: already applied; git -R agrees" if self.git_reverse else \
                "matcher: already applied; git -R refuses"
        if self.git_forward:
            return f"matcher refuses ({self.matcher}), git applies"
        return "both refuse"


class GitApply:
    """``git apply`` in a scratch folder outside any repository: the reference."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        scratch.mkdir(parents=True, exist_ok=True)

    def run(self, patch: CorpusPatch, current: bytes | None, reverse: bool = False,
            check: bool = False) -> tuple[bool, bytes | None]:
        target = self.scratch / patch.path
        if current is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(current)
        source = self.scratch.parent / "one.patch"
        source.write_bytes(patch.text)
        args = ["git", "apply"] + (["--unidiff-zero"] if patch.form == "git -U0" else []) + \
            (["-R"] if reverse else []) + (["--check"] if check else []) + [str(source)]
        done = _run(args, self.scratch, check=False)
        result = target.read_bytes() if target.is_file() else None
        if target.exists():
            target.unlink()
        return done.returncode == 0, result


def engine_outcome(fp: FilePatch, current: bytes | None) -> tuple[str, bytes | None, str]:
    analysis = analyze(fp, current)
    if analysis.state is FileState.PRISTINE:
        return "pristine", apply_forward(analysis), analysis.summary()
    return analysis.state.value, None, analysis.summary()


def compare(patch: CorpusPatch, target: str, relation: str, current: bytes | None,
            git: GitApply) -> Outcome:
    git_ok, git_out = git.run(patch, current)
    rev_ok, _ = git.run(patch, current, reverse=True, check=True)
    try:
        (fp,) = parse_patch(patch.text, origin=patch.path)
    except Exception as exc:
        return Outcome(patch, target, relation, "error", git_ok, rev_ok, note=str(exc))
    state, out, note = engine_outcome(fp, current)
    outcome = Outcome(patch, target, relation, state, git_ok, rev_ok, note=note)
    if state == "pristine":
        outcome.same_bytes = git_ok and out == git_out
        again = analyze(fp, out)
        outcome.reapply_ok = again.state is FileState.APPLIED
        outcome.revert_ok = outcome.reapply_ok and apply_reverse(again) == current
    elif state == "applied":
        back = analyze(fp, current)
        original = apply_reverse(back)
        outcome.revert_ok = analyze(fp, original).state is FileState.PRISTINE and \
            apply_forward(analyze(fp, original)) == current
    return outcome


@dataclass
class Corpus:
    releases: dict[str, dict[str, bytes]] = field(default_factory=dict)
    patches: list[CorpusPatch] = field(default_factory=list)
    chains: tuple[tuple[str, ...], ...] = CHAINS

    def targets(self, patch: CorpusPatch) -> list[tuple[str, str]]:
        """(release, relation): the own release, the next one (re-apply), the neighbours."""
        chain = next(c for c in self.chains if patch.old in c and patch.new in c)
        i = chain.index(patch.old)
        out = [(patch.old, "own"), (patch.new, "reapply")]
        if i > 0:
            out.append((chain[i - 1], "neighbour"))
        if i + 2 < len(chain):
            out.append((chain[i + 2], "neighbour"))
        return out


def build(work: Path, chains: Sequence[Sequence[str]] = CHAINS) -> Corpus:
    corpus = Corpus(chains=tuple(tuple(c) for c in chains))
    for number, chain in enumerate(chains):
        for version in chain:
            corpus.releases.setdefault(version, release_files(version))
        corpus.patches += make_patches(work / f"chain{number}", chain, corpus.releases)
    return corpus


def sample(patches: list[CorpusPatch], per_form: int | None, seed: int = 12) \
        -> list[CorpusPatch]:
    """The same files in every form (so forms compare), at most ``per_form`` per pair."""
    if per_form is None:
        return patches
    rng = random.Random(seed)
    keys = sorted({(p.old, p.new, p.path) for p in patches})
    by_pair: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for key in keys:
        by_pair.setdefault(key[:2], []).append(key)
    chosen: set[tuple[str, str, str]] = set()
    for pair_keys in by_pair.values():
        chosen.update(rng.sample(pair_keys, min(per_form, len(pair_keys))))
    return [p for p in patches if (p.old, p.new, p.path) in chosen]


def run(corpus: Corpus, patches: list[CorpusPatch], scratch: Path) -> list[Outcome]:
    git = GitApply(scratch / "work")
    outcomes = []
    for patch in patches:
        for target, relation in corpus.targets(patch):
            current = corpus.releases[target].get(patch.path)
            outcomes.append(compare(patch, target, relation, current, git))
    return outcomes


def table(outcomes: list[Outcome]) -> str:
    counts = Counter((o.relation, o.patch.form, o.category) for o in outcomes)
    lines = [f"{n:6d}  {rel:9s} {form:9s} {cat}" for (rel, form, cat), n in sorted(counts.items())]
    hunks = sum(o.patch.text.count(b"\n@@ ") + o.patch.text.startswith(b"@@ ")
                for o in outcomes if o.relation == "own")
    files = len({(o.patch.old, o.patch.new, o.patch.path, o.patch.form) for o in outcomes})
    lines.append(f"{files} per-file patches, {hunks} hunks, {len(outcomes)} applications")
    return "\n".join(lines)
