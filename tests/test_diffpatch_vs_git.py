"""The matcher against ``git apply`` on real vllm-ascend release diffs (integration tier).

The corpus is built here from real wheels (see tests/kit/diffpatch_corpus.py): per-file patches
between consecutive releases of two chains (0.15.0rc1 -> 0.16.0rc1 -> 0.17.0rc1 and
0.18.0rc1 -> 0.18.0 -> 0.19.1rc1) in four forms, applied to their own release, re-applied to
the release they lead to, and cross-applied to the neighbours. A sample keeps this under a
few minutes; ``ASCENDPATCH_ENGINE_CORPUS=full`` runs every file (for measuring).

What must hold, and the only disagreement allowed:

* own release: the matcher applies and writes git's bytes (``-U0``: or refuses as ambiguous);
* re-apply: the matcher says "already applied", and ``git apply -R --check`` agrees;
* whenever the matcher applies: git applies too, to the same bytes; the result is "applied"
  on the next look and reverses to the input byte for byte;
* whenever the matcher says applied, reversing and re-applying gives the file back;
* the matcher refuses where git applies only when it proves the placement ambiguous
  (after git's placement the patch would still apply, or the result would not reverse).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from ascendpatch.patchfile.diffpatch import (
    FilePatch,
    analyze,
    apply_forward,
    parse_patch,
)
from ascendpatch.pipeline.filestate import FileState
from tests.kit import diffpatch_corpus

pytestmark = pytest.mark.integration

PER_PAIR = None if os.environ.get("ASCENDPATCH_ENGINE_CORPUS") == "full" else 30


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> diffpatch_corpus.Corpus:
    if shutil.which("git") is None or shutil.which("diff") is None:
        pytest.fail("the differential test needs git and diff (apt-get install git diffutils)")
    return diffpatch_corpus.build(tmp_path_factory.mktemp("corpus") / "build")


@pytest.fixture(scope="module")
def outcomes(corpus: diffpatch_corpus.Corpus, tmp_path_factory: pytest.TempPathFactory) \
        -> list[diffpatch_corpus.Outcome]:
    work = tmp_path_factory.mktemp("apply")
    patches = diffpatch_corpus.sample(corpus.patches, PER_PAIR)
    done = diffpatch_corpus.run(corpus, patches, work)
    figures = diffpatch_corpus.table(done)
    (work / "figures.txt").write_text(figures)
    sys.stdout.write("\n" + figures + "\n")  # the agreement figures (pytest -s shows them)
    return done


def _show(items: list[diffpatch_corpus.Outcome]) -> str:
    return "\n".join(f"{o.patch.form} {o.patch.old}->{o.patch.new} on {o.target}: "
                     f"{o.patch.path}: {o.category}: {o.note[:160]}" for o in items[:10])


def test_corpus_covers_every_form_and_relation(outcomes: list[diffpatch_corpus.Outcome]) -> None:
    assert {o.patch.form for o in outcomes} == set(diffpatch_corpus.FORMS)
    assert {o.relation for o in outcomes} == {"own", "reapply", "neighbour"}
    assert any(o.patch.text.count(b"\n@@ ") > 1 for o in outcomes)  # multi-hunk patches
    assert any(o.patch.form == "diff -uN" and b"1970-01-01" in o.patch.text for o in outcomes)


def test_own_release_gives_git_bytes(outcomes: list[diffpatch_corpus.Outcome]) -> None:
    own = [o for o in outcomes if o.relation == "own"]
    bad = [o for o in own if o.category != "both apply, identical bytes" and not
           (o.patch.form == "git -U0" and "ambiguous" in o.note)]
    assert not bad, _show(bad)


def test_reapply_is_already_applied(outcomes: list[diffpatch_corpus.Outcome]) -> None:
    again = [o for o in outcomes if o.relation == "reapply"]
    bad = [o for o in again if o.category != "matcher: already applied; git -R agrees" and not
           (o.patch.form == "git -U0" and "ambiguous" in o.note)]
    assert not bad, _show(bad)


def test_engine_never_writes_what_git_would_not(outcomes: list[diffpatch_corpus.Outcome]) -> None:
    bad = [o for o in outcomes if o.category in ("matcher applies, git refuses",
                                                "both apply, different bytes")]
    assert not bad, _show(bad)


def test_every_write_reapplies_as_applied_and_reverts_byte_exact(
        outcomes: list[diffpatch_corpus.Outcome]) -> None:
    written = [o for o in outcomes if o.matcher == "pristine"]
    assert written
    bad = [o for o in written if not (o.reapply_ok and o.revert_ok)]
    assert not bad, _show(bad)
    applied = [o for o in outcomes if o.matcher == "applied"]
    assert applied and all(o.revert_ok for o in applied), _show(
        [o for o in applied if not o.revert_ok])


def test_refusals_where_git_applies_are_proven_ambiguous(
        outcomes: list[diffpatch_corpus.Outcome]) -> None:
    refused = [o for o in outcomes if o.matcher in ("conflict", "partial", "error")
               and o.git_forward]
    bad = [o for o in refused if "ambiguous" not in o.note]
    assert not bad, _show(bad)


def test_already_applied_agrees_with_git_reverse(outcomes: list[diffpatch_corpus.Outcome]) -> None:
    bad = [o for o in outcomes if o.category == "matcher: already applied; git -R refuses"]
    assert not bad, _show(bad)


def _case(corpus: diffpatch_corpus.Corpus, form: str, old: str, path: str, target: str) \
        -> tuple[FilePatch, bytes | None]:
    (patch,) = [p for p in corpus.patches if (p.form, p.old, p.path) == (form, old, path)]
    (parsed,) = parse_patch(patch.text, origin=path)
    return parsed, corpus.releases[target].get(path)


OPS_INFO = ("vllm_ascend/_cann_ops_custom/vendors/vllm-ascend/op_impl/ai_core/tbe/config/"
            "ascend910b/aic-ascend910b-ops-info.json")


@pytest.mark.parametrize("form, path", [
    ("git -U1", "vllm_ascend/distributed/kv_transfer/__init__.py"),
    ("git -U3", OPS_INFO)])
def test_the_reported_duplications_are_refused_as_ambiguous(
        corpus: diffpatch_corpus.Corpus, form: str, path: str) -> None:
    """Issue 12's cases: 0.16.0rc1 -> 0.17.0rc1 on 0.15.0rc1 registered the connector twice
    and duplicated a 148-line block; git apply does the same. Now: a conflict naming where."""
    patch, current = _case(corpus, form, "0.16.0rc1", path, "0.15.0rc1")
    analysis = analyze(patch, current)
    assert analysis.state is FileState.CONFLICT
    assert "ambiguous placement" in analysis.summary()


def test_cpu_binding_hunks_agree_with_git(corpus: diffpatch_corpus.Corpus, tmp_path: Path) -> None:
    """Issue 12: the -U1 patch of cpu_binding.py (0.18.0 -> 0.19.1rc1) on 0.18.0rc1 called a
    hunk applied while its removed lines were still there."""
    form, path = "git -U1", "vllm_ascend/cpu_binding.py"
    patch, current = _case(corpus, form, "0.18.0", path, "0.18.0rc1")
    assert current is not None
    analysis = analyze(patch, current)
    lines = current.decode().splitlines()
    for hunk, report in zip(patch.hunks, analysis.hunks, strict=True):
        removed = [text for kind, text, _ in hunk.ops if kind == "-"]
        if report.state is FileState.APPLIED:
            assert not all(line in lines for line in removed) or not removed, hunk.header
    (raw,) = [p for p in corpus.patches if (p.form, p.old, p.path) == (form, "0.18.0", path)]
    git_ok, git_out = diffpatch_corpus.GitApply(tmp_path / "w").run(raw, current)
    if analysis.state is FileState.PRISTINE:
        assert git_ok and apply_forward(analysis) == git_out
    else:
        assert not git_ok or "ambiguous" in analysis.summary()


def test_revert_refuses_an_upstream_change_that_matches_record(
        corpus: diffpatch_corpus.Corpus, outcomes: list[diffpatch_corpus.Outcome],
        tmp_path: Path) -> None:
    """Issue 12: a 0.19.1rc1 file already holds the 0.18.0 change upstream and matches
    RECORD; revert 'reversed' it. Without a ledger record nothing proves the patch is ours."""
    from ascendpatch.env.standins import write_distribution
    from tests.kit import run_cli, tree_digest, write_manifest

    upstream = [p for p in corpus.patches
                if (p.old, p.new, p.form) == ("0.18.0rc1", "0.18.0", "git -U3") and
                analyze(parse_patch(p.text, origin="x")[0],
                        corpus.releases["0.19.1rc1"].get(p.path)).state is FileState.APPLIED]
    assert upstream, "no 0.18.0 change is upstream in 0.19.1rc1: the corpus changed"
    patch = upstream[0]
    site = tmp_path / "site"
    site.mkdir()
    write_distribution(site, "vllm-ascend", "0.19.1rc1", corpus.releases["0.19.1rc1"], (),
                       summary="release files", installer="pip")
    (tmp_path / "fix.patch").write_bytes(patch.text)
    manifest = write_manifest(tmp_path / "m.yaml", [{
        "id": "upstream", "title": "an upstream change", "kind": "diff",
        "distribution": "vllm-ascend", "versions": ">=0.18", "source": "fix.patch"}])
    before = tree_digest(site)
    result = run_cli("--site-packages", site, "--manifest", manifest, "revert")
    assert result.code == 1, result.out + result.err
    assert patch.path in result.out and "RECORD" in result.out and "fix:" in result.out
    assert tree_digest(site) == before
