"""`ascendpatch check-launch`: serve command lines and vllm-omni deploy configs.

Whether vllm-ascend detects quant_model_description.json by itself is read from the real
wheels' code (0.22.1rc1 does, 0.13.0 does not); the Hugging Face cache resolution is checked
against the real huggingface_hub's ``try_to_load_from_cache``."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendpatch.deploy import launch
from tests.kit import make_dist, run_cli, wheels


def _model(folder: Path, quant: bool = True, vision: bool = True) -> Path:
    folder.mkdir(parents=True)
    if quant:
        (folder / "quant_model_description.json").write_text('{"model_quant_type": "W8A8"}')
    config: dict[str, object] = {"architectures": ["MuseGlimmerForConditionalGeneration"]}
    if vision:
        config["vision_config"] = {"hidden_size": 1152}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return _model(tmp_path / "Muse-Glimmer-30B-w8a8")


@pytest.fixture
def empty_site(tmp_path: Path) -> Path:
    site = tmp_path / "empty-site"
    site.mkdir()
    return site


def test_missing_quantization_and_image_cap(model: Path, empty_site: Path) -> None:
    result = run_cli("--site-packages", empty_site, "check-launch", "--", "vllm", "serve",
                     str(model), "--port", "8199")
    assert result.code == 1
    assert f"[OK] model folder served: {model} (the local folder the command names)" \
        in result.out
    assert "[FAIL] quantization-ascend: " in result.out
    assert "no installed vllm-ascend was found to tell whether it detects the file" in result.out
    assert "[FAIL] max-image-tokens: a multimodal model without a max_image_tokens cap" \
        in result.out


def test_a_correct_command_passes(model: Path) -> None:
    result = run_cli("check-launch", "--", "vllm", "serve", str(model), "--quantization",
                     "ascend", "--mm-processor-kwargs", '{"max_image_tokens": 1024}')
    assert result.code == 0, result.out
    assert "[OK] quantization-ascend: --quantization ascend" in result.out


def test_the_quantized_weights_in_a_subfolder_are_named(tmp_path: Path) -> None:
    """The Muse-Glimmer package keeps its W8A8 weights in weights/; serving the package
    root loads no quantization description at all."""
    package = _model(tmp_path / "Muse-Glimmer-30B-w8a8-vllm-x86", quant=False, vision=False)
    _model(package / "weights")
    result = run_cli("check-launch", "--", "vllm", "serve", str(package), "--quantization",
                     "ascend")
    assert result.code == 1
    assert f"quant_model_description.json is in {package / 'weights'}: serve that folder" \
        in result.out


def test_quantization_ascend_without_a_description(tmp_path: Path) -> None:
    plain = _model(tmp_path / "plain", quant=False, vision=False)
    result = run_cli("check-launch", "--", "vllm", "serve", str(plain), "--quantization",
                     "ascend")
    assert result.code == 1 and "holds no quant_model_description.json" in result.out


def test_no_rule_applied_is_said(tmp_path: Path) -> None:
    plain = _model(tmp_path / "plain", quant=False, vision=False)
    result = run_cli("check-launch", "--", "vllm", "serve", str(plain))
    assert result.code == 0
    assert "[WARN] no launch rule applied to this command" in result.out


def test_a_hugging_face_id_resolves_to_its_cached_snapshot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import try_to_load_from_cache

    cache = tmp_path / "hub"
    repo = cache / "models--Ascend-SACT--Muse-Glimmer-30B-w8a8"
    commit = "0123456789abcdef0123456789abcdef01234567"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = _model(repo / "snapshots" / commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    reference = try_to_load_from_cache("Ascend-SACT/Muse-Glimmer-30B-w8a8", "config.json",
                                       cache_dir=cache)
    assert isinstance(reference, str) and Path(reference).parent == snapshot
    result = run_cli("check-launch", "--", "vllm", "serve", "Ascend-SACT/Muse-Glimmer-30B-w8a8",
                     "--quantization", "ascend", "--mm-processor-kwargs",
                     '{"max_image_tokens": 1024}')
    assert result.code == 0, result.out
    assert f"model folder served: {Path(reference).parent} (the Hugging Face cache snapshot" \
        in result.out
    missing = run_cli("check-launch", "--", "vllm", "serve", "Ascend-SACT/Other")
    assert missing.code == 1 and "has no snapshot in the Hugging Face cache" in missing.out


def _install_quantization_code(site: Path, version: str) -> None:
    """The real wheel's platform.py and quantization package, laid out in a temp site."""
    with zipfile.ZipFile(wheels.wheel(version)) as archive:
        files = {name: archive.read(name) for name in archive.namelist()
                 if name == "vllm_ascend/platform.py" or
                 (name.startswith("vllm_ascend/quantization/") and name.endswith(".py"))}
    make_dist(site, "vllm-ascend", version, {"vllm_ascend/__init__.py": "", **files})


@pytest.mark.integration
@pytest.mark.parametrize(("version", "detects"), [("0.22.1rc1", True), ("0.13.0", False)])
def test_quantization_verdict_follows_the_installed_vllm_ascend(
        model: Path, site: Path, version: str, detects: bool) -> None:
    _install_quantization_code(site, version)
    result = run_cli("--site-packages", site, "check-launch", "--", "vllm", "serve", str(model),
                     "--mm-processor-kwargs", '{"max_image_tokens": 1024}')
    if detects:
        assert result.code == 0, result.out
        assert (f"[OK] quantization-ascend: no --quantization, and none is needed: the "
                f"installed vllm-ascend {version} detects quant_model_description.json by "
                "itself (vllm_ascend/platform.py calls maybe_auto_detect_quantization") \
            in result.out
    else:
        assert result.code == 1, result.out
        assert (f"the installed vllm-ascend {version} does not detect the file by itself "
                "(its platform.py never calls maybe_auto_detect_quantization)") in result.out


def test_deploy_config_knobs_and_repetition_penalty(tmp_path: Path) -> None:
    config = tmp_path / "minicpmo_4_5.yaml"
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


def test_repetition_penalty_elsewhere_is_legitimate(tmp_path: Path) -> None:
    """The rule names the MiniCPM-o configs; 1.1 in another model's config stands."""
    config = tmp_path / "qwen3_omni.yaml"
    config.write_text(yaml.safe_dump({"model": "Qwen/Qwen3-Omni-30B-A3B-Instruct",
                                      "stage_args": [{"default_sampling_params":
                                                      {"repetition_penalty": 1.1}}]}))
    result = run_cli("check-launch", "--config", config)
    assert result.code == 0, result.out
    assert "[SKIP] stage_args.0.default_sampling_params.repetition_penalty = 1.1: the " \
           "repetition-penalty rule is for MiniCPM-o configs only" \
        in result.out
    named = tmp_path / "deploy.yaml"  # the model named inside the config counts as well
    named.write_text(yaml.safe_dump({"model": "openbmb/MiniCPM-o-4_5", "stage_args": [
        {"default_sampling_params": {"repetition_penalty": 1.2}}]}))
    assert run_cli("check-launch", "--config", named).code == 1


def test_a_config_with_no_known_knob_says_so(tmp_path: Path) -> None:
    config = tmp_path / "deploy.yaml"
    config.write_text(yaml.safe_dump({"stage_args": [{"engine_args": {"max_num_seqs": 4}}]}))
    result = run_cli("check-launch", "--config", config)
    assert result.code == 0 and "[WARN]" in result.out and "no launch rule applied" in result.out


def test_nothing_to_check_is_a_usage_error() -> None:
    result = run_cli("check-launch")
    assert result.code == 2


CAP = '{"max_image_tokens": 1024}'


@pytest.mark.parametrize(("flags", "code"), [
    (["--quantization=ascend", f"--mm-processor-kwargs={CAP}"], 0),
    (["--quantization", "ascend", "--mm_processor_kwargs", CAP], 0),  # vLLM reads _ as -
    (["-q", "ascend", "--mm-processor-kwargs", CAP], 0),  # vLLM's short alias
    (["-qascend", "--mm-processor-kwargs", CAP], 0),
    (["--quantization", "fp8", "--mm-processor-kwargs", CAP, "--quantization", "ascend"], 0),
    (["--quantization", "ascend", "--mm-processor-kwargs", CAP, "--quantization=fp8"], 1),
])
def test_flags_are_read_as_vllm_parses_them(model: Path, flags: list[str], code: int) -> None:
    """The spellings vLLM's FlexibleArgumentParser accepts (vllm 0.22.1
    utils/argparse_utils.py: underscores become dashes; engine/arg_utils.py: ``-q``), and
    argparse's rule that the last occurrence wins."""
    result = run_cli("check-launch", "--", "vllm", "serve", str(model), *flags)
    assert result.code == code, result.out


def test_a_download_dir_snapshot_through_a_symlinked_model_path(tmp_path: Path) -> None:
    """vLLM's --download-dir replaces the hub cache; the snapshot's files are symlinks into
    blobs/ as huggingface_hub writes them; a symlink to a model folder is followed."""
    from huggingface_hub import try_to_load_from_cache

    cache = tmp_path / "downloads"
    repo = cache / "models--Ascend-SACT--Muse-Glimmer-30B-w8a8"
    commit = "89abcdef0123456789abcdef0123456789abcdef"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    built = _model(tmp_path / "built")
    (repo / "blobs").mkdir()
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for file in built.iterdir():
        blob = repo / "blobs" / file.name.replace(".", "-")
        file.rename(blob)
        (snapshot / file.name).symlink_to(Path("../..") / "blobs" / blob.name)
    reference = try_to_load_from_cache("Ascend-SACT/Muse-Glimmer-30B-w8a8", "config.json",
                                       cache_dir=cache)
    assert isinstance(reference, str) and Path(reference).parent == snapshot
    result = run_cli("check-launch", "--", "vllm", "serve", "Ascend-SACT/Muse-Glimmer-30B-w8a8",
                     "--download-dir", str(cache), "--quantization", "ascend",
                     "--mm-processor-kwargs", CAP)
    assert result.code == 0, result.out
    assert f"model folder served: {snapshot} (the Hugging Face cache snapshot" in result.out
    link = tmp_path / "current"
    link.symlink_to(snapshot)
    linked = run_cli("check-launch", "--", "vllm", "serve", str(link), "-q", "ascend",
                     "--mm-processor-kwargs", CAP)
    assert linked.code == 0 and f"model folder served: {snapshot.resolve()}" in linked.out


def test_a_target_without_vllm_falls_back_to_our_reading_and_says_so(model: Path) -> None:
    """This test venv has no vLLM: the flags are read as before, and the output says that a
    misspelled flag goes unseen (tests/test_launch_realvllm.py runs vLLM's own parser)."""
    result = run_cli("--python", sys.executable, "check-launch", "--", "vllm", "serve",
                     str(model), "--tensor-paralel-size", "2", "-q", "ascend",
                     "--mm-processor-kwargs", CAP)
    assert result.code == 0, result.out
    assert (f"[SKIP] serve-args: the target ({Path(sys.executable)} (Python ") in result.out
    assert ("has no vLLM: the command line was read by ascendpatch's own parsing, so a flag "
            "vLLM does not know is not caught") in result.out
    assert "[OK] quantization-ascend: --quantization ascend" in result.out


def test_a_line_that_is_not_vllm_serve_is_read_by_ours(model: Path, empty_site: Path) -> None:
    result = run_cli("--site-packages", empty_site, "check-launch", "--", "python", "-m",
                     "vllm.entrypoints.openai.api_server", "--model", str(model))
    assert "[SKIP] serve-args: not a `vllm serve` command line" in result.out
    assert f"[OK] model folder served: {model}" in result.out


_VALUE = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=40),
                      lambda inner: st.lists(inner, max_size=3) |
                      st.dictionaries(st.sampled_from(["--quantization", "quantization",
                                                       "model_tag", "model"]) |
                                      st.text(max_size=12), inner, max_size=3), max_leaves=8)
_ANSWER = st.fixed_dictionaries({}, optional={
    "version": _VALUE, "values": _VALUE, "dests": _VALUE, "error": _VALUE,
    "suggestions": _VALUE, "missing": _VALUE})


@settings(max_examples=300, deadline=None)
@given(doc=_ANSWER)
def test_any_answer_of_the_parser_script_is_one_serve_args_line(doc: dict[str, object]) -> None:
    """Whatever the target's script printed (a broken vLLM, another version's shape): one
    serve-args verdict, and vLLM's reading only when it gave both values and dests."""
    parsing = launch._answer(Path("/py"), doc)
    assert parsing.verdict.rule == "serve-args"
    assert (parsing.parsed is not None) == (isinstance(doc.get("values"), dict) and
                                            isinstance(doc.get("dests"), dict))
    if parsing.parsed is not None:
        parsing.parsed.get("--quantization")
        assert parsing.parsed.model is None or isinstance(parsing.parsed.model, str)


def test_a_named_target_that_cannot_be_used_is_exit_2(model: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """check-launch works without a target (discovery may find none), but a target the user
    named, by flag or $ASCENDPATCH_PYTHON, that does not exist is their error, as for every
    other command: exit 2 naming it, never a quiet "no target found"."""
    missing = tmp_path / "nowhere" / "bin" / "python"
    argv = ("check-launch", "--", "vllm", "serve", str(model))
    result = run_cli("--python", missing, *argv)
    assert result.code == 2 and f"{missing} does not exist" in result.err, result
    assert "no target found" not in result.out + result.err
    monkeypatch.setenv("ASCENDPATCH_PYTHON", str(missing))
    result = run_cli(*argv)
    assert result.code == 2 and f"{missing} does not exist" in result.err, result
