"""`lock` and `install --dry-run` say why a stack cannot be resolved, in plain words.

First with small wheels in a local wheelhouse and real pip / pip-compile (a conflict between
the stack's own pins, found before resolving; one deeper in the tree, found by pip's resolver
and shown without its traceback). Then every bundled stack manifest against the real index:
the releases of vllm-ascend and of vllm on PyPI pin different torch builds (vllm-ascend
installs vllm from source on Ascend images), and some pins have no wheel at all.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ascendpatch.manifest import loader
from tests.kit import Run, build_wheel, run_cli, tree_digest, wheels, write_manifest

pytestmark = pytest.mark.integration


@pytest.fixture
def house(tmp_path: Path) -> Path:
    folder = tmp_path / "house"
    build_wheel(folder, "cv", "4.11")
    build_wheel(folder, "cv", "4.13")
    build_wheel(folder, "asc", "1.0", ["cv<=4.11"])
    build_wheel(folder, "vl", "1.0", ["cv>=4.13"])
    build_wheel(folder, "mid-a", "1.0", ["cv<=4.11"])
    build_wheel(folder, "mid-b", "1.0", ["cv>=4.13"])
    build_wheel(folder, "top-a", "1.0", ["mid-a"])
    build_wheel(folder, "top-b", "1.0", ["mid-b"])
    return folder


def _stack(tmp_path: Path, **pins: str) -> Path:
    return write_manifest(tmp_path / "stack.yaml", [], protected=["torch"],
                          stack={"packages": pins})


def _run(python: Path, manifest: Path, house: Path, *args: str) -> Run:
    return run_cli("--python", python, "--manifest", manifest, *args, "--offline",
                   "--wheelhouse", house)


def test_pins_that_disagree_are_named_before_resolving(tmp_path: Path, house: Path) -> None:
    python = wheels.make_venv(tmp_path / "venv")
    manifest = _stack(tmp_path, asc="==1.0", vl="==1.0")
    before = tree_digest(tmp_path / "venv")
    expected = ("[FAIL] conflict: asc 1.0 needs cv<=4.11 and vl 1.0 needs cv>=4.13; no release "
                "of cv on the index satisfies both; nothing was {}; fix: pin releases of asc "
                "and vl that agree, or list one of them under the manifest's no_deps "
                "(ascendpatch installs it with pip --no-deps and reports what it leaves unmet)")
    dry = _run(python, manifest, house, "install", "--dry-run")
    assert (dry.code, dry.out.strip()) == (1, expected.format("changed"))
    lock = _run(python, manifest, house, "lock", "-o", str(tmp_path / "stack.lock"))
    assert (lock.code, lock.out.strip()) == (1, expected.format("locked"))
    assert not (tmp_path / "stack.lock").exists()
    assert tree_digest(tmp_path / "venv") == before


def test_a_deeper_conflict_is_pips_own_words_without_traceback(tmp_path: Path,
                                                              house: Path) -> None:
    python = wheels.make_venv(tmp_path / "venv")
    manifest = _stack(tmp_path, **{"top-a": "==1.0", "top-b": "==1.0"})
    dry = _run(python, manifest, house, "install", "--dry-run")
    assert dry.code == 1
    assert "conflicting requirements: mid-a 1.0 needs cv<=4.11; mid-b 1.0 needs cv>=4.13" \
        in dry.err, dry.err
    assert "Traceback" not in dry.err and len(dry.err.strip().splitlines()) == 1


def test_the_refusal_advice_names_an_option_that_exists(tmp_path: Path) -> None:
    folder = tmp_path / "house"
    build_wheel(folder, "torch", "2.1.0")
    build_wheel(folder, "torch", "2.5.0")
    build_wheel(folder, "needs-torch", "1.0", ["torch>=2.5"])
    python = wheels.make_venv(tmp_path / "venv")
    wheels.pip_install(python, "--no-index", "--find-links", str(folder), "torch==2.1.0")
    result = _run(python, _stack(tmp_path), folder, "install", "needs-torch")
    assert result.code == 1
    assert "or list needs-torch under the manifest's no_deps (installed with pip --no-deps)" \
        in result.out
    assert "install it with --no-deps" not in result.out


# --------------------------------------------------------------------------- bundled stacks

TORCH_PAIRS = {"0.11.0": ("2.7.1", "2.8.0"), "0.13.0": ("2.8.0", "2.9.0"),
               "0.18.0": ("2.9.0", "2.10.0"), "0.23.0": ("2.10.0", "2.11.0")}
NO_WHEEL = {"vllm-ascend-0.23.0.post1": "vllm-ascend==0.23.0.post1",
            "muse-glimmer-w8a8": "vllm-ascend==0.22.1rc2"}
STACKS = [n for n in loader.bundled_names() if loader.load(n).stack.packages]


def test_every_bundled_stack_is_covered() -> None:
    assert set(STACKS) == {f"vllm-ascend-{v}" for v in TORCH_PAIRS} | set(NO_WHEEL)


def _expected(name: str) -> list[str]:
    if name in NO_WHEEL:
        return [f"[FAIL] cannot read the metadata of the stack's pins from wheels (no wheel on "
                f"the index satisfies {NO_WHEEL[name]} (it has: "]
    version = name.removeprefix("vllm-ascend-")
    ours, theirs = TORCH_PAIRS[version]
    lines = [f"[FAIL] conflict: vllm-ascend {version} needs torch=={ours} and vllm {version} "
             f"needs torch=={theirs}; no release of torch on the index satisfies both"]
    if version == "0.18.0":  # issue 13's example
        lines.append("[FAIL] conflict: vllm-ascend 0.18.0 needs opencv-python-headless<=4.11.0.86"
                     " and vllm 0.18.0 needs opencv-python-headless>=4.13.0; no release of "
                     "opencv-python-headless on the index satisfies both")
    return lines


@pytest.mark.parametrize("name", STACKS)
def test_bundled_stack_lock_and_install_dry_run(tmp_path: Path, name: str) -> None:
    """Real resolution input from the real index; each command answers in seconds."""
    python = wheels.make_venv(tmp_path / "venv")
    before = tree_digest(tmp_path / "venv")
    for args in (["lock", "-o", str(tmp_path / "stack.lock")], ["install", "--dry-run"]):
        started = time.monotonic()
        result = run_cli("--python", python, "--manifest", name, *args)
        took = time.monotonic() - started
        text = result.out + result.err
        assert result.code == 1, text
        for line in _expected(name):
            assert line in text, text
        assert "Traceback" not in text
        print(f"{name} {args[0]}: {took:.1f} s")  # noqa: T201 (timings, shown with pytest -s)
    assert not (tmp_path / "stack.lock").exists()
    assert tree_digest(tmp_path / "venv") == before
