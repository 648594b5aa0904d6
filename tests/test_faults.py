"""File-system faults during apply and revert: one line, exit 1, nothing changed.

Issue 11 items 12, 13 and 15. Disk full and read-only run on a small tmpfs mounted by the test
(as root; unmounted in ``finally``), with a loop-mounted ext4 file as the fallback; a test
skips only with a printed reason. Permission faults run the real CLI with the capabilities
that let root ignore file modes dropped (``setpriv``). Ctrl-C after the commit point and a
closed stdout pipe are driven on real processes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit import (
    CTRL_C_PRELUDE,
    TRACEBACK,
    make_demo_target,
    run_cli,
    run_process,
    seconduid,
    tree_digest,
)
from tests.kit.smallfs import skip_saying as _skip
from tests.kit.smallfs import small_fs

MOD = "".join(f"value_{i} = {i}\n" for i in range(1, 200))
OTHER = "".join(f"other_{i} = {i}\n" for i in range(1, 100))


def _target(root: Path, tmp: Path) -> tuple[Path, Path]:
    site = root / "site"
    return site, make_demo_target(site, tmp, MOD, OTHER)


def _fill(root: Path, leave_pages: int) -> None:
    """Fill the file system with 4 KiB files, then free ``leave_pages`` of them."""
    fillers = root / "filler"
    fillers.mkdir()
    made: list[Path] = []
    with contextlib.suppress(OSError):
        while True:
            path = fillers / str(len(made))
            made.append(path)
            with path.open("wb") as handle:
                handle.write(b"\0" * 4096)
    for path in made[:leave_pages]:
        path.unlink(missing_ok=True)


def _files(site: Path) -> dict[str, str]:
    return {k: v for k, v in tree_digest(site).items() if not k.startswith(".ascendpatch")}


def _one_line_fault(err: str, words: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("[FAIL] cannot write /") and words in lines[0], err  # full path
    assert "fix:" in lines[0] and TRACEBACK not in err and "details:" not in err


def test_disk_full_at_every_level_changes_nothing_and_says_so(tmp_path: Path) -> None:
    outcomes = []
    with small_fs(tmp_path / "mnt") as root:
        for pages in range(0, 14):
            for child in list(root.iterdir()):
                shutil.rmtree(child)
            site, manifest = _target(root, tmp_path)
            pristine = _files(site)
            _fill(root, pages)
            result = run_cli("--site-packages", site, "--manifest", manifest, "apply")
            if result.code == 0:
                outcomes.append("applied")
                assert "value_5b" in (site / "demo/mod.py").read_text()
                continue
            assert result.code == 1, result.err
            _one_line_fault(result.err, "No space left on device; nothing was changed")
            assert _files(site) == pristine
            assert not (site / ".ascendpatch/journal.json").exists()
            assert not list(site.rglob("*.ascendpatch-tmp"))
            outcomes.append("refused")
    # Refused with 0 free pages (backups), 2 (journal), 3 (a file, mid-transaction) ...
    assert outcomes.count("refused") >= 3 and outcomes[-1] == "applied", outcomes


def test_a_journal_on_a_full_disk_readers_refuse_and_a_writer_rolls_back_later(
        tmp_path: Path) -> None:
    """A reader never rolls back (that writes): status refuses, changing nothing; the writer's
    rollback on a full disk fails in one line, keeping the journal; with space it succeeds."""
    with small_fs(tmp_path / "mnt") as root:
        site, manifest = _target(root, tmp_path)
        args = ("--site-packages", site, "--manifest", manifest)
        killed = run_process(*args, "apply", env={"ASCENDPATCH_CRASH_AT": "3"})  # one file
        assert killed.code < 0 and (site / ".ascendpatch/journal.json").exists()
        _fill(root, 0)
        half = tree_digest(site)
        status = run_cli(*args, "status")
        assert status.code == 1, status.err
        assert "an interrupted run needs recovery" in status.err
        assert tree_digest(site) == half
        applied = run_cli(*args, "apply")
        assert applied.code == 1, applied.err
        said = applied.out + applied.err
        assert "No space left on device" in said and "free space" in said
        assert (site / ".ascendpatch/journal.json").exists()
        shutil.rmtree(root / "filler")  # space again: the next writer rolls it back
        assert run_cli(*args, "revert").code == 0
        assert not (site / ".ascendpatch/journal.json").exists()
        assert (site / "demo/mod.py").read_text() == MOD


def test_read_only_file_system(tmp_path: Path) -> None:
    with small_fs(tmp_path / "mnt") as root:
        site, manifest = _target(root, tmp_path)
        args = ("--site-packages", site, "--manifest", manifest)
        subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)
        try:
            result = run_cli(*args, "apply")
            assert result.code == 1
            _one_line_fault(result.err, "Read-only file system; nothing was changed")
            assert "remount it read-write" in result.err
            assert run_cli(*args, "status").code == 1  # still answers
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(root)], check=True)
        assert run_cli(*args, "apply").code == 0
        applied = _files(site)
        subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)
        try:
            result = run_cli(*args, "revert")
            assert result.code == 1
            _one_line_fault(result.err, "Read-only file system; nothing was changed")
            assert _files(site) == applied
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(root)], check=True)


def test_permission_denied_mid_apply(tmp_path: Path) -> None:
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        _skip("needs root and setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
        return
    site, manifest = _target(tmp_path, tmp_path)
    (site / ".ascendpatch").mkdir()
    (site / "demo").chmod(0o555)  # the state folder is writable, the package folder is not
    pristine = _files(site)
    try:
        proc = subprocess.run(
            [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner",
             sys.executable, "-m", "ascendpatch", "--site-packages", str(site), "--manifest",
             str(manifest), "apply"], capture_output=True, text=True, timeout=120, check=False)
    finally:
        (site / "demo").chmod(0o755)
    assert proc.returncode == 1, proc.stderr
    _one_line_fault(proc.stderr, f"{os.strerror(errno.EACCES)}; nothing was changed")
    assert "run as a user who can write" in proc.stderr
    assert _files(site) == pristine
    assert not (site / ".ascendpatch/journal.json").exists()


@pytest.mark.integration
def test_an_unprivileged_apply_on_an_unreadable_file_is_one_line(tmp_path: Path) -> None:
    """uid 65534 (a real second user) runs apply and status on a root-owned target with one
    0600 file: exit 1, one line naming the file and the fix, nothing written. On 89ee836 it
    was exit 3 (PermissionError, a traceback in a crash log)."""
    with seconduid.open_folder() as top:
        site, manifest = _target(top, top)
        (site / "demo" / "mod.py").chmod(0o600)
        before = tree_digest(top)
        home = seconduid.home_for_nobody(tmp_path)
        for command in ("apply", "status"):
            run = seconduid.ascendpatch("--site-packages", site, "--manifest", manifest,
                                        command, home=home)
            lines = (run.stdout + run.stderr).strip().splitlines()
            assert run.returncode == 1, (command, lines)
            assert len(lines) == 1 and f"cannot read {site}/demo/mod.py" in lines[0], lines
            assert "(Permission denied); nothing was changed; fix: run as a user" in lines[0]
            assert tree_digest(top) == before


# The apply of a two-file patch, with Ctrl-C delivered at crash point N.
SIGINT_AT = CTRL_C_PRELUDE + """\
import os, signal, sys
import ascendpatch.store.crash as crash
at = int(sys.argv[1])
n = {"i": 0}
def point():
    n["i"] += 1
    if n["i"] == at:
        os.kill(os.getpid(), signal.SIGINT)
crash.point = point
from ascendpatch.shell.cli import main
sys.exit(main(sys.argv[2:]))
"""


# Real processes interrupted mid-transaction, as test_crash_safety.py (integration tier).
@pytest.mark.integration
def test_sigint_after_the_commit_point_reports_applied(tmp_path: Path) -> None:
    site, manifest = _target(tmp_path, tmp_path)
    # Points: 1 backups, 2 journal, 3-4 the files, 5 the ledger, 6 after the commit point.
    proc = subprocess.run([sys.executable, "-c", SIGINT_AT, "6", "--site-packages", str(site),
                           "--manifest", str(manifest), "apply"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 130, proc.stderr
    assert "applied in full, not rolled back" in proc.stderr
    assert "any change in progress was rolled back" not in proc.stderr
    assert run_cli("--site-packages", site, "--manifest", manifest, "status").code == 0
    # Before the commit point the same signal still means a rollback.
    proc = subprocess.run([sys.executable, "-c", SIGINT_AT, "4", "--site-packages", str(site),
                           "--manifest", str(manifest), "revert"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 130 and "was rolled back" in proc.stderr
    assert run_cli("--site-packages", site, "--manifest", manifest, "status").code == 0


def test_status_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    site, manifest = _target(tmp_path, tmp_path)
    shell = (f"{sys.executable} -m ascendpatch --site-packages {site} --manifest {manifest} "
             f"status | head -c 0; echo \"status=${{PIPESTATUS[0]}}\" >&2")
    proc = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=60,
                          check=False)
    assert "BrokenPipeError" not in proc.stderr and TRACEBACK not in proc.stderr, proc.stderr
    assert "Exception ignored" not in proc.stderr
    assert proc.stderr.strip().endswith("status=1")
