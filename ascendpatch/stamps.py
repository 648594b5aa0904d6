"""What a stat proves: git's "racy git" rule (Documentation/technical/racy-git.txt), for every
cache that takes a file's stat as proof that it is unchanged (the audit's stat cache,
inspect/audit/statcache.py; the target's report, env/introcache.py; pip's kept settings,
env/pipsaved.py; a manifest's kept parse, manifest/parsed.py), and the stat those keep.

A stat taken when a run started proves nothing about a change made in the same timestamp tick:
on a file system with 1-second timestamps (ext4 with 128-byte inodes, FAT), a same-size rewrite
within the second keeps size, mtime, ctime and inode; with sub-second ones, the kernel stamps
files from its coarse clock, a tick behind the clock a run reads.
"""

from __future__ import annotations

import os

SECOND_NS = 10**9
# How much older than the run's start a stat must be to prove its file unchanged. Whole
# seconds (the file system keeps no more; FAT keeps even ones): 2 s and the clock's tick.
COARSE_RACY_NS = 3 * SECOND_NS
# Sub-second timestamps: the kernel stamps files from its coarse clock, up to a tick (1-10
# ms) behind the clock a run reads; a few ticks to spare.
FINE_RACY_NS = 50_000_000


def racy(mtime_ns: int, ctime_ns: int, verified_ns: int) -> bool:
    """Whether a stat taken by a run that started at ``verified_ns`` (``time.time_ns``)
    cannot prove its file unchanged since: a later write could keep every field of it.

    A timestamp with a fractional second shows the file system keeps sub-second times; both
    whole (or one of them, by chance, a 1 in 10^9) are taken as 1-second timestamps."""
    coarse = not (mtime_ns % SECOND_NS and ctime_ns % SECOND_NS)
    margin = COARSE_RACY_NS if coarse else FINE_RACY_NS
    return max(mtime_ns, ctime_ns) + margin > verified_ns


Stat = list[int]  # mtime_ns, ctime_ns, size, inode, device, mode


def stat_of(path: str | os.PathLike[str], follow: bool = True) -> Stat | None:
    """The stat a cache keeps of the file (or folder) at ``path`` to know it unchanged, or
    None where there is none (missing, unreadable, a NUL in a path a cache file names).
    ``follow``: False for the link itself."""
    try:
        st = os.stat(path) if follow else os.lstat(path)  # noqa: PTH116 (no Path for each)
    except (OSError, ValueError):
        return None
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_dev, st.st_mode]


def is_stat(value: object) -> bool:
    """Whether ``value`` (read back from a cache file) has the shape of a :func:`stat_of`."""
    return isinstance(value, list) and len(value) == 6 and all(type(n) is int for n in value)
