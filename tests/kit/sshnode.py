"""A node reached over real SSH: a network namespace with its own sshd, for the fleet test.

The namespace gets one veth pair to the host (10.231.x.1 <-> 10.231.x.2); its sshd uses a
host key, an authorized key and a config made in a temp dir, so nothing of the machine's own
SSH set-up is used or changed (sessions get their caches in that folder, not in root's home).
Needs root, ``ip`` (iproute2) and ``sshd`` (openssh-server).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SshNode:
    address: str
    key: Path

    def inventory_vars(self, remote_tmp: Path) -> str:
        return (f"ansible_connection=ssh ansible_host={self.address} ansible_user=root "
                f"ansible_ssh_private_key_file={self.key} ansible_remote_tmp={remote_tmp} "
                "ansible_ssh_common_args='-o StrictHostKeyChecking=no "
                "-o UserKnownHostsFile=/dev/null -o ConnectTimeout=10'")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True, capture_output=True)


def _config(folder: Path, address: str) -> Path:
    config = folder / "sshd_config"
    config.write_text(f"""ListenAddress {address}
Port 22
HostKey {folder / 'host_key'}
AuthorizedKeysFile {folder / 'authorized_keys'}
PidFile {folder / 'sshd.pid'}
PermitRootLogin prohibit-password
PasswordAuthentication no
StrictModes no
UsePAM no
Subsystem sftp internal-sftp
SetEnv PIP_NO_CACHE_DIR=1 XDG_CACHE_HOME={folder / 'cache'} ASCENDPATCH_CACHE={folder / 'cache'}
""")
    return config


def _wait_for(address: str, timeout: float = 20) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with contextlib.suppress(OSError), socket.create_connection((address, 22), timeout=1):
            return
        time.sleep(0.2)
    raise TimeoutError(f"sshd on {address}:22 did not answer")


@contextlib.contextmanager
def ssh_node(folder: Path) -> Iterator[SshNode]:
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    tag = str(os.getpid() % 250 + 1)
    ns, host_if, node_if = f"apfleet{tag}", f"apf{tag}h", f"apf{tag}n"
    host_ip, node_ip = f"10.231.{tag}.1", f"10.231.{tag}.2"
    folder.mkdir(parents=True, exist_ok=True)
    _keygen(folder / "host_key")
    _keygen(folder / "client_key")
    shutil.copy(folder / "client_key.pub", folder / "authorized_keys")
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation folder
    _ip("netns", "add", ns)
    proc = None
    try:
        _ip("link", "add", host_if, "type", "veth", "peer", "name", node_if)
        _ip("link", "set", node_if, "netns", ns)
        _ip("addr", "add", f"{host_ip}/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        for args in (("addr", "add", f"{node_ip}/30", "dev", node_if),
                     ("link", "set", node_if, "up"), ("link", "set", "lo", "up")):
            _ip("netns", "exec", ns, "ip", *args)
        with open(folder / "sshd.log", "w") as log:  # (the child keeps its own descriptor)
            proc = subprocess.Popen(["ip", "netns", "exec", ns, sshd, "-D", "-e", "-f",
                                     str(_config(folder, node_ip))],
                                    stdout=subprocess.DEVNULL, stderr=log)
        _wait_for(node_ip)
        yield SshNode(node_ip, folder / "client_key")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
        # sessions outlive the listening sshd (Ansible keeps one open for ControlPersist):
        # every process left in this test's own namespace is one of them
        left = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                              check=False).stdout.split()
        for pid in left:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGTERM)
        subprocess.run(["ip", "link", "del", host_if], check=False, capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
