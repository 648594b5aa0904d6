"""`ascendpatch install` with real pip into real venvs, from a local wheelhouse of small wheels.

The "torch" here is a tiny wheel standing in for the image's torch (protected); the tests show
that nothing ascendpatch installs can replace it.
"""

from __future__ import annotations

import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ascendpatch.env import pipdiff
from tests.kit import (
    IndexRecorder,
    Run,
    build_wheel,
    run_cli,
    torchguard,
    tree_digest,
    wheels,
    write_manifest,
)

pytestmark = pytest.mark.integration

@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    return torchguard.world(tmp_path)


def install(world: dict[str, Path], *args: str) -> Run:
    return run_cli("--python", world["python"], "--manifest", world["manifest"], "install",
                   "--offline", "--wheelhouse", world["house"], *args)


def torch_files(site: Path) -> dict[str, str]:
    return {k: v for k, v in tree_digest(site).items() if k.startswith("torch")}


def test_refuses_a_package_that_needs_another_torch(world: dict[str, Path]) -> None:
    before = tree_digest(world["site"])
    result = install(world, "needs-new-torch")
    assert result.code == 1
    assert ("[FAIL] refused: needs-new-torch 1.0 -> torch 2.5.0 would upgrade torch 2.1.0+cpu "
            "-> 2.5.0") in result.out
    assert tree_digest(world["site"]) == before  # not one byte changed


def test_refusal_names_the_whole_chain(world: dict[str, Path]) -> None:
    before = torch_files(world["site"])
    result = install(world, "chain-top")
    assert result.code == 1
    assert ("refused: chain-top 1.0 -> chain-mid 1.0 -> torch 2.5.0 would upgrade torch "
            "2.1.0+cpu -> 2.5.0") in result.out
    assert torch_files(world["site"]) == before


def test_compatible_package_installs_and_torch_is_untouched(world: dict[str, Path]) -> None:
    before = torch_files(world["site"])
    dry = install(world, "friendly", "--dry-run")
    assert dry.code == 1
    assert "[WARN] would install friendly 1.0" in dry.out
    result = install(world, "friendly")
    assert result.code == 0, result.out
    assert "[OK] friendly 1.0 installed (friendly)" in result.out
    assert torch_files(world["site"]) == before
    again = install(world, "friendly", "--dry-run")
    assert again.code == 0


def test_no_deps_package_installs_and_reports_unmet(world: dict[str, Path]) -> None:
    before = torch_files(world["site"])
    result = install(world, "step-audio2")
    assert result.code == 0, result.out
    out = result.out
    assert "[OK] step-audio2 1.0 installed (step-audio2)" in out
    assert ("[WARN] step-audio2 was installed with --no-deps (manifest no_deps: its dependencies "
            "would replace the image's NPU stack); unmet: torch>=2.5, librosa>=0.10, helper") in out
    assert torch_files(world["site"]) == before


def test_dry_run_shows_the_whole_plan_and_changes_nothing(world: dict[str, Path]) -> None:
    before = tree_digest(world["site"])
    dry = install(world, "step-audio2", "friendly", "--dry-run")
    assert dry.code == 1, dry.out
    for change in ("install friendly 1.0", "install helper 1.0", "install step-audio2 1.0"):
        assert f"[WARN] would {change}" in dry.out
    # predicted from pip's report: helper arrives with friendly, so only these stay unmet
    assert ("[WARN] step-audio2 would be installed with --no-deps (manifest no_deps: its "
            "dependencies would replace the image's NPU stack); unmet: torch>=2.5, "
            "librosa>=0.10") in dry.out
    doc = install(world, "friendly", "--dry-run", "--json").json
    assert [i["data"] for i in doc["results"] if i["id"] == "plan:friendly"] == [
        {"package": "friendly", "action": "install", "installed": None, "new": "1.0"}]
    assert tree_digest(world["site"]) == before


# Every start of the target's interpreter appends its sys.argv to $AP_TEST_STARTS (a module
# imported from a .pth: once per process, though a venv's lib64 link reads the .pth twice).
_COUNTER = ("import json, os, sys\n"
            "if os.environ.get('AP_TEST_STARTS'):\n"
            "    with open(os.environ['AP_TEST_STARTS'], 'a') as log:\n"
            "        log.write(json.dumps(sys.argv) + '\\n')\n")


def _pip_runs(world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
              *args: str) -> tuple[Run, list[list[str]]]:
    """``install`` of ``args`` and the pip processes it ran in the target (pip --python runs
    itself there as ``__pip-runner__.py``)."""
    (world["site"] / "ap_test_starts.py").write_text(_COUNTER)
    (world["site"] / "ap_test_starts.pth").write_text("import ap_test_starts\n")
    starts = tmp_path / "starts.jsonl"
    monkeypatch.setenv("AP_TEST_STARTS", str(starts))
    result = install(world, *args)
    lines = starts.read_text().splitlines() if starts.exists() else []
    argvs = [json.loads(line) for line in lines]
    return result, [a for a in argvs if a and a[0].endswith("__pip-runner__.py")]


@pytest.mark.parametrize(("reqs", "steps"), [(("needs-new-torch",), 1),
                                             (("friendly", "step-audio2"), 2)])
def test_a_pip_plan_is_one_pip_resolution_per_step(world: dict[str, Path], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   reqs: tuple[str, ...], steps: int) -> None:
    """`install --dry-run --resolver pip` costs what pip's own resolution costs: one pip run
    per step of the plan (the requirements; the no_deps packages with --no-deps), counted in
    the real pip the target runs, and no other pip process: no second resolution, no
    pre-flight or index query of its own."""
    result, runs = _pip_runs(world, monkeypatch, tmp_path, *reqs, "--dry-run",
                             "--resolver", "pip")
    assert result.code == 1, result.out + result.err
    assert len(runs) == steps, runs
    assert all("install" in a and "--dry-run" in a and "--report" in a for a in runs), runs
    assert [set(reqs) & set(a) for a in runs] == \
        ([set(reqs)] if steps == 1 else [{"friendly"}, {"step-audio2"}])


@pytest.fixture
def index_server() -> Iterator[str]:
    IndexRecorder.requests = []
    server = http.server.HTTPServer(("127.0.0.1", 0), IndexRecorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    server.shutdown()


def test_offline_never_contacts_an_index(world: dict[str, Path], index_server: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", index_server)
    assert install(world, "helper").code == 0
    assert IndexRecorder.requests == []
    online = run_cli("--python", world["python"], "--manifest", world["manifest"], "install",
                     "--wheelhouse", world["house"], "--dry-run", "friendly")
    assert online.code == 1
    assert IndexRecorder.requests, "control: without --offline pip does ask the index"


def test_offline_without_wheelhouse_is_a_usage_error(world: dict[str, Path]) -> None:
    result = run_cli("--python", world["python"], "--manifest", world["manifest"], "install",
                     "--offline", "helper")
    assert result.code == 2 and "--offline needs --wheelhouse" in result.err


def test_stack_pins_are_installed_and_checked(world: dict[str, Path], tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "stack.yaml", [], protected=["torch"],
                              stack={"packages": {"helper": "==1.0", "torch": "==2.1.0"}})
    result = run_cli("--python", world["python"], "--manifest", manifest, "install",
                     "--offline", "--wheelhouse", world["house"])
    assert result.code == 0, result.out
    assert "[OK] helper 1.0 matches ==1.0" in result.out
    assert "[OK] torch 2.1.0+cpu matches ==2.1.0" in result.out


def _install_lock_elsewhere(world: dict[str, Path], venv: Path, manifest: Path, lock: Path,
                            house: Path) -> Run:
    """``install --lock`` into a fresh venv that has only the image's torch."""
    python = wheels.make_venv(venv)
    wheels.pip_install(python, "--no-index", "--find-links", str(world["house"]),
                       "torch==2.1.0+cpu")
    return run_cli("--python", python, "--manifest", manifest, "install", "--lock", lock,
                   "--offline", "--wheelhouse", house)


def test_lock_then_install_the_lock_elsewhere(world: dict[str, Path], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = write_manifest(tmp_path / "stack.yaml", [], protected=["torch"],
                              stack={"packages": {"friendly": "==1.0"}})
    lock = tmp_path / "stack.lock"
    made = run_cli("--python", world["python"], "--manifest", manifest, "lock", "-o", lock,
                   "--wheelhouse", world["house"])
    assert made.code == 0, made.out + made.err
    text = lock.read_text()
    assert "friendly==1.0" in text and "helper==1.0" in text and "--hash=sha256:" in text
    assert "\ntorch==" not in text  # protected: provided by the image, never locked
    result = _install_lock_elsewhere(world, tmp_path / "other", manifest, lock, world["house"])
    assert result.code == 0, result.out + result.err
    assert "[OK] friendly 1.0 matches ==1.0" in result.out
    # pip reads the lock as it was when checked, for the plan and the install: a lock
    # rewritten after the check (to a `name @ URL` sdist pip would build) changes nothing
    planned = pipdiff.steps_for

    def steps_then_rewrite(*args: object, **kwargs: object) -> object:
        steps = planned(*args, **kwargs)  # type: ignore[arg-type]
        lock.write_text(f"evil @ file://{tmp_path}/evil-1.0.tar.gz\n")
        return steps

    monkeypatch.setattr(pipdiff, "steps_for", steps_then_rewrite)
    kept = _install_lock_elsewhere(world, tmp_path / "rewritten", manifest, lock, world["house"])
    assert kept.code == 0, kept.out + kept.err
    assert "[OK] friendly 1.0 matches ==1.0" in kept.out and "evil" not in kept.out + kept.err
    monkeypatch.setattr(pipdiff, "steps_for", planned)
    lock.write_text(text)
    # a wheelhouse whose helper wheel was tampered with no longer matches the lock's hashes
    tampered = tmp_path / "tampered"
    shutil.copytree(world["house"], tampered)
    build_wheel(tampered, "helper", "1.0", files={"helper/__init__.py": "evil = 1\n"})
    refused = _install_lock_elsewhere(world, tmp_path / "third", manifest, lock, tampered)
    assert refused.code == 1
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in refused.err
