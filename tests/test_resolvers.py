"""uv and pip decide alike: the same pins, the same refusals, the same requirement chains.

Issue 27 item 1: `--resolver uv` (ascendpatch[fast]) must only be faster. Every bundled stack
is locked with real pip-compile and real uv against the real index, for a target whose
protected packages are labelled stand-ins of the image's NPU stack at the stack's pins; the
install cases of the torch guard (tests/kit/torchguard.py) are planned with both from a
wheelhouse of small wheels, and their --json documents compared. ascendpatch's own cache (the
pip-tools venv, the pre-flight's reports) and pip's are kept in the test cache; pip's HTTP cache
stays empty on this machine's network, whose proxy answers without cache headers, so every pip
run downloads again (tests/kit/prebuild.py).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from ascendpatch import hashing
from ascendpatch.env import standins
from ascendpatch.manifest import loader
from tests.kit import TRACEBACK, Run, build_wheel, isolated, run_cli, torchguard, wheels

pytestmark = pytest.mark.integration

WHEEL_STACKS = ["vllm-ascend-0.11.0", "vllm-ascend-0.13.0", "vllm-ascend-0.18.0",
                "vllm-ascend-0.23.0"]
NO_WHEEL = {"vllm-ascend-0.23.0.post1": "vllm-ascend==0.23.0.post1",
            "muse-glimmer-w8a8": "vllm-ascend==0.22.1rc2"}
PIN = re.compile(r"^([a-z0-9][a-z0-9._-]*)==(\S+)", re.MULTILINE)


# Two at a time, the short one (0.11.0: one minute with pip-compile, the others three or four)
# last, so that the two-core machine is busy to the end (one by one, these locks were a quarter
# of the whole suite's time). --durations shows all of it as the setup of the first test,
# [vllm-ascend-0.11.0], though that stack is locked last.
LOCK_ORDER = sorted(WHEEL_STACKS, key=lambda name: name == "vllm-ascend-0.11.0")
LOCK_TIMEOUT = 900.0  # one lock: 5 min with pip-compile on a loaded machine


def use_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_CACHE_DIR", str(wheels.CACHE / "pip-http"))
    monkeypatch.setenv("ASCENDPATCH_CACHE", str(wheels.CACHE / "ascendpatch-cache"))


@pytest.fixture
def cached(monkeypatch: pytest.MonkeyPatch) -> None:
    use_caches(monkeypatch)


@pytest.fixture(scope="module")
def stack_locks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, tuple[Run, str]]]:
    """Every wheel stack locked with uv and with pip by the real CLI, each a process of its own,
    two stacks at a time. Most of a stack's pip lock is one core's work: pip-compile builds the
    metadata of arctic-inference's sdist, which installs torch 2.7.0 into a build environment."""
    root = tmp_path_factory.mktemp("stack-locks")
    with isolated(root / "home"), pytest.MonkeyPatch.context() as monkeypatch:
        use_caches(monkeypatch)
        targets = {name: stack_target(root / name, name) for name in LOCK_ORDER}

        def both(name: str) -> dict[str, tuple[Run, str]]:
            return {resolver: lock_process(targets[name], name, resolver,
                                           root / name / f"{resolver}.lock")
                    for resolver in ("uv", "pip")}

        with ThreadPoolExecutor(max_workers=2) as pool:
            return dict(zip(LOCK_ORDER, pool.map(both, LOCK_ORDER), strict=True))


def stack_target(tmp_path: Path, name: str) -> Path:
    """A venv holding labelled stand-ins of the protected packages the stack pins."""
    manifest = loader.load(name)
    python = wheels.make_venv(tmp_path / "target")
    protected = {canonicalize_name(p) for p in manifest.protected}
    for pin in manifest.stack.packages:
        if canonicalize_name(pin.name) in protected:
            version = standins.version_satisfying(SpecifierSet(pin.specifier))
            standins.write_distribution(wheels.site_packages(python), pin.name, version,
                                        standins.modules_for(pin.name, version))
    return python


def lock_process(python: Path, name: str, resolver: str, out: Path) -> tuple[Run, str]:
    """``lock``, as ``python -m ascendpatch`` in a session of its own (threads can run these).

    Whatever goes wrong is this lock's Run (code -1, the reason in ``err``), for its own test to
    report; one that times out is stopped with everything it started (pip-compile, pip)."""
    argv = [sys.executable, "-m", "ascendpatch", "--json", "--python", str(python),
            "--manifest", name, "lock", "-o", str(out), "--resolver", resolver]
    try:
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL, start_new_session=True) as proc:
            try:
                stdout, stderr = proc.communicate(timeout=LOCK_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                stdout, stderr = proc.communicate()
                return Run(-1, stdout, f"{resolver} lock timed out after {LOCK_TIMEOUT:.0f} s\n"
                                       f"{stderr}"), ""
        return Run(proc.returncode, stdout, stderr), out.read_text() if out.exists() else ""
    except Exception:  # this lock's failure, not the other stacks' tests'
        return Run(-1, "", traceback.format_exc()), ""


def pins(text: str) -> set[tuple[str, str]]:
    return {(str(canonicalize_name(n)), v) for n, v in PIN.findall(text)}


def test_the_bundled_stacks_are_these() -> None:
    stacks = {n for n in loader.bundled_names() if loader.load(n).stack.packages}
    assert stacks == set(WHEEL_STACKS) | set(NO_WHEEL)


@pytest.mark.parametrize("name", WHEEL_STACKS)
def test_each_bundled_stack_locks_alike_with_pip_and_uv(
        stack_locks: dict[str, dict[str, tuple[Run, str]]], name: str) -> None:
    version = name.removeprefix("vllm-ascend-")
    by_uv, uv_text = stack_locks[name]["uv"]
    assert by_uv.code == 0, by_uv.out + by_uv.err
    assert by_uv.json["resolver"]["name"] == "uv"
    by_pip, pip_text = stack_locks[name]["pip"]
    assert by_pip.code == 0, by_pip.out + by_pip.err
    assert by_pip.json["resolver"]["name"] == "pip"
    assert pins(uv_text) == pins(pip_text)
    assert ("vllm-ascend", version) in pins(pip_text)
    # vllm is the stack's no_deps package: pinned and hashed, its dependencies not locked
    loose = [line for line in pip_text.splitlines() if line.startswith("#no-deps: ")]
    assert loose == [line for line in uv_text.splitlines() if line.startswith("#no-deps: ")]
    assert len(loose) == 1 and loose[0].startswith(f"#no-deps: vllm=={version} --hash=sha256:")
    names = {n for n, _v in pins(pip_text)}
    assert not names & {"torch", "torch-npu", "torchvision", "torchaudio", "triton-ascend"}


@pytest.mark.parametrize("name", sorted(NO_WHEEL))
def test_a_stack_without_a_wheel_says_so_with_either(tmp_path: Path, name: str) -> None:
    python = wheels.make_venv(tmp_path / "venv")
    said = {}
    for resolver in ("pip", "uv"):
        result = run_cli("--python", python, "--manifest", name, "lock", "-o",
                         tmp_path / "stack.lock", "--resolver", resolver)
        assert result.code == 1 and TRACEBACK not in result.err
        said[resolver] = result.out + result.err
    assert said["pip"] == said["uv"]
    assert f"no wheel on the index satisfies {NO_WHEEL[name]}" in said["pip"]
    assert not (tmp_path / "stack.lock").exists()


def _decision(doc: dict[str, Any]) -> list[tuple[object, ...]]:
    return [(i["id"], i["level"], i["message"], i.get("fix"), i.get("data"))
            for i in doc["results"]]


@pytest.mark.parametrize("reqs", torchguard.CASES, ids="+".join)
def test_the_torch_guard_plans_alike_with_pip_and_uv(tmp_path: Path,
                                                     reqs: tuple[str, ...]) -> None:
    world = torchguard.world(tmp_path)
    docs = {}
    for resolver in ("pip", "uv"):
        result = run_cli("--json", "--python", world["python"], "--manifest",
                         world["manifest"], "install", "--dry-run", "--offline",
                         "--wheelhouse", world["house"], "--resolver", resolver, *reqs)
        docs[resolver] = result.json
        assert docs[resolver]["resolver"]["name"] == resolver, docs[resolver]["resolver"]
    assert _decision(docs["uv"]) == _decision(docs["pip"])
    assert docs["uv"]["exit_code"] == docs["pip"]["exit_code"] == 1
    if reqs == ("chain-top",):  # the chain is named, whoever resolved
        assert docs["uv"]["results"][0]["data"]["chain"] == ["chain-top 1.0", "chain-mid 1.0",
                                                              "torch 2.5.0"]


@pytest.mark.usefixtures("cached")
def test_the_lock_help_example_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`lock --help`'s example, word for word, on the sandbox install.sh builds."""
    from ascendpatch.commands.lock import COMMAND

    monkeypatch.chdir(tmp_path)
    made = run_cli("sandbox", "./ascendpatch-sandbox", "--vllm-ascend", "0.18.0",
                   "--wheelhouse", wheels.wheel("0.18.0").parent)
    assert made.code == 0, made.out + made.err
    words = shlex.split(COMMAND.example)
    assert words[0] == "ascendpatch"
    result = run_cli(*words[1:])
    assert result.code == 0, result.out + result.err
    text = (tmp_path / "stack.lock").read_text()
    assert ("vllm-ascend", "0.18.0") in pins(text) and "#no-deps: vllm==0.18.0 " in text


@pytest.mark.usefixtures("cached")
def test_the_sdist_only_fix_works(tmp_path: Path) -> None:
    """Following the advice for 0.23.0.post1 (its wheel, built where CANN is, in a wheelhouse:
    here a labelled stand-in wheel of that name) locks the stack."""
    house = tmp_path / "house"
    build_wheel(house, "vllm-ascend", "0.23.0.post1",
                files={"vllm_ascend/__init__.py": "'''stand-in: built on an NPU host'''\n"})
    python = stack_target(tmp_path, "vllm-ascend-0.23.0.post1")
    result = run_cli("--python", python, "--manifest", "vllm-ascend-0.23.0.post1", "lock", "-o",
                     tmp_path / "stack.lock", "--wheelhouse", house, "--resolver", "uv")
    assert result.code == 0, result.out + result.err
    text = (tmp_path / "stack.lock").read_text()
    digest = hashing.sha256_file(house / "vllm_ascend-0.23.0.post1-py3-none-any.whl")
    assert f"vllm-ascend==0.23.0.post1 \\\n    --hash=sha256:{digest}" in text
    assert "#no-deps: vllm==0.23.0 --hash=sha256:" in text
