"""The lock's no_deps section (env/lockfile.py), lock's words about pip-compile's input, and
what lock refuses to write (index options) or show (an index's password).

The section is read back by `install --lock` from a file the user gives: hostile input (a
FIFO, a huge file, non-UTF-8 bytes, lines that are no exact hashed pin) is refused with one
line, exit 2, before pip runs. The hashes come from pip's own report; the recorded report
below is a real one (`pip install --dry-run --no-deps --report` of vllm==0.18.0 on PyPI).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendpatch.commands.lock import _index_free, _unnamed
from ascendpatch.env import lockfile, pipadapter, resolver
from ascendpatch.env.pipadapter import ONLINE, PipError
from ascendpatch.errors import InvalidInputError
from tests.kit import seconduid
from tests.kit.properties import deadline

HEX = "ab" * 32
VLLM_ITEM = {"metadata": {"name": "vllm", "version": "0.18.0"},
             "download_info": {"url": "https://files.pythonhosted.org/packages/4f/e9/vllm-0.18.0"
                                      "-cp38-abi3-manylinux_2_31_x86_64.whl",
                               "archive_info": {"hash": f"sha256={HEX}",
                                                "hashes": {"sha256": HEX}}}}


def test_the_section_pins_and_hashes_what_pips_report_names(tmp_path: Path) -> None:
    other = {"metadata": {"name": "Vllm_Ascend", "version": "0.18.0"}, "download_info": {}}
    text = lockfile.section({"install": [other, VLLM_ITEM]}, ["VLLM"], tmp_path, ONLINE)
    assert text == lockfile.HEADER + f"#no-deps: vllm==0.18.0 --hash=sha256:{HEX}\n"
    older = {**VLLM_ITEM, "download_info": {"archive_info": {"hash": f"sha256={HEX}"}}}
    assert lockfile.section({"install": [older]}, ["vllm"], tmp_path, ONLINE).endswith(
        f"--hash=sha256:{HEX}\n")
    assert lockfile.section({"install": []}, ["vllm"], tmp_path, ONLINE) == ""


def test_a_written_section_reads_back(tmp_path: Path) -> None:
    lock = tmp_path / "stack.lock"
    lock.write_text("asc==1.0 \\\n    --hash=sha256:" + HEX + "\n" + lockfile.HEADER
                    + f"#no-deps: vllm==0.18.0 --hash=sha256:{HEX} --hash=sha256:{'cd' * 32}\n")
    assert lockfile.read(lock) == [f"vllm==0.18.0 --hash=sha256:{HEX} --hash=sha256:{'cd' * 32}"]
    written = lockfile.write_requirements(lockfile.read(lock), tmp_path)
    assert written.read_text() == f"vllm==0.18.0 --hash=sha256:{HEX} --hash=sha256:{'cd' * 32}\n"


@pytest.mark.parametrize("entry", [
    "vllm>=0.18.0 --hash=sha256:" + HEX,  # not exact
    "vllm==0.18.0",  # no hash
    "vllm==0.18.0 --hash=md5:" + "ab" * 16,
    "vllm==0.18.0 --hash=sha256:" + HEX + " --index-url http://evil/",  # no other options
    "vllm @ https://evil/vllm.whl --hash=sha256:" + HEX,
    "vllm==0.18.0; python_version<'3' --hash=sha256:" + HEX,
    "-r /etc/shadow --hash=sha256:" + HEX,
    "vllm===0.18.0 --hash=sha256:" + HEX,
])
def test_a_bad_no_deps_line_is_refused(tmp_path: Path, entry: str) -> None:
    lock = tmp_path / "stack.lock"
    lock.write_text(f"{lockfile.MARK}{entry}\n")
    with pytest.raises(InvalidInputError, match="line 1: a no-deps line must be"):
        lockfile.read(lock)


def test_hostile_lock_files_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.lock"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInputError, match="cannot read the lock"):
        lockfile.read(fifo)  # refused before a read that would block
    huge = tmp_path / "huge.lock"
    with huge.open("wb") as handle:
        handle.truncate(lockfile.MAX_LOCK_BYTES + 1)
    with pytest.raises(InvalidInputError, match="cannot read the lock"):
        lockfile.read(huge)
    with pytest.raises(InvalidInputError, match="cannot read the lock"):
        lockfile.read(tmp_path / "missing.lock")
    binary = tmp_path / "binary.lock"
    binary.write_bytes(b"\xff\xfe" + lockfile.MARK.encode() + b"\xffvllm==1 --hash=x\n")
    assert lockfile.read(binary) == []  # the mark is not at a line start: pip's comment
    binary.write_bytes(lockfile.MARK.encode() + b"vl\xffm==1.0 --hash=sha256:" + HEX.encode())
    with pytest.raises(InvalidInputError, match="no-deps line must be"):
        lockfile.read(binary)


def test_a_lock_another_uid_owns_or_can_write_is_refused_before_pip(tmp_path: Path) -> None:
    """All of a lock but its no-deps lines goes to pip (index URLs, ``name @ URL`` sdists it
    builds, as root): a lock uid 65534 wrote (via setpriv), or one any user can write, is
    refused with one line; the copy pip would read is never made."""
    pinned = f"{lockfile.MARK}vllm==0.18.0 --hash=sha256:{HEX}\n"
    with seconduid.open_folder() as shared:
        theirs = seconduid.home_for_nobody(shared) / "stack.lock"
        made = seconduid.run("sh", "-c", f"printf '%s' '{pinned}' > {theirs}")
        assert made.returncode == 0, made.stderr
        with pytest.raises(InvalidInputError, match="owned by uid 65534, not by this user"):
            lockfile.read(theirs)
    loose = tmp_path / "loose.lock"
    loose.write_text(pinned)
    loose.chmod(0o646)
    with pytest.raises(InvalidInputError, match="writable by other users"):
        lockfile.read(loose)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loose.lock"]
    loose.chmod(0o644)
    private = tmp_path / "private"
    private.mkdir()
    copy, lines = lockfile.take(loose, private)
    assert copy.read_text() == pinned and lines == [f"vllm==0.18.0 --hash=sha256:{HEX}"]


@settings(max_examples=200, deadline=deadline(1000))
@given(st.text(max_size=300))
def test_any_no_deps_line_is_read_or_refused(tmp_path_factory: pytest.TempPathFactory,
                                             entry: str) -> None:
    lock = tmp_path_factory.mktemp("lock") / "stack.lock"
    lock.write_bytes(lockfile.MARK.encode() + entry.encode("utf-8", "surrogatepass")
                     .replace(b"\n", b" ").replace(b"\r", b" "))
    try:
        found = lockfile.read(lock)
    except InvalidInputError as exc:
        assert len(str(exc)) < 400
    else:
        assert all("--hash=sha256:" in line for line in found)


def test_pip_compiles_words_name_the_manifest_not_its_deleted_input(tmp_path: Path) -> None:
    """pip's own words from a real run (lock of vllm-ascend 0.18.0 with transformers)."""
    spec = tmp_path / "s18.in"
    spec.write_text(f"# input\n-c {tmp_path}/protected.txt\nvllm-ascend==0.18.0\n"
                    "transformers>=4.57.4\n")
    said = (f"Cannot install -r {spec} (line 3) and -r {spec} (line 4) because these package "
            f"versions have conflicting dependencies. (from -c {tmp_path}/protected.txt)")
    assert _unnamed(said, spec, tmp_path, "s18") == (
        "Cannot install vllm-ascend==0.18.0 (manifest s18) and transformers>=4.57.4 (manifest "
        "s18) because these package versions have conflicting dependencies. (from -c the lock "
        "input of manifest s18)")


INDEX = "http://user:SECRETTOKEN@127.0.0.1:8080/simple"


@pytest.mark.parametrize("said", [
    f"--extra-index-url {INDEX}\n\nsix==1.16.0 \\\n",  # pip-compile's echo of its output
    f"Looking in indexes: {INDEX}\nERROR: Could not fetch URL {INDEX}/six/: 401 Unauthorized",
])
def test_pip_compiles_words_never_show_an_index_password(tmp_path: Path, said: str) -> None:
    spec = tmp_path / "s.in"
    spec.write_text("six==1.16.0\n")
    shown = _unnamed(pipadapter.explain(said), spec, tmp_path, "s")
    assert "SECRETTOKEN" not in shown and "http://user:***@127.0.0.1:8080/simple" in shown


def test_uvs_words_never_show_an_index_password() -> None:
    said = (f"error: Failed to fetch: `{INDEX}/six/`\n  Caused by: HTTP status client error "
            f"(401 Unauthorized) for url ({INDEX}/six/)\n")
    shown = resolver.uv_said(said)
    assert "SECRETTOKEN" not in shown and "http://user:***@127.0.0.1:8080/simple/six/" in shown


@pytest.mark.parametrize("line", [f"--index-url {INDEX}", f"--index-url={INDEX}", f"-i {INDEX}",
                                  f"-i{INDEX}", f"  --extra-index-url {INDEX}",
                                  "--trusted-host 127.0.0.1:8080", "-f /srv/wheels",
                                  "--find-links=/srv/wheels", "--find-links"])
def test_a_resolver_output_with_an_index_option_is_never_a_lock(line: str) -> None:
    output = f"six==1.16.0 \\\n    --hash=sha256:{HEX}\n    # via -r s.in\n{line}\n"
    with pytest.raises(PipError) as refused:
        _index_free(output, "uv", "s")
    option = line.split()[0].split("=")[0].removesuffix(INDEX)
    assert str(refused.value).startswith(f"uv wrote {option} into the lock of manifest s (line "
                                         "4 of its output) although told not to; nothing was "
                                         "locked; fix: ")
    assert "SECRETTOKEN" not in str(refused.value) and "/srv" not in str(refused.value)


def test_a_lock_without_index_options_is_kept_as_the_resolver_wrote_it() -> None:
    output = (f"six==1.16.0 \\\n    --hash=sha256:{HEX}\n    # via -r s.in\n"
              f"#no-deps: vllm==0.18.0 --hash=sha256:{HEX}\n--no-binary :none:\n")
    assert _index_free(output, "pip-compile", "s") == output


@pytest.mark.integration
def test_pips_failure_on_a_lock_names_the_users_file_not_the_private_copy(
        tmp_path: Path) -> None:
    """install --lock hands pip a private copy (read once); pip's error quoted that copy's
    temp path, deleted once the command ends (1ae4e26..e57e3c0). Real pip, an empty
    wheelhouse."""
    from tests.kit import run_cli, wheels

    python = wheels.make_venv(tmp_path / "target")
    lock = tmp_path / "my.lock"
    lock.write_text("six==1.16.0 --hash=sha256:"
                    "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254\n")
    lock.chmod(0o644)
    (tmp_path / "wh").mkdir()
    result = run_cli("--python", python, "install", "--lock", lock, "--offline",
                     "--wheelhouse", tmp_path / "wh", "--dry-run")
    said = result.out + result.err
    assert result.code == 1 and "pip cannot resolve" in said, said
    assert str(lock) in said and "lock.txt" not in said, said
