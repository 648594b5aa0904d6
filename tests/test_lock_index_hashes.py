"""`lock --resolver pip` hashes by what the index states, not by downloading every file.

pip-tools takes hashes from the PyPI JSON API; from an index without it (a mirror in pip.conf,
Nexus, pypiserver: pip-tools #1217, #1412) it downloads every file of each pinned version, every
platform's wheels, to hash them: about 6 GB for a vllm-ascend stack on this machine's index
proxy, which serves no JSON API. ascendpatch runs pip-compile through env/_pipcompile.py, which
takes the sha256 the index's page states (PEP 503 ``#sha256=``), as the index states it, and
downloads only a file whose link states none, or states it in another form. Here: real
pip-compile against a PEP 503 index on 127.0.0.1 (tests/kit/localindex.py, no JSON API), named
in a pip.conf, that records every path asked for.
"""

from __future__ import annotations

import hashlib
import subprocess
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ascendpatch.env import pipadapter
from tests.kit import Run, build_wheel, isolated, run_cli, wheels, write_manifest
from tests.kit.localindex import Recorder, serving_folder, sha256, write_pages

pytestmark = pytest.mark.integration

TOP = "hashed_top-1.0-py3-none-any.whl"
# files of the pinned version pip never needs to resolve (other platforms): only hashed
WINDOWS = "hashed_top-1.0-cp311-cp311-win_amd64.whl"
MAC = "hashed_top-1.0-cp311-cp311-macosx_11_0_arm64.whl"  # its page states a wrong sha256
WRONG = "0" * 64
# dependencies whose page states no usable sha256: no hash, an uppercase one, an md5
FALLBACKS = {"hashed-bare": "", "hashed-upper": "upper", "hashed-md5": "md5"}


@dataclass(frozen=True)
class Locked:
    run: Run
    lock: str
    seen: list[str]
    files: Path
    home: Path


def _other_bytes(wheel: Path, name: str) -> Path:
    """A copy of ``wheel`` named ``name`` whose bytes differ (a zip comment)."""
    copy = wheel.with_name(name)
    copy.write_bytes(wheel.read_bytes())
    with zipfile.ZipFile(copy, "a") as archive:
        archive.comment = name.encode()
    return copy


def _restate(page: Path, filename: str, fragment: str) -> None:
    """The link to ``filename`` on ``page`` with ``fragment`` (``""``: no hash stated)."""
    text = page.read_text()
    start = text.index(f"{filename}#")
    end = text.index('"', start)
    page.write_text(text[:start] + filename + (f"#{fragment}" if fragment else "") + text[end:])


def _index(root: Path) -> Path:
    files = root / "files"
    top = build_wheel(files, "hashed-top", "1.0", sorted(f"{n}>=1" for n in FALLBACKS))
    _other_bytes(top, WINDOWS)
    _other_bytes(top, MAC)
    for name in FALLBACKS:
        build_wheel(files, name, "1.0")
    write_pages(root)
    simple = root / "simple"
    _restate(simple / "hashed-top" / "index.html", MAC, f"sha256={WRONG}")
    _restate(simple / "hashed-bare" / "index.html", "hashed_bare-1.0-py3-none-any.whl", "")
    upper = files / "hashed_upper-1.0-py3-none-any.whl"
    _restate(simple / "hashed-upper" / "index.html", upper.name,
             f"sha256={sha256(upper).upper()}")
    md5 = files / "hashed_md5-1.0-py3-none-any.whl"
    _restate(simple / "hashed-md5" / "index.html", md5.name,
             f"md5={hashlib.md5(md5.read_bytes()).hexdigest()}")
    return root


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Locked]:
    tmp = tmp_path_factory.mktemp("indexhashes")
    served = _index(tmp / "served")
    manifest = write_manifest(tmp / "stack.yaml", [], name="stack", protected=["torch"],
                              stack={"packages": {"hashed-top": "==1.0"}})
    with isolated(tmp / "home"), pytest.MonkeyPatch.context() as env, \
            serving_folder(served) as port:
        conf = tmp / "pip.conf"
        conf.write_text(f"[global]\nextra-index-url = http://127.0.0.1:{port}/simple\n"
                        "no-cache-dir = true\n")
        env.setenv("PIP_CONFIG_FILE", str(conf))
        python = wheels.make_venv(tmp / "target")
        Recorder.seen = []
        run = run_cli("--json", "--python", python, "--manifest", manifest, "lock", "-o",
                      tmp / "stack.lock", "--resolver", "pip")
        lock = (tmp / "stack.lock").read_text() if (tmp / "stack.lock").exists() else ""
        yield Locked(run, lock, list(Recorder.seen), served / "files", tmp / "home")


def _hashes(lock: str, name: str) -> set[str]:
    block = lock.split(f"{name}==1.0 \\", 1)[1].split("\n    #", 1)[0]
    return {word.removeprefix("--hash=sha256:") for word in block.split()
            if word.startswith("--hash=sha256:")}


def test_every_file_of_the_pin_is_hashed_as_the_index_states_it(locked: Locked) -> None:
    """Three files of different bytes: each one's stated hash, the wrong one included (no file
    is read to check it: `install --lock` would refuse that file, --require-hashes)."""
    assert locked.run.code == 0, locked.run.out + locked.run.err
    assert _hashes(locked.lock, "hashed-top") == {
        sha256(locked.files / TOP), sha256(locked.files / WINDOWS), WRONG}
    assert sha256(locked.files / MAC) not in locked.lock


def test_no_file_whose_hash_the_index_states_is_downloaded_to_hash_it(locked: Locked) -> None:
    assert locked.run.code == 0, locked.run.out + locked.run.err
    assert "/simple/hashed-top/" in locked.seen
    assert not [path for path in locked.seen if WINDOWS in path or MAC in path], locked.seen


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_a_file_whose_page_states_no_usable_sha256_is_downloaded_and_hashed(
        locked: Locked, name: str) -> None:
    """No hash, an uppercase one, an md5: hashed from the bytes, as pip-tools does."""
    wheel = f"{name.replace('-', '_')}-1.0-py3-none-any.whl"
    assert _hashes(locked.lock, name) == {sha256(locked.files / wheel)}
    # once by pip's resolution (no PEP 658 metadata here), once more by pip-tools to hash it
    assert locked.seen.count(f"/files/{wheel}") == 2, locked.seen


def test_the_lock_names_its_input_by_name_not_by_a_temp_path(locked: Locked) -> None:
    """pip-compile names its input by the path it was given, a temp folder that is gone when
    the lock is read, and that differs in every run: two locks of one stack must not differ."""
    assert "# via -r stack.in" in locked.lock, locked.lock
    assert "-r /" not in locked.lock, locked.lock


def test_a_pip_tools_without_the_hasher_runs_as_it_is_and_says_so(locked: Locked) -> None:
    """pip-tools is installed unpinned: the real pip-tools of this lock, its hasher removed,
    is left as it is (no TypeError, no crash), and the one line says why."""
    (venv,) = (locked.home / ".cache" / "ascendpatch" / "piptools").iterdir()
    script = Path(pipadapter.__file__).with_name(pipadapter.COMPILE_SCRIPT)
    probe = ("import runpy, sys\n"
             "from piptools.repositories.pypi import PyPIRepository\n"
             "real = PyPIRepository._get_file_hash\n"
             "mod = runpy.run_path(sys.argv[1], run_name='probe')\n"
             "assert mod['patch']() is None and PyPIRepository._get_file_hash is not real\n"
             "del PyPIRepository._get_file_hash\n"
             "print(mod['NOTICE'].format(why=mod['patch']()))\n")
    done = subprocess.run([venv / "bin" / "python", "-c", probe, script], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "no PyPIRepository._get_file_hash); every file of each pin is downloaded" \
        in done.stdout, done.stdout
