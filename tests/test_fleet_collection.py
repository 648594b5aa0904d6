"""The ascendpatch.fleet collection as files: ansible-doc reads the module's documentation,
ansible-galaxy builds it, the playbooks say what the README promises. (Running it is
test_fleet_ansible.py.) The two that run Ansible's own tools are in the integration tier."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kit import REPO

COLLECTION = REPO / "ansible"
BIN = Path(sys.executable).parent


@pytest.mark.integration
def test_ansible_doc_documents_the_module() -> None:
    proc = subprocess.run([BIN / "ansible-doc", "-t", "module", "-M",
                           COLLECTION / "plugins" / "modules", "ascendpatch", "--json"],
                          capture_output=True, text=True, check=True, timeout=120)
    doc = json.loads(proc.stdout)["ascendpatch"]
    options = doc["doc"]["options"]
    assert set(options["command"]["choices"]) == {"apply", "revert", "verify", "audit",
                                                  "snapshot", "install", "preview"}
    assert {"python", "manifest", "with_ids", "ids", "output"} <= set(options)
    assert options["with_ids"]["aliases"] == ["with"]
    assert doc["doc"]["attributes"]["check_mode"]["support"] == "full"
    assert "ascendpatch.fleet.ascendpatch:" in doc["examples"]
    assert {"exit_code", "changed_files", "result", "pending_pins"} <= set(doc["return"])


@pytest.mark.integration
def test_galaxy_builds_the_collection(tmp_path: Path) -> None:
    subprocess.run([BIN / "ansible-galaxy", "collection", "build", COLLECTION,
                    "--output-path", tmp_path], check=True, capture_output=True, timeout=120)
    (tarball,) = tmp_path.glob("ascendpatch-fleet-*.tar.gz")
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
    assert {"plugins/modules/ascendpatch.py", "plugins/module_utils/tool.py",
            "plugins/module_utils/checkmode.py", "roles/ascendpatch/tasks/main.yml",
            "roles/ascendpatch/tasks/audit.yml", "playbooks/rollout.yml",
            "playbooks/audit.yml", "MANIFEST.json"} <= names


def _plays(name: str) -> list[dict[str, Any]]:
    plays = yaml.safe_load((COLLECTION / "playbooks" / name).read_text())
    assert isinstance(plays, list)
    return plays


def test_rollout_stops_on_the_first_failed_node_in_batches() -> None:
    nodes = _plays("rollout.yml")[-1]
    assert nodes["max_fail_percentage"] == 0 and "serial" in nodes
    assert nodes["roles"] == [{"role": "ascendpatch.fleet.ascendpatch"}]


def test_audit_only_reads_the_nodes() -> None:
    tasks = yaml.safe_load((COLLECTION / "roles/ascendpatch/tasks/audit.yml").read_text())
    commands = [t["ascendpatch.fleet.ascendpatch"]["command"] for t in tasks
                if "ascendpatch.fleet.ascendpatch" in t]
    assert commands == ["verify", "audit"]  # (and the snapshot, included before them)
    writes = {"ansible.builtin.copy", "ansible.builtin.pip", "ansible.builtin.file"}
    assert not [t for t in tasks if writes & set(t)]


@pytest.mark.integration
def test_ansible_doc_documents_the_roles_variables() -> None:
    """On 89ee836 the role had no argument_specs: ansible-doc knew none of its variables."""
    proc = subprocess.run([BIN / "ansible-doc", "-t", "role", "-r", COLLECTION / "roles",
                           "ascendpatch", "--json"], capture_output=True, text=True,
                          check=True, timeout=120)
    entries = json.loads(proc.stdout)["ascendpatch"]["entry_points"]
    main = entries["main"]["options"]
    assert main["ascendpatch_wheelhouse"]["required"] is True
    assert {"ascendpatch_python", "ascendpatch_prefix", "ascendpatch_manifest",
            "ascendpatch_with", "ascendpatch_controller_executable"} <= set(main)
    assert {"ascendpatch_python", "ascendpatch_snapshot_dir"} <= set(entries["audit"]["options"])


def test_the_playbooks_variables_are_documented_and_take_host_patterns() -> None:
    """`ascendpatch_hosts` is documented, and no playbook indexes `groups` with it (a host
    name there crashed the run: "'dict' object has no attribute 'n1'")."""
    readme = (COLLECTION / "README.md").read_text()
    for name in ("ascendpatch_hosts", "ascendpatch_serial", "ascendpatch_snapshot_dir"):
        assert f"| `{name}` |" in readme, name
    hosts_txt = (COLLECTION / "roles" / "ascendpatch" / "tasks" / "hosts_txt.yml").read_text()
    assert "groups[" not in hosts_txt and "ansible_play_hosts_all" in hosts_txt
    for name in ("rollout.yml", "audit.yml"):  # both write hosts.txt with the role's tasks
        text = (COLLECTION / "playbooks" / name).read_text()
        assert "groups[" not in text and "tasks_from: hosts_txt.yml" in text
        assert all(play["hosts"] != "localhost" for play in _plays(name))
