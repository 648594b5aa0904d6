"""The Ansible module's diff (``diff.prepared``), through the real ``ansible-playbook`` in
check and real mode: an env file's secret-named values are masked in it, context lines too
(on 89ee836 they were shown as they are)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit import write_manifest
from tests.kit.ansibleplay import module_args, play

pytestmark = pytest.mark.integration

SERVE_ENV = (b"HF_TOKEN=hf_ansible_secret\n"
             b"export API_KEY=\"key_ansible_secret\"  # router\n"
             b"ASCEND_RT_VISIBLE_DEVICES=0,1\n")


def test_the_modules_diff_masks_secret_values(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    site, model = tmp_path / "site", tmp_path / "model"
    site.mkdir()
    model.mkdir()
    (model / "serve.env").write_bytes(SERVE_ENV)
    monkeypatch.setenv("MODEL_DIR", str(model))  # ansible-playbook passes it to the module
    manifest = write_manifest(tmp_path / "m.yaml", [{
        "id": "serve-env", "title": "serve env", "kind": "env-file",
        "options": {"file": "${MODEL_DIR}/serve.env", "key": "VLLM_USE_V1", "value": "1"}}])
    for flags in (("--check", "--diff"), ("--diff",)):
        result = play(tmp_path, module_args(site, manifest), *flags)
        assert result.get("failed") is not True, result
        prepared = result["diff"]["prepared"]  # type: ignore[index]
        assert "hf_ansible_secret" not in str(result) and "key_ansible_secret" not in str(result)
        assert " HF_TOKEN=***\n" in prepared and " export API_KEY=***  # router\n" in prepared
        assert "+VLLM_USE_V1=1\n" in prepared, prepared
    assert b"VLLM_USE_V1=1\n" in (model / "serve.env").read_bytes()
