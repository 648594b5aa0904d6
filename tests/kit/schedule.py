"""The order the whole suite's files run in, and what each file cost (a pytest plugin).

``.ci/run`` runs the suite in two pytest-xdist workers with ``--dist loadfile``: each file runs
whole in one worker (its module fixtures, such as the four stack locks or the Ansible fleet,
are built once), and with ``--no-loadscope-reorder`` the workers take files in collection order
(xdist's own order is by number of tests, which says nothing of their time). A file of minutes
taken last leaves the other worker idle at the end, so the files that take minutes go first,
longest first (``LONGEST_FIRST``, from the per-file totals this plugin prints); the rest keep
pytest's order and fill in around them. The order is only a schedule: every file passes in any
order.

With ``--durations``, the run also lists its slowest files (setup, call and teardown of their
tests, summed: the time a worker spent on them), which is how ``LONGEST_FIRST`` is kept true.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

# Longest first: the per-file totals of a cold run of the whole suite in two workers (1b4da77,
# 2026-12-02, seconds of one worker: resolvers 661, fleet_ansible 488, serve_realserver 231,
# sampler_behaviour 172, stop_realserver 159, logs_realserver 120, plugin_realserver 113,
# install_sh 112, readme 110, serve_container 107, catalog 106, smoke_realvllm 102). The
# real-server files start after the two longest, by when the background prebuild of the
# server's venv (tests/kit/prebuild.py, 217 s of that run) is done.
LONGEST_FIRST = (
    "tests/test_resolvers.py",
    "tests/test_fleet_ansible.py",
    "tests/test_serve_realserver.py",
    "tests/test_sampler_behaviour.py",
    "tests/test_stop_realserver.py",
    "tests/test_logs_realserver.py",
    "tests/test_plugin_realserver.py",
    "tests/test_install_sh.py",
    "tests/test_readme.py",
    "tests/test_serve_container.py",
    "tests/test_catalog.py",
    "tests/test_smoke_realvllm.py",
)
SHOWN = 20  # files in the summary

_RANK = {path: rank for rank, path in enumerate(LONGEST_FIRST)}
_spent: defaultdict[str, float] = defaultdict(float)


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the files of ``LONGEST_FIRST`` to the front, in its order; a stable sort keeps
    every file's tests together and in their own order (each worker collects the same)."""
    items.sort(key=lambda item: _RANK.get(file_of(item.nodeid), len(_RANK)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _spent[file_of(report.nodeid)] += report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    if config.getoption("durations", None) is None or not _spent:
        return
    slowest = sorted(_spent.items(), key=lambda pair: pair[1], reverse=True)[:SHOWN]
    terminalreporter.write_sep("=", f"slowest {len(slowest)} files (setup + call + teardown)")
    for path, seconds in slowest:
        terminalreporter.write_line(f"{seconds:8.1f}s {path}")
