"""Nothing ascendpatch or install.sh runs imports code from the folder it is run in.

``python -m`` and ``python -c`` put the current folder first on sys.path. Root runs
ascendpatch (and install.sh) on shared hosts, sometimes from /tmp or another user's folder: a
real second uid (65534) plants ``json.py``, ``pip.py``, ``argparse.py``, ``runpy.py`` (the
fix's own first import) and ``venv.py`` in a folder it owns, each writing a marker with its
euid when imported; root then runs each command that starts an interpreter from there, and no
marker may appear (inscript.module_argv / code_argv, install.sh's ``isolated``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ascendpatch.env import inscript, pipadapter, pipconfig
from tests.kit import REPO, chdir, run_cli, seconduid, torchguard, write_manifest

PLANTED = ("json", "pip", "argparse", "runpy", "venv", "shtab")
_MARKER = ("import os as _o\n"
           "open(_o.path.join(_o.path.dirname(_o.path.abspath(__file__)),\n"
           "                  'ran-%s-as-uid-%d' % (__name__, _o.geteuid())), 'w').close()\n")


@pytest.fixture
def planted() -> Iterator[Path]:
    """A folder uid 65534 owns, with its modules in it (written by that uid)."""
    seconduid.require()
    with seconduid.open_folder("ascendpatch-cwd-") as parent:
        folder = parent / "theirs"
        folder.mkdir()
        os.chown(folder, seconduid.NOBODY, seconduid.NOBODY)
        wrote = seconduid.run("/bin/sh", "-c",
                              'for m in $3; do printf %s "$2" > "$1/$m.py" || exit 1; done',
                              "sh", folder, _MARKER, " ".join(PLANTED))
        assert wrote.returncode == 0, wrote.stderr
        assert {p.stat().st_uid for p in folder.iterdir()} == {seconduid.NOBODY}
        yield folder


def ran(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("ran-*"))


def test_pips_configuration_and_own_pip_never_import_from_the_cwd(planted: Path) -> None:
    with chdir(planted):
        settings = pipconfig.read(Path(sys.executable), "install")
        version = pipadapter.run_pip(["--version"])
    assert isinstance(settings, list)
    assert version.returncode == 0 and version.stdout.startswith("pip "), version.stderr
    assert ran(planted) == []


def test_a_venv_is_made_without_importing_from_the_cwd(planted: Path) -> None:
    """How sandbox and the pip-tools venv run ``python -m venv``."""
    with chdir(planted):
        made = subprocess.run(inscript.module_argv(sys.executable, "venv",
                                                   ["--without-pip", str(planted / "v")]),
                              capture_output=True, text=True, check=False)
    assert made.returncode == 0 and (planted / "v" / "bin" / "python").exists(), made.stderr
    assert inscript.shown(inscript.module_argv("py", "venv", ["x"])) == ["py", "-m", "venv", "x"]
    assert ran(planted) == []


def test_a_script_file_runs_without_importing_from_the_cwd(planted: Path) -> None:
    """How pip-compile (env/_pipcompile.py) and _pipfind.py are run: ``python FILE args``."""
    script = planted.parent / "script.py"
    script.write_text("import json, sys\nprint(json.dumps(sys.argv))\n")
    with chdir(planted):
        done = subprocess.run(inscript.file_argv(sys.executable, script, ["a", "b"]),
                              capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f'["{script}", "a", "b"]'
    assert inscript.shown(inscript.file_argv("py", script, ["a"])) == ["py", str(script), "a"]
    assert ran(planted) == []


def test_every_python_install_sh_runs_goes_through_its_isolated_helper() -> None:
    lines = (REPO / "install.sh").read_text().splitlines()
    direct = [line.strip() for line in lines if not line.lstrip().startswith("#")
              and re.search(r'"\$\w+(/[\w/]+)?" -[mc]\b', line) and "isolated " not in line]
    assert direct == []


def test_the_commands_install_sh_runs_never_import_from_the_cwd(planted: Path,
                                                                tmp_path: Path) -> None:
    """install.sh's own helper (``isolated``, read from install.sh) runs the remember step
    exactly as install.sh does, and pip, from the planted folder."""
    script = ('eval "$(sed -n "/^isolated() {/,/^}/p" "$1")" && cd "$2" && '
              'isolated "$3" -m ascendpatch.shell.remember --python "$3" --manifest default && '
              'isolated "$3" -m pip --version && isolated "$3" -c "import json"')
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    proc = subprocess.run(["bash", "-c", script, "bash", REPO / "install.sh", planted,
                           sys.executable], capture_output=True, text=True, env=env,
                          check=False, stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "config" / "ascendpatch" / "config.toml").is_file()
    assert ran(planted) == []


@pytest.mark.integration
@pytest.mark.parametrize("resolver", ["pip", "auto"])
def test_install_and_lock_never_import_from_the_cwd(planted: Path, tmp_path: Path,
                                                     resolver: str) -> None:
    world = torchguard.world(tmp_path)
    stack = write_manifest(tmp_path / "stack.yaml", [], protected=["torch"],
                           stack={"packages": {"friendly": "==1.0"}})
    with chdir(planted):
        dry = run_cli("--python", world["python"], "--manifest", world["manifest"], "-v",
                      "install", "--dry-run", "--offline", "--wheelhouse", world["house"],
                      "--resolver", resolver, "friendly")
        lock = run_cli("--python", world["python"], "--manifest", stack, "lock", "-o",
                       tmp_path / "stack.lock", "--wheelhouse", world["house"],
                       "--resolver", resolver)
    assert dry.code == 1 and "[WARN] would install friendly 1.0" in dry.out, dry.out + dry.err
    assert lock.code == 0, lock.out + lock.err
    assert ran(planted) == []
