"""`lock --resolver pip` hashes by what the index states, not by downloading every file.

pip-tools takes hashes from the PyPI JSON API; from an index without it (a mirror in pip.conf,
Nexus, pypiserver: pip-tools #1217, #1412) it downloads every file of each pinned version, every
platform's wheels, to hash them: about 6 GB for a vllm-ascend stack on this machine's index
proxy, which serves no JSON API. ascendpatch runs pip-compile through env/_pipcompile.py, which
takes the sha256 the index's page states (PEP 503 ``#sha256=``) and downloads only a file whose
link states none. Here: real pip-compile against a PEP 503 index on 127.0.0.1
(tests/kit/localindex.py, no JSON API), named in a pip.conf, that records every path asked for.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit import Run, build_wheel, isolated, run_cli, wheels, write_manifest
from tests.kit.localindex import Recorder, serving_folder, sha256, write_pages

pytestmark = pytest.mark.integration

# files of the pinned version pip never needs to resolve (other platforms): only hashed
OTHERS = ("hashed_top-1.0-cp311-cp311-win_amd64.whl",
          "hashed_top-1.0-cp311-cp311-macosx_11_0_arm64.whl")


def _index(root: Path) -> Path:
    files = root / "files"
    top = build_wheel(files, "hashed-top", "1.0", ["hashed-bare>=1"])
    for name in OTHERS:  # same bytes, other names: what matters is that nobody reads them
        shutil.copyfile(top, files / name)
    build_wheel(files, "hashed-bare", "1.0")
    write_pages(root)
    # hashed-bare's page states no hash: that file must still be hashed, by downloading it
    page = root / "simple" / "hashed-bare" / "index.html"
    page.write_text(page.read_text().split("#sha256=")[0] + '">'
                    + page.read_text().split('">', 1)[1])
    return root


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Run, str, list[str],
                                                                       Path]]:
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
        yield run, lock, list(Recorder.seen), served / "files"


def _hashes(lock: str, name: str) -> set[str]:
    block = lock.split(f"{name}==1.0 \\", 1)[1].split("\n    #", 1)[0]
    return {word.removeprefix("--hash=sha256:") for word in block.split()
            if word.startswith("--hash=sha256:")}


def test_every_file_of_the_pin_is_hashed_by_what_the_index_states(
        locked: tuple[Run, str, list[str], Path]) -> None:
    run, lock, _seen, files = locked
    assert run.code == 0, run.out + run.err
    top = sha256(files / "hashed_top-1.0-py3-none-any.whl")
    assert _hashes(lock, "hashed-top") == {top}  # the three files have the same bytes
    assert _hashes(lock, "hashed-bare") == {sha256(files / "hashed_bare-1.0-py3-none-any.whl")}


def test_no_file_whose_hash_the_index_states_is_downloaded_to_hash_it(
        locked: tuple[Run, str, list[str], Path]) -> None:
    run, _lock, seen, _files = locked
    assert run.code == 0, run.out + run.err
    assert "/simple/hashed-top/" in seen
    assert not [path for path in seen if any(name in path for name in OTHERS)], seen


def test_a_file_whose_hash_the_index_does_not_state_is_downloaded_and_hashed(
        locked: tuple[Run, str, list[str], Path]) -> None:
    _run, _lock, seen, _files = locked
    # once by pip's resolution, once more by pip-tools to hash it (no stated hash)
    assert seen.count("/files/hashed_bare-1.0-py3-none-any.whl") == 2, seen


def test_the_lock_names_its_input_by_name_not_by_a_temp_path(
        locked: tuple[Run, str, list[str], Path]) -> None:
    """pip-compile names its input by the path it was given, a temp folder that is gone when
    the lock is read, and that differs in every run: two locks of one stack must not differ."""
    _run, lock, _seen, _files = locked
    assert "# via -r stack.in" in lock, lock
    assert "-r /" not in lock, lock
