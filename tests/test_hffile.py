"""Kind hf-file: the whisper-large-v3 processor_config.json fix, proven with huggingface_hub.

The cache is laid out exactly as huggingface_hub writes it (blobs named by hash, relative
symlinks in snapshots/<commit>/, refs/main, .no_exist markers), or with plain copies as on
systems without symlinks. huggingface_hub's own try_to_load_from_cache and scan_cache_dir then
judge the result, offline.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.kit import Run, run_cli, run_process, tree_digest, write_manifest

hub = pytest.importorskip("huggingface_hub") if not os.environ.get("CI") else \
    __import__("huggingface_hub")
from huggingface_hub.file_download import _CACHED_NO_EXIST  # noqa: E402

REPO = "openai/whisper-large-v3"
COMMITS = ["06f233fe06e710322aca913c1bc4249a0d71fce1", "1ecca609f8c8a6c8b6b1a4c4f0d0d6f7f2f0a3b1"]
PREPROCESSOR = json.dumps({"chunk_length": 30, "feature_extractor_type": "WhisperFeatureExtractor",
                           "feature_size": 128, "processor_class": "WhisperProcessor",
                           "sampling_rate": 16000}, indent=2).encode()


def make_cache(root: Path, *, links: bool, no_exist: bool) -> Path:
    repo = root / "models--openai--whisper-large-v3"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMITS[0])
    blob = repo / "blobs" / hashlib.sha256(PREPROCESSOR).hexdigest()
    blob.parent.mkdir()
    blob.write_bytes(PREPROCESSOR)
    for commit in COMMITS:
        snap = repo / "snapshots" / commit
        snap.mkdir(parents=True)
        if links:
            (snap / "preprocessor_config.json").symlink_to(
                os.path.relpath(blob, snap))
        else:
            (snap / "preprocessor_config.json").write_bytes(PREPROCESSOR)
        if no_exist:
            marker = repo / ".no_exist" / commit / "processor_config.json"
            marker.parent.mkdir(parents=True)
            marker.write_bytes(b"")
    return root


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    return write_manifest(tmp_path / "omni.yaml", [{
        "id": "whisper-processor-config", "title": "whisper processor_config.json fix",
        "kind": "hf-file",
        "options": {"repos": [REPO], "filename": "processor_config.json",
                    "content": {"processor_class": "WhisperProcessor"}}}])


def cli(site: Path, manifest: Path, *args: str) -> Run:
    return run_cli("--site-packages", site, "--manifest", manifest, *args)


@pytest.mark.parametrize("links", [True, False], ids=["symlinks", "copies"])
@pytest.mark.parametrize("no_exist", [True, False], ids=["marker", "no-marker"])
def test_fix_is_visible_to_huggingface_hub(tmp_path: Path, manifest: Path, site: Path,
                                           monkeypatch: pytest.MonkeyPatch, links: bool,
                                           no_exist: bool) -> None:
    cache = make_cache(tmp_path / "hf" / "hub", links=links, no_exist=no_exist)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = tree_digest(cache)
    found = hub.try_to_load_from_cache(REPO, "processor_config.json", cache_dir=cache)
    assert found is (_CACHED_NO_EXIST if no_exist else None)

    first = cli(site, manifest, "apply")
    assert first.code == 0, first.out + first.err
    assert first.out.strip() == "[OK] Applied whisper processor_config.json fix"
    for commit in COMMITS:
        path = hub.try_to_load_from_cache(REPO, "processor_config.json", cache_dir=cache,
                                          revision=commit)
        assert isinstance(path, str), path
        assert json.loads(Path(path).read_text()) == {"processor_class": "WhisperProcessor"}
        assert Path(path).is_symlink() is links
    info = hub.scan_cache_dir(cache)
    assert not info.warnings, info.warnings
    assert (cache / "models--openai--whisper-large-v3/snapshots" / COMMITS[0] /
            "preprocessor_config.json").read_bytes() == PREPROCESSOR  # other files untouched

    applied = tree_digest(cache)
    again = cli(site, manifest, "apply")
    assert "already applied" in again.out
    assert tree_digest(cache) == applied

    reverted = cli(site, manifest, "revert")
    assert reverted.code == 0, reverted.out
    assert tree_digest(cache) == before, "revert must restore the cache exactly"


def test_hf_hub_cache_variable_wins(tmp_path: Path, manifest: Path, site: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    cache = make_cache(tmp_path / "custom-cache", links=True, no_exist=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    assert cli(site, manifest, "apply").code == 0
    assert isinstance(hub.try_to_load_from_cache(REPO, "processor_config.json",
                                                 cache_dir=cache), str)


def test_existing_file_from_the_hub_is_left_alone(tmp_path: Path, manifest: Path, site: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    cache = make_cache(tmp_path / "hf" / "hub", links=False, no_exist=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    for commit in COMMITS:
        (cache / "models--openai--whisper-large-v3/snapshots" / commit /
         "processor_config.json").write_text('{"processor_class": "Other"}\n')
    before = tree_digest(cache)
    result = cli(site, manifest, "apply")
    assert result.code == 0
    assert tree_digest(cache) == before


def test_a_fifo_where_the_file_should_be_is_refused_not_read(tmp_path: Path, manifest: Path,
                                                             site: Path) -> None:
    """Opening a FIFO to read it would block every command (status included) for ever."""
    cache = make_cache(tmp_path / "hf" / "hub", links=False, no_exist=False)
    fifo = cache / "models--openai--whisper-large-v3/snapshots" / COMMITS[0] / \
        "processor_config.json"
    os.mkfifo(fifo)
    before = tree_digest(cache)
    run = run_process("--site-packages", site, "--manifest", manifest, "apply",
                      env={"HF_HUB_CACHE": str(cache)}, timeout=30)
    assert run.code == 1, run.out + run.err
    assert f"{fifo} is not a regular file" in run.out + run.err
    assert tree_digest(cache) == before


# A cache other users can write may hold links out of it. Every path is decided through the
# store's guard before anything is written: no journal is left that the next run would refuse
# (on 89ee836: blobs/ linked out made apply write its journal and then refuse it, so every
# later command exited 2 until the journal was moved by hand), and nothing outside the cache
# is read (a .no_exist/<commit> linked to a root-only folder was read and kept as a backup).


def _nothing_written(site: Path) -> None:
    assert not (site / ".ascendpatch").exists()


def test_blobs_linked_out_of_the_cache_is_refused_before_anything_is_written(
        tmp_path: Path, manifest: Path, site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = make_cache(tmp_path / "hf" / "hub", links=True, no_exist=True)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    repo = cache / "models--openai--whisper-large-v3"
    outside = tmp_path / "outside-blobs"
    (repo / "blobs").rename(outside)
    (repo / "blobs").symlink_to(outside)
    before = tree_digest(tmp_path / "hf"), tree_digest(outside)
    for command in ("apply", "status", "apply"):
        result = cli(site, manifest, command)
        said = (result.out + result.err).strip()
        assert result.code == 2, (command, said)
        assert len(said.splitlines()) == 1 and "outside" in said and "blobs" in said, said
        assert (tree_digest(tmp_path / "hf"), tree_digest(outside)) == before
        _nothing_written(site)
    (repo / "blobs").unlink()  # the one fix needed: the link, never a journal
    outside.rename(repo / "blobs")
    assert cli(site, manifest, "apply").code == 0
    assert isinstance(hub.try_to_load_from_cache(REPO, "processor_config.json",
                                                 cache_dir=cache), str)


def test_a_no_exist_folder_linked_outside_is_never_read(
        tmp_path: Path, manifest: Path, site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = make_cache(tmp_path / "hf" / "hub", links=True, no_exist=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    private = tmp_path / "root-only"
    private.mkdir(mode=0o700)
    secret = private / "processor_config.json"
    secret.write_bytes(b"root's private bytes\n")
    secret.chmod(0o600)
    no_exist = cache / "models--openai--whisper-large-v3" / ".no_exist"
    no_exist.mkdir()
    (no_exist / COMMITS[0]).symlink_to(private)
    before = tree_digest(tmp_path / "hf")
    for command in ("apply", "status"):
        result = cli(site, manifest, command)
        said = (result.out + result.err).strip()
        assert result.code == 2, (command, said)
        assert len(said.splitlines()) == 1 and "outside" in said and ".no_exist" in said, said
        assert secret.read_bytes() == b"root's private bytes\n"
        assert tree_digest(tmp_path / "hf") == before
        _nothing_written(site)
