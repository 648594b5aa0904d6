"""The engine against ``git apply`` on real vllm-ascend release diffs (integration tier).

The corpus is built here from real wheels (see tests/engine_corpus.py): per-file patches
between consecutive releases of two chains (0.15.0rc1 -> 0.16.0rc1 -> 0.17.0rc1 and
0.18.0rc1 -> 0.18.0 -> 0.19.1rc1) in four forms, applied to their own release, re-applied to
the release they lead to, and cross-applied to the neighbours. A sample keeps this under a
few minutes; ``ASCENDPATCH_ENGINE_CORPUS=full`` runs every file (for measuring).

What must hold, and the only disagreement allowed:

* own release: the engine applies and writes git's bytes (``-U0``: or refuses as ambiguous);
* re-apply: the engine says "already applied", and ``git apply -R --check`` agrees;
* whenever the engine applies: git applies too, to the same bytes; the result is "applied"
  on the next look and reverses to the input byte for byte;
* whenever the engine says applied, reversing and re-applying gives the file back;
* the engine refuses where git applies only when it proves the placement ambiguous
  (after git's placement the patch would still apply, or the result would not reverse).
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from tests import engine_corpus

pytestmark = pytest.mark.integration

PER_PAIR = None if os.environ.get("ASCENDPATCH_ENGINE_CORPUS") == "full" else 30


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[engine_corpus.Outcome]:
    if shutil.which("git") is None or shutil.which("diff") is None:
        pytest.fail("the differential test needs git and diff (apt-get install git diffutils)")
    work = tmp_path_factory.mktemp("corpus")
    corpus = engine_corpus.build(work / "build")
    patches = engine_corpus.sample(corpus.patches, PER_PAIR)
    done = engine_corpus.run(corpus, patches, work / "apply")
    figures = engine_corpus.table(done)
    (work / "figures.txt").write_text(figures)
    sys.stdout.write("\n" + figures + "\n")  # the agreement figures (pytest -s shows them)
    return done


def _show(items: list[engine_corpus.Outcome]) -> str:
    return "\n".join(f"{o.patch.form} {o.patch.old}->{o.patch.new} on {o.target}: "
                     f"{o.patch.path}: {o.category}: {o.note[:160]}" for o in items[:10])


def test_corpus_covers_every_form_and_relation(outcomes: list[engine_corpus.Outcome]) -> None:
    assert {o.patch.form for o in outcomes} == set(engine_corpus.FORMS)
    assert {o.relation for o in outcomes} == {"own", "reapply", "neighbour"}
    assert any(o.patch.text.count(b"\n@@ ") > 1 for o in outcomes)  # multi-hunk patches
    assert any(o.patch.form == "diff -uN" and b"1970-01-01" in o.patch.text for o in outcomes)


def test_own_release_gives_git_bytes(outcomes: list[engine_corpus.Outcome]) -> None:
    own = [o for o in outcomes if o.relation == "own"]
    bad = [o for o in own if o.category != "both apply, identical bytes" and not
           (o.patch.form == "git -U0" and "ambiguous" in o.note)]
    assert not bad, _show(bad)


def test_reapply_is_already_applied(outcomes: list[engine_corpus.Outcome]) -> None:
    again = [o for o in outcomes if o.relation == "reapply"]
    bad = [o for o in again if o.category != "engine: already applied; git -R agrees" and not
           (o.patch.form == "git -U0" and "ambiguous" in o.note)]
    assert not bad, _show(bad)


def test_engine_never_writes_what_git_would_not(outcomes: list[engine_corpus.Outcome]) -> None:
    bad = [o for o in outcomes if o.category in ("engine applies, git refuses",
                                                "both apply, different bytes")]
    assert not bad, _show(bad)


def test_every_write_reapplies_as_applied_and_reverts_byte_exact(
        outcomes: list[engine_corpus.Outcome]) -> None:
    written = [o for o in outcomes if o.engine == "pristine"]
    assert written
    bad = [o for o in written if not (o.reapply_ok and o.revert_ok)]
    assert not bad, _show(bad)
    applied = [o for o in outcomes if o.engine == "applied"]
    assert applied and all(o.revert_ok for o in applied), _show(
        [o for o in applied if not o.revert_ok])


def test_refusals_where_git_applies_are_proven_ambiguous(
        outcomes: list[engine_corpus.Outcome]) -> None:
    refused = [o for o in outcomes if o.engine in ("conflict", "partial", "error")
               and o.git_forward]
    bad = [o for o in refused if "ambiguous" not in o.note]
    assert not bad, _show(bad)


def test_already_applied_agrees_with_git_reverse(outcomes: list[engine_corpus.Outcome]) -> None:
    bad = [o for o in outcomes if o.category == "engine: already applied; git -R refuses"]
    assert not bad, _show(bad)
