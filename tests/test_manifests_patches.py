"""``manifests --patches --json``: each diff artifact's patch text, what the fleet's check mode
shows as the diff for a node without the tool. The patch file is read as any file we read but
do not own: a FIFO, a file over the cap, a missing one or bytes that are not UTF-8 give that
variant one error line (or escapes), never a hang, a crash or an unbounded read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ascendpatch.commands import manifests
from tests.kit import SMALL_PATCH, run_cli, write_manifest, write_small_manifest


def _artifacts(doc: dict[str, Any]) -> list[dict[str, Any]]:
    (result,) = doc["results"]
    artifacts: list[dict[str, Any]] = result["data"]["artifacts"]
    return artifacts


def test_a_diff_artifacts_patch_text_with_its_versions(tmp_path: Path) -> None:
    manifest = write_small_manifest(tmp_path)
    doc = run_cli("--manifest", manifest, "manifests", "--patches", "--json").json
    (artifact,) = _artifacts(doc)
    assert artifact["patches"] == [{"versions": ">=1", "source": "fix.patch",
                                    "diff": SMALL_PATCH}]
    plain = run_cli("--manifest", manifest, "manifests", "--json").json
    assert "patches" not in _artifacts(plain)[0]  # only when asked: a catalog's worth of text


def test_an_exact_pin_picks_its_variant_alone() -> None:
    doc = run_cli("--manifest", "vllm-ascend-0.18.0", "manifests", "--patches", "--json").json
    (artifact,) = [a for a in _artifacts(doc) if a["id"] == "sampler-topk-topp-fallback"]
    assert [p["source"] for p in artifact["patches"]] == ["0.18.0rc1.patch"]


def _variants(tmp_path: Path, sources: list[str]) -> Path:
    return write_manifest(tmp_path / "m.yaml", [{
        "id": "demo-fix", "title": "demo fix", "kind": "diff", "distribution": "demo",
        "variants": [{"versions": f"=={i + 1}", "source": s, "targets": ["demo/mod.py"]}
                     for i, s in enumerate(sources)]}])


def test_hostile_patch_files_give_one_line_each(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.patch")
    (tmp_path / "latin.patch").write_bytes(SMALL_PATCH.encode() + b"# caf\xe9\n")
    (tmp_path / "huge.patch").write_bytes(b"x" * (manifests.MAX_PATCH_BYTES + 1))
    manifest = _variants(tmp_path, ["fifo.patch", "latin.patch", "huge.patch", "gone.patch",
                                    "${NO_SUCH_VAR_FOR_THIS_TEST}/x.patch"])
    run = run_cli("--manifest", manifest, "manifests", "--patches", "--json")
    assert run.code == 0, run.err
    patches: list[dict[str, str]] = _artifacts(run.json)[0]["patches"]
    fifo, latin, huge, gone, unset = patches
    assert "a FIFO" in fifo["error"] and "diff" not in fifo
    assert latin["diff"].endswith("# caf\\xe9\n")
    assert "larger than 4 MiB" in huge["error"]
    assert "No such file" in gone["error"]
    assert "needs ${NO_SUCH_VAR_FOR_THIS_TEST}" in unset["error"]
    assert all("\n" not in p["error"] for p in (fifo, huge, gone, unset))
