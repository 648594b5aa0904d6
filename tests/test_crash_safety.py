"""Interrupted and concurrent runs, with real processes.

A multi-file patch is applied by a real ``python -m ascendpatch apply`` that is SIGKILLed
(1) at every crash point of the transaction (``ASCENDPATCH_CRASH_AT``, a fault-injection seam
that makes the process kill itself at exactly that instant) and (2) at random instants across
its whole run. After the next command, every file must be wholly pristine or wholly patched,
the ledger must agree, and ``status`` must tell the truth.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.kit import CTRL_C_PRELUDE, make_dist, run_process, tree_digest, write_manifest

# Real processes killed, interrupted and racing, dozens of runs: seconds each (integration tier).
pytestmark = pytest.mark.integration

FILES = 12


def _content(i: int) -> str:
    return "".join(f"f{i}_line_{n} = {n}\n" for n in range(1, 9))


def _patch() -> str:
    parts = []
    for i in range(FILES):
        parts.append(f"--- a/multi/m{i}.py\n+++ b/multi/m{i}.py\n@@ -3,3 +3,4 @@\n"
                     f" f{i}_line_3 = 3\n f{i}_line_4 = 4\n+f{i}_patched = True\n"
                     f" f{i}_line_5 = 5\n")
    return "".join(parts)


@pytest.fixture
def template(tmp_path: Path) -> dict[str, Path]:
    site = tmp_path / "template-site"
    make_dist(site, "multi", "1.0",
              {f"multi/m{i}.py": _content(i) for i in range(FILES)} | {"multi/__init__.py": ""})
    (tmp_path / "multi.patch").write_text(_patch())
    manifest = write_manifest(tmp_path / "m.yaml", [{
        "id": "multi-fix", "title": "multi-file fix", "kind": "diff", "distribution": "multi",
        "versions": ">=1", "source": "multi.patch"}])
    return {"site": site, "manifest": manifest}


def _hashes(site: Path) -> list[str]:
    return [hashlib.sha256((site / f"multi/m{i}.py").read_bytes()).hexdigest()
            for i in range(FILES)]


def _patched_hashes() -> list[str]:
    out = []
    for i in range(FILES):
        text = _content(i).replace(f"f{i}_line_4 = 4\n", f"f{i}_line_4 = 4\nf{i}_patched = True\n")
        out.append(hashlib.sha256(text.encode()).hexdigest())
    return out


def _pristine_hashes() -> list[str]:
    return [hashlib.sha256(_content(i).encode()).hexdigest() for i in range(FILES)]


def _check_consistent(site: Path, manifest: Path) -> str:
    """Run the next commands: a reader refuses a journal, changing nothing; the next writer
    (revert: after a rollback nothing is applied) recovers; then all-or-nothing on disk,
    ledger and status must agree."""
    args = ("--site-packages", site, "--manifest", manifest)
    if (site / ".ascendpatch/journal.json").exists():
        half = tree_digest(site)
        refused = run_process(*args, "status")
        assert refused.code == 1 and "an interrupted run needs recovery" in refused.err
        assert tree_digest(site) == half
    if (site / ".ascendpatch/journal.json").exists() or list(site.rglob("*.ascendpatch-tmp")):
        assert run_process(*args, "revert").code == 0
    status = run_process(*args, "--json", "status")
    doc = json.loads(status.out)
    current = _hashes(site)
    ledger_path = site / ".ascendpatch/ledger.json"
    ledger = json.loads(ledger_path.read_text())["artifacts"] if ledger_path.exists() else {}
    assert not (site / ".ascendpatch/journal.json").exists()
    assert not list(site.rglob("*.ascendpatch-tmp"))
    (item,) = doc["results"]
    if current == _pristine_hashes():
        assert item["status"] == "not-applied", doc
        assert "multi-fix" not in ledger
        return "pristine"
    assert current == _patched_hashes(), "a file is neither pristine nor patched, or mixed"
    assert item["status"] == "already-applied", doc
    assert set(ledger["multi-fix"]) == {f"multi/m{i}.py" for i in range(FILES)}
    return "patched"


def test_kill_at_every_crash_point(template: dict[str, Path], tmp_path: Path) -> None:
    outcomes = []
    for point in range(1, 60):
        site = tmp_path / f"site-{point}"
        shutil.copytree(template["site"], site)
        run = run_process("--site-packages", site, "--manifest", template["manifest"], "apply",
                          env={"ASCENDPATCH_CRASH_AT": str(point)})
        killed = run.code == -signal.SIGKILL
        journal_left = (site / ".ascendpatch/journal.json").exists()
        state = _check_consistent(site, template["manifest"])
        outcomes.append((point, killed, journal_left, state))
        if not killed:
            assert run.code == 0, run.err
            break
    killed_points = [o for o in outcomes if o[1]]
    assert len(killed_points) >= FILES + 2, outcomes  # every file write was a crash point
    assert any(o[2] for o in killed_points), "no kill landed inside a transaction"
    assert outcomes[-1][3] == "patched"
    # After recovery a normal apply completes the job.
    site = tmp_path / f"site-{killed_points[len(killed_points) // 2][0]}"
    assert run_process("--site-packages", site, "--manifest", template["manifest"],
                       "apply").code == 0
    assert _hashes(site) == _patched_hashes()


def test_kill_at_random_instants(template: dict[str, Path], tmp_path: Path) -> None:
    rng = random.Random(20261130)
    cmd = [sys.executable, "-m", "ascendpatch", "--site-packages", "SITE", "--manifest",
           str(template["manifest"]), "apply"]
    start = time.monotonic()
    probe = tmp_path / "probe"
    shutil.copytree(template["site"], probe)
    subprocess.run([c if c != "SITE" else str(probe) for c in cmd], check=True,
                   capture_output=True)
    duration = time.monotonic() - start
    seen = set()
    for attempt in range(16):
        site = tmp_path / f"rand-{attempt}"
        shutil.copytree(template["site"], site)
        proc = subprocess.Popen([c if c != "SITE" else str(site) for c in cmd],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 1.1) * duration)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        seen.add(_check_consistent(site, template["manifest"]))
    assert seen <= {"pristine", "patched"}


def test_concurrent_applies_serialize(template: dict[str, Path], tmp_path: Path) -> None:
    site = tmp_path / "shared"
    shutil.copytree(template["site"], site)
    procs = [subprocess.Popen([sys.executable, "-m", "ascendpatch", "--site-packages", str(site),
                               "--manifest", str(template["manifest"]), "apply"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(6)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, outs
    lines = [out.strip() for out, _ in outs]
    assert lines.count("[OK] Applied multi-file fix") == 1
    assert lines.count("[OK] multi-file fix already applied") == 5
    assert _check_consistent(site, template["manifest"]) == "patched"


def test_lock_timeout_names_the_holder(template: dict[str, Path]) -> None:
    site = template["site"]
    fd = os.open(site, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        run = run_process("--site-packages", site, "--manifest", template["manifest"],
                          "--lock-timeout", "0.5", "apply")
    finally:
        os.close(fd)
    assert run.code == 1
    assert "waiting for the target lock" in run.err
    assert f"locked by process {os.getpid()}" in run.err
    assert _hashes(site) == _pristine_hashes()


def test_sigint_rolls_back_and_exits_130(template: dict[str, Path], tmp_path: Path) -> None:
    """Ctrl-C in the middle of a transaction: rollback, then exit 130."""
    site = tmp_path / "sigint"
    shutil.copytree(template["site"], site)
    code = (
        CTRL_C_PRELUDE +
        "import os, signal, sys\n"
        "import ascendpatch.store.crash as crash\n"
        "n = {'i': 0}\n"
        "def point():\n"
        "    n['i'] += 1\n"
        "    if n['i'] == 6: os.kill(os.getpid(), signal.SIGINT)\n"
        "crash.point = point\n"
        "from ascendpatch.shell.cli import main\n"
        f"sys.exit(main(['--site-packages', {str(site)!r}, '--manifest', "
        f"{str(template['manifest'])!r}, 'apply']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 130, proc.stderr
    assert "rolled back" in proc.stderr
    assert _hashes(site) == _pristine_hashes()
    assert not (site / ".ascendpatch/journal.json").exists()


def test_read_only_commands_never_recover_a_journal(template: dict[str, Path],
                                                    tmp_path: Path) -> None:
    """A run killed mid-transaction leaves its journal. Every command that only reads refuses
    in one line naming the recovery, exit 1, and writes nothing: on 89ee836 `plan` and
    `status` rolled the files back and deleted the journal (and `plan` is what the Ansible
    module's check mode runs). The next `apply` recovers and completes."""
    site = tmp_path / "killed"
    shutil.copytree(template["site"], site)
    args = ("--site-packages", site, "--manifest", template["manifest"])
    killed = run_process(*args, "apply", env={"ASCENDPATCH_CRASH_AT": "6"})
    assert killed.code == -signal.SIGKILL and (site / ".ascendpatch/journal.json").exists()
    half = tree_digest(site)
    assert _hashes(site) not in (_pristine_hashes(), _patched_hashes())  # really half done
    snap = tmp_path / "snap.json"
    for command in (["plan"], ["status"], ["verify", "--no-probes"], ["audit"],
                    ["snapshot", "-o", str(snap)], ["apply", "--dry-run", "--diff"],
                    ["revert", "--dry-run"], ["capture", "multi"]):
        result = run_process(*args, *command)
        said = result.out + result.err
        assert result.code == 1, (command, said)
        assert "an interrupted run needs recovery" in said and "revert" in said, command
        assert len(result.err.strip().splitlines()) == 1, (command, result.err)
        assert tree_digest(site) == half, command
    assert not snap.exists()
    applied = run_process(*args, "apply")
    assert applied.code == 0, applied.err
    assert "recovered an interrupted run" in applied.out + applied.err
    assert _hashes(site) == _patched_hashes()
    assert not (site / ".ascendpatch/journal.json").exists()


def test_snapshot_waits_for_a_writer_like_every_reader(template: dict[str, Path],
                                                       tmp_path: Path) -> None:
    """While a writer holds the target's lock, snapshot waits (here: times out, naming the
    holder) instead of recording a half-written apply; on 89ee836 it took no lock."""
    snap = tmp_path / "snap.json"
    fd = os.open(template["site"], os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # what a running apply holds
        runs = {command[0]: run_process("--site-packages", template["site"], "--manifest",
                                        template["manifest"], "--lock-timeout", "0.5",
                                        *command)
                for command in (["snapshot", "-o", str(snap)], ["audit"], ["status"])}
    finally:
        os.close(fd)
    for command, run in runs.items():
        assert run.code == 1, (command, run.err)
        assert f"locked by process {os.getpid()}" in run.err, command
    assert not snap.exists()
