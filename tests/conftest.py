from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolate(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never write to the real home, logs or target: everything goes to temp dirs."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("ASCENDPATCH_LOG_DIR", str(home / "logs"))
    for var in ("ASCENDPATCH_PYTHON", "ASCENDPATCH_CRASH_AT", "ASCENDPATCH_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    folder = tmp_path / "site-packages"
    folder.mkdir()
    return folder

