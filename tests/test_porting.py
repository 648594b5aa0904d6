"""capture, port and catalog-check on the real vllm-ascend releases (integration tier)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ascendpatch.kinds.diff import load_patch
from ascendpatch.manifest import loader
from ascendpatch.patchfile.diffpatch import analyze, apply_forward
from tests.kit import REPO, Run, build_wheel, run_cli, run_process, wheels

pytestmark = pytest.mark.integration

PATCHES = REPO / "patches" / "vllm-ascend" / "sampler-topk-topp-fallback"
HOUSE = ("--offline", "--wheelhouse", str(wheels.WHEELS))


def _port(*args: str) -> Run:
    return run_cli("port", "sampler-topk-topp-fallback", *args, *HOUSE)


@pytest.mark.parametrize("start, to, expected", [
    ("0.18.0", "0.18.0rc1", "[OK] vllm_ascend/sample/sampler.py hunk #1: applies exactly"),
    ("0.15.0rc1", "0.16.0rc1", "[WARN] vllm_ascend/sample/sampler.py hunk #1: applies at "
                               "offset +5"),
    ("0.19.1rc1", "0.20.2rc1", "[FAIL] vllm_ascend/sample/sampler.py hunk #1: conflict; "
                               "nearest code:"),
])
def test_port_between_real_releases(start: str, to: str, expected: str) -> None:
    result = _port("--from", start, "--to", to)
    assert expected in result.out, result.out
    assert result.code == (1 if "conflict" in expected else 0)


def _patched(version: str) -> bytes:
    original = wheels.wheel_member(version, wheels.SAMPLER)
    (patch,) = load_patch(PATCHES / f"{version}.patch")
    result = apply_forward(analyze(patch, original))
    assert result is not None
    return result


def _fake_release(house: Path, version: str, sampler: bytes) -> None:
    build_wheel(house, "vllm-ascend", version, files={
        "vllm_ascend/__init__.py": "", wheels.SAMPLER: sampler.decode()})


def test_fix_already_upstream_is_obsolete_not_applied_nor_conflict(tmp_path: Path) -> None:
    house = tmp_path / "house"
    _fake_release(house, "0.99.0", _patched("0.26.0rc1"))  # upstream adopted the fix
    result = run_cli("port", "sampler-topk-topp-fallback", "--from", "0.26.0rc1", "--to",
                     "0.99.0", "--offline", "--wheelhouse", house)
    assert "[WARN] vllm_ascend/sample/sampler.py hunk #1: already present upstream" in result.out
    assert "already fixed upstream: retire the patch for this release" in result.out
    assert "conflict" not in result.out and "applies" not in result.out


def test_port_write_adds_a_variant_and_keeps_the_catalog_comments(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    shutil.copytree(REPO / "manifests", data / "manifests")
    shutil.copytree(REPO / "patches", data / "patches")
    monkeypatch.setenv("ASCENDPATCH_DATA_DIR", str(data))
    house = tmp_path / "house"
    shifted = b"# a new header comment upstream\n" * 4 + wheels.wheel_member("0.26.0rc1",
                                                                            wheels.SAMPLER)
    _fake_release(house, "0.99.1", shifted)
    result = run_cli("port", "sampler-topk-topp-fallback", "--from", "0.26.0rc1", "--to",
                     "0.99.1", "--write", "--offline", "--wheelhouse", house)
    assert result.code == 0, result.out + result.err
    assert "applies at offset +4" in result.out and "added variant ==0.99.1" in result.out
    text = (data / "manifests/default.yaml").read_text()
    assert "# The default catalog" in text and "# 0.16.0rc1 and 0.17.0rc1 ship" in text
    manifest = loader.load(str(data / "manifests/default.yaml"))
    artifact = manifest.artifact("sampler-topk-topp-fallback")
    assert artifact is not None and artifact.variants[-1].versions == "==0.99.1"
    assert (data / "patches/vllm-ascend/sampler-topk-topp-fallback/0.99.1.patch").exists()
    # and the written variant really applies to that release, installed
    site = tmp_path / "site"
    site.mkdir()
    wheels.pip_install(wheels.make_venv(tmp_path / "v"), "--no-deps", "--no-index",
                       "--find-links", str(house), "vllm-ascend==0.99.1")
    python = tmp_path / "v" / "bin" / "python"
    applied = run_process("--python", python, "apply",
                          env={"ASCENDPATCH_DATA_DIR": str(data)})
    assert applied.code == 0 and "[OK] Applied sampler top_k/top_p fallback" in applied.out


def test_catalog_check_agrees_with_the_per_release_tests(tmp_path: Path) -> None:
    table = tmp_path / "matrix.md"
    versions = wheels.AFFECTED + wheels.UNAFFECTED
    result = run_cli("--json", "catalog-check", *versions, "--markdown", table, *HOUSE)
    assert result.code == 0, result.out
    matrix = result.json["matrix"]["sampler-topk-topp-fallback"]
    assert {v: matrix[v] for v in wheels.AFFECTED} == {v: "applies" for v in wheels.AFFECTED}
    assert {v: matrix[v] for v in wheels.UNAFFECTED} == \
        {v: "not needed" for v in wheels.UNAFFECTED}
    assert table.read_text().startswith("| artifact | 0.9.1 | 0.11.0 |")


SDISTS = ("--wheelhouse", str(wheels.CACHE / "sdists"))  # listing online, files from the cache


@pytest.fixture(scope="module")
def sdists() -> None:
    for version in wheels.SDIST_AFFECTED + wheels.FIXED_UPSTREAM:
        wheels.sdist("vllm-ascend", version)


@pytest.mark.usefixtures("sdists")
@pytest.mark.parametrize("version", wheels.FIXED_UPSTREAM)
def test_port_to_a_release_fixed_upstream_says_not_needed(version: str) -> None:
    result = run_cli("port", "sampler-topk-topp-fallback", "--to", version, *SDISTS, "--offline")
    assert result.code == 0, result.out + result.err
    assert result.out.strip() == (
        f"[SKIP] sampler top_k/top_p fallback patch: not needed for vllm-ascend {version}: "
        "fixed upstream (vllm_ascend/sample/sampler.py calls none of "
        "torch_npu.npu_top_k_top_p, torch.ops._C_ascend.npu_apply_top_k_top_p)")
    assert "conflict" not in result.out


@pytest.mark.usefixtures("sdists")
def test_catalog_check_covers_the_sdist_only_releases(tmp_path: Path) -> None:
    versions = wheels.SDIST_AFFECTED + wheels.FIXED_UPSTREAM
    result = run_cli("--json", "catalog-check", *versions, *SDISTS, "--offline")
    assert result.code == 0, result.out
    matrix = result.json["matrix"]["sampler-topk-topp-fallback"]
    assert matrix == {**{v: "applies" for v in wheels.SDIST_AFFECTED},
                      **{v: "not needed (fixed upstream)" for v in wheels.FIXED_UPSTREAM}}


@pytest.mark.usefixtures("sdists")
def test_catalog_check_new_lists_the_releases_newer_than_the_catalog() -> None:
    """Against the real index: every release above the catalog's newest, with a verdict."""
    result = run_cli("--json", "catalog-check", "--new", *SDISTS)
    assert result.code == 0 or "port by hand" in result.out, result.out + result.err
    items = [i for i in result.json["results"] if "version" in i.get("data", {})]
    verdicts = {i["data"]["version"]: i["data"]["verdict"] for i in items}
    assert {v: verdicts[v] for v in wheels.FIXED_UPSTREAM} == \
        {v: "not needed (fixed upstream)" for v in wheels.FIXED_UPSTREAM}
    assert all(verdicts.values())  # later releases too: each one has a verdict
    assert not set(verdicts) & set(wheels.AFFECTED + wheels.SDIST_AFFECTED)


# --------------------------------------------------------------------------- capture


def _edit(sampler: Path) -> None:
    text = sampler.read_text()
    assert "def random_sample(" in text
    sampler.write_text(text.replace("def random_sample(",
                                    "# local tuning: see ticket 42\ndef random_sample(", 1))


def test_capture_on_a_real_wheel_replays_byte_identically(tmp_path: Path) -> None:
    first = wheels.venv_with(tmp_path / "edited", "0.18.0")
    sampler = wheels.site_packages(first) / wheels.SAMPLER
    _edit(sampler)
    patch, manifest = tmp_path / "local.patch", tmp_path / "captured.yaml"
    result = run_cli("--python", first, "capture", "vllm-ascend", "--id", "local-sampler",
                     "--output", patch, "--manifest-out", manifest, *HOUSE)
    assert result.code == 0, result.out + result.err
    assert "captured vllm_ascend/sample/sampler.py (changed)" in result.out
    assert "vllm-ascend 0.18.0" in patch.read_text().splitlines()[0]
    assert loader.load(str(manifest)).artifact("local-sampler") is not None  # validates

    second = wheels.venv_with(tmp_path / "fresh", "0.18.0")
    applied = run_cli("--python", second, "--manifest", manifest, "apply", "local-sampler")
    assert applied.code == 0, applied.out
    assert (wheels.site_packages(second) / wheels.SAMPLER).read_bytes() == sampler.read_bytes()


def test_capture_never_swallows_an_existing_patch(tmp_path: Path) -> None:
    first = wheels.venv_with(tmp_path / "edited", "0.18.0")
    assert run_cli("--python", first, "apply").code == 0  # the catalog's sampler fix
    sampler = wheels.site_packages(first) / wheels.SAMPLER
    _edit(sampler)
    patch, manifest = tmp_path / "local.patch", tmp_path / "captured.yaml"
    result = run_cli("--python", first, "capture", "vllm-ascend", "--id", "local-sampler",
                     "--output", patch, "--manifest-out", manifest, *HOUSE)
    assert result.code == 0, result.out + result.err
    assert "diffed against sampler-topk-topp-fallback (already applied)" in result.out
    text = patch.read_text()
    assert "+# local tuning" in text and "_ascendpatch_topk_topp_op_available" not in text
    second = wheels.venv_with(tmp_path / "fresh", "0.18.0")
    applied = run_cli("--python", second, "--manifest", manifest, "apply")  # catalog + capture
    assert applied.code == 0, applied.out
    assert (wheels.site_packages(second) / wheels.SAMPLER).read_bytes() == sampler.read_bytes()


# --------------------------------------------------------------------------- failure paths


def test_capture_into_a_malformed_manifest_changes_nothing(tmp_path: Path) -> None:
    python = wheels.venv_with(tmp_path / "edited", "0.18.0")
    _edit(wheels.site_packages(python) / wheels.SAMPLER)
    manifest = tmp_path / "broken.yaml"
    manifest.write_text("name: x\nartifacts: [\n")
    patch = tmp_path / "local.patch"
    result = run_cli("--python", python, "capture", "vllm-ascend", "--output", patch,
                     "--manifest-out", manifest, *HOUSE)
    assert result.code == 2
    assert f"{manifest}: malformed YAML" in result.err and len(result.err.splitlines()) == 1
    assert not patch.exists() and manifest.read_text() == "name: x\nartifacts: [\n"


def test_port_write_is_all_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """If the manifest cannot be written, the new patch is not left behind either."""
    from ascendpatch.store import atomic

    data = tmp_path / "data"
    shutil.copytree(REPO / "manifests", data / "manifests")
    shutil.copytree(REPO / "patches", data / "patches")
    monkeypatch.setenv("ASCENDPATCH_DATA_DIR", str(data))
    house = tmp_path / "house"
    _fake_release(house, "0.99.1", b"# moved\n" * 4 + wheels.wheel_member("0.26.0rc1",
                                                                          wheels.SAMPLER))
    catalog = data / "manifests/default.yaml"
    before = catalog.read_text()
    real = atomic.write_atomic

    def failing(path: Path, payload: bytes, mode: int | None = None) -> None:
        if path == catalog:
            raise OSError(30, "Read-only file system", str(path))
        real(path, payload, mode)

    monkeypatch.setattr(atomic, "write_atomic", failing)
    result = run_cli("port", "sampler-topk-topp-fallback", "--to", "0.99.1", "--write",
                     "--offline", "--wheelhouse", house)
    assert result.code == 1
    assert "neither was changed" in result.err and len(result.err.splitlines()) == 1
    assert catalog.read_text() == before
    assert not (data / "patches/vllm-ascend/sampler-topk-topp-fallback/0.99.1.patch").exists()


def test_failed_sandbox_leaves_no_half_folder(tmp_path: Path) -> None:
    bad = tmp_path / "bad-house"
    bad.mkdir()
    (bad / wheels.wheel("0.18.0").name).write_bytes(b"not a zip")
    sandbox = tmp_path / "sandbox"
    failed = run_cli("sandbox", sandbox, "--wheelhouse", bad, "--offline")
    assert failed.code == 1 and "cannot install" in failed.err
    assert not sandbox.exists()
    good = run_cli("sandbox", sandbox, "--wheelhouse", wheels.WHEELS, "--offline")
    assert good.code == 0, good.err  # not refused as "exists and is not a sandbox"


def test_sdist_download_failure_is_one_line_exit_1(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """An index that lists the sdist but cannot serve it (a broken mirror)."""
    import http.server
    import json
    import threading

    class Mirror(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/simple/vllm-ascend/"):
                body = json.dumps({"files": [{"filename": "vllm_ascend-0.27.1rc1.tar.gz",
                                              "url": "/files/vllm_ascend-0.27.1rc1.tar.gz",
                                              "hashes": {}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
                self.end_headers()
                self.wfile.write(body)
            else:
                self.send_response(404)
                self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Mirror)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_address[1]}/simple")
    try:
        result = run_cli("port", "sampler-topk-topp-fallback", "--to", "0.27.1rc1")
    finally:
        server.shutdown()
    assert result.code == 1, result.err
    assert "cannot download vllm_ascend-0.27.1rc1.tar.gz" in result.err
    assert len(result.err.strip().splitlines()) == 1
    cache = Path(os.environ["ASCENDPATCH_CACHE"]) / "releases"
    assert not list(cache.glob("*.tar.gz"))
