"""The environment `serve` gives vLLM (ascendpatch/deploy/serve_env.py): set_env.sh scripts
sourced by real bash into the child's environment only, refused where a second uid (a real
one: 65534 through setpriv) could have written them; the manifest's env on top; secrets masked.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendpatch.deploy import serve_env
from ascendpatch.errors import InvalidInputError
from tests.kit import seconduid

TOOLKIT, ATB = serve_env.STANDARD


@pytest.fixture()
def root() -> Iterator[Path]:
    with seconduid.open_folder("ascendpatch-serve-") as folder:
        yield folder


def _script(root: Path, rel: str, body: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    for parent in [p for p in path.parents if root in p.parents or p == root]:
        parent.chmod(0o755)
    path.write_text(body)
    path.chmod(0o644)
    return path


def _env(root: Path, **more: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], serve_env.ROOT_VAR: str(root),
            "LD_LIBRARY_PATH": "/opt/old", **more}


def test_the_child_gets_what_the_scripts_export_and_this_process_does_not(root: Path) -> None:
    _script(root, TOOLKIT, "export ASCEND_TOOLKIT_HOME=/x/toolkit\n"
                           "export LD_LIBRARY_PATH=/x/lib64:$LD_LIBRARY_PATH\n"
                           "export HCCL_TOKEN=hidden-value\necho chatter\nunset GONE\n")
    _script(root, ATB, "export ATB_HOME_PATH=/x/atb\nfalse\n")  # a false last line is fine
    before = dict(os.environ)
    built = serve_env.build(_env(root, GONE="1"), [], {"HF_HUB_OFFLINE": "1"})
    assert dict(os.environ) == before
    assert built.env["ASCEND_TOOLKIT_HOME"] == "/x/toolkit"
    assert built.env["LD_LIBRARY_PATH"] == "/x/lib64:/opt/old"
    assert built.env["ATB_HOME_PATH"] == "/x/atb" and built.env["HF_HUB_OFFLINE"] == "1"
    assert "GONE" not in built.env and built.removed == ("GONE",)
    assert "SHLVL" not in built.env and "_" not in built.env  # bash's own, not the scripts'
    shown = built.shown_additions()
    assert "HCCL_TOKEN=<set, value hidden>" in shown and "hidden-value" not in str(shown)
    assert built.sourced == (root / TOOLKIT, root / ATB)


def test_no_script_at_the_standard_paths_changes_nothing_but_the_manifest_env(root: Path) -> None:
    built = serve_env.build(_env(root), [], {"A": "1"})
    assert built.sourced == () and built.added == (("A", "1"),)


def test_the_manifest_names_its_own_scripts(root: Path) -> None:
    _script(root, TOOLKIT, "export FROM_STANDARD=1\n")
    own = _script(root, "opt/cann/set_env.sh", "export FROM_MANIFEST=1\n")
    built = serve_env.build(_env(root), [str(own)], {})
    assert built.env.get("FROM_MANIFEST") == "1" and "FROM_STANDARD" not in built.env
    with pytest.raises(InvalidInputError, match="not a file"):
        serve_env.build(_env(root), [str(root / "missing.sh")], {})


def test_a_script_in_a_folder_a_second_uid_can_write_is_refused(root: Path) -> None:
    script = _script(root, TOOLKIT, "export OK=1\n")
    script.parent.chmod(0o777)  # world-writable, not sticky
    with pytest.raises(InvalidInputError, match="is writable by other users"):
        serve_env.build(_env(root), [], {})
    replaced = seconduid.run("sh", "-c", f"rm -f {script} && echo 'export OWNED=1' > {script}")
    assert replaced.returncode == 0, replaced.stderr  # the danger is real: uid 65534 did it
    with pytest.raises(InvalidInputError, match="refusing to source"):
        serve_env.build(_env(root), [], {})


def test_a_sticky_folder_others_can_write_is_fine_for_an_entry_of_ours(root: Path) -> None:
    script = _script(root, TOOLKIT, "export OK=1\n")
    script.parent.chmod(0o1777)  # like /tmp: others cannot replace what root owns
    assert serve_env.build(_env(root), [], {}).env["OK"] == "1"


def test_a_script_or_folder_another_uid_owns_is_refused(root: Path) -> None:
    script = _script(root, TOOLKIT, "export OK=1\n")
    os.chown(script, seconduid.NOBODY, seconduid.NOBODY)
    with pytest.raises(InvalidInputError, match=f"owned by uid {seconduid.NOBODY}"):
        serve_env.build(_env(root), [], {})
    os.chown(script, 0, 0)
    os.chown(script.parent, seconduid.NOBODY, seconduid.NOBODY)
    with pytest.raises(InvalidInputError, match=f"owned by uid {seconduid.NOBODY}"):
        serve_env.build(_env(root), [], {})


def test_a_link_to_a_script_another_uid_can_write_is_refused(root: Path) -> None:
    theirs = root / "theirs"
    theirs.mkdir()
    os.chown(theirs, seconduid.NOBODY, seconduid.NOBODY)
    planted = seconduid.run("sh", "-c", f"echo 'export X=1' > {theirs}/set_env.sh")
    assert planted.returncode == 0, planted.stderr
    link = root / TOOLKIT
    link.parent.mkdir(parents=True)
    link.symlink_to(theirs / "set_env.sh")
    with pytest.raises(InvalidInputError, match="refusing to source"):
        serve_env.build(_env(root), [], {})


def test_a_fifo_at_the_standard_path_is_refused(root: Path) -> None:
    fifo = root / TOOLKIT
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    assert serve_env.candidates([], _env(root)) == []  # not a file: not a script to source


def test_a_failing_script_is_one_line_with_no_secret(root: Path) -> None:
    _script(root, TOOLKIT, "exec kill -9 $$\n")
    with pytest.raises(InvalidInputError, match="failed") as caught:
        serve_env.build(_env(root, DB_PASSWORD="pw-123"), [], {})
    assert "pw-123" not in str(caught.value) and "\n" not in str(caught.value)


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=300))
def test_the_env_reader_takes_any_bytes(data: bytes) -> None:
    parsed = serve_env._parse(data)
    assert all(isinstance(k, str) and isinstance(v, str) and k for k, v in parsed.items())


def test_a_link_in_a_folder_a_second_uid_can_write_is_refused(root: Path) -> None:
    """/shared (0777, not sticky) holds ``cann``, root's link to root's script folder: the
    resolved chain is all root's, but uid 65534 can rename its own link over ``cann``."""
    real = _script(root, "opt/cann-real/set_env.sh", "export OK=1\n")
    shared = root / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "cann").symlink_to(real.parent)
    with pytest.raises(InvalidInputError, match=f"{shared} is writable by other users"):
        serve_env.build(_env(root), [str(shared / "cann" / "set_env.sh")], {})
    theirs = seconduid.run("sh", "-c", f"mkdir {shared}/mine && echo 'export OWNED=1' > "
                                       f"{shared}/mine/set_env.sh && ln -s {shared}/mine "
                                       f"{shared}/new && mv -T {shared}/new {shared}/cann")
    assert theirs.returncode == 0, theirs.stderr  # the danger is real: uid 65534 did it


def test_a_relative_link_through_a_folder_of_another_uid_is_refused(root: Path) -> None:
    _script(root, "opt/cann/set_env.sh", "export OK=1\n")
    theirs = root / "theirs"
    theirs.mkdir()
    os.chown(theirs, seconduid.NOBODY, seconduid.NOBODY)
    (root / "opt" / "link").symlink_to("../theirs/../opt/cann")
    with pytest.raises(InvalidInputError, match=f"{theirs} is owned by uid {seconduid.NOBODY}"):
        serve_env.build(_env(root), [str(root / "opt" / "link" / "set_env.sh")], {})
    assert serve_env.build(_env(root), [str(root / "opt" / "cann" / "set_env.sh")],
                           {}).env["OK"] == "1"


def test_empty_search_path_entries_never_make_the_current_folder_a_search_folder(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``export X=/a:$X`` with X unset leaves an empty entry (the current folder) in X; real
    bash sources the script from /, and build() keeps only absolute entries."""
    _script(root, TOOLKIT, "export LD_LIBRARY_PATH=/x/lib64:${LD_LIBRARY_PATH}\n"
                           "export PYTHONPATH=/x/py:$PYTHONPATH\n"
                           "export ASCEND_OPP_PATH=opp\nexport WHERE=$(pwd)\n")
    monkeypatch.chdir(tmp_path)
    env = _env(root)
    del env["LD_LIBRARY_PATH"]
    built = serve_env.build(env, [], {"PATH": f"{os.environ['PATH']}::bin"})
    assert built.env["LD_LIBRARY_PATH"] == "/x/lib64" and built.env["PYTHONPATH"] == "/x/py"
    assert "ASCEND_OPP_PATH" not in built.env and "" not in built.env["PATH"].split(":")
    assert built.env["WHERE"] == "/"
    assert set(built.dropped) == {"LD_LIBRARY_PATH: ''", "PYTHONPATH: ''",
                                  "ASCEND_OPP_PATH: 'opp'", "PATH: ''", "PATH: 'bin'"}
    assert ("LD_LIBRARY_PATH", "/x/lib64") in built.added


_PEAK = """
import resource, sys
from pathlib import Path
from ascendpatch.deploy import serve_env
from ascendpatch.errors import InvalidInputError
serve_env.SOURCE_TIMEOUT = float(sys.argv[2])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    serve_env.build({"PATH": "/usr/bin:/bin", serve_env.ROOT_VAR: sys.argv[1]}, [], {})
    print("BUILT")
except InvalidInputError as exc:
    print("REFUSED", exc)
print("GREW", (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def _build_in_a_process(root: Path, timeout: float) -> tuple[str, int]:
    import subprocess
    import sys

    from tests.kit import REPO

    proc = subprocess.run([sys.executable, "-c", _PEAK, str(root), str(timeout)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=True)
    said, grew = proc.stdout.strip().splitlines()
    return said, int(grew.split()[1])


def test_a_script_that_prints_without_end_is_one_line_in_bounded_memory(root: Path) -> None:
    """Only the end of a script's standard error is held (inscript.run_bounded: before, it
    was read whole, ``capture_output``, until the timeout). (Its standard output cannot flood:
    it is sourced with ``1>&2``, and ``env -0`` cannot print more than the kernel lets one
    process's environment hold: the 4 MiB bound is not reached.)"""
    _script(root, TOOLKIT, "yes chatter-chatter-chatter >&2\n")
    said, grew_mib = _build_in_a_process(root, 3)
    assert said.startswith("REFUSED") and "did not finish in 3 s" in said
    assert grew_mib < 50, f"the peak grew by {grew_mib} MiB while sourcing"


def test_a_process_a_script_leaves_holding_its_output_is_not_waited_for(root: Path) -> None:
    """A set_env.sh that starts something in the background (its standard error still ours):
    the environment is taken once bash has exited, and what it left is stopped with its
    group, instead of sourcing failing at the timeout."""
    marker = "ascendpatch-test-left-behind-9731"
    _script(root, TOOLKIT, f"export ASCEND_TOOLKIT_HOME=/x\n(exec -a {marker} sleep 60) >&2 &\n")
    said, _ = _build_in_a_process(root, 20)
    assert said == "BUILT"
    import subprocess
    import time

    for _ in range(200):  # (SIGKILL is delivered, and the process gone, a moment later)
        left = subprocess.run(["pgrep", "-f", marker], capture_output=True, check=False)
        if not left.stdout:
            break
        time.sleep(0.05)
    assert left.stdout == b"", "what the script left running was not stopped"


def test_a_relative_set_env_path_is_refused(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It was checked from the current folder and sourced from ``/`` (where bash runs): a
    second uid's script at ``/tmp/...`` ran as root while root's own ``./tmp/...`` passed the
    check (a helper's review)."""
    mine = _script(root, "tmp/cann/set_env.sh", "export MINE=1\n")
    monkeypatch.chdir(root)
    with pytest.raises(InvalidInputError, match="relative path") as caught:
        serve_env.build(_env(root), [str(mine.relative_to(root))], {})
    assert "absolute path" in (caught.value.fix or "")


def test_a_failing_scripts_last_words_are_masked(root: Path) -> None:
    _script(root, TOOLKIT, 'echo "connecting with https://svc:$DB_PASSWORD@db.internal" >&2\n'
                           "exit 1\n")
    with pytest.raises(InvalidInputError, match="failed") as caught:
        serve_env.build(_env(root, DB_PASSWORD="hunter2"), [], {})
    assert "hunter2" not in str(caught.value) and "https://svc:***@db.internal" in str(
        caught.value)


def test_bash_that_cannot_start_is_said_as_such(root: Path) -> None:
    _script(root, TOOLKIT, "export X=1\n")
    with pytest.raises(InvalidInputError) as caught:
        serve_env.build({**_env(root), "PATH": "/nonexistent"}, [], {})
    assert "MiB" not in str(caught.value) and "bash" in str(caught.value)
