"""store.atomic: files and links replace their target through one temp-entry helper.

Both writers draw an unpredictable temp name, never follow or reuse a name that is taken,
and leave nothing behind when the replace fails."""

from __future__ import annotations

import errno
import os
import secrets
from pathlib import Path

import pytest

from ascendpatch.store import atomic
from tests.kit import make_dist, run_cli, write_manifest


def _debris(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(atomic.TEMP_SUFFIX))


@pytest.mark.parametrize("kind", ["file", "link"])
def test_a_taken_temp_name_is_left_alone_and_another_drawn(
        kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"secret")
    folder = tmp_path / "folder"
    folder.mkdir()
    planted = folder / f".planted{atomic.TEMP_SUFFIX}"
    planted.symlink_to(victim)
    names = iter(["planted", "fresh"])  # the first name drawn is the planted one
    monkeypatch.setattr(secrets, "token_hex", lambda _n: next(names))
    out = folder / "out"
    if kind == "file":
        atomic.write_atomic(out, b"new")
        assert out.read_bytes() == b"new" and not out.is_symlink()
    else:
        atomic.symlink_atomic(out, "elsewhere")
        assert out.is_symlink() and str(out.readlink()) == "elsewhere"
    assert victim.read_bytes() == b"secret"
    assert planted.is_symlink() and _debris(folder) == [planted.name]


@pytest.mark.parametrize("kind", ["file", "link"])
def test_a_failed_replace_leaves_no_temp_entry(kind: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "inside").mkdir(parents=True)  # a folder where the file or link should go
    with pytest.raises(OSError):
        if kind == "file":
            atomic.write_atomic(out, b"new")
        else:
            atomic.symlink_atomic(out, "elsewhere")
    assert _debris(tmp_path) == [] and (out / "inside").is_dir()


def test_a_file_named_name_max_long_is_patched(tmp_path: Path) -> None:
    """A 255-byte file name (NAME_MAX): the temp name beside it must still fit (on 89ee836 it
    was derived from the name, 30 bytes longer: ENAMETOOLONG, exit 3)."""
    name = "m" * 252 + ".py"
    assert len(name.encode()) == 255
    site = tmp_path / "site"
    make_dist(site, "demo", "1.0", {"demo/__init__.py": "", f"demo/{name}": "a = 1\nb = 3\n"})
    (tmp_path / "fix.patch").write_text(
        f"--- a/demo/{name}\n+++ b/demo/{name}\n@@ -1,2 +1,3 @@\n a = 1\n+a2 = 2\n b = 3\n")
    manifest = write_manifest(tmp_path / "m.yaml", [{
        "id": "long-fix", "title": "long name fix", "kind": "diff", "distribution": "demo",
        "versions": ">=1", "source": "fix.patch"}])
    args = ("--site-packages", site, "--manifest", manifest)
    applied = run_cli(*args, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert (site / "demo" / name).read_text() == "a = 1\na2 = 2\nb = 3\n"
    reverted = run_cli(*args, "revert")
    assert reverted.code == 0, reverted.out + reverted.err
    assert (site / "demo" / name).read_text() == "a = 1\nb = 3\n"
    assert _debris(site / "demo") == []


def _recording_fsync(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The real os.fsync, recording what each call synced (a file or folder, by path)."""
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(str(Path(f"/proc/self/fd/{fd}").readlink()))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def test_a_deferred_batch_syncs_every_file_and_folder_once_at_its_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside deferred_sync nothing is fsynced; leaving it syncs each file written and each
    folder changed (the concurrent fsyncs a file system commits together: a catalog's 700
    fsyncs one after another cost seconds). Nothing after the batch runs before they are done."""
    synced = _recording_fsync(monkeypatch)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "gone").write_bytes(b"old")
    with atomic.deferred_sync():
        atomic.write_atomic(tmp_path / "a" / "one", b"1")
        atomic.write_atomic(tmp_path / "a" / "two", b"2")
        atomic.symlink_atomic(tmp_path / "a" / "link", "one")
        atomic.remove(tmp_path / "b" / "gone")
        assert synced == []
    real = str(tmp_path.resolve())
    assert sorted(synced) == sorted([f"{real}/a", f"{real}/a/one", f"{real}/a/two",
                                     f"{real}/b"])
    assert (tmp_path / "a" / "two").read_bytes() == b"2"
    assert (tmp_path / "a" / "link").readlink() == Path("one")
    assert not (tmp_path / "b" / "gone").exists()


def test_a_batch_that_fails_syncs_nothing_and_a_failed_sync_is_raised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After an exception the caller rolls back (its own writes sync as usual); an fsync that
    fails at the end of a batch (EIO) is raised, naming its file, never swallowed."""
    synced = _recording_fsync(monkeypatch)
    with pytest.raises(KeyError), atomic.deferred_sync():
        atomic.write_atomic(tmp_path / "one", b"1")
        raise KeyError("stop")
    assert synced == []
    atomic.write_atomic(tmp_path / "after", b"x")  # outside a batch: synced at once
    assert len(synced) == 2

    def broken(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError) as caught, atomic.deferred_sync():
        atomic.write_atomic(tmp_path / "two", b"2")
    assert caught.value.errno == errno.EIO and str(tmp_path) in str(caught.value.filename)


def test_a_transaction_has_every_backup_on_disk_before_its_journal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The journal's order, with batched syncs: all backups synced before the journal is
    written, all files replaced and synced before the ledger and the commit point."""
    site = tmp_path / "site"
    files = {f"demo/m{i}.py": f"a = 1\nb = 3\n# {i}\n" for i in range(3)}
    make_dist(site, "demo", "1.0", {"demo/__init__.py": "", **files})
    artifacts: list[dict[str, object]] = []
    for i in range(3):
        (tmp_path / f"p{i}.patch").write_text(
            f"--- a/demo/m{i}.py\n+++ b/demo/m{i}.py\n@@ -1,2 +1,3 @@\n a = 1\n+a2 = 2\n b = 3\n")
        artifacts.append({"id": f"fix-{i}", "title": f"fix {i}", "kind": "diff",
                          "distribution": "demo", "versions": ">=1", "source": f"p{i}.patch"})
    manifest = write_manifest(tmp_path / "m.yaml", artifacts)
    synced = _recording_fsync(monkeypatch)
    applied = run_cli("--site-packages", site, "--manifest", manifest, "apply")
    assert applied.code == 0, applied.out + applied.err
    state = f"{site.resolve()}/.ascendpatch"
    # the journal and the ledger are written through temp files of the state folder, in
    # that order (and synced under their temp names); backups and files under their own
    temps = [i for i, p in enumerate(synced) if p.startswith(f"{state}/.")
             and p.endswith(atomic.TEMP_SUFFIX)]
    journal, ledger = temps[0], temps[-1]
    backups = [i for i, p in enumerate(synced) if p.startswith(f"{state}/backups/")]
    targets = [i for i, p in enumerate(synced) if p.startswith(f"{site.resolve()}/demo/m")]
    assert len(backups) == 3 and len(targets) == 3
    assert max(backups) < journal < min(targets) and max(targets) < ledger
    for i in range(3):
        assert (site / "demo" / f"m{i}.py").read_text() == f"a = 1\na2 = 2\nb = 3\n# {i}\n"


def test_a_cache_folder_keeps_its_most_recently_written_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache of one file per path (a manifest in a fresh temp folder each CI run) does not
    grow without end: past cachedir.KEEP files, writing one removes the least recently
    written. The file just written stays even when its stamp is the oldest; a temp file in
    flight (another run's, a dot name), a folder and a link are never taken."""
    import os

    from ascendpatch import cachedir

    def name(i: int) -> str:
        return f"{i:016x}.json"  # (as introcache names its files)

    monkeypatch.setenv("ASCENDPATCH_CACHE", str(tmp_path / "cache"))
    folder = cachedir.folder("introspect")
    for i in range(cachedir.KEEP + 5):
        cachedir.write(folder / name(i), b"{}")
        os.utime(folder / name(i), ns=(10**18 + i, 10**18 + i))  # (a stamp each)
    in_flight = folder / f".0123456789abcdef{atomic.TEMP_SUFFIX}"
    in_flight.write_bytes(b"half")
    (folder / "sub").mkdir()
    (folder / "link").symlink_to(tmp_path)
    assert sorted(p.name for p in folder.glob("*.json")) == \
        sorted(name(i) for i in range(5, cachedir.KEEP + 5))
    late, last = name(10**6), name(10**6 + 1)
    cachedir.write(folder / late, b"{}")
    os.utime(folder / late, ns=(1, 1))  # the oldest stamp of all ...
    cachedir.write(folder / late, b"{}")  # ... yet the one just written: kept
    assert (folder / late).exists()
    os.utime(folder / late, ns=(1, 1))
    cachedir.write(folder / last, b"{}")  # now the oldest goes
    names = {p.name for p in folder.iterdir()}
    assert len(names & {name(i) for i in range(cachedir.KEEP + 5)}) == cachedir.KEEP - 1
    assert {last, in_flight.name, "sub", "link"} <= names and late not in names
    assert len([n for n in names if n.endswith(".json")]) == cachedir.KEEP


def test_a_cache_root_that_holds_the_users_files_loses_none_of_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$ASCENDPATCH_CACHE may be any folder: pointed at a checkout, its manifests/ holds the
    user's YAML beside the kept parses. Only files of the cache's own kind go (a hex name as
    long as the one written, with its ending, mode 0600, this user's): 70 old YAML files, a
    name that is not UTF-8, a hex name of another ending, length or mode all stay."""
    import os

    from ascendpatch import cachedir

    monkeypatch.setenv("ASCENDPATCH_CACHE", str(tmp_path / "checkout"))
    folder = cachedir.folder("manifests")
    theirs = [f"team-{i:02d}.yaml" for i in range(70)]
    theirs += ["0123456789abcdef.yaml", "0123456789abcde.json", "0123456789abcdef0.json",
               "fedcba9876543210.json"]
    for own in theirs:
        (folder / own).write_text("name: x\n")
        os.utime(folder / own, ns=(1, 1))
    (folder / "fedcba9876543210.json").chmod(0o644)  # (not as cachedir writes its files)
    odd = os.fsencode(str(folder)) + b"/we\xffird"
    with open(odd, "wb") as handle:
        handle.write(b"x")
    for i in range(cachedir.KEEP + 3):
        cachedir.write(folder / f"{i:016x}.json", b"{}")
    left = {p.name for p in folder.iterdir()}
    assert set(theirs) <= left and "we\udcffird" in left
    assert len(left - set(theirs) - {"we\udcffird"}) == cachedir.KEEP


def test_a_cache_file_is_replaced_atomically_but_never_fsynced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ascendpatch's own cache files (cachedir.write) skip both fsyncs (20-30 ms of a cold
    audit): a crash can only cost the cache, whose readers take a cut file for none. Every
    other write still syncs the file and its folder."""
    from ascendpatch import cachedir

    monkeypatch.setenv("ASCENDPATCH_CACHE", str(tmp_path / "cache"))
    synced = _recording_fsync(monkeypatch)
    folder = cachedir.folder("audit")
    cachedir.write(folder / "statcache.v5", b"old")
    before = (folder / "statcache.v5").stat().st_ino
    cachedir.write(folder / "statcache.v5", b"new")
    assert synced == [] and (folder / "statcache.v5").read_bytes() == b"new"
    assert (folder / "statcache.v5").stat().st_ino != before  # a new file, renamed over
    assert _debris(folder) == []
    atomic.write_atomic(tmp_path / "data", b"kept")
    assert len(synced) == 2 and str(tmp_path.resolve()) in synced  # the file, then its folder
