"""The built wheel: declared license = shipped LICENSE, metadata, no setuptools deprecation."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.kit import REPO

# each test builds the checkout, or packs the copy installed from it
pytestmark = pytest.mark.usefixtures("builds_the_checkout")

MACHINE_ENV = dict(os.environ)  # the machine's pip configuration (conftest isolates pip later)


def test_license_file_is_the_declared_apache_2_license() -> None:
    text = (REPO / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'license = "Apache-2.0"' in pyproject and 'license-files = ["LICENSE"]' in pyproject


@pytest.mark.integration
def test_wheel_builds_without_deprecation_and_carries_license_and_urls(tmp_path: Path) -> None:
    env = {**MACHINE_ENV, "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w",
                           str(tmp_path), str(REPO)], capture_output=True, text=True, env=env,
                          timeout=600, check=False, stdin=subprocess.DEVNULL)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "Deprecat" not in log, [line for line in log.splitlines() if "eprecat" in line]
    (wheel,) = tmp_path.glob("ascendpatch-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        meta = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    text = meta.decode()
    assert "License-Expression: Apache-2.0" in text
    assert "License-File: LICENSE" in text
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "Classifier: Programming Language :: Python :: 3.10" in text
    assert text.count("Project-URL: ") >= 2
    assert "importlib-metadata" not in text.lower() and "importlib_metadata" not in text
    for schema in ("output.schema.json", "manifest.schema.json", "snapshot.schema.json"):
        assert f"ascendpatch/data/{schema}" in names
