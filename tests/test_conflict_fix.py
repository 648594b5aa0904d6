"""A conflict's fix names the target's own pip, and following it works (integration tier:
the real vllm-ascend 0.18.0 wheel in a real venv, real pip)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit import run_cli, wheels

pytestmark = pytest.mark.integration


def _venv(root: Path, with_pip: bool) -> tuple[Path, str]:
    """A venv with the real 0.18.0 wheel, and the pip its fix must name: its own, or (a target
    without pip, as the vllm-omni image's system python) this tool's pip with --python."""
    if not with_pip:
        python = wheels.venv_with(root, "0.18.0")
        return python, f"{sys.executable} -m pip --python {python}"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    python = root / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    str(wheels.wheel("0.18.0"))], check=True)
    return python, f"{python} -m pip"


@pytest.mark.parametrize("with_pip", [True, False])
def test_the_conflict_fix_is_the_targets_own_pip_and_it_works(tmp_path: Path,
                                                              with_pip: bool) -> None:
    """On main the fix said a bare `pip install --force-reinstall ...`: whichever pip is first
    on PATH, which is seldom the image's."""
    python, pip = _venv(tmp_path / "venv", with_pip)
    sampler = wheels.site_packages(python) / wheels.SAMPLER
    sampler.write_text(sampler.read_text().replace("top_k", "topk_edited"))  # a local edit
    refused = run_cli("--python", python, "--json", "apply")
    assert refused.code == 1
    (item,) = refused.json["results"]
    assert item["status"] == "conflict"
    expected = f"{pip} install --force-reinstall --no-deps vllm-ascend==0.18.0"
    assert item["fix"] == (f"reinstall the package ({expected}) and apply again, or port the "
                           "patch to this content")
    command = re.fullmatch(r"reinstall the package \((.*)\) and apply again.*", item["fix"])
    assert command is not None
    subprocess.run([*shlex.split(command[1]), "--no-index", "--find-links", str(wheels.WHEELS)],
                   check=True, capture_output=True)
    applied = run_cli("--python", python, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert "[OK] Applied sampler top_k/top_p fallback patch" in applied.out


def test_without_an_interpreter_the_fix_says_whose_pip(tmp_path: Path) -> None:
    python = wheels.venv_with(tmp_path / "venv", "0.18.0")
    site = wheels.site_packages(python)
    sampler = site / wheels.SAMPLER
    sampler.write_text(sampler.read_text().replace("top_k", "topk_edited"))
    status = run_cli("--site-packages", site, "status")
    assert status.code == 1
    assert ("fix: reinstall the package with the pip of the image's own python (python -m pip "
            "install --force-reinstall --no-deps vllm-ascend==0.18.0)") in status.out
