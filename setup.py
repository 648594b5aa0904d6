"""Build hook: ship the catalog (manifests/ and patches/) inside the wheel.

In a checkout the catalog lives at the top level, where maintainers edit it; an installed
ascendpatch (install.sh puts it in a venv of its own) finds the copy at ascendpatch/_bundled.
See ascendpatch/data.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildWithCatalog(build_py):
    def run(self) -> None:
        super().run()
        bundled = Path(self.build_lib) / "ascendpatch" / "_bundled"
        for name in ("manifests", "patches"):
            shutil.copytree(ROOT / name, bundled / name, dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildWithCatalog})
