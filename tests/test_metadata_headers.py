"""env/target.headers: a distribution's METADATA headers from the text before its first blank
line, the same as importlib.metadata's whole-file reading (issue 27 item 4: verify parsed the
long descriptions of 300 distributions for their Requires-Dist lines).

Compared with ``importlib.metadata.PathDistribution(...).metadata`` on generated METADATA
(Hypothesis: header lines, folded values, every line ending, bodies that look like headers)
and on every distribution installed in this test's own interpreter; then the hostile files a
target can hold (a FIFO, a huge file, bytes that are not UTF-8)."""

from __future__ import annotations

import os
import tempfile
from importlib import metadata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascendpatch.env import target
from ascendpatch.env.target import headers
from tests.kit.properties import deadline

NAMES = ["Metadata-Version", "Name", "Version", "Requires-Dist", "Provides-Extra", "Summary",
         "Requires-Python", "Content-Type", "Description", "X"]
VALUES = st.text(st.characters(codec="utf-8", exclude_characters="\r\n"),
                 max_size=30)
ENDINGS = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def metadata_texts(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        name = draw(st.sampled_from(NAMES))
        lines.append(f"{name}:{draw(st.sampled_from(['', ' ', '  ']))}{draw(VALUES)}"
                     f"{draw(ENDINGS)}")
        for _fold in range(draw(st.integers(0, 2))):  # folded (continuation) lines
            lines.append(f"{draw(st.sampled_from([' ', chr(9), '        ']))}{draw(VALUES)}"
                         f"{draw(ENDINGS)}")
        if draw(st.booleans()) and draw(st.integers(0, 9)) == 0:
            lines.append(f"{draw(VALUES)}{draw(ENDINGS)}")  # a line that is not a header
    separator = draw(st.sampled_from(["", "\n", "\r\n", "\r", "\n\n"]))
    body = draw(st.lists(st.sampled_from(["Requires-Dist: ghost\n", "text\r\n", "\n", "\r",
                                          "--b\n", "Name: other\n", "x"]), max_size=6))
    return "".join(lines) + separator + "".join(body)


def _headers_only(parsed: metadata.PackageMetadata) -> list[tuple[str, str]]:
    """The header lines, without the Description importlib appends from the body."""
    items = list(parsed.items())  # type: ignore[attr-defined]
    return items[:-1] if parsed.get_payload() else items  # type: ignore[attr-defined]


def _same(folder: Path) -> None:
    ours, theirs = headers(folder), metadata.PathDistribution(folder).metadata
    assert _headers_only(ours) == _headers_only(theirs)
    for key in ("Name", "Version", "Requires-Dist"):
        assert ours.get_all(key) == theirs.get_all(key)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=deadline(2000))
@given(metadata_texts(), st.sampled_from(["METADATA", "PKG-INFO"]))
def test_the_headers_are_importlibs_on_generated_metadata(text: str, name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "demo-1.0.dist-info"
        folder.mkdir()
        (folder / name).write_bytes(text.encode())
        _same(folder)


def test_the_headers_are_importlibs_on_every_installed_distribution() -> None:
    seen = 0
    for dist in metadata.distributions():
        folder = getattr(dist, "_path", None)
        if isinstance(folder, Path) and folder.is_dir():
            _same(folder)
            seen += 1
    assert seen >= 20  # this venv: ascendpatch's dependencies and dev tools


def test_an_empty_metadata_falls_back_to_pkg_info_as_importlib_does(tmp_path: Path) -> None:
    folder = tmp_path / "demo-1.0.egg-info"
    folder.mkdir()
    (folder / "METADATA").write_bytes(b"")
    (folder / "PKG-INFO").write_text("Name: demo\nVersion: 1.0\nRequires-Dist: a\n\nbody\n")
    assert headers(folder).get_all("Requires-Dist") == ["a"]
    _same(folder)


def test_hostile_metadata_counts_as_absent_or_keeps_its_headers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A FIFO is never opened for a blocking read (importlib would hang), a file over the
    bound is not read (importlib reads it whole), and a body that is not UTF-8 leaves the
    headers readable (importlib raises UnicodeDecodeError: verify ended in exit 3)."""
    fifo = tmp_path / "fifo-1.0.dist-info"
    fifo.mkdir()
    os.mkfifo(fifo / "METADATA")
    assert headers(fifo).get_all("Requires-Dist") is None
    binary = tmp_path / "binary-1.0.dist-info"
    binary.mkdir()
    (binary / "METADATA").write_bytes(b"Name: binary\nRequires-Dist: b\n\n\xff\xfe body\n")
    assert headers(binary).get_all("Requires-Dist") == ["b"]
    with pytest.raises(UnicodeDecodeError):
        metadata.PathDistribution(binary).metadata  # noqa: B018
    big = tmp_path / "big-1.0.dist-info"
    big.mkdir()
    (big / "METADATA").write_bytes(b"Name: big\nRequires-Dist: c\n\n" + b"x" * 4096)
    monkeypatch.setattr(target, "MAX_METADATA_BYTES", 1024)
    assert headers(big).get_all("Name") is None
