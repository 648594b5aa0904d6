"""Kind env-file, through the real CLI on real files: one KEY=value set or removed in a dotenv
file under ${MODEL_DIR}, everything else byte for byte, judged by readers we did not write:
python-dotenv's dotenv_values and bash's `set -a; . file`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from dotenv import dotenv_values

from tests.kit import Run, run_cli, tree_digest, write_manifest

# Comments, blank lines, `export`, quotes, an inline comment and mixed line endings: all of it
# must come back byte for byte.
SERVE_ENV = (b"# serve environment of the model package\r\n"
             b"ASCEND_RT_VISIBLE_DEVICES=0,1\r\n"
             b"\r\n"
             b"export VLLM_WORKER_MULTIPROC_METHOD=spawn  # NPU needs spawn\n"
             b"HCCL_BUFFSIZE='512'\r\n"
             b"# VLLM_USE_V1=0 (commented out: not a definition)\r\n"
             b"TAIL=no-newline")


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    monkeypatch.setenv("MODEL_DIR", str(folder))
    return folder


def manifest(tmp_path: Path, **options: object) -> Path:
    return write_manifest(tmp_path / "m.yaml", [{
        "id": "serve-env", "title": "serve env", "kind": "env-file",
        "options": {"file": "${MODEL_DIR}/serve.env", "key": "VLLM_USE_V1", **options}}])


def cli(site: Path, path: Path, *args: str) -> Run:
    return run_cli("--site-packages", site, "--manifest", path, *args)


def bash_reads(env_file: Path, key: str) -> str | None:
    """What a shell sees after `set -a; . serve.env` (None: unset)."""
    script = f'set -a; . "$1"; if [ -n "${{{key}+x}}" ]; then printf "%s" "${key}"; ' \
             'else exit 7; fi'
    proc = subprocess.run(["bash", "-c", script, "bash", str(env_file)], capture_output=True,
                          text=True, check=False, env={"PATH": "/usr/bin:/bin"})
    return None if proc.returncode == 7 else proc.stdout


def test_set_apply_reapply_status_revert(tmp_path: Path, site: Path, model: Path) -> None:
    env_file = model / "serve.env"
    env_file.write_bytes(SERVE_ENV)
    before = dotenv_values(env_file)
    path = manifest(tmp_path, value="1")

    plan = cli(site, path, "plan")
    assert plan.code == 1 and "+VLLM_USE_V1=1" in plan.out, plan.out
    assert cli(site, path, "status").code == 1

    first = cli(site, path, "apply")
    assert (first.code, first.out.strip()) == (0, "[OK] Applied serve env"), first.out + first.err
    applied = env_file.read_bytes()
    assert applied == SERVE_ENV + b"\r\nVLLM_USE_V1=1\r\n"  # CRLF dominates; the tail kept
    assert dotenv_values(env_file) == {**before, "VLLM_USE_V1": "1"}
    # (bash reads "1\r" from a CRLF file, ours or not: it is judged on LF files below)

    digest = tree_digest(tmp_path)
    again = cli(site, path, "apply")
    assert (again.code, again.out.strip()) == (0, "[OK] serve env already applied")
    assert tree_digest(tmp_path) == digest
    status = cli(site, path, "--json", "status")
    assert status.code == 0 and status.json["results"][0]["status"] == "already-applied"

    reverted = cli(site, path, "revert")
    assert (reverted.code, reverted.out.strip()) == (0, "[OK] Reverted serve env")
    assert env_file.read_bytes() == SERVE_ENV
    assert "VLLM_USE_V1" not in dotenv_values(env_file)
    assert bash_reads(env_file, "VLLM_USE_V1") is None


def test_a_missing_file_is_created_and_revert_removes_it(tmp_path: Path, site: Path,
                                                         model: Path) -> None:
    path = manifest(tmp_path, value="hello world #1")  # needs quotes in every reader
    assert cli(site, path, "apply").code == 0
    env_file = model / "serve.env"
    assert env_file.read_bytes() == b"VLLM_USE_V1='hello world #1'\n"
    assert dotenv_values(env_file) == {"VLLM_USE_V1": "hello world #1"}
    assert bash_reads(env_file, "VLLM_USE_V1") == "hello world #1"
    assert cli(site, path, "revert").code == 0
    assert not env_file.exists() and model.is_dir()


def test_another_value_is_a_conflict_that_force_overwrites(tmp_path: Path, site: Path,
                                                           model: Path) -> None:
    env_file = model / "serve.env"
    original = SERVE_ENV.replace(b"HCCL_BUFFSIZE='512'\r\n",
                                 b"HCCL_BUFFSIZE='512'\r\n  export VLLM_USE_V1=\"0\"  # old\r\n")
    env_file.write_bytes(original)
    path = manifest(tmp_path, value="1")
    refused = cli(site, path, "apply")
    assert refused.code == 1
    assert "conflict in serve.env" in refused.out and "--force" in refused.out
    assert env_file.read_bytes() == original

    forced = cli(site, path, "apply", "--force")
    assert forced.code == 0, forced.out + forced.err
    assert env_file.read_bytes() == original.replace(b'  export VLLM_USE_V1="0"  # old\r\n',
                                                     b"  export VLLM_USE_V1=1  # old\r\n")
    assert dotenv_values(env_file)["VLLM_USE_V1"] == "1"
    assert cli(site, path, "apply").out.strip() == "[OK] serve env already applied"
    assert cli(site, path, "revert").code == 0
    assert env_file.read_bytes() == original
    assert dotenv_values(env_file)["VLLM_USE_V1"] == "0"


def test_remove_mode(tmp_path: Path, site: Path, model: Path) -> None:
    env_file = model / "serve.env"
    env_file.write_bytes(SERVE_ENV)
    path = write_manifest(tmp_path / "m.yaml", [{
        "id": "serve-env", "title": "serve env", "kind": "env-file",
        "options": {"file": "${MODEL_DIR}/serve.env", "key": "VLLM_WORKER_MULTIPROC_METHOD",
                    "remove": True}}])
    assert dotenv_values(env_file)["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
    assert cli(site, path, "apply").code == 0
    assert env_file.read_bytes() == SERVE_ENV.replace(
        b"export VLLM_WORKER_MULTIPROC_METHOD=spawn  # NPU needs spawn\n", b"")
    assert "VLLM_WORKER_MULTIPROC_METHOD" not in dotenv_values(env_file)
    assert bash_reads(env_file, "VLLM_WORKER_MULTIPROC_METHOD") is None
    digest = tree_digest(tmp_path)
    assert cli(site, path, "apply").out.strip() == "[OK] serve env already applied"
    assert tree_digest(tmp_path) == digest
    assert cli(site, path, "revert").code == 0
    assert env_file.read_bytes() == SERVE_ENV
    assert dotenv_values(env_file)["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"


@pytest.mark.parametrize(("text", "says"), [
    (b"VLLM_USE_V1=0\nA=1\nexport VLLM_USE_V1=1\n", "VLLM_USE_V1 is defined 2 times (lines 1, 3)"),
    (b"A=1\nVLLM_USE_V1='unclosed\n", "line 2: the VLLM_USE_V1 line cannot be read"),
    (b"VLLM_USE_V1\n", "line 1: the VLLM_USE_V1 line cannot be read"),
])
def test_ambiguous_files_are_refused_naming_the_file_and_the_fix(
        tmp_path: Path, site: Path, model: Path, text: bytes, says: str) -> None:
    env_file = model / "serve.env"
    env_file.write_bytes(text)
    path = manifest(tmp_path, value="1")
    before = tree_digest(tmp_path)
    for command in ("apply", "status"):
        result = cli(site, path, command)
        assert result.code == 1, result.out + result.err
        said = result.out + result.err
        assert f"{env_file}" in said and says in said and "fix:" in said, said
    assert tree_digest(tmp_path) == before


@pytest.mark.parametrize(("options", "says"), [
    ({"value": "it's"}, "a quote, backslash or control character"),
    ({"value": "1", "remove": True}, "give either 'value' (set the key) or 'remove: true'"),
    ({}, "give either 'value'"),
    ({"value": "1", "key": "NOT-A-KEY"}, "artifacts[0].options.key: 'NOT-A-KEY' is not a "
                                         "variable name"),
])
def test_bad_options_exit_2(tmp_path: Path, site: Path, model: Path,
                            options: dict[str, object], says: str) -> None:
    result = cli(site, manifest(tmp_path, **options), "apply")
    assert result.code == 2 and says in result.err, result.out + result.err
    assert not (model / "serve.env").exists()


def test_unset_model_dir_names_the_variable(tmp_path: Path, site: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MODEL_DIR", raising=False)
    result = cli(site, manifest(tmp_path, value="1"), "apply")
    assert result.code == 2
    assert "needs ${MODEL_DIR}, which is not set" in result.err
    assert "export MODEL_DIR=" in result.err
