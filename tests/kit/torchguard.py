"""The torch guard's world: a wheelhouse of small wheels around a stand-in torch (protected).

The "torch" here is a tiny wheel standing in for the image's torch; ``needs-new-torch`` and
``chain-top -> chain-mid`` need another one, ``friendly`` accepts it, ``step-audio2`` is the
manifest's ``no_deps`` package. tests/test_install.py installs from it with pip;
tests/test_resolvers.py plans the same installs with pip and with uv and compares them.
"""

from __future__ import annotations

from pathlib import Path

from tests.kit import build_wheel, wheels, write_manifest

TORCH_FILES = {"torch/__init__.py": "'''stand-in torch for the install tests'''\n"}
# (REQs of `install --dry-run`) of the guard's tests: refused, refused with a chain, accepted,
# no_deps with what it leaves unmet, and a plan with both
CASES = (("needs-new-torch",), ("chain-top",), ("friendly",), ("step-audio2",),
         ("friendly", "step-audio2"), ("helper",))


def world(tmp_path: Path) -> dict[str, Path]:
    house = tmp_path / "wheelhouse"
    build_wheel(house, "torch", "2.1.0+cpu", files=TORCH_FILES)
    build_wheel(house, "torch", "2.5.0", files=TORCH_FILES)
    build_wheel(house, "needs-new-torch", "1.0", ["torch>=2.5"])
    build_wheel(house, "chain-top", "1.0", ["chain-mid>=1"])
    build_wheel(house, "chain-mid", "1.0", ["torch>=2.5"])
    build_wheel(house, "friendly", "1.0", ["torch>=2.0", "helper==1.0"])
    build_wheel(house, "helper", "1.0")
    build_wheel(house, "step-audio2", "1.0", ["torch>=2.5", "librosa>=0.10", "helper"])
    python = wheels.make_venv(tmp_path / "venv")
    wheels.pip_install(python, "--no-index", "--find-links", str(house), "torch==2.1.0+cpu")
    manifest = write_manifest(tmp_path / "m.yaml", [], no_deps=["step-audio2"],
                              protected=["torch", "torch-npu"])
    return {"house": house, "python": python, "manifest": manifest,
            "site": wheels.site_packages(python)}
