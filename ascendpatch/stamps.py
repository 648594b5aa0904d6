"""What a stat proves: git's "racy git" rule (Documentation/technical/racy-git.txt), for every
cache that takes a file's stat as proof that it is unchanged (the audit's stat cache,
inspect/audit/statcache.py; the target's report, env/introcache.py).

A stat taken when a run started proves nothing about a change made in the same timestamp tick:
on a file system with 1-second timestamps (ext4 with 128-byte inodes, FAT), a same-size rewrite
within the second keeps size, mtime, ctime and inode; with sub-second ones, the kernel stamps
files from its coarse clock, a tick behind the clock a run reads.
"""

from __future__ import annotations

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
