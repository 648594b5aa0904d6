"""store.atomic: files and links replace their target through one temp-entry helper.

Both writers draw an unpredictable temp name, never follow or reuse a name that is taken,
and leave nothing behind when the replace fails."""

from __future__ import annotations

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
