"""The test cache is filled once, whole, when several test processes ask at the same moment
(tests/kit/cachefill.py: the suite runs in two pytest-xdist workers beside the 3.10 tier).

The tests of two callers start real processes released together once both are ready (not
threads: the lock is ``flock``, per open file) and check what they end with: one build, the
same whole files; a build that dies leaves nothing a later one trusts; and a fill inside a
fill of the same folder is an error, not a hang.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.kit import REPO, build_wheel, cachefill

# What each of two processes runs first (_together): its imports, then "ready" (a file of its
# own), then a wait on the barrier file; sys.argv[1] is the cache folder the code asks for.
BARRIER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from tests.kit import cachefill
    folder, go, ready = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    ready.touch()
    while not go.exists():
        time.sleep(0.01)
""")
# Both ask for the same folder; the build writes a marker per build and is slow enough that
# the second one asks while the first builds.
ASK = textwrap.dedent("""
    def build(partial):
        partial.mkdir()
        with open(folder.parent / "builds", "a") as log:
            log.write("built\\n")
        time.sleep(0.5)
        (partial / "done").write_text("whole")
    print(cachefill.complete(folder, build) / "done")
""")


def _together(code: str, *args: Path) -> list[subprocess.Popen[str]]:
    """Two processes running ``BARRIER`` then ``code`` with ``args``, released at once when
    both are ready."""
    go = args[1]
    ready = [go.with_name(f"ready-{n}") for n in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", BARRIER + code, *map(str, args), str(flag)],
                              cwd=REPO, stdout=subprocess.PIPE, text=True) for flag in ready]
    deadline = time.monotonic() + 60
    while not all(flag.exists() for flag in ready) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    return procs


def test_two_processes_asking_for_one_folder_build_it_once(tmp_path: Path) -> None:
    folder, go = tmp_path / "cache" / "kit", tmp_path / "go"
    procs = _together(ASK, folder, go)
    outs = [proc.communicate(timeout=60)[0].strip() for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0]
    assert outs == [str(folder / "done")] * 2
    assert (tmp_path / "cache" / "builds").read_text() == "built\n"
    assert (folder / "done").read_text() == "whole"
    assert not folder.with_name("kit.partial").exists()


def test_a_build_that_dies_leaves_nothing_trusted_and_the_next_one_builds(
        tmp_path: Path) -> None:
    folder = tmp_path / "cache" / "kit"

    def dies(partial: Path) -> None:
        partial.mkdir()
        (partial / "half").write_text("")
        raise OSError("killed halfway")

    with pytest.raises(OSError, match="killed halfway"):
        cachefill.complete(folder, dies)
    assert not folder.exists()  # the leftovers are only under .partial, which nobody reads

    def builds(partial: Path) -> None:
        partial.mkdir()
        (partial / "done").write_text("")

    built = cachefill.complete(folder, builds)
    assert sorted(p.name for p in built.iterdir()) == ["done"]


@pytest.mark.integration
def test_two_processes_downloading_one_wheel_both_get_it_whole_with_its_dependency(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real pip, from a find-links folder (no index): both processes return the same whole
    wheel, its dependency is beside it, and no temp download is left in the folder."""
    house = tmp_path / "house"
    build_wheel(house, "demo-dep", "1.0")
    build_wheel(house, "demo", "1.0", requires=["demo-dep"])
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(house))
    cache, go = tmp_path / "cache", tmp_path / "go"
    code = 'print(*cachefill.downloaded(folder, "demo-1.0-*.whl", "demo==1.0", deps=True))\n'
    procs = _together(code, cache, go)
    outs = [proc.communicate(timeout=120)[0].strip() for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0]
    assert outs == [str(cache / "demo-1.0-py3-none-any.whl")] * 2
    assert sorted(p.name for p in cache.iterdir()) == [
        ".lock", "demo-1.0-py3-none-any.whl", "demo_dep-1.0-py3-none-any.whl"]
    assert (cache / "demo-1.0-py3-none-any.whl").read_bytes() == \
        (house / "demo-1.0-py3-none-any.whl").read_bytes()


def test_a_fill_inside_a_fill_of_the_same_folder_is_an_error_not_a_hang(tmp_path: Path) -> None:
    folder = tmp_path / "cache" / "kit"

    def nested(partial: Path) -> None:
        cachefill.complete(tmp_path / "cache" / "other", lambda inner: inner.mkdir())

    with pytest.raises(RuntimeError, match="already locked by this process"):
        cachefill.complete(folder, nested)
    assert not folder.exists()
