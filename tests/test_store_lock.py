"""Readers (status, verify, audit) started during a live apply wait on a shared lock.

Issue 11 item 11. A real ``apply`` process is held still in the middle of its transaction
(after the first of two files is written: the crash seam is replaced by a wait on a file), and
real reader processes are started then. Without the shared lock they would read one patched
and one pristine file and report drift ("partially applied", an unexpected audit finding).
With it they wait, say so, and report the finished state.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.kit import DEMO_MOD, DEMO_OTHER, make_demo_target

# Real processes held mid-transaction and racing readers (integration tier).
pytestmark = pytest.mark.integration

MOD, OTHER = DEMO_MOD, DEMO_OTHER

# The apply, held at crash point 3 (first file replaced, second not) until "go" appears.
HELD_APPLY = """\
import os, sys, time
from pathlib import Path
import ascendpatch.store.crash as crash
held, go = Path(sys.argv[1]), Path(sys.argv[2])
n = {"i": 0}
def point():
    n["i"] += 1
    if n["i"] == 3:
        held.touch()
        while not go.exists():
            time.sleep(0.02)
crash.point = point
from ascendpatch.shell.cli import main
sys.exit(main(sys.argv[3:]))
"""


def test_readers_wait_for_a_live_apply_and_never_report_half_written_state(
        site: Path, tmp_path: Path) -> None:
    manifest = make_demo_target(site, tmp_path)
    held, go = tmp_path / "held", tmp_path / "go"
    target = ["--site-packages", str(site), "--manifest", str(manifest)]
    apply = subprocess.Popen([sys.executable, "-c", HELD_APPLY, str(held), str(go), *target,
                              "apply"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    readers: list[subprocess.Popen[str]] = []
    try:
        deadline = time.monotonic() + 60
        while not held.exists():
            assert apply.poll() is None and time.monotonic() < deadline, apply.communicate()
            time.sleep(0.02)
        # Mid-transaction for real: one file written, the other not, the journal present.
        assert "value_5b" in (site / "demo/mod.py").read_text()
        assert (site / "demo/other.py").read_text() == OTHER
        assert (site / ".ascendpatch/journal.json").exists()
        for command in ("status", "verify", "audit"):
            readers.append(subprocess.Popen(
                [sys.executable, "-m", "ascendpatch", *target, "--json", command],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for reader in readers:  # each says it waits (without the lock: EOF, it finished)
            assert reader.stderr is not None
            assert "waiting for the target lock" in reader.stderr.readline()
        assert [r.poll() for r in readers] == [None, None, None]
        go.touch()
        _, err = apply.communicate(timeout=60)
        assert apply.returncode == 0, err
        docs = []
        for reader in readers:
            rout, _ = reader.communicate(timeout=120)
            docs.append((reader.returncode, json.loads(rout)))
    finally:
        go.touch()
        for proc in (apply, *readers):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    (status_code, status), (verify_code, verify), (audit_code, audit) = docs
    assert status_code == 0 and status["results"][0]["status"] == "already-applied", status
    assert verify_code == 0, verify
    assert any(r["id"] == "artifact:demo-fix" and r["level"] == "OK" for r in verify["results"])
    assert audit_code == 0, audit
    assert all(r["level"] == "OK" for r in audit["results"]), audit
