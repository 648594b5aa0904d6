"""One task of the real ascendpatch Ansible module, run by the real ``ansible-playbook``
(ansible-core from PyPI, local connection) on localhost; its registered result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.kit import REPO

BIN = Path(sys.executable).parent


def play(root: Path, args: dict[str, object], *flags: str,
         env_more: dict[str, str] | None = None) -> dict[str, object]:
    """Run the module with ``args`` (``flags``: ``--check``, ``--diff``) in a playbook under
    ``root``, with ``env_more`` in its environment; the task's registered result (the task
    may fail: ``ignore_errors``)."""
    collections = root / "collections" / "ansible_collections" / "ascendpatch"
    if not collections.exists():
        collections.mkdir(parents=True)
        (collections / "fleet").symlink_to(REPO / "ansible")
    out = root / "result.json"
    task = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "run the module", "ascendpatch.fleet.ascendpatch": args, "register": "r",
         "ignore_errors": True},
        {"name": "keep the result", "ansible.builtin.copy": {
            "content": "{{ r | to_json }}", "dest": str(out)}, "check_mode": False}]}]
    playbook = root / "play.yml"
    playbook.write_text(yaml.safe_dump(task))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "ANSIBLE_"))}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(root / "collections"), ANSIBLE_NOCOLOR="1",
               PATH=f"{BIN}:{env['PATH']}", **(env_more or {}))
    proc = subprocess.run([BIN / "ansible-playbook", "-i", "localhost,", "-c", "local",
                           "-e", f"ansible_python_interpreter={sys.executable}", playbook,
                           *flags], capture_output=True, text=True, env=env, timeout=300,
                          check=False, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert isinstance(result, dict)
    return result


def module_args(site: Path, manifest: Path, **more: object) -> dict[str, object]:
    """The module's arguments for ``apply`` on a --site-packages target with this manifest."""
    return {"command": "apply", "site_packages": str(site), "manifest": str(manifest),
            "executable": str(BIN / "ascendpatch"), **more}
