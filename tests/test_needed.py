"""``needed_if``: a diff artifact decides a release the catalog does not list by its content.

The condition is read from the syntax tree of the release's file; apply / status / revert
then use the variant whose patch fits, say "not needed (fixed upstream)", or fail with the
port command to run. Fake distributions in temp dirs; the real releases are in
test_catalog.py and test_porting.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascendpatch.manifest.needed import Condition, evaluate
from ascendpatch.patchfile.diffwrite import patch_text
from tests.kit import TRACEBACK, make_dist, run_cli, tree_digest, write_manifest

OP = Condition("demo/sampler.py", ("torch_npu.npu_top_k_top_p",))

AFFECTED = """\
import torch_npu


def fused(logits, k, p):
    if p is None and k is None:
        return logits
    return torch_npu.npu_top_k_top_p(logits, k=k, p=p)


def other():
    return 1
"""
PATCHED = AFFECTED.replace(
    "    return torch_npu.npu_top_k_top_p(logits, k=k, p=p)\n",
    "    try:\n        return torch_npu.npu_top_k_top_p(logits, k=k, p=p)\n"
    "    except Exception:\n        return logits\n")
FIXED_UPSTREAM = """\
import torch_npu


def fused(logits, k, p):
    # npu_top_k_top_p is slow: sort+mask instead (torch_npu.npu_top_k_top_p(x) no more)
    text = "torch_npu.npu_top_k_top_p(logits)"
    return logits
"""
REWRITTEN = """\
import torch_npu


def fused(logits, k, p, reduce=False):
    if reduce:
        logits = logits * 2
    return torch_npu.npu_top_k_top_p(logits, k=k, p=p)
"""


@pytest.mark.parametrize("source, needed", [
    (AFFECTED, True),
    (PATCHED, False),  # inside try/except: guarded
    ("import torch_npu\ntry:\n    x = 1\nfinally:\n    torch_npu.npu_top_k_top_p(x)\n", True),
    ("import torch_npu\ntry:\n    torch_npu.npu_top_k_top_p(1)\nfinally:\n    pass\n", True),
    (FIXED_UPSTREAM, False),  # a comment and a string are no call
    ("from torch_npu import npu_top_k_top_p\nnpu_top_k_top_p(1)\n", False),  # other name
])
def test_condition_reads_calls_from_the_syntax_tree(source: str, needed: bool) -> None:
    assert evaluate(OP, source.encode()).needed is needed


def test_unguarded_calls_are_named_with_their_line() -> None:
    finding = evaluate(OP, AFFECTED.encode())
    assert finding.reason == ("demo/sampler.py calls torch_npu.npu_top_k_top_p at line 7 "
                              "without a guard")


@pytest.mark.parametrize("content, reason", [
    (None, "demo/sampler.py is not in this release"),
    (b"def broken(:\n", "demo/sampler.py cannot be parsed as Python"),
])
def test_undecidable_content_is_not_called_fixed(content: bytes | None, reason: str) -> None:
    finding = evaluate(OP, content)
    assert finding.needed is None and finding.reason.startswith(reason)


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    (tmp_path / "fix.patch").write_text(patch_text("demo fix", [
        ("demo/sampler.py", AFFECTED.encode(), PATCHED.encode())]))
    return write_manifest(tmp_path / "m.yaml", [{
        "id": "demo-fix", "title": "demo fix", "kind": "diff", "distribution": "demo",
        "needed_if": {"file": "demo/sampler.py", "calls_unguarded": ["torch_npu.npu_top_k_top_p"]},
        "variants": [{"versions": ">=1.0,<2.0", "source": "fix.patch",
                      "targets": ["demo/sampler.py"]}],
    }])


RECAP_CHANGED = "recap: ok=0 changed=1 skipped=0 failed=0\n"  # apply's recap (stderr)
RECAP_OK = "recap: ok=1 changed=0 skipped=0 failed=0\n"


def _cli(site: Path, catalog: Path, *args: str) -> tuple[int, str]:
    result = run_cli("--site-packages", site, "--manifest", catalog, *args)
    return result.code, result.out + result.err


def test_unknown_release_with_the_same_bug_gets_the_nearest_patch(site: Path,
                                                                  catalog: Path) -> None:
    make_dist(site, "demo", "2.0", {"demo/__init__.py": "", "demo/sampler.py": AFFECTED})
    assert _cli(site, catalog, "apply") == (0, "[OK] Applied demo fix\n" + RECAP_CHANGED)
    assert (site / "demo/sampler.py").read_text() == PATCHED
    before = tree_digest(site)
    assert _cli(site, catalog, "apply") == (0, "[OK] demo fix already applied\n" + RECAP_OK)
    assert tree_digest(site) == before
    code, out = _cli(site, catalog, "status")
    assert code == 0 and "applied" in out
    assert _cli(site, catalog, "revert")[0] == 0
    assert (site / "demo/sampler.py").read_text() == AFFECTED


def test_unknown_release_fixed_upstream_is_not_needed(site: Path, catalog: Path) -> None:
    make_dist(site, "demo", "2.0", {"demo/__init__.py": "", "demo/sampler.py": FIXED_UPSTREAM})
    before = tree_digest(site)
    for command in ("apply", "status"):
        code, out = _cli(site, catalog, command)
        assert code == 0, out
        assert out.startswith("[SKIP] demo fix: not needed for demo 2.0 (not in the catalog, "
                              "decided by content): fixed upstream: demo/sampler.py calls none "
                              "of torch_npu.npu_top_k_top_p"), out
    assert tree_digest(site) == before


def test_unknown_release_where_no_patch_fits_fails_with_the_port_command(
        site: Path, catalog: Path) -> None:
    make_dist(site, "demo", "2.0", {"demo/__init__.py": "", "demo/sampler.py": REWRITTEN})
    before = tree_digest(site)
    code, out = _cli(site, catalog, "apply")
    assert code == 1
    assert out.splitlines()[-1] == "recap: ok=0 changed=0 skipped=0 failed=1"
    assert out.splitlines()[0] == (
        "[FAIL] demo fix: demo 2.0 is not in the catalog and needs the fix by hand: "
        "demo/sampler.py calls torch_npu.npu_top_k_top_p at line 7 without a guard, and no "
        f"variant's patch fits; fix: ascendpatch --manifest {catalog} port demo-fix --to 2.0 "
        "--write")  # the hint repeats the --manifest given (issue 13)
    assert tree_digest(site) == before


def test_the_skips_fix_is_data_in_json(site: Path, catalog: Path) -> None:
    """The port command is the item's ``fix``, not words glued into its message."""
    make_dist(site, "demo", "2.0", {"demo/__init__.py": "", "demo/sampler.py": REWRITTEN})
    result = run_cli("--site-packages", site, "--manifest", catalog, "apply", "--json")
    (item,) = json.loads(result.out)["results"]
    assert item["fix"] == f"ascendpatch --manifest {catalog} port demo-fix --to 2.0 --write"
    assert item["message"].endswith("; fix: " + item["fix"])
    assert item["message"].count("; fix: ") == 1


def test_a_covered_release_is_still_decided_by_its_variant(site: Path, catalog: Path) -> None:
    make_dist(site, "demo", "1.5", {"demo/__init__.py": "", "demo/sampler.py": AFFECTED})
    assert _cli(site, catalog, "apply") == (0, "[OK] Applied demo fix\n" + RECAP_CHANGED)


@pytest.mark.parametrize("needed_if, problem", [
    ({"file": "demo/sampler.py", "calls_unguarded": ["torch_npu.npu top"]},
     "needed_if.calls_unguarded[0]: 'torch_npu.npu top' is not a dotted Python name"),
    ({"calls_unguarded": ["x.y"]}, "needed_if.file: required key is missing"),
])
def test_a_malformed_condition_is_refused(tmp_path: Path, site: Path,
                                          needed_if: dict[str, object], problem: str) -> None:
    manifest = write_manifest(tmp_path / "bad.yaml", [{
        "id": "demo-fix", "title": "demo fix", "kind": "diff", "distribution": "demo",
        "needed_if": needed_if, "versions": ">=1.0", "source": "fix.patch"}])
    result = run_cli("--site-packages", site, "--manifest", manifest, "status")
    assert result.code == 2 and problem in result.err, result.err


DEEP = "x = " + " + ".join(["1"] * 2500) + "\n"  # parses; 89ee836's recursive visitor crashed


@pytest.mark.parametrize(("content", "allowed"), [
    ((DEEP + AFFECTED).encode(), {True}),
    ((DEEP + FIXED_UPSTREAM).encode(), {False}),
    # past Python 3.11's ast.parse limit (undecided); 3.10's parser reads it (no call: False)
    (b"x = " + b" + ".join([b"1"] * 6000) + b"\n", {None, False}),
    (b"x = " + b"(" * 5000 + b"1" + b")" * 5000 + b"\n", {None}),
    (b"#" * (5 * 1024 * 1024), {None}),  # larger than any source file: not parsed
])
def test_hostile_source_is_read_or_undecided_never_a_crash(content: bytes,
                                                           allowed: set[bool | None]) -> None:
    assert evaluate(OP, content).needed in allowed


def test_a_deeply_nested_release_file_through_the_cli(site: Path, catalog: Path) -> None:
    """A target's file is untrusted input: a 6,000-term expression is "cannot tell" (the
    release needs a port), one line and exit 1, not exit 3 with a RecursionError."""
    deep = "x = " + " + ".join(["1"] * 6000) + "\n"
    make_dist(site, "demo", "2.0", {"demo/__init__.py": "", "demo/sampler.py": deep})
    before = tree_digest(site)
    for command in ("apply", "status", "plan"):
        code, out = _cli(site, catalog, command)
        assert code in (0, 1) and TRACEBACK not in out and "unexpected error" not in out, out
    assert tree_digest(site) == before
