"""The stat cache on a file system with 1-second timestamps (issue 22 item 5, "racy git").

ext4 made with 128-byte inodes has no room for the nanosecond fields: mtime and ctime are whole
seconds. A same-size rewrite within the second of an audit then keeps size, mtime, ctime and
inode, so a stat cache that trusts every entry reports the file clean forever after (and
``snapshot --all-files`` keeps the stale digest, so the fleet report shows the host clean).
These tests run on a real loop-mounted ext4 made so (as root; unmounted in ``finally``) and skip,
with the reason printed, only where loop devices cannot be used.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit import make_dist, make_small_demo, run_cli, unmount, write_small_manifest

pytestmark = pytest.mark.integration  # mkfs.ext4 and mount, and waits for second boundaries

SECOND_NS = 10**9
NEW_DIGEST = hashlib.sha256(b"y = 9\n").hexdigest()


@contextlib.contextmanager
def coarse_ext4(where: Path) -> Iterator[Path]:
    """An ext4 with 128-byte inodes (1-second timestamps) loop-mounted at ``where``."""
    if os.geteuid() != 0:
        _skip("loop-mounting an ext4 needs root")
    image, mount = where / "coarse.img", where / "coarse"
    mount.mkdir()
    with image.open("wb") as handle:
        handle.truncate(16 << 20)
    for cmd in (["mkfs.ext4", "-q", "-F", "-I", "128", str(image)],
                ["mount", "-o", "loop", str(image), str(mount)]):
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            _skip(f"no loop-mounted ext4 here ({' '.join(cmd[:2])}: {done.stderr.strip()})")
    try:
        yield mount
    finally:
        unmount(mount)


def _skip(reason: str) -> None:
    sys.stderr.write(f"SKIP: {reason}\n")
    pytest.skip(reason)


@pytest.fixture
def coarse(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(site, manifest): two distributions on the coarse ext4, the manifest beside it."""
    with coarse_ext4(tmp_path) as mount:
        site = mount / "site-packages"
        site.mkdir()
        make_small_demo(site)
        make_dist(site, "other", "2.0", {"other/__init__.py": "x = 1\n",
                                         "other/util.py": "y = 2\n"})
        yield site, write_small_manifest(tmp_path)


def _stat_key(path: Path) -> tuple[int, int, int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns


def _audit(site: Path, manifest: Path) -> tuple[int, str]:
    done = run_cli("--site-packages", site, "--manifest", manifest, "audit")
    return done.code, done.out


def _rewrite_within_the_second(site: Path, manifest: Path) -> str:
    """Write util.py, audit (clean), rewrite it with other bytes of the same size in place:
    repeated until the rewrite kept every field of the stat the audit cached (all inside one
    second). Returns the clean audit's output."""
    util = site / "other/util.py"
    for _attempt in range(20):
        time.sleep(1 - time.time() % 1 + 0.01)  # just past a second boundary
        util.write_text("y = 2\n")
        code, out = _audit(site, manifest)
        assert code == 0, out
        before = _stat_key(util)
        with util.open("r+b") as handle:  # in place: same inode
            handle.write(b"y = 9\n")
        if _stat_key(util) == before:
            assert before[1] % SECOND_NS == 0, "not 1-second timestamps: mkfs -I 128 ignored?"
            return out
    pytest.fail("20 tries and no audit + rewrite fit inside one second")


def test_a_same_size_rewrite_within_the_second_of_an_audit_is_found(
        coarse: tuple[Path, Path], tmp_path: Path) -> None:
    site, manifest = coarse
    _rewrite_within_the_second(site, manifest)
    for _repeat in range(3):  # the cold-after-racy audit, then repeat audits from its cache
        code, out = _audit(site, manifest)
        assert code == 1 and "[FAIL] ..5      other/util.py (other 2.0: changed)" in out, out
    assert _snapshot_digest(site, manifest, tmp_path) == NEW_DIGEST


def _snapshot_digest(site: Path, manifest: Path, tmp_path: Path) -> str:
    snap = tmp_path / "node.json"
    assert run_cli("--site-packages", site, "--manifest", manifest, "snapshot", "--all-files",
                   "-o", snap).code == 0
    return str(json.loads(snap.read_text())["files"]["other/util.py"])


def test_snapshot_after_a_racy_audit_has_the_new_digest(coarse: tuple[Path, Path],
                                                         tmp_path: Path) -> None:
    """The snapshot shares the audit's stat cache: it must not take the stale digest either
    (the fleet report would show the host clean)."""
    site, manifest = coarse
    _rewrite_within_the_second(site, manifest)
    assert _snapshot_digest(site, manifest, tmp_path) == NEW_DIGEST


def test_files_older_than_the_window_are_not_hashed_again(coarse: tuple[Path, Path]) -> None:
    """The rule costs only the racy entries: once the files are older than the window, a
    repeat audit on 1-second timestamps hashes nothing."""
    site, manifest = coarse
    from ascendpatch.stamps import COARSE_RACY_NS

    time.sleep(COARSE_RACY_NS / SECOND_NS)
    args = ("--site-packages", site, "--manifest", manifest, "--json", "audit")
    first, again = run_cli(*args).json, run_cli(*args).json
    assert first["files_hashed"] == first["files_checked"] > 0
    assert again["files_hashed"] == 0 and again["exit_code"] == 0
