"""The model adapter against the REAL vLLM (vllm 0.22.1 wheel, tests/kit/realvllm.py): its
``ModelRegistry`` and ``load_general_plugins``, not a stand-in (issue 16 §3).

The target is a real venv with the cached vllm wheel's package (linked) and dist-info (copied)
in its site-packages, and its few Python dependencies and this interpreter's CPU torch through
a ``.pth`` file. The adapter declares a
new architecture and one vLLM already ships (Qwen2VLForConditionalGeneration, a multimodal
class, as a fixed multimodal placeholder would replace): both must resolve to the adapter's
own ``module:Class``, the override is announced once, and ``verify`` tells a registry that
resolves the shipped name elsewhere from one that resolves it to the adapter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from ascendpatch.inspect.checks import plugins
from ascendpatch.kinds.plugin import adapter
from ascendpatch.manifest import loader
from ascendpatch.results import Level
from tests.kit import realvllm, run_cli, wheels, write_manifest

pytestmark = pytest.mark.integration

NEW_ARCH = "MuseGlimmerForConditionalGeneration"
SHIPPED_ARCH = "Qwen2VLForConditionalGeneration"
SHIPPED_TARGET = "vllm.model_executor.models.qwen2_vl:Qwen2VLForConditionalGeneration"
ADAPTER = '''"""Muse-Glimmer adapter (test copy): a new architecture and a fixed built-in one."""
import torch.nn as nn


class MuseGlimmerForConditionalGeneration(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()

    def embed_input_ids(self, input_ids):
        return input_ids

    def forward(self, input_ids, positions, **kwargs):
        return input_ids

    def compute_logits(self, hidden_states):
        return hidden_states


class PatchedQwen2VL(MuseGlimmerForConditionalGeneration):
    """The placeholder-alignment fix, replacing vLLM's own class."""
'''
# What the independent run on a real server found: a wrapper whose __init__ hands everything
# on. vLLM's initialize_model sees no vllm_config/prefix names, guesses old-style arguments
# and the Worker dies with "missing ... 'vllm_config'".
PASS_THROUGH = ADAPTER.replace('''    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()''', '''    def __init__(self, *args, **kwargs):
        super().__init__()''')
NOT_A_MODEL = ADAPTER.replace('''    def compute_logits(self, hidden_states):
        return hidden_states
''', '').replace('''    def embed_input_ids(self, input_ids):
        return input_ids
''', '')
RESOLVE = '''
import json, logging, os, sys
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
from vllm.plugins import load_general_plugins
logging.getLogger("vllm.ascendpatch").addHandler(Keep())
load_general_plugins()
from vllm import ModelRegistry
out, loaded = {}, {}
for arch in sys.argv[1:]:
    entry = ModelRegistry.models.get(arch)
    out[arch] = None if entry is None else "%s:%s" % (entry.module_name, entry.class_name)
    if entry is not None and not entry.module_name.startswith("vllm."):
        # what vLLM imports for the architecture (vLLM's own modules need CUDA-era deps)
        cls = entry.load_model_cls()
        loaded[arch] = "%s:%s" % (cls.__module__, cls.__qualname__)
print(json.dumps({"resolved": out, "loaded": loaded, "log": records}))
'''
OTHER_PLUGIN = '''
def register():
    from vllm import ModelRegistry
    ModelRegistry.register_model("Qwen2VLForConditionalGeneration", "other_fix:OtherQwen2VL")
'''


@pytest.fixture(scope="module")
def vllm_path() -> str:
    return realvllm.pythonpath()


@pytest.fixture
def world(tmp_path: Path, vllm_path: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    python = wheels.make_venv(tmp_path / "venv")
    site = wheels.site_packages(python)
    torch_site = sysconfig.get_paths()["purelib"]  # this interpreter's CPU torch
    extra = tmp_path / "later-on-sys-path"
    extra.mkdir()
    code, deps = vllm_path.split(os.pathsep)
    # vllm "installed" in the venv: its package linked from the cache (read only), its
    # dist-info copied, so that the adapter lands in this venv, next to vllm, as on a host
    (site / "vllm").symlink_to(Path(code) / "vllm", target_is_directory=True)
    for info in Path(code).glob("vllm-*.dist-info"):
        shutil.copytree(info, site / info.name)
    (site / "realvllm.pth").write_text("\n".join([deps, torch_site, str(extra)]) + "\n")
    model = tmp_path / "model"
    (model / "patches").mkdir(parents=True)
    (model / "patches" / "muse_glimmer.py").write_text(ADAPTER)
    manifest = write_manifest(tmp_path / "muse.yaml", [
        {"id": "muse-glimmer-adapter", "title": "Muse-Glimmer model adapter", "kind": "plugin",
         "distribution": "vllm", "versions": ">=0.22",
         "source": "${MODEL_DIR}/patches/muse_glimmer.py",
         "options": {"architectures": [NEW_ARCH, SHIPPED_ARCH],
                     "classes": {SHIPPED_ARCH: "PatchedQwen2VL"}}}])
    monkeypatch.setenv("MODEL_DIR", str(model))
    monkeypatch.setenv("VLLM_TARGET_DEVICE", "cpu")
    monkeypatch.setenv("VLLM_PLUGINS", "muse-glimmer-adapter")
    return {"python": python, "site": site, "manifest": manifest, "extra": extra, "model": model}


def _resolve(world: dict[str, Path]) -> dict[str, object]:
    proc = subprocess.run([str(world["python"]), "-c", RESOLVE, NEW_ARCH, SHIPPED_ARCH],
                          capture_output=True, text=True, check=False, cwd="/", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert isinstance(doc, dict)
    return doc


def test_adapter_overrides_a_shipped_architecture(world: dict[str, Path]) -> None:
    before = _resolve(world)["resolved"]
    assert before == {NEW_ARCH: None, SHIPPED_ARCH: SHIPPED_TARGET}  # vLLM's own class

    applied = run_cli("--python", world["python"], "--manifest", world["manifest"], "apply")
    assert applied.code == 0, applied.out + applied.err

    after = _resolve(world)
    # the class vLLM would load for each architecture is the adapter's
    assert after["resolved"] == after["loaded"] == {
        NEW_ARCH: f"muse_glimmer:{NEW_ARCH}", SHIPPED_ARCH: "muse_glimmer:PatchedQwen2VL"}
    messages = after["log"]
    assert isinstance(messages, list)
    log = [m for m in messages if "in its place" in str(m)]
    assert log == [f"ascendpatch adapter muse-glimmer-adapter: {SHIPPED_ARCH} is built into "
                   f"vLLM as {SHIPPED_TARGET}; registering muse_glimmer:PatchedQwen2VL in its "
                   "place"]

    verify = run_cli("--python", world["python"], "--manifest", world["manifest"], "verify",
                     "--no-probes")
    assert (f"[OK] vLLM's ModelRegistry resolves {SHIPPED_ARCH} to the adapter's "
            "muse_glimmer:PatchedQwen2VL") in verify.out, verify.out
    assert f"resolves {NEW_ARCH} to the adapter's muse_glimmer:{NEW_ARCH}" in verify.out


def test_verify_fails_when_another_class_wins(world: dict[str, Path]) -> None:
    """Another plugin, found later on sys.path, registers the shipped name after the adapter:
    the name still exists, but the registry resolves it elsewhere, and verify says so."""
    assert run_cli("--python", world["python"], "--manifest", world["manifest"],
                   "apply").code == 0
    extra = world["extra"]
    (extra / "other_fix_plugin.py").write_text(OTHER_PLUGIN)
    info = extra / "other_fix_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: other-fix-plugin\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text("[vllm.general_plugins]\n"
                                           "other_fix = other_fix_plugin:register\n")
    artifact = loader.load(str(world["manifest"])).artifact("muse-glimmer-adapter")
    assert artifact is not None
    env = {**os.environ}
    env.pop("VLLM_PLUGINS")  # what vLLM loads on an NPU host: every plugin
    results = {r.id: r for r in plugins.check(world["python"], [adapter(artifact)], True,
                                                env)}
    shipped = results[f"plugin:{SHIPPED_ARCH}"]
    assert shipped.level is Level.FAIL
    assert shipped.message.startswith(f"vLLM's ModelRegistry resolves {SHIPPED_ARCH} to "
                                      "other_fix:OtherQwen2VL, not to the adapter's "
                                      "muse_glimmer:PatchedQwen2VL")
    assert results[f"plugin:{NEW_ARCH}"].level is Level.OK


@pytest.mark.parametrize(("source", "reason"), [
    (PASS_THROUGH, "does not name vllm_config and prefix: vLLM's initialize_model then takes it "
                   "for an old-style model class"),
    (NOT_A_MODEL, "vLLM's is_text_generation_model and is_pooling_model both reject it"),
], ids=["args-kwargs", "no-model-interface"])
def test_an_adapter_vllm_cannot_instantiate_fails_verify(world: dict[str, Path], source: str,
                                                         reason: str) -> None:
    """The registry resolves both architectures to the adapter, but vLLM's own rules (applied
    by the probe in the target, with the real vllm 0.22.1) reject the class: verify fails and
    says why. On 89ee836 verify said "[OK] vLLM's ModelRegistry resolves ..." and the Worker
    died at start-up."""
    (world["model"] / "patches" / "muse_glimmer.py").write_text(source)
    applied = run_cli("--python", world["python"], "--manifest", world["manifest"], "apply")
    assert applied.code == 0, applied.out + applied.err
    verify = run_cli("--python", world["python"], "--manifest", world["manifest"], "verify",
                     "--no-probes")
    assert verify.code == 1, verify.out
    for arch, cls in ((NEW_ARCH, NEW_ARCH), (SHIPPED_ARCH, "PatchedQwen2VL")):
        line = next(x for x in verify.out.splitlines() if f"resolves {arch} to" in x)
        assert line.startswith(f"[FAIL] vLLM's ModelRegistry resolves {arch} to the adapter's "
                               f"muse_glimmer:{cls}, but vLLM cannot instantiate that "
                               "class: "), line
        assert reason in line, line
