"""`bash install.sh`: the README's first command, end to end, as CI runs it on a fresh checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.kit import REPO, tree_digest, wheels

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("builds_the_checkout")]


def _run(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(REPO / "install.sh"), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=900, check=False,
                          stdin=subprocess.DEVNULL, cwd=env["HOME"])


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    cache = Path(os.environ["ASCENDPATCH_CACHE"])
    (cache / "wheels").mkdir(parents=True, exist_ok=True)
    shutil.copy(wheels.wheel("0.18.0"), cache / "wheels")  # no second download of 29 MB
    return {**os.environ, "ASCENDPATCH_PREFIX": str(tmp_path / "tool")}


def _ok_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("[OK]")]


def _ascendpatch(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed tool, run as a user would after install.sh: no --python."""
    return subprocess.run([f"{env['ASCENDPATCH_PREFIX']}/venv/bin/ascendpatch", *args],
                          capture_output=True, text=True, env=env, timeout=300, check=False,
                          stdin=subprocess.DEVNULL, cwd=cwd)


def test_sandbox_end_to_end_twice(env: dict[str, str], tmp_path: Path) -> None:
    sandbox = tmp_path / "sandbox"
    first = _run("--sandbox", sandbox, env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.rstrip().endswith("=== Installation complete ===")
    assert "[OK] Applied sampler top_k/top_p fallback patch" in first.stdout
    assert "[FAIL]" not in first.stdout
    # no dead end: the op library is expected to be missing in a sandbox, and the run says so
    assert "op library not loaded, as expected in a sandbox (no NPU" in first.stdout
    verified = first.stdout.split("--- verify\n", 1)[1]
    assert not [line for line in verified.splitlines() if line.startswith("[WARN]")], verified
    # the target is remembered: later commands, from anywhere, need no --python
    config = Path(env["HOME"]) / ".config" / "ascendpatch" / "config.toml"
    assert f'[OK] config {config}: python = "{sandbox}/bin/python"' in first.stdout
    assert "next: ascendpatch status\n" in first.stdout
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    verify = _ascendpatch("-v", "verify", env=env, cwd=elsewhere)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert f"target {sandbox}/bin/python (Python " in verify.stderr
    assert f"(from {config})" in verify.stderr
    device = _ascendpatch("verify", "--device", env=env, cwd=elsewhere)
    assert "[SKIP] no NPU: on-device check not run" in device.stdout, device.stdout
    assert "AttributeError" not in device.stdout + device.stderr
    before = tree_digest(sandbox)
    second = _run("--sandbox", sandbox, env=env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "[OK] sampler top_k/top_p fallback patch already applied" in second.stdout
    assert f"[OK] config {config} already names this target" in second.stdout
    assert second.stdout.rstrip().endswith("=== Installation complete ===")
    assert tree_digest(sandbox) == before, "the second run changed the target"
    assert len(_ok_lines(second.stdout)) >= len(_ok_lines(first.stdout)) - 3
    # a config that names something else is the user's: left as it is, and said so
    config.write_text('python = "/usr/bin/python3"\n')
    third = _run("--sandbox", sandbox, env=env)
    assert third.returncode == 0, third.stdout + third.stderr
    assert f"[WARN] config {config} names another target or manifest; left alone" \
           in third.stdout
    assert f'python = "{sandbox}/bin/python"' in third.stdout
    assert f"next: ascendpatch --python {sandbox}/bin/python --manifest default status" \
           in third.stdout
    assert config.read_text() == 'python = "/usr/bin/python3"\n'
    # --uninstall of another prefix leaves this install's completion file alone
    completion = Path(env["HOME"]) / ".local/share/bash-completion/completions/ascendpatch"
    assert completion.is_file()
    other = _run("--uninstall", "--prefix", tmp_path / "B", env=env)
    assert other.returncode == 0 and completion.is_file(), other.stdout
    gone = _run("--uninstall", env=env)
    assert gone.returncode == 0 and not completion.exists(), gone.stdout


def test_a_failing_step_stops_with_its_name(env: dict[str, str], tmp_path: Path) -> None:
    sandbox = tmp_path / "sandbox"
    assert _run("--sandbox", sandbox, env=env).returncode == 0
    sampler = next(sandbox.glob("lib/python*/site-packages")) / wheels.SAMPLER
    assert _run("--python", sandbox / "bin/python", env=env).returncode == 0
    # A hand-edited line inside the patch (neither upstream nor patched): apply must refuse.
    # a line that only the patch adds (the fix's state flag), in every release's patch
    guard = ("_ASCENDPATCH_TOPK_TOPP_OP = None  # None: not probed yet, True: the operator, "
             "False: fallback\n")
    text = sampler.read_text()
    assert guard in text
    sampler.write_text(text.replace(guard, guard.rstrip("\n") + "  # local edit\n"))
    before = tree_digest(sandbox)
    failed = _run("--python", sandbox / "bin/python", env=env)
    assert failed.returncode == 1
    assert "[FAIL] install.sh: step 'apply' failed (exit 1)" in failed.stderr
    assert "=== Installation complete ===" not in failed.stdout
    assert tree_digest(sandbox) == before


def test_help_documents_every_option_and_variable() -> None:
    out = subprocess.run(["bash", str(REPO / "install.sh"), "--help"], capture_output=True,
                         text=True, check=True).stdout
    for word in ("--python", "--sandbox", "--vllm-ascend", "--manifest", "--wheelhouse",
                 "--prefix", "SMOOTH=1", "MODEL_DIR", "ASCENDPATCH_PYTHON", "ASCENDPATCH_PREFIX",
                 "ASCENDPATCH_TOOL_PYTHON"):
        assert word in out, word
    bad = subprocess.run(["bash", str(REPO / "install.sh"), "--bogus"], capture_output=True,
                         text=True, check=False)
    assert bad.returncode == 2 and "unknown option --bogus" in bad.stderr


def test_bundle_then_air_gapped_bootstrap(env: dict[str, str], tmp_path: Path) -> None:
    """`ascendpatch bundle` on a connected machine, then install.sh with no index at all."""
    from tests.kit import IndexRecorder, run_cli

    house = tmp_path / "wheelhouse"
    made = run_cli("bundle", house)
    assert made.code == 0, made.out + made.err
    names = {p.name.split("-")[0].lower() for p in house.glob("*.whl")}
    assert {"ascendpatch", "packaging", "unidiff", "pyyaml", "rich", "pip_tools"} <= names
    shutil.copy(wheels.wheel("0.18.0"), house)  # the sandbox's vllm-ascend comes along too

    import http.server
    import threading

    IndexRecorder.requests = []
    server = http.server.HTTPServer(("127.0.0.1", 0), IndexRecorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    index = f"http://127.0.0.1:{server.server_address[1]}/simple"
    offline_env = {**env, "PIP_INDEX_URL": index, "ASCENDPATCH_CACHE": str(tmp_path / "empty")}
    try:
        result = _run("--wheelhouse", house, "--sandbox", tmp_path / "sandbox", env=offline_env)
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.rstrip().endswith("=== Installation complete ===")
    assert IndexRecorder.requests == [], "an air-gapped bootstrap must not contact any index"


def test_a_system_python3_without_venv_falls_back_to_the_target(env: dict[str, str],
                                                                  tmp_path: Path) -> None:
    """The vllm-omni image's python3 is a 3.10 without pip: the tool venv must still come."""
    sandbox = tmp_path / "sandbox"
    assert _run("--sandbox", sandbox, env=env).returncode == 0
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir()
    fake = fake_bin / "python3"
    fake.write_text("#!/bin/sh\necho 'No module named ensurepip' >&2\nexit 1\n")
    fake.chmod(0o755)
    tool = tmp_path / "other-tool"
    result = _run("--python", sandbox / "bin/python", env={
        **env, "PATH": f"{fake_bin}:{env['PATH']}", "ASCENDPATCH_PREFIX": str(tool)})
    assert result.returncode == 0, result.stdout + result.stderr
    home = (tool / "venv" / "pyvenv.cfg").read_text()
    assert "home" in home and str(fake_bin) not in home
