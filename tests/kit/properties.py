"""Hypothesis' settings for the property suites: the one place that says what CI=true changes.

Locally, each suite explores new inputs on every run, and each example must finish within the
suite's deadline (``deadline(ms)``): a parser that goes quadratic or worse on some input fails
there, with that input. Under CI=true the suites replay a fixed sequence (a run fails for a
change, never for the luck of the draw) and wall-clock deadlines are off: a CI machine is a
loaded machine, and on a cold one (the real vLLM server's 6 GB venv being unpacked beside the
fast tier) a 3 ms example of tests/test_metadata_headers.py once took 3,455 ms, which no
deadline of a parser should fail for. Slow suites still show in CI's --durations.
"""

from __future__ import annotations

import os

from hypothesis import settings

CI = bool(os.environ.get("CI"))


def register() -> None:
    """Load the CI profile when CI is set (conftest calls this once)."""
    settings.register_profile("ci", derandomize=True, database=None, print_blob=True,
                              deadline=None)
    if CI:
        settings.load_profile("ci")


def deadline(ms: int) -> int | None:
    """A suite's per-example time bound in milliseconds: ``ms`` locally, none under CI."""
    return None if CI else ms
