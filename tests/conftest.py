from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolate(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never write to the real home, logs or target: everything goes to temp dirs."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("ASCENDPATCH_LOG_DIR", str(home / "logs"))
    monkeypatch.setenv("ASCENDPATCH_CACHE", str(home / ".cache" / "ascendpatch"))
    for var in ("ASCENDPATCH_PYTHON", "ASCENDPATCH_CRASH_AT", "ASCENDPATCH_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    # The machine's pip configuration (extra indexes, find-links, a global constraints file)
    # must not leak into tests that run real pip: each test says where packages come from.
    for var in [v for v in os.environ if v.startswith("PIP_")]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    folder = tmp_path / "site-packages"
    folder.mkdir()
    return folder

