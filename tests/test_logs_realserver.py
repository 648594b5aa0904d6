"""`ascendpatch logs` on what a real vLLM server writes (integration tier).

These need the real-server kit another issue builds (``tests/kit/realserver.py``): a real
vLLM 0.22.1 server started on this host, its crash on the first top_p < 1 request (the
sampler's top-k/top-p traceback, about 135 lines), and two starts of the same server. Until
that kit exists they skip, saying so; the interface they expect is:

- ``realserver.crash_log() -> Path``: the 0.22.1 server's log of that crash;
- ``realserver.start_logs(count) -> list[Path]``: ``count`` logs of real starts, unchanged;
- ``realserver.start_log_with_error() -> Path``: a real start plus one error line.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from tests.kit import run_cli

pytestmark = pytest.mark.integration


def _kit() -> ModuleType:
    try:
        return importlib.import_module("tests.kit.realserver")
    except ModuleNotFoundError:
        pytest.skip("needs tests/kit/realserver.py, the real-server kit of another issue")


def test_the_real_sampler_crash_is_one_finding() -> None:
    result = run_cli("logs", _kit().crash_log())
    assert result.code == 1
    fails = [line for line in result.out.splitlines() if line.startswith("[FAIL]")]
    faults = [line for line in fails if "topk-topp-custom-op-missing" in line]
    assert len(faults) == 1, result.out
    others = [line for line in result.out.splitlines() if line.startswith("[WARN]")]
    assert len(others) <= 5, result.out  # a handful at most, never one per frame line


def test_two_real_starts_of_the_same_server_are_no_difference() -> None:
    good, again = _kit().start_logs(2)
    result = run_cli("logs", "--baseline", good, again)
    assert result.code == 0 and "[FAIL]" not in result.out, result.out


def test_a_real_start_with_a_new_error_fails_against_its_baseline() -> None:
    kit = _kit()
    good = kit.start_logs(1)[0]
    result = run_cli("logs", "--baseline", good, kit.start_log_with_error())
    assert result.code == 1 and "new since" in result.out, result.out
