"""The sampler fallback on the real wheels of every release it claims (integration tier).

Each release's wheel is downloaded from the index (cached outside the checkout), installed with
pip ``--no-deps`` into a throwaway venv, and driven through a real ``python -m ascendpatch``
process: apply, compile, guard in the syntax tree, idempotent re-apply, revert to RECORD.
"""

from __future__ import annotations

import ast
import hashlib
import py_compile
from pathlib import Path

import pytest
from packaging.version import Version

from ascendpatch.env.target import from_python, from_site_packages
from ascendpatch.manifest import loader
from tests.kit import run_process, tree_digest, wheels

pytestmark = pytest.mark.integration

GUARD = "_ascendpatch_top_k_top_p"
FALLBACK = "_ascendpatch_top_k_top_p_pytorch"
NPU_FUNCS = ("_apply_top_k_top_p_ascendc", "_apply_top_k_top_p_torch_npu")
OPERATORS = ("torch.ops._C_ascend.npu_apply_top_k_top_p", "torch_npu.npu_top_k_top_p")


def _calls(node: ast.AST) -> list[str]:
    return [ast.unparse(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)]


def assert_guard_at_selection_point(source: str) -> None:
    """Every call of the fused operator goes through the guard; the guard calls it inside a
    try whose handler disables it, and falls back to vLLM's algorithm."""
    tree = ast.parse(source)
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    (npu_name,) = [name for name in NPU_FUNCS if name in funcs]
    guard = funcs[GUARD]
    ops_in_guard = [c for c in _calls(guard) if c in OPERATORS]
    assert len(ops_in_guard) == 1, "the guard calls the operator once"
    (attempt,) = [n for n in ast.walk(guard) if isinstance(n, ast.Try)]
    assert ops_in_guard[0] in _calls(attempt.body[0])  # inside the try
    (handler,) = attempt.handlers
    assert handler.type is not None and ast.unparse(handler.type) == "Exception"
    assert "_ascendpatch_topk_topp_disable" in _calls(handler)
    assert isinstance(guard.body[-1], ast.Return) and _calls(guard.body[-1]) == [FALLBACK]
    # nothing else in the file calls the operator directly; the fused function uses the guard
    outside = [c for name, f in funcs.items() if name != GUARD for c in _calls(f)]
    assert not any(c in OPERATORS for c in outside)
    assert GUARD in _calls(funcs[npu_name])
    selector = [n for n in tree.body if isinstance(n, ast.Assign)
                and ast.unparse(n.targets[0]) == "apply_top_k_top_p"]
    assert selector and npu_name in ast.unparse(selector[0].value)
    cache = [n for n in tree.body if isinstance(n, ast.Assign)
             and ast.unparse(n.targets[0]) == "_ASCENDPATCH_TOPK_TOPP_OP"]
    assert cache and ast.unparse(cache[0].value) == "None"  # probed at first use, not import


def _declared(version: str) -> tuple[str, str]:
    """The (before, after) sha256 the catalog declares for this release's sampler."""
    artifact = loader.load("default").artifact("sampler-topk-topp-fallback")
    assert artifact is not None
    variant = artifact.variant_for(Version(version))
    assert variant is not None, f"no catalog variant covers {version}"
    hashes = variant.sha256[wheels.SAMPLER]
    (before,), (after,) = hashes.before, hashes.after
    return before, after


def _venv_with(tmp_path: Path, version: str) -> Path:
    return wheels.venv_with(tmp_path / f"venv-{version}", version)


@pytest.mark.parametrize("version", wheels.AFFECTED)
def test_fallback_applies_on_the_real_wheel(tmp_path: Path, version: str) -> None:
    python = _venv_with(tmp_path, version)
    site = wheels.site_packages(python)
    sampler = site / wheels.SAMPLER
    record = from_python(python).get("vllm-ascend")
    assert record is not None
    pristine_sha = record.record[wheels.SAMPLER].sha256

    first = run_process("--python", python, "apply")
    assert first.code == 0, first.out + first.err
    assert first.out.strip() == "[OK] Applied sampler top_k/top_p fallback patch"
    py_compile.compile(str(sampler), doraise=True, cfile=str(tmp_path / "check.pyc"))
    assert_guard_at_selection_point(sampler.read_text())
    assert _declared(version) == (pristine_sha, hashlib.sha256(sampler.read_bytes()).hexdigest())

    before = tree_digest(site)
    second = run_process("--python", python, "apply")
    assert second.code == 0
    assert second.out.strip() == "[OK] sampler top_k/top_p fallback patch already applied"
    assert tree_digest(site) == before

    reverted = run_process("--python", python, "revert")
    assert reverted.code == 0, reverted.out
    assert hashlib.sha256(sampler.read_bytes()).hexdigest() == pristine_sha


@pytest.mark.parametrize("version", wheels.UNAFFECTED)
def test_unaffected_releases_are_skipped_and_unchanged(tmp_path: Path, version: str) -> None:
    python = _venv_with(tmp_path, version)
    site = wheels.site_packages(python)
    before = tree_digest(site)
    result = run_process("--python", python, "apply")
    assert result.code == 0, result.err
    assert result.out.startswith(f"[SKIP] sampler top_k/top_p fallback patch: not needed for "
                                 f"vllm-ascend {version}")
    assert tree_digest(site) == before


def _sdist_site(tmp_path: Path, version: str) -> Path:
    """The sdist's package laid out as installed (no build: the C extensions need CANN)."""
    site = tmp_path / "site-packages"
    site.mkdir()
    wheels.install_from_sdist(wheels.sdist("vllm-ascend", version), site, version)
    return site


@pytest.mark.parametrize("version", wheels.SDIST_AFFECTED)
def test_fallback_applies_on_the_real_sdist(tmp_path: Path, version: str) -> None:
    site = _sdist_site(tmp_path, version)
    sampler = site / wheels.SAMPLER
    original = sampler.read_bytes()
    assert original == wheels.sdist_member(wheels.sdist("vllm-ascend", version),
                                            wheels.SAMPLER)
    if version == "0.23.0.post1":
        assert original == wheels.wheel_member("0.23.0", wheels.SAMPLER)  # byte-identical

    first = run_process("--site-packages", site, "apply")
    assert first.code == 0, first.out + first.err
    assert first.out.strip() == "[OK] Applied sampler top_k/top_p fallback patch"
    py_compile.compile(str(sampler), doraise=True, cfile=str(tmp_path / "check.pyc"))
    assert_guard_at_selection_point(sampler.read_text())
    assert _declared(version) == (hashlib.sha256(original).hexdigest(),
                                  hashlib.sha256(sampler.read_bytes()).hexdigest())
    before = tree_digest(site)
    assert "already applied" in run_process("--site-packages", site, "apply").out
    assert tree_digest(site) == before
    assert run_process("--site-packages", site, "revert").code == 0
    dist = from_site_packages(site).get("vllm-ascend")
    assert dist is not None
    assert sampler.read_bytes() == original  # the sdist's own bytes
    assert hashlib.sha256(original).hexdigest() == dist.record[wheels.SAMPLER].sha256


@pytest.mark.parametrize("version", wheels.FIXED_UPSTREAM)
def test_release_fixed_upstream_is_not_needed_by_content(tmp_path: Path, version: str) -> None:
    site = _sdist_site(tmp_path, version)
    artifact = loader.load("default").artifact("sampler-topk-topp-fallback")
    assert artifact is not None and artifact.variant_for(Version(version)) is None
    before = tree_digest(site)
    for command in ("apply", "status"):
        result = run_process("--site-packages", site, command)
        assert result.code == 0, result.out + result.err
        assert result.out.startswith(
            f"[SKIP] sampler top_k/top_p fallback patch: not needed for vllm-ascend {version} "
            "(not in the catalog, decided by content): fixed upstream: "
            "vllm_ascend/sample/sampler.py calls none of torch_npu.npu_top_k_top_p"), result.out
    assert tree_digest(site) == before
