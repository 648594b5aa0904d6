"""The model adapter in a REAL vLLM 0.22.1 server (tests/kit/realserver.py; integration tier).

The target is a small venv of its own: vLLM's package linked from the cached server venv
(read only) and its dist-info copied, so that ``apply`` writes the plugin into this venv and
never into the shared cache; torch and vLLM's other requirements come from the cached venv
through a ``.pth`` file. The adapter replaces vLLM's own ``LlamaForCausalLM`` (the tiny test
model's architecture) with a subclass that prints a marker when it is built: the marker in the
server's log shows that the real Worker instantiated the adapter. After ``revert`` the registry
resolves the built-in class again and a new server builds it (no marker).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.kit import realserver, run_cli, wheels, write_manifest

pytestmark = pytest.mark.integration

MARKER = "ASCENDPATCH TEST ADAPTER built"
ADAPTER = f'''"""Test adapter (ascendpatch tests): vLLM's own Llama, marked when it is built."""
import os
import sys

from vllm.model_executor.models.llama import LlamaForCausalLM


class MarkedLlama(LlamaForCausalLM):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        print("{MARKER} in pid %d" % os.getpid(), file=sys.stderr, flush=True)
'''
BUILTIN = "vllm.model_executor.models.llama:LlamaForCausalLM"
RESOLVE = '''
import json
from vllm.plugins import load_general_plugins
load_general_plugins()
from vllm import ModelRegistry
entry = ModelRegistry.models["LlamaForCausalLM"]
print(json.dumps("%s:%s" % (entry.module_name, entry.class_name)))
'''


@pytest.fixture
def target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    cached = next((realserver.venv() / "lib").glob("python*/site-packages"))
    python = wheels.make_venv(tmp_path / "venv")
    site = wheels.site_packages(python)
    (site / "vllm").symlink_to(cached / "vllm", target_is_directory=True)
    for info in cached.glob("vllm-*.dist-info"):
        shutil.copytree(info, site / info.name)
    (site / "realserver.pth").write_text(f"{cached}\n")
    script = python.parent / "vllm"  # the command a user runs, on this venv's interpreter
    script.write_text(f"#!{python}\nimport sys\nfrom vllm.entrypoints.cli.main import main\n"
                      "if __name__ == '__main__':  # vLLM spawns: the main module is imported\n"
                      "    sys.exit(main())\n")
    script.chmod(0o755)
    source = tmp_path / "model-patches" / "marked_llama.py"
    source.parent.mkdir()
    source.write_text(ADAPTER)
    manifest = write_manifest(tmp_path / "adapter.yaml", [
        {"id": "marked-llama", "title": "marked Llama adapter", "kind": "plugin",
         "distribution": "vllm", "versions": ">=0.22", "source": str(source),
         "options": {"architectures": ["LlamaForCausalLM"],
                     "classes": {"LlamaForCausalLM": "MarkedLlama"}}}])
    for key, value in realserver.ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(realserver, "vllm", lambda: script)  # serve() runs this venv's vllm
    return {"python": python, "site": site, "manifest": manifest}


def _resolved(python: Path) -> str:
    run = subprocess.run([str(python), "-c", RESOLVE], capture_output=True, text=True,
                         env=realserver.server_env(), cwd="/", timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert isinstance(found, str)
    return found


def test_the_real_worker_builds_the_adapter_and_revert_brings_back_vllms_class(
        target: dict[str, Path], tmp_path: Path) -> None:
    def ap(*args: str) -> str:
        run = run_cli("--python", target["python"], "--manifest", target["manifest"], *args)
        assert run.code == 0, run.out + run.err
        return run.out

    assert _resolved(target["python"]) == BUILTIN
    ap("apply")
    verify = run_cli("--python", target["python"], "--manifest", target["manifest"], "verify",
                     "--no-probes")  # fails for this CPU host's missing CANN, not the adapter
    assert ("[OK] vLLM's ModelRegistry resolves LlamaForCausalLM to the adapter's "
            "marked_llama:MarkedLlama, a class vLLM can instantiate") in verify.out, verify.out
    with realserver.serve(tmp_path) as server:
        log = server.log_text()
    assert MARKER in log, log[-3000:]
    assert ("ascendpatch adapter marked-llama: LlamaForCausalLM is built into vLLM as "
            f"{BUILTIN}; registering marked_llama:MarkedLlama in its place") in log
    assert "old-style model class" not in log

    assert "Reverted marked Llama adapter" in ap("revert")
    assert not list(target["site"].glob("ascendpatch_plugin_*"))
    assert _resolved(target["python"]) == BUILTIN
    with realserver.serve(tmp_path) as server:
        log = server.log_text()
    assert MARKER not in log and "registering marked_llama" not in log, log[-3000:]
