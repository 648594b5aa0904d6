"""Model-package artifacts: the vLLM plugin adapter and the SmoothQuant drop-in (real venvs).

`vllm` here is a STAND-IN wheel built by the tests with vLLM's plugin and registry API
(load_general_plugins filtered by VLLM_PLUGINS; ModelRegistry.register_model with
"module:Class" strings and get_supported_archs), for the install lifecycle. The registry
semantics (override of a shipped architecture, what verify resolves) are proven against the
real vllm wheel in tests/test_plugin_realvllm.py.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from ascendpatch.hashing import sha256_bytes
from tests.kit import Run, build_wheel, run_cli, tree_digest, wheels, write_manifest

pytestmark = pytest.mark.integration

VLLM_INIT = '''"""STAND-IN vllm built by the ascendpatch tests: the plugin/registry API only."""


class _Registry:
    def __init__(self):
        self.models = {"LlamaForCausalLM": "vllm.fake:Llama"}

    def register_model(self, arch, target):
        if isinstance(target, str) and target.count(":") != 1:
            raise ValueError("Expected a string in the format `<module>:<class>`")
        self.models[arch] = target

    def get_supported_archs(self):
        return self.models.keys()


ModelRegistry = _Registry()
'''
VLLM_PLUGINS = '''"""STAND-IN vllm.plugins: load_general_plugins as vLLM does it."""
import os
from importlib.metadata import entry_points

plugins_loaded = False


def load_general_plugins():
    global plugins_loaded
    if plugins_loaded:
        return
    plugins_loaded = True
    allowed = os.environ.get("VLLM_PLUGINS")
    names = None if allowed is None else allowed.split(",")
    for ep in entry_points(group="vllm.general_plugins"):
        if names is None or ep.name in names:
            ep.load()()
'''
ADAPTER = '''"""Muse-Glimmer adapter (test copy)."""


class MuseGlimmerForConditionalGeneration:
    def __init__(self, *, vllm_config, prefix=""):  # as vLLM's initialize_model calls it
        self.prefix = prefix
'''
W8A8 = "def apply(layer, x):\n    return x  # upstream w8a8_dynamic (test copy)\n"
SMOOTH = "def apply(layer, x):\n    return x / layer.smooth_scale  # SmoothQuant drop-in\n"


def _vllm_wheel(house: Path) -> Path:
    return build_wheel(house, "vllm", "0.22.1", files={"vllm/__init__.py": VLLM_INIT,
                                                       "vllm/plugins/__init__.py": VLLM_PLUGINS})


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    house = tmp_path / "house"
    _vllm_wheel(house)
    python = wheels.make_venv(tmp_path / "venv")
    wheels.pip_install(python, "--no-index", "--find-links", str(house), "vllm==0.22.1")
    model = tmp_path / "Muse-Glimmer-30B-w8a8-vllm-x86"
    (model / "patches" / "vllm_ascend").mkdir(parents=True)
    (model / "patches" / "muse_glimmer.py").write_text(ADAPTER)
    (model / "patches" / "vllm_ascend" / "w8a8_dynamic.py.smooth").write_text(SMOOTH)
    manifest = write_manifest(tmp_path / "muse.yaml", [
        {"id": "muse-glimmer-adapter", "title": "Muse-Glimmer model adapter", "kind": "plugin",
         "distribution": "vllm", "versions": ">=0.22",
         "source": "${MODEL_DIR}/patches/muse_glimmer.py",
         "options": {"architectures": ["MuseGlimmerForConditionalGeneration"]}},
        {"id": "smoothquant", "title": "SmoothQuant W8A8 drop-in", "kind": "dropin",
         "enabled": False, "distribution": "vllm-ascend", "versions": ">=0.22.1rc1",
         "source": "${MODEL_DIR}/patches/vllm_ascend/w8a8_dynamic.py.smooth",
         "targets": ["vllm_ascend/quantization/methods/w8a8_dynamic.py"],
         "sha256": {"vllm_ascend/quantization/methods/w8a8_dynamic.py": {
             "before": [sha256_bytes(W8A8.encode())]}},
         "options": {"scales_env": "VLLM_ASCEND_SMOOTH_SCALES"}},
    ], launch={"tensor_parallel_size": 2})
    return {"python": python, "house": house, "manifest": manifest, "model": model,
            "site": wheels.site_packages(python)}


def cli(world: dict[str, Path], *args: str, env: dict[str, str] | None = None) -> Run:
    os.environ["MODEL_DIR"] = str(world["model"])
    try:
        return run_cli("--python", world["python"], "--manifest", world["manifest"], *args)
    finally:
        del os.environ["MODEL_DIR"]


def _registered_in_fresh_interpreter(python: Path) -> bool:
    code = ("import os; os.environ['VLLM_PLUGINS'] = 'muse-glimmer-adapter'\n"
            "from vllm.plugins import load_general_plugins; load_general_plugins()\n"
            "from vllm import ModelRegistry\n"
            "print('MuseGlimmerForConditionalGeneration' in ModelRegistry.get_supported_archs())")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True,
                         cwd="/")
    return out.stdout.strip() == "True"


def test_adapter_plugin_lifecycle(world: dict[str, Path]) -> None:
    site = world["site"]
    before = tree_digest(site)
    assert not _registered_in_fresh_interpreter(world["python"])
    applied = cli(world, "apply", "muse-glimmer-adapter")
    assert applied.code == 0, applied.out + applied.err
    assert applied.out.strip() == "[OK] Applied Muse-Glimmer model adapter"
    assert _registered_in_fresh_interpreter(world["python"])
    verify = cli(world, "verify", "--no-probes")
    assert ("[OK] vLLM's ModelRegistry resolves MuseGlimmerForConditionalGeneration to the "
            "adapter's muse_glimmer:MuseGlimmerForConditionalGeneration"
            in verify.out), verify.out
    assert "already applied" in cli(world, "apply", "muse-glimmer-adapter").out

    # Reinstalling vllm (pip --force-reinstall) does not remove the adapter.
    wheels.pip_install(world["python"], "--force-reinstall", "--no-deps", "--no-index",
                       "--find-links", str(world["house"]), "vllm==0.22.1")
    assert _registered_in_fresh_interpreter(world["python"])

    # Revert: the distribution and all its files are gone, no orphan, no empty folder.
    reverted = cli(world, "revert", "muse-glimmer-adapter")
    assert reverted.code == 0, reverted.out
    after = {k: v for k, v in tree_digest(site).items() if not k.startswith(".ascendpatch")}
    assert {k: v for k, v in after.items() if "__pycache__" not in k} == \
        {k: v for k, v in before.items() if "__pycache__" not in k}
    assert not list(site.glob("ascendpatch_plugin_*"))
    assert not _registered_in_fresh_interpreter(world["python"])


def test_an_edited_adapter_source_is_applied_not_a_conflict(world: dict[str, Path]) -> None:
    """The adapter's source edited after apply: the installed module (and the RECORD that
    hashes it) are what ascendpatch wrote, so the next apply installs the new content (on
    main: "conflict in muse_glimmer.py", as if a stranger had written it); revert still
    removes everything."""
    site = world["site"]
    before = tree_digest(site)
    assert cli(world, "apply", "muse-glimmer-adapter").code == 0
    (world["model"] / "patches" / "muse_glimmer.py").write_text(ADAPTER + "FIXED = True\n")
    again = cli(world, "apply", "muse-glimmer-adapter")
    assert again.code == 0, again.out + again.err
    assert again.out.startswith("[OK] Applied Muse-Glimmer model adapter (new content in "
                                "muse_glimmer.py, "), again.out
    assert (site / "muse_glimmer.py").read_text().endswith("FIXED = True\n")
    assert cli(world, "revert", "muse-glimmer-adapter").code == 0
    after = {k: v for k, v in tree_digest(site).items()
             if not k.startswith(".ascendpatch") and "__pycache__" not in k}
    assert after == {k: v for k, v in before.items() if "__pycache__" not in k}


def test_removed_adapter_makes_verify_fail_by_name(world: dict[str, Path]) -> None:
    assert cli(world, "apply", "muse-glimmer-adapter").code == 0
    for path in world["site"].glob("ascendpatch_plugin_*"):
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    verify = cli(world, "verify", "--no-probes")
    assert verify.code == 1
    assert "Muse-Glimmer model adapter" in verify.out and "[FAIL]" in verify.out


# --------------------------------------------------------------------------- SmoothQuant


def _safetensors(path: Path, vectors: int) -> Path:
    header = {f"model.layers.{i}.smooth_scale": {"dtype": "F32", "shape": [8],
                                                 "data_offsets": [i * 32, i * 32 + 32]}
              for i in range(vectors)}
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 32 * vectors)
    return path


@pytest.fixture
def quant(world: dict[str, Path], tmp_path: Path) -> dict[str, Path]:
    wheels.pip_install(world["python"], "--no-index", "--find-links", str(_ascend(tmp_path)),
                       "vllm-ascend==0.22.1rc2")
    world["scales"] = _safetensors(tmp_path / "smooth_scales.safetensors", 364)
    return world


def _ascend(tmp_path: Path) -> Path:
    house = tmp_path / "ascend-house"
    build_wheel(house, "vllm-ascend", "0.22.1rc2", files={
        "vllm_ascend/__init__.py": "",
        "vllm_ascend/quantization/methods/w8a8_dynamic.py": W8A8})
    return house


@pytest.mark.parametrize("dropin, scales, level, fragment", [
    (False, False, "SKIP", "SmoothQuant not in use"),
    (True, False, "FAIL", "the SmoothQuant drop-in is installed but VLLM_ASCEND_SMOOTH_SCALES "
                          "is not set: half installed"),
    (False, True, "FAIL", "VLLM_ASCEND_SMOOTH_SCALES is set but the SmoothQuant drop-in is not "
                          "installed: half installed"),
    (True, True, "OK", "SmoothQuant: drop-in installed and 364 smooth scale vectors"),
])
def test_smoothquant_both_halves_or_neither(quant: dict[str, Path], monkeypatch:
                                            pytest.MonkeyPatch, dropin: bool, scales: bool,
                                            level: str, fragment: str) -> None:
    if dropin:
        assert cli(quant, "apply", "--with", "smoothquant").code == 0
    if scales:
        monkeypatch.setenv("VLLM_ASCEND_SMOOTH_SCALES", str(quant["scales"]))
    out = cli(quant, "verify", "--no-probes").out
    assert any(line.startswith(f"[{level}]") and fragment in line for line in out.splitlines()), \
        out
    if dropin and scales:
        assert ("[WARN] vLLM logs 'Unknown vLLM environment variable detected: "
                "VLLM_ASCEND_SMOOTH_SCALES' at start-up: harmless") in out


def test_serve_log_needs_the_line_on_every_tp_rank(quant: dict[str, Path], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli(quant, "apply", "--with", "smoothquant").code == 0
    monkeypatch.setenv("VLLM_ASCEND_SMOOTH_SCALES", str(quant["scales"]))
    line = "(Worker_TP{r} pid=4242) INFO [smooth-w8a8] loaded 364 smooth scale vectors\n"
    one = tmp_path / "tp2-one.log"
    one.write_text("INFO Initializing a V1 LLM engine with config: tensor_parallel_size=2\n"
                   + line.format(r=0) + "INFO: Application startup complete.\n")
    bad = cli(quant, "verify", "--no-probes", "--serve-log", str(one))
    assert bad.code == 1
    assert ("[FAIL] serve log: the SmoothQuant line appears 1 time(s) for "
            "tensor_parallel_size=2") in bad.out
    both = tmp_path / "tp2-both.log"
    both.write_text(one.read_text() + line.format(r=1))
    good = cli(quant, "verify", "--no-probes", "--serve-log", str(both))
    assert "[OK] serve log: '[smooth-w8a8] loaded N smooth scale vectors' on all 2 TP" in good.out


def test_torch_pt_scales_are_counted_in_the_target(quant: dict[str, Path], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch") if not os.environ.get("CI") else __import__("torch")
    scales = tmp_path / "smooth_scales.pt"
    torch.save({f"layer{i}": torch.ones(16) for i in range(5)}, scales)
    # make this test runner's CPU torch importable in the target venv (a .pth line)
    (quant["site"] / "runner-torch.pth").write_text(str(Path(str(torch.__file__)).parent.parent))
    assert cli(quant, "apply", "--with", "smoothquant").code == 0
    monkeypatch.setenv("VLLM_ASCEND_SMOOTH_SCALES", str(scales))
    out = cli(quant, "verify", "--no-probes").out
    assert "SmoothQuant: drop-in installed and 5 smooth scale vectors" in out, out
