"""store.atomic: files and links replace their target through one temp-entry helper.

Both writers draw an unpredictable temp name, never follow or reuse a name that is taken,
and leave nothing behind when the replace fails."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from ascendpatch.store import atomic


def _debris(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(atomic.TEMP_SUFFIX))


@pytest.mark.parametrize("kind", ["file", "link"])
def test_a_taken_temp_name_is_left_alone_and_another_drawn(
        kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"secret")
    folder = tmp_path / "folder"
    folder.mkdir()
    planted = folder / f".out.planted{atomic.TEMP_SUFFIX}"
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
