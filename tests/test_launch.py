"""`ascendpatch check-launch`: serve command lines and vllm-omni deploy configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.kit import run_cli


@pytest.fixture
def model(tmp_path: Path) -> Path:
    folder = tmp_path / "Muse-Glimmer-30B-w8a8"
    folder.mkdir()
    (folder / "quant_model_description.json").write_text('{"model_quant_type": "W8A8"}')
    (folder / "config.json").write_text(json.dumps({"architectures": [
        "MuseGlimmerForConditionalGeneration"], "vision_config": {"hidden_size": 1152}}))
    return folder


def test_missing_quantization_and_image_cap(model: Path) -> None:
    result = run_cli("check-launch", "--", "vllm", "serve", str(model), "--port", "8199")
    assert result.code == 1
    assert "[FAIL] quantization-ascend: the model folder holds quant_model_description.json" \
        in result.out
    assert "[FAIL] max-image-tokens: a multimodal model without a max_image_tokens cap" \
        in result.out


def test_a_correct_command_passes(model: Path) -> None:
    result = run_cli("check-launch", "--", "vllm", "serve", str(model), "--quantization",
                     "ascend", "--mm-processor-kwargs", '{"max_image_tokens": 1024}')
    assert result.code == 0, result.out
    assert "[OK] quantization-ascend: --quantization ascend" in result.out


def test_deploy_config_knobs_and_repetition_penalty(tmp_path: Path) -> None:
    config = tmp_path / "deploy.yaml"
    config.write_text(yaml.safe_dump({
        "stage_args": [{"engine_args": {"model_stage": "talker"},
                        "token2wav_n_timesteps": 3,
                        "default_sampling_params": {"repetition_penalty": 1.2}}],
        "connectors": {"connector_of_shared_memory": {"extra": {"connector_get_sleep_s":
                                                                0.001}}}}))
    result = run_cli("check-launch", "--config", config)
    assert result.code == 1
    assert ("[FAIL] stage_args.0.token2wav_n_timesteps is silently ignored here: vllm-omni "
            "reads it only under connectors.connector_of_shared_memory.extra") in result.out
    assert "[FAIL] stage_args.0.default_sampling_params.repetition_penalty = 1.2" in result.out
    assert ("[OK] connectors.connector_of_shared_memory.extra.connector_get_sleep_s = 0.001"
            in result.out)


def test_nothing_to_check_is_a_usage_error() -> None:
    result = run_cli("check-launch")
    assert result.code == 2
