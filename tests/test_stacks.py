"""`lock` and `install --dry-run` say why a stack cannot be resolved, in plain words.

First with small wheels in a local wheelhouse and real pip / pip-compile (a conflict between
the stack's own pins, found before resolving; one deeper in the tree, found by pip's resolver
and shown without its traceback). Then every bundled stack manifest against the real index:
the releases of vllm-ascend and of vllm on PyPI pin different torch builds (vllm-ascend
installs vllm from source on Ascend images), and some pins have no wheel at all.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from ascendpatch import hashing
from ascendpatch.env import lockfile
from tests.kit import TRACEBACK, Run, build_wheel, run_cli, tree_digest, wheels, write_manifest

pytestmark = pytest.mark.integration


@pytest.fixture
def house(tmp_path: Path) -> Path:
    folder = wheels.with_pip_tools(tmp_path / "house")
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
    dry = _run(python, manifest, house, "install", "--dry-run", "--resolver", "pip")
    assert dry.code == 1
    assert "conflicting requirements: mid-a 1.0 needs cv<=4.11; mid-b 1.0 needs cv>=4.13" \
        in dry.err, dry.err
    assert TRACEBACK not in dry.err and len(dry.err.strip().splitlines()) == 1


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


def test_lock_honours_no_deps_and_the_lock_installs(tmp_path: Path, house: Path) -> None:
    """The advice of the conflict, followed: vl under no_deps is locked pinned and hashed (not
    resolved: its cv>=4.13 would clash), the rest is resolved; install --lock installs vl with
    --no-deps and reports what it leaves unmet."""
    python = wheels.make_venv(tmp_path / "venv")
    manifest = write_manifest(tmp_path / "stack.yaml", [], protected=["torch"],
                              no_deps=["vl"], stack={"packages": {"asc": "==1.0", "vl": "==1.0"}})
    lock = tmp_path / "stack.lock"
    made = _run(python, manifest, house, "lock", "-o", str(lock))
    assert made.code == 0, made.out + made.err
    text = lock.read_text()
    digest = hashing.sha256_file(house / "vl-1.0-py3-none-any.whl")
    assert f"#no-deps: vl==1.0 --hash=sha256:{digest}\n" in text
    assert "asc==1.0" in text and "cv==4.11" in text and "cv==4.13" not in text
    assert "[OK] locked 3 packages with hashes" in made.out
    other = wheels.make_venv(tmp_path / "other")
    done = _run(other, manifest, house, "install", "--lock", str(lock))
    assert done.code == 0, done.out + done.err
    assert "[OK] vl 1.0 matches ==1.0" in done.out
    assert "[WARN] vl was installed with --no-deps" in done.out and "unmet: cv>=4.13" in done.out
    site = wheels.site_packages(other)
    assert all((site / f"{n}.dist-info").is_dir() for n in ("asc-1.0", "vl-1.0", "cv-4.11"))


def test_a_lock_whose_no_deps_hash_differs_installs_nothing(tmp_path: Path, house: Path) -> None:
    python = wheels.make_venv(tmp_path / "venv")
    manifest = write_manifest(tmp_path / "stack.yaml", [], protected=["torch"],
                              no_deps=["vl"], stack={"packages": {"asc": "==1.0", "vl": "==1.0"}})
    lock = tmp_path / "stack.lock"
    assert _run(python, manifest, house, "lock", "-o", str(lock)).code == 0
    lock.write_text(re.sub(r"(#no-deps: vl==1.0 --hash=sha256:)[0-9a-f]{64}", r"\g<1>" + "0" * 64,
                           lock.read_text()))
    before = tree_digest(tmp_path / "venv")
    refused = _run(python, manifest, house, "install", "--lock", str(lock))
    assert refused.code == 1 and "THESE PACKAGES DO NOT MATCH THE HASHES" in refused.err
    assert tree_digest(tmp_path / "venv") == before
    lock.write_text(lock.read_text().replace("#no-deps: vl==1.0", "#no-deps: vl>=1.0"))
    bad = _run(python, manifest, house, "install", "--lock", str(lock))
    assert bad.code == 2 and "a no-deps line must be NAME==VERSION" in bad.err, bad.err


def test_a_pip_compile_failure_names_the_manifest_not_a_temp_file(tmp_path: Path,
                                                                  house: Path) -> None:
    python = wheels.make_venv(tmp_path / "venv")
    manifest = _stack(tmp_path, **{"top-a": "==1.0", "top-b": "==1.0"})
    for resolver, said in (("pip", "pip-compile could not resolve the stack of manifest test: "
                                    "Cannot install top-a"),
                           ("uv", "uv could not resolve the stack of manifest test: ")):
        result = _run(python, manifest, house, "lock", "-o", str(tmp_path / "stack.lock"),
                      "--resolver", resolver)
        assert result.code == 1
        assert said in result.err, result.err
        assert re.search(r"tmp\w+/", result.err) is None and ".in (line" not in result.err
        assert TRACEBACK not in result.err and len(result.err.strip().splitlines()) == 1
        assert not (tmp_path / "stack.lock").exists()


def test_the_bench_baseline_is_the_pip_compile_lock_runs(tmp_path: Path, house: Path) -> None:
    """bench/resolver.py times pip's own resolution of lock's request: pip-compile run directly
    on the input lock writes for it (commands/lock.pip_compile_argv). `lock -v --resolver pip`
    runs the same command line through env/_pipcompile.py (pip-compile taking the hashes the
    index states), with the same input (the installed protected torch as a metadata-only
    wheel, vl left to no_deps), and the baseline locks what lock locks."""
    from ascendpatch.commands.context import Context
    from ascendpatch.commands.lock import pip_compile_argv
    from ascendpatch.env import pipadapter
    from ascendpatch.env.pipadapter import Source
    from ascendpatch.env.target import from_python
    from ascendpatch.manifest import loader

    build_wheel(house, "torch", "2.1.0+cpu")
    build_wheel(house, "uses-torch", "1.0", ["torch==2.1.0"])
    python = wheels.make_venv(tmp_path / "venv")
    wheels.pip_install(python, "--no-index", "--find-links", str(house), "torch==2.1.0+cpu")
    manifest = write_manifest(tmp_path / "stack.yaml", [], protected=["torch"], no_deps=["vl"],
                              stack={"packages": {"asc": "==1.0", "uses-torch": "==1.0",
                                                  "vl": "==1.0"}})
    made = _run(python, manifest, house, "-v", "lock", "-o", str(tmp_path / "stack.lock"),
                "--resolver", "pip")
    assert made.code == 0, made.out + made.err
    script = Path(pipadapter.__file__).with_name(pipadapter.COMPILE_SCRIPT)
    ran = [line for line in made.err.splitlines() if line.startswith("$ ")
           and f" {script} " in line]
    assert len(ran) == 1, made.err
    folder = tmp_path / "input"
    folder.mkdir()
    ctx = Context(target=from_python(python), manifest=loader.load(str(manifest)), env={})
    argv = pip_compile_argv(ctx, folder, Source(wheelhouse=house, offline=True))
    lock_folder = re.search(r"-o (\S+)/lock\.txt ", ran[0])
    assert lock_folder is not None, ran[0]
    through_script = [str(Path(argv[0]).with_name("python")), str(script), *argv[1:]]
    assert ran[0].replace(lock_folder.group(1), str(folder)) == "$ " + shlex.join(through_script)
    assert (folder / "test.in").read_text().splitlines()[2:] == ["asc==1.0", "uses-torch==1.0"]
    assert "torch @ file://" in (folder / "protected.txt").read_text()
    own = subprocess.run(argv, cwd=folder, capture_output=True, text=True, check=False)
    assert own.returncode == 0, own.stderr
    compiled = _hashed_pins((tmp_path / "stack.lock").read_text().split(lockfile.HEADER)[0])
    assert _hashed_pins((folder / "lock.txt").read_text()) == compiled
    assert {pin for pin, _hashes in compiled} == {"asc==1.0", "cv==4.11", "uses-torch==1.0"}


def _hashed_pins(text: str) -> set[tuple[str, frozenset[str]]]:
    """Each NAME==VERSION of a hashed requirements file with its hashes."""
    joined = text.replace("\\\n", " ")
    found = set()
    for line in joined.splitlines():
        words = line.split()
        if words and "==" in words[0] and not line.startswith("#"):
            found.add((words[0], frozenset(w for w in words if w.startswith("--hash="))))
    return found


# --------------------------------------------------------------------------- bundled stacks
# The four release stacks with wheels lock (tests/test_resolvers.py, with pip-compile and
# with uv); these two have no wheel of their vllm-ascend pin on the index, and say so.

NO_WHEEL = {"vllm-ascend-0.23.0.post1": "vllm-ascend==0.23.0.post1",
            "muse-glimmer-w8a8": "vllm-ascend==0.22.1rc2"}
WHY = {"vllm-ascend-0.23.0.post1": (
    "the index has only an sdist of vllm-ascend 0.23.0.post1, which builds only where its NPU "
    "toolchain (CANN) is installed; ascendpatch installs wheels only; fix: build the wheel on "
    "such a host (pip wheel --no-deps vllm-ascend==0.23.0.post1 -w DIR) and pass --wheelhouse "
    "DIR, or pin a release with a wheel"),
    "muse-glimmer-w8a8": (
    "the index has no release 0.22.1rc2 of vllm-ascend at all; ascendpatch installs wheels "
    "only; fix: pin a release of vllm-ascend the index has, or put its wheel in a wheelhouse "
    "(--wheelhouse DIR)")}


@pytest.mark.parametrize("name", sorted(NO_WHEEL))
def test_a_bundled_stack_without_a_wheel_says_why(tmp_path: Path, name: str) -> None:
    """Real resolution input from the real index; each command answers in seconds."""
    python = wheels.make_venv(tmp_path / "venv")
    before = tree_digest(tmp_path / "venv")
    for args in (["lock", "-o", str(tmp_path / "stack.lock")], ["install", "--dry-run"]):
        started = time.monotonic()
        result = run_cli("--python", python, "--manifest", name, *args)
        took = time.monotonic() - started
        text = result.out + result.err
        assert result.code == 1, text
        assert (f"[FAIL] cannot read the metadata of the stack's pins from wheels (no wheel on "
                f"the index satisfies {NO_WHEEL[name]} (it has: ") in text
        assert WHY[name] in text  # the fix that works: tests/test_resolvers.py
        assert TRACEBACK not in text
        print(f"{name} {args[0]}: {took:.1f} s")  # noqa: T201 (timings, shown with pytest -s)
    assert not (tmp_path / "stack.lock").exists()
    assert tree_digest(tmp_path / "venv") == before
