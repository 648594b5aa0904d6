from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit import cachefill, isolate, properties

# The property suites explore new inputs on every local run; in CI (CI=true) they replay a fixed
# sequence without wall-clock deadlines (tests/kit/properties.py). A failure found locally
# becomes a plain test next to its suite.
properties.register()

# Any write to the real home directory fails the test (tests/kit/homeguard.py); the files that
# take minutes run first, and --durations also lists the slowest files (tests/kit/schedule.py).
pytest_plugins = ["tests.kit.homeguard", "tests.kit.schedule"]


@pytest.fixture(scope="session", autouse=True)
def _sockets_in_the_runs_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """vLLM binds its ZeroMQ sockets in the system temp folder and leaves them there when the
    server is killed (vllm/utils/network_utils.get_open_zmq_ipc_path): every real server of
    the run, module fixtures' included, keeps them in the run's own temp folder instead."""
    rpc = tmp_path_factory.mktemp("rpc", numbered=False)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("VLLM_RPC_BASE_PATH", str(rpc))
        yield


@pytest.fixture(autouse=True)
def _isolate(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never write to the real home, logs or target: everything goes to temp dirs."""
    isolate(monkeypatch, tmp_path_factory.mktemp("home"))


@pytest.fixture
def site(tmp_path: Path) -> Path:
    folder = tmp_path / "site-packages"
    folder.mkdir()
    return folder


@pytest.fixture
def builds_the_checkout() -> Iterator[None]:
    """For a test that builds the checkout (pip, install.sh, bundle): one such build at a time
    across the suite's processes (tests/kit/cachefill.building_the_checkout says why)."""
    with cachefill.building_the_checkout():
        yield
