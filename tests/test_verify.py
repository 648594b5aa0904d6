"""verify: pins, dependencies, CANN environment, env vars, operator probes.

The probes answer through tests.kit.fakes.FakeInscript with the documents the real probe
printed for the same stand-in stacks (tests/test_fakes.py re-runs the real one).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ascendpatch.env.standins import torch_npu_body, write_distribution
from ascendpatch.inspect.checks import cann, envvars
from ascendpatch.results import Level
from tests.kit import fake_cann, make_dist, run_cli, write_manifest
from tests.kit.fakes import FakeInscript, stand_in_stack

LIBHCCL_ERROR = "libhccl.so: cannot open shared object file: No such file or directory"


def _messages(run_out: str, level: str) -> list[str]:
    return [line for line in run_out.splitlines() if line.startswith(f"[{level}]")]


def test_pins_with_local_labels_pre_releases_and_reasons(site: Path, tmp_path: Path) -> None:
    make_dist(site, "torch", "2.10.0+cpu", {})
    make_dist(site, "vllm-ascend", "0.22.1rc2", {})
    make_dist(site, "transformers", "5.12.1", {})
    manifest = write_manifest(tmp_path / "m.yaml", [], stack={"packages": {
        "torch": "==2.10.0", "vllm-ascend": "==0.22.1rc2",
        "transformers": {"version": "==5.16.1", "reason": "the model's processor exists only "
                                                          "in 5.16.1"},
        "torch-npu": "==2.11.0rc4"}})
    result = run_cli("--site-packages", site, "--manifest", manifest, "verify")
    assert result.code == 1
    assert "[OK] torch 2.10.0+cpu matches ==2.10.0" in result.out
    assert "[OK] vllm-ascend 0.22.1rc2 matches ==0.22.1rc2" in result.out
    assert ("[FAIL] transformers 5.12.1 does not match ==5.16.1 (the model's processor exists "
            "only in 5.16.1)") in result.out
    assert "[FAIL] torch-npu is not installed" in result.out
    assert "[SKIP] CANN environment, operator probes" in result.out


def test_dependency_conflicts_and_accepted_ones(site: Path, tmp_path: Path) -> None:
    requires = ["transformers==5.5.4", "numpy", "only-on-windows; sys_platform=='win32'"]
    make_dist(site, "vllm-ascend", "0.23.0", {}, requires=requires)
    make_dist(site, "transformers", "5.16.1", {})
    plain = write_manifest(tmp_path / "plain.yaml", [])
    result = run_cli("--site-packages", site, "--manifest", plain, "verify")
    assert ("[FAIL] vllm-ascend 0.23.0 requires transformers==5.5.4, but transformers 5.16.1 "
            "is installed") in result.out
    assert "requires 1 package(s) that are not installed: numpy" in result.out
    assert "only-on-windows" not in result.out  # markers are evaluated
    accepting = write_manifest(tmp_path / "acc.yaml", [], accepted_conflicts=[{
        "package": "vllm-ascend", "requirement": "transformers==5.5.4",
        "reason": "the model needs 5.16.1"}])
    make_dist(site, "numpy", "2.0.0", {})
    result = run_cli("--site-packages", site, "--manifest", accepting, "verify")
    assert result.code == 0, result.out
    assert ("[OK] accepted: vllm-ascend 0.23.0 requires transformers==5.5.4, but transformers "
            "5.16.1 is installed (the model needs 5.16.1)") in result.out


def test_cann_environment_checks(tmp_path: Path) -> None:
    env = fake_cann(tmp_path)
    assert all(r.level is Level.OK for r in cann.check(env))
    assert cann.cann_version(env) == "9.0.0"
    missing = cann.check({})
    assert [r.level for r in missing] == [Level.FAIL] * 4
    fixes = " ".join(r.fix for r in missing)  # each failure says what to source
    assert cann.TOOLKIT_SETENV in fixes and cann.ATB_SETENV in fixes


def test_expected_environment_variables() -> None:
    from ascendpatch.manifest.model import Manifest

    manifest = Manifest(name="m", path=None, env={"HF_HUB_OFFLINE": "1"})
    (bad,) = envvars.expected(manifest, {})
    assert bad.level is Level.FAIL and bad.fix == "export HF_HUB_OFFLINE=1"
    (good,) = envvars.expected(manifest, {"HF_HUB_OFFLINE": "1"})
    assert good.level is Level.OK


# --------------------------------------------------------------------------- operator probes


def _probe_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vllm_ascend: str,
               npu_body: str) -> Path:
    """A (fake) venv with vllm-ascend metadata and STAND-IN torch / torch_npu modules; its
    interpreter answers as the real one did for that stack."""
    fake = FakeInscript().install(monkeypatch)
    python, site = fake.target(tmp_path / "venv")
    stand_in_stack(site, vllm_ascend, npu_body)
    fake.probe(site, vllm_ascend, npu_body)
    return python


@pytest.mark.parametrize("body, expected", [
    # the stand-in says what it is: an OK line never passes a simulated operator off as real
    (torch_npu_body(), "[OK] torch_npu.npu_top_k_top_p present (the sampler (top-k/top-p)) "
                       "(stand-in: simulated, no NPU)"),
    (torch_npu_body(["npu_dynamic_quant", "npu_quant_matmul"]),
     "[FAIL] torch_npu.npu_top_k_top_p missing: the first top_p<1 request will kill EngineCore; "
     "fix: ascendpatch apply sampler-topk-topp-fallback"),
    (torch_npu_body(import_error=LIBHCCL_ERROR),
     "[FAIL] CANN environment not loaded (ImportError: libhccl.so: cannot open shared object "
     "file: No such file or directory); fix: source /usr/local/Ascend/ascend-toolkit/set_env.sh "
     "and /usr/local/Ascend/nnal/atb/set_env.sh in the shell that runs Python (processes "
     "inherit them)"),
])
def test_operator_probe_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str,
                              expected: str) -> None:
    python = _probe_env(tmp_path, monkeypatch, "0.23.0", body)
    manifest = write_manifest(tmp_path / "m.yaml", [])
    result = run_cli("--python", python, "--manifest", manifest, "verify")
    # hints repeat the --python / --manifest that were given (issue 13)
    expected = expected.replace("fix: ascendpatch apply",
                                f"fix: ascendpatch --python {python} --manifest {manifest} apply")
    assert expected in result.out.splitlines(), result.out


def test_probe_of_the_custom_op_generation_and_a_torch_pair_mismatch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = _probe_env(tmp_path, monkeypatch, "0.18.0",
                        torch_npu_body(import_error="undefined symbol: x"))
    site = next((tmp_path / "venv" / "lib").glob("python*/site-packages"))
    for dist_info in site.glob("torch-*.dist-info"):
        shutil.rmtree(dist_info)
    write_distribution(site, "torch", "2.9.0", {})
    manifest = write_manifest(tmp_path / "m.yaml", [])
    out = run_cli("--python", python, "--manifest", manifest, "verify").out
    assert ("[FAIL] torch_npu 2.10.0.post4 needs torch==2.10.0, but torch 2.9.0 is installed "
            f"(ImportError: undefined symbol: x); fix: ascendpatch --python {python} --manifest "
            f"{manifest} install restores the stack's pair") in out


def test_probe_reports_fallback_when_op_missing_but_patch_applied(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ascendpatch.env.target import from_python
    from ascendpatch.inspect.checks import probes

    python = _probe_env(tmp_path, monkeypatch, "0.18.0", torch_npu_body())
    lines = probes.check(from_python(python), {"sampler-topk-topp-fallback"})
    by_id = {r.id: r for r in lines}
    op = by_id["probe:_C_ascend.npu_apply_top_k_top_p"]  # stand-ins: expected, and said so
    assert op.level is Level.OK and "uses the PyTorch fallback" in op.message
    assert "missing, as expected in a sandbox (stand-in: simulated, no NPU)" in op.message
    # the stand-in stack has no op library: expected in a sandbox, said so (not a dead end)
    library = by_id["probe:vllm_ascend_C"]
    assert library.level is Level.SKIP, library
    assert library.message.startswith("vllm-ascend's op library not loaded, as expected in a "
                                      "sandbox (no NPU, torch_npu is a stand-in): ")


def test_an_op_library_that_does_not_load_on_a_real_stack_names_a_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ascendpatch.env.target import from_python
    from ascendpatch.inspect.checks import probes

    python = _probe_env(tmp_path, monkeypatch, "0.18.0", torch_npu_body())
    site = next((tmp_path / "venv" / "lib").glob("python*/site-packages"))
    for dist_info in site.glob("torch*.dist-info"):  # as pip installed them: not stand-ins
        (dist_info / "INSTALLER").write_text("pip\n")
    by_id = {r.id: r for r in probes.check(from_python(python), {"sampler-topk-topp-fallback"})}
    library = by_id["probe:vllm_ascend_C"]
    assert library.level is Level.WARN and library.fix, library
    assert "vllm_ascend_C is compiled against them" in str(library.fix)
    op = by_id["probe:_C_ascend.npu_apply_top_k_top_p"]  # a real stack: worth a warning
    assert op.level is Level.WARN and "uses the PyTorch fallback" in op.message


def test_verify_device_in_a_sandbox_is_skipped_no_npu(tmp_path: Path) -> None:
    """The real probe in a real venv with the sandbox's stand-in torch: 89ee836 ran the
    on-device check on it and failed with AttributeError: module 'torch' has no attribute
    'Tensor' (the fallback's annotations)."""
    from tests.kit.fakes import real_venv

    python, site = real_venv(tmp_path / "venv")
    stand_in_stack(site, "0.18.0", torch_npu_body())
    sampler = site / "vllm_ascend" / "sample" / "sampler.py"
    sampler.parent.mkdir(parents=True)
    sampler.write_text("import torch\n\n\ndef _ascendpatch_top_k_top_p_pytorch(\n"
                       "        logits: torch.Tensor, k, p) -> torch.Tensor:\n"
                       "    return logits\n")
    (tmp_path / "venv" / "ascendpatch-sandbox.json").write_text("{}")
    manifest = write_manifest(tmp_path / "m.yaml", [])
    done = run_cli("--python", python, "--manifest", manifest, "verify", "--device")
    device = [line for line in done.out.splitlines() if "on-device" in line]
    assert device == ["[SKIP] no NPU: on-device check not run, torch here is a stand-in "
                      "(stand-in: simulated, no NPU); run it on an Ascend host"], done.out
    assert "AttributeError" not in done.out + done.err


def test_secret_looking_variables_are_reported_by_presence_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 11 item 18: --json and every message show that HF_TOKEN is set, never its value."""
    secret_file = tmp_path / "hf_file_secret_path"
    secret_file.write_text("x")
    manifest = write_manifest(tmp_path / "m.yaml", [{
        "id": "needs-key", "title": "needs a key", "kind": "diff", "distribution": "absent",
        "versions": ">=1", "source": "none.patch",
        "options": {"requires_env": ["SERVICE_KEY_FILE", "ACCESS_TOKEN_FILE"]}}],
        env={"HF_TOKEN": "hf_manifest_wants_this", "DB_PASSWORD": "pw_in_manifest",
             "HF_HUB_OFFLINE": "1"})
    monkeypatch.setenv("HF_TOKEN", "hf_live_secret_value")
    monkeypatch.setenv("DB_PASSWORD", "pw_in_manifest")
    monkeypatch.setenv("SERVICE_KEY_FILE", str(secret_file))
    monkeypatch.setenv("ACCESS_TOKEN_FILE", "/nonexistent/tok_secret_path")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    python, _ = FakeInscript().install(monkeypatch).target(tmp_path / "venv")
    for fmt in (["--json"], []):
        result = run_cli("--python", python, "--manifest", manifest, *fmt, "verify",
                         "--no-probes")
        said = result.out + result.err
        for value in ("hf_live_secret_value", "hf_manifest_wants_this", "pw_in_manifest",
                      "hf_file_secret_path", "tok_secret_path"):
            assert value not in said, (value, said)
        assert "HF_TOKEN is set to another value" in said
        assert "DB_PASSWORD is set as the manifest wants (value hidden)" in said
        assert "SERVICE_KEY_FILE=<set, value hidden>" in said
        assert "ACCESS_TOKEN_FILE=<set, value hidden>: no such file" in said
        assert "HF_HUB_OFFLINE is '0', the manifest wants 1" in said  # not secret: shown


def test_verify_loads_the_fleet_model_only_for_prometheus() -> None:
    """`verify` is the command a rebuilt image runs first; `--prometheus FILE` needs the
    fleet's model (inspect/promfile -> inspect/fleet, 10-14 ms of its 105 ms of imports on
    the bench VM), a plain verify does not: on fcaeb2e every verify imported it."""
    import subprocess
    import sys

    code = ("import sys\nfrom ascendpatch.commands import verify\n"
            "print(' '.join(sorted(sys.modules)))")
    modules = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120, check=True).stdout.split()
    assert "ascendpatch.commands.verify" in modules
    assert "ascendpatch.inspect.fleet" not in modules
    assert "ascendpatch.inspect.promfile" not in modules
