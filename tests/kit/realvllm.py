"""The real vLLM, importable on CPU torch, as an independent reference (integration tier).

``pip download --no-deps vllm==0.22.1`` (the vLLM of the muse-glimmer-w8a8 stack) lands in the
test cache (``tests.kit.wheels.CACHE``, outside the checkout); pip installs it ``--no-deps
--target`` next to a second folder with the few Python packages its sampler, ``ModelRegistry``
and plugin loader import. Nothing goes into the test venv: a subprocess gets both folders on
``PYTHONPATH`` and uses the venv's CPU torch.

The dependency list was found by trying (import, read the ModuleNotFoundError, add the package
vLLM's METADATA declares for it). It is what ``vllm.v1.sample.ops.topk_topp_sampler``,
``vllm.ModelRegistry`` and ``vllm.plugins`` need; vLLM's other 60 requirements (CUDA kernels,
flashinfer, xgrammar, the OpenAI server ...) are not imported by them. The versions are the
ones this was tested with. Each folder is complete or absent: pip fills a temp folder that is
renamed into place.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.kit import cachefill, wheels

VERSION = "0.22.1"
DEPS = ("numpy==2.4.6", "regex==2026.11.19", "pydantic==2.14.4", "cbor2==6.3.0",
        "psutil==7.2.2", "pyzmq==27.3.0", "transformers==5.24.0", "gguf==0.19.0",
        "aiohttp==3.14.5", "requests==2.34.2", "openai-harmony==0.0.8", "openai==3.57.0")
ROOT = wheels.CACHE / "vllm"
TAG = f"py{sys.version_info[0]}{sys.version_info[1]}"


def wheel() -> Path:
    return cachefill.downloaded(ROOT, f"vllm-{VERSION}-*.whl", f"vllm=={VERSION}")[0]


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                   check=True)


def _installed(folder: Path, *args: str) -> Path:
    """``pip install --target`` into ``folder``, all or nothing, once (tests/kit/cachefill)."""
    return cachefill.complete(folder, lambda partial: _pip("install", "-q", "--target",
                                                           str(partial), *args))


def pythonpath() -> str:
    """``PYTHONPATH`` that makes the real vllm importable with this interpreter's torch."""
    code = _installed(ROOT / f"vllm-{VERSION}-{TAG}", "--no-deps", str(wheel()))
    deps = _installed(ROOT / f"deps-{VERSION}-{TAG}", *DEPS)
    return os.pathsep.join([str(code), str(deps)])


def env(*extra: Path) -> dict[str, str]:
    """The environment of a subprocess that imports the real vllm (and ``extra`` folders)."""
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join([*(str(p) for p in extra), pythonpath()])
    out["VLLM_TARGET_DEVICE"] = "cpu"
    out.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    return out
