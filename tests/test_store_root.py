"""The one path guard (``store.root``), fed hostile input directly: every former guard is a use
of it, so what it lets through reaches the disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ascendpatch.errors import UnsafePathError
from ascendpatch.store import root as root_module
from ascendpatch.store.root import Root, Roots

DEPTHS = ["", "a/", "a/b/"]  # where the hostile entry sits below the root


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """A root with ``a/b/`` inside, a folder and a file outside it."""
    (tmp_path / "root" / "a" / "b").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_bytes(b"secret\n")
    return {"root": tmp_path / "root", "outside": tmp_path / "outside"}


@pytest.mark.parametrize(("rel", "said"), [
    ("..", "contains '..'"), ("a/../../x", "contains '..'"), ("a/b/../../..", "contains '..'"),
    ("/etc/passwd", "absolute path"), ("~root/x", "absolute path"),
    ("", "not a plain relative path"), ("a/\0b", "not a plain relative path"),
    ("a\\..\\x", "not a plain relative path"),
])
def test_a_name_of_the_wrong_form_is_refused(tree: dict[str, Path], rel: str, said: str) -> None:
    with pytest.raises(UnsafePathError, match=said) as err:
        Root(tree["root"]).join(rel, origin="artifact demo")
    assert str(err.value).startswith("artifact demo: ")
    fix = str(err.value).split("; fix: ")[1]  # (each says how to fix it)
    assert "site-packages" in fix and ("forward slashes" in fix) == ("\\" in rel)


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_symlink_out_of_the_tree_is_refused_at_every_depth(
        tree: dict[str, Path], depth: str, what: str) -> None:
    target = tree["outside"] / "secret" if what == "file" else tree["outside"]
    (tree["root"] / depth / "link").symlink_to(target)
    rel = f"{depth}link" if what == "file" else f"{depth}link/secret"
    with pytest.raises(UnsafePathError, match="a symlink leads out of the tree") as err:
        Root(tree["root"]).join(rel, origin="o")
    assert str(tree["outside"]) in str(err.value)
    assert err.value.fix == (f"find the link with 'namei -l {tree['root'] / rel}'; to have "
                             "ascendpatch change that file, replace the link with a copy of "
                             "what it points to")
    assert not Root(tree["root"]).holds(tree["root"] / rel)


@pytest.mark.parametrize("depth", DEPTHS)
def test_a_symlink_that_stays_in_the_tree_is_joined_unresolved(
        tree: dict[str, Path], depth: str) -> None:
    (tree["root"] / "a" / "b" / "real").write_bytes(b"x")
    (tree["root"] / depth / "link").symlink_to(tree["root"] / "a" / "b" / "real")
    root = Root(tree["root"])
    assert root.join(f"{depth}link", origin="o") == tree["root"] / depth / "link"
    assert root.inside(tree["root"] / depth / "link") == ("a", "b", "real")


def test_non_utf8_names_are_guarded_like_any_other(tree: dict[str, Path]) -> None:
    name = os.fsdecode(b"caf\xe9")
    root = Root(tree["root"])
    assert root.join(f"a/{name}", origin="o") == tree["root"] / "a" / name
    (tree["root"] / os.fsdecode(b"l\xff")).symlink_to(tree["outside"])
    with pytest.raises(UnsafePathError, match="outside the target"):
        root.join(os.fsdecode(b"l\xff") + "/secret", origin="o")


def test_inside_tells_where_a_path_really_lies(tree: dict[str, Path]) -> None:
    root = Root(tree["root"])
    assert root.inside(tree["root"]) == ()
    assert root.inside(tree["root"] / "a" / "b" / "new") == ("a", "b", "new")
    assert root.inside(tree["root"] / "a" / ".." / ".." / "outside") is None
    assert root.inside(tree["outside"]) is None
    assert root.inside(Path(f"{tree['root']}/a\0b")) is None
    assert root.relative(tree["root"] / "a" / "b") == "a/b"
    assert root.relative(tree["outside"]) is None


def test_open_dir_reaches_a_folder_and_creates_missing_ones(tree: dict[str, Path]) -> None:
    root = Root(tree["root"])
    os.close(root.open_dir(tree["root"] / "a" / "b"))
    os.close(root.open_dir(tree["root"] / "a" / "new" / "deep", create=True))
    assert (tree["root"] / "a" / "new" / "deep").is_dir()
    with pytest.raises(FileNotFoundError):
        root.open_dir(tree["root"] / "missing")


@pytest.mark.parametrize("depth", DEPTHS)
def test_open_dir_refuses_a_folder_leading_out(tree: dict[str, Path], depth: str) -> None:
    (tree["root"] / depth / "link").symlink_to(tree["outside"], target_is_directory=True)
    with pytest.raises(UnsafePathError, match="leads outside"):
        Root(tree["root"]).open_dir(tree["root"] / depth / "link", create=True)
    assert list(tree["outside"].iterdir()) == [tree["outside"] / "secret"]


@pytest.mark.parametrize("depth", DEPTHS)
def test_open_dir_never_follows_a_folder_swapped_for_a_link_after_the_check(
        tree: dict[str, Path], depth: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk itself refuses the link: here the resolution is made blind to it, as when the
    swap comes between the check and the walk."""
    swapped = tree["root"] / depth / "c"
    swapped.symlink_to(tree["outside"], target_is_directory=True)
    monkeypatch.setattr(root_module, "_real", lambda path: Path(path))
    with pytest.raises(UnsafePathError, match="became a symlink or a file"):
        Root(tree["root"]).open_dir(swapped / "new", create=True)
    assert list(tree["outside"].iterdir()) == [tree["outside"] / "secret"]


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("planted", ["fifo", "file"])
def test_open_dir_refuses_a_fifo_or_file_where_a_folder_is_expected(
        tree: dict[str, Path], depth: str, planted: str) -> None:
    """``O_DIRECTORY`` fails before a FIFO's open could block: refused, never waited on."""
    spot = tree["root"] / depth / "x"
    os.mkfifo(spot) if planted == "fifo" else spot.write_bytes(b"")
    for folder in (spot, spot / "below"):
        with pytest.raises(UnsafePathError, match="became a symlink or a file"):
            Root(tree["root"]).open_dir(folder, create=True)


@pytest.fixture
def roots(tree: dict[str, Path], tmp_path: Path) -> Roots:
    (tmp_path / "hub").mkdir()
    (tree["root"] / ".state").mkdir()
    return Roots(tree["root"], [tmp_path / "hub"], state=tree["root"] / ".state")


def test_a_path_from_state_is_guarded(roots: Roots, tree: dict[str, Path],
                                      tmp_path: Path) -> None:
    assert roots.guard("a/b", origin="j") == tree["root"] / "a" / "b"
    assert roots.guard(str(tree["root"] / "a"), origin="j") == tree["root"] / "a"
    assert roots.guard(str(tmp_path / "hub" / "x"), origin="j") == tmp_path / "hub" / "x"
    assert roots.rel(tree["root"] / "a" / "b") == "a/b"
    assert roots.rel(tmp_path / "hub" / "x") == str(tmp_path / "hub" / "x")


@pytest.mark.parametrize(("raw", "said"), [
    (None, "is not a string"), (7, "is not a string"),
    ("/etc/passwd", "lies outside the target"), ("../outside/secret", "contains '..'"),
    (".state/ledger.json", "inside ascendpatch's own state folder"),
    ("a/\0", "not a plain relative path"),
])
def test_a_hostile_path_from_state_is_refused(roots: Roots, raw: object, said: str) -> None:
    with pytest.raises(UnsafePathError, match=said) as err:
        roots.guard(raw, origin="journal j")
    assert str(err.value).startswith("journal j: ")


def test_a_link_into_the_state_folder_is_refused(roots: Roots, tree: dict[str, Path]) -> None:
    (tree["root"] / "a" / "in").symlink_to(tree["root"] / ".state")
    with pytest.raises(UnsafePathError, match="own state folder"):
        roots.guard("a/in/ledger.json", origin="j")
    (tree["root"] / "a" / "cfg").symlink_to(tree["root"] / ".state" / "ledger.json")
    with pytest.raises(UnsafePathError, match="own state folder"):
        roots.destination(tree["root"] / "a" / "cfg")


def test_a_link_is_written_through_only_into_a_guarded_tree(
        roots: Roots, tree: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "hub" / "blob").write_bytes(b"{}")
    links = {name: tree["root"] / "a" / name for name in ("hub", "out", "top", "plain")}
    links["hub"].symlink_to(tmp_path / "hub" / "blob")
    links["out"].symlink_to(tree["outside"] / "secret")
    links["top"].symlink_to(tree["root"])  # the tree itself: no file to write
    links["plain"].write_bytes(b"")
    assert roots.destination(links["hub"]) == tmp_path / "hub" / "blob"
    assert roots.destination(links["plain"]) == links["plain"]
    for name in ("out", "top"):
        with pytest.raises(UnsafePathError, match="outside the target; not followed") as err:
            roots.destination(links[name])
        assert f"namei -l {links[name]}" in str(err.value)

    assert roots.root_of(tmp_path / "hub" / "blob") == tmp_path / "hub"
    assert roots.root_of(links["plain"]) == tree["root"]


def test_the_link_fix_quotes_the_path_it_names() -> None:
    """The fix is a command line to copy: a path with a space or $(...) is one quoted word
    (a review found ``namei -l .../s$(touch PWNED)'q`` printed as it was)."""
    from ascendpatch.store.root import link_fix

    assert "namei -l '/t/site packages/x.py'" in link_fix(Path("/t/site packages/x.py"))
    assert "namei -l '/t/s$(touch PWNED)'\"'\"'q'" in link_fix(Path("/t/s$(touch PWNED)'q"))
