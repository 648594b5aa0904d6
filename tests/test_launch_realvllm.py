"""`ascendpatch check-launch` reading the command line with a REAL vLLM 0.22.1's own parser.

The target is the kit's vLLM venv (tests/kit/realserver.py): check-launch runs vLLM's serve
parser in it (env/_serveargs.py; the parser is built and asked, no engine starts), so a flag
vLLM does not know is vLLM's own error, and the rules see vLLM's values.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.kit import realserver, run_cli

pytestmark = pytest.mark.integration

CAP = '{"max_image_tokens": 1024}'


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A W8A8 multimodal model folder: the quantization and image-cap rules apply to it."""
    folder = tmp_path / "Muse-Glimmer-30B-w8a8"
    folder.mkdir()
    (folder / "quant_model_description.json").write_text('{"model_quant_type": "W8A8"}')
    (folder / "config.json").write_text(json.dumps({"vision_config": {"hidden_size": 1152}}))
    return folder


def _check(*serve: str | Path) -> tuple[int, str]:
    result = run_cli("--python", realserver.python(), "check-launch", "--", "vllm", "serve",
                     *serve)
    return result.code, result.out


def test_a_misspelled_flag_is_vllms_own_error_with_a_did_you_mean(model: Path) -> None:
    """89ee836 never looked at flags no rule names: --tensor-paralel-size passed unseen."""
    code, out = _check(model, "--tensor-paralel-size", "2", "-q", "ascend",
                       "--mm-processor-kwargs", CAP)
    assert code == 1, out
    assert ("[FAIL] serve-args: vLLM 0.22.1+cpu's own parser refuses the command line: "
            "unrecognized arguments: --tensor-paralel-size 2; did you mean "
            "--tensor-parallel-size?") in out
    # the rules still run, on ascendpatch's own reading
    assert "[OK] quantization-ascend: --quantization ascend" in out


def test_the_rules_see_the_values_vllm_sees(model: Path) -> None:
    """vLLM's dotted form of a JSON argument: 89ee836 read no --mm-processor-kwargs at all and
    failed the image-cap rule."""
    code, out = _check(model, "--tensor_parallel_size", "1", "--quantization", "ascend",
                       "--mm-processor-kwargs.max_image_tokens", "1024")
    assert code == 0, out
    assert (f"[OK] serve-args: vLLM 0.22.1+cpu's own parser ({realserver.python()}) accepts "
            "the command line; the rules below see its values") in out
    assert '[OK] max-image-tokens: --mm-processor-kwargs {"max_image_tokens": 1024}' in out


def test_vllms_own_checks_before_start_up_count(model: Path) -> None:
    """ServeSubcommand.validate, as `vllm serve` runs it before anything starts."""
    code, out = _check(model, "--enable-auto-tool-choice")
    assert code == 1, out
    assert ("[FAIL] serve-args: vLLM 0.22.1+cpu's own parser refuses the command line: "
            "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser") in out
