"""The ascendpatch.fleet collection, run for real: ansible-playbook (ansible-core from PyPI)
against four hosts with ``ansible_connection=local``, each with its own sandbox target built from
a real vllm-ascend wheel (node-4 at another release; node-3 gets a hand-edited patched file;
node-2 reached over real SSH, in a network namespace with its own sshd), plus node-gone, a host
over SSH that does not answer. Then fleet-report on the snapshots the
playbooks fetched, and the HTML page in headless Chromium (Debian's package).

One sandbox is built per release and copied for the other hosts (a venv works from a copy:
its interpreter finds pyvenv.cfg next to it). The playbooks run once each, in the order a
platform team would run them; the tests below read what those runs left.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ascendpatch import __version__
from tests.kit import REPO, browser, cachefill, tree_digest, wheels
from tests.kit.sshnode import SshNode, ssh_node

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
HOSTS = ("node-1", "node-2", "node-3", "node-4")
SSH_HOST = "node-2"  # reached over real SSH: a network namespace with its own sshd
OTHER_VERSION = "0.18.0rc1"  # node-4: another affected release (the fix applies there too)
# a line that only the patch adds (the fix's state flag), in every release's patch
GUARD = ("_ASCENDPATCH_TOPK_TOPP_OP = None  # None: not probed yet, True: the operator, "
         "False: fallback\n")


@dataclass
class Fleet:
    root: Path
    env: dict[str, str]
    inventory: Path
    snapshots: Path
    runs: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    digests: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    tool_after_check: list[str] = field(default_factory=list)
    hosts_txt: dict[str, str | None] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, dict[str, str | None]] = field(default_factory=dict)  # textfiles
    metric_files: dict[str, dict[str, tuple[int, int] | None]] = field(default_factory=dict)

    def host_dir(self, host: str) -> Path:
        return self.root / host

    def python(self, host: str) -> Path:
        return self.host_dir(host) / "target" / "bin" / "python"

    def digest_all(self) -> dict[str, dict[str, str]]:
        return {h: tree_digest(self.host_dir(h)) for h in HOSTS}

    def playbook(self, key: str, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        proc = self.run(BIN / "ansible-playbook", "-i", self.inventory,
                         f"ascendpatch.fleet.{name}", *args)
        self.runs[key] = proc
        return proc

    def adhoc(self, key: str, host: str, module_args: str,
              *args: str) -> subprocess.CompletedProcess[str]:
        proc = self.run(BIN / "ansible", "-i", self.inventory, host, "-m",
                         "ascendpatch.fleet.ascendpatch", "-a", module_args, *args)
        self.runs[key] = proc
        return proc

    def run(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        start = time.monotonic()
        proc = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                              env=self.env, cwd=self.root, timeout=600, check=False,
                              stdin=subprocess.DEVNULL)
        key = " ".join(str(a) for a in args[3:5])
        self.seconds[key] = self.seconds.get(key, 0) + time.monotonic() - start
        return proc


def recap(proc: subprocess.CompletedProcess[str]) -> dict[str, dict[str, int]]:
    """PLAY RECAP lines: host -> {ok, changed, unreachable, failed, ...}."""
    out: dict[str, dict[str, int]] = {}
    for host, counts in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", proc.stdout, re.M):
        out[host] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", counts)}
    return out


def _take(path: Path) -> str | None:
    """The file's text, and the file gone (so the next run must write its own)."""
    if not path.exists():
        return None
    text = path.read_text()
    path.unlink()
    return text


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _sandbox(folder: Path, version: str, env: dict[str, str]) -> None:
    wheelhouse = folder.parent / f"wheel-{version}"
    wheelhouse.mkdir(parents=True)
    shutil.copy(wheels.wheel(version), wheelhouse)
    subprocess.run([BIN / "ascendpatch", "sandbox", folder, "--vllm-ascend", version,
                    "--offline", "--wheelhouse", wheelhouse], env=env, check=True,
                   capture_output=True, timeout=300)


def _inventory(root: Path, ssh: SshNode) -> Path:
    lines = ["[nodes]"]
    for host in HOSTS:
        how = ssh.inventory_vars(root / "remote-tmp") if host == SSH_HOST else \
            "ansible_connection=local"
        lines.append(f"{host} {how} ascendpatch_prefix={root / host / 'tool'} "
                     f"ascendpatch_python={root / host / 'target/bin/python'} "
                     f"ascendpatch_prometheus_textfile={_textfile(root, host)}")
    lines += ["[lost]",
              f"node-gone ansible_host=127.0.0.1 ansible_port={_closed_port()} "
              "ansible_connection=ssh ansible_ssh_common_args='-o ConnectTimeout=5'",
              "[all:vars]", f"ansible_python_interpreter={sys.executable}"]
    path = root / "inventory.ini"
    path.write_text("\n".join(lines) + "\n")
    return path


def _textfile(root: Path, host: str) -> Path:
    """Where the host's verify writes its Prometheus textfile (node_exporter's folder)."""
    return root / host / "textfile" / "ascendpatch.prom"


def _textfiles(f: Fleet) -> tuple[dict[str, str | None], dict[str, tuple[int, int] | None]]:
    """Each host's textfile, and its (inode, mtime_ns): a rewrite shows as a new inode."""
    texts: dict[str, str | None] = {}
    stats: dict[str, tuple[int, int] | None] = {}
    for host in HOSTS:
        path = _textfile(f.root, host)
        texts[host] = path.read_text() if path.exists() else None
        stats[host] = (path.stat().st_ino, path.stat().st_mtime_ns) if path.exists() else None
    return texts, stats


def _collection(root: Path, env: dict[str, str]) -> Path:
    built = root / "collection"
    subprocess.run([BIN / "ansible-galaxy", "collection", "build", REPO / "ansible",
                    "--output-path", built], env=env, check=True, capture_output=True)
    (tarball,) = built.glob("ascendpatch-fleet-*.tar.gz")
    subprocess.run([BIN / "ansible-galaxy", "collection", "install", tarball, "-p",
                    root / "collections"], env=env, check=True, capture_output=True)
    return root / "collections"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    with contextlib.ExitStack() as stack:
        yield from _fleet(tmp_path_factory.mktemp("fleet"), stack)


def _fleet(root: Path, stack: contextlib.ExitStack) -> Iterator[Fleet]:
    home = root / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "ANSIBLE_"))}
    env.update(HOME=str(home), ASCENDPATCH_CACHE=str(home / "cache"),
               ASCENDPATCH_LOG_DIR=str(home / "logs"), PATH=f"{BIN}:{env['PATH']}",
               ANSIBLE_NOCOLOR="1", ANSIBLE_HOST_KEY_CHECKING="False",
               ANSIBLE_PIPELINING="True", ANSIBLE_FORKS="5")
    env.pop("ASCENDPATCH_PYTHON", None)
    env["ANSIBLE_COLLECTIONS_PATH"] = str(_collection(root, env))
    wheelhouse = root / "wheelhouse"  # what 'ascendpatch bundle' makes on the controller
    with cachefill.building_the_checkout():  # bundle builds ascendpatch's wheel from it
        subprocess.run([BIN / "ascendpatch", "bundle", wheelhouse], env=env, check=True,
                       capture_output=True, timeout=600)
    _sandbox(root / "build" / "a", "0.18.0", env)
    for host in HOSTS[:3]:
        root.joinpath(host).mkdir()
        shutil.copytree(root / "build" / "a", root / host / "target", symlinks=True)
    root.joinpath(HOSTS[3]).mkdir()
    _sandbox(root / HOSTS[3] / "target", OTHER_VERSION, env)
    for host in HOSTS:
        _textfile(root, host).parent.mkdir()
    ssh = stack.enter_context(ssh_node(root / "sshd"))
    f = Fleet(root, env, _inventory(root, ssh), root / "snapshots")
    common = ("-e", f"ascendpatch_wheelhouse={wheelhouse}",
              "-e", f"ascendpatch_snapshot_dir={f.snapshots}", "-e", "ascendpatch_serial=2",
              "-l", "nodes")
    f.digests["fresh"] = f.digest_all()
    f.playbook("check", "rollout", *common, "--check", "--diff")
    f.digests["after-check"] = f.digest_all()
    f.tool_after_check = [h for h in HOSTS if f.host_dir(h).joinpath("tool").exists()]
    f.playbook("first", "rollout", *common)
    f.metrics["first"], f.metric_files["first"] = _textfiles(f)
    f.hosts_txt["first"] = _take(f.snapshots / "hosts.txt")
    # host names, not a group (on 89ee836: "'dict' object has no attribute 'node-1'")
    f.playbook("second", "rollout", *common[:-4], "-e", "ascendpatch_serial=4",
               "-e", f"ascendpatch_hosts={','.join(HOSTS)}")
    f.hosts_txt["second"] = _take(f.snapshots / "hosts.txt")
    n1 = (f"python={f.python('node-1')} "
          f"executable={f.host_dir('node-1') / 'tool/venv/bin/ascendpatch'}")
    f.adhoc("revert", "node-1", f"command=revert {n1}")
    f.digests["reverted"] = {"node-1": tree_digest(f.host_dir("node-1"))}
    # node-1 pending again, the others converged: what a preview of the next rollout shows
    f.digests["before-preview"] = f.digest_all()
    f.metrics["before-preview"], f.metric_files["before-preview"] = _textfiles(f)
    f.playbook("preview", "rollout", *common, "--check", "--diff")
    f.metrics["after-preview"], f.metric_files["after-preview"] = _textfiles(f)
    f.digests["after-preview"] = f.digest_all()
    f.adhoc("plan", "node-1", f"command=apply {n1}", "--check", "--diff")
    f.digests["planned"] = {"node-1": tree_digest(f.host_dir("node-1"))}
    f.adhoc("reapply", "node-1", f"command=apply {n1}", "--diff")
    f.adhoc("no-tool", "node-2", f"command=verify python={f.python('node-2')} "
                                 f"executable={root / 'nowhere' / 'ascendpatch'}")
    shutil.rmtree(f.snapshots)  # the audit's snapshots only, from here on
    sampler = next((root / "node-3/target").glob("lib/python*/site-packages")) / wheels.SAMPLER
    text = sampler.read_text()
    assert GUARD in text
    sampler.write_text(text.replace(GUARD, GUARD.rstrip("\n") + "  # hand edit on node-3\n"))
    f.playbook("audit", "audit", "-e", f"ascendpatch_snapshot_dir={f.snapshots}")
    yield f
    sys.stderr.write(f"fleet test steps (s): {f.seconds}\n")


def test_verify_writes_each_nodes_prometheus_textfile_but_not_in_check_mode(
        fleet: Fleet) -> None:
    """ascendpatch_prometheus_textfile: the rollout's verify leaves node_exporter a textfile
    on each node it converged (one over real SSH) saying so; a --check preview rewrites none
    (the same file, inode and mtime, on every node), and the first --check on fresh nodes
    wrote none (test_check_mode_writes_nothing: the host folders are unchanged)."""
    first = fleet.metrics["first"]
    for host in ("node-1", "node-2", "node-3"):
        text = first[host]
        assert text is not None, (host, fleet.runs["first"].stdout[-3000:])
        assert re.search(r'\nascendpatch_verify_ok\{manifest="[^"]+"\} 1\n', text), text
        assert re.search(r'\nascendpatch_artifact_state\{manifest="[^"]+",artifact="[^"]+",'
                         r'state="(already-)?applied"\} 1\n', text), text
    assert fleet.metric_files["after-preview"] == fleet.metric_files["before-preview"]
    assert all(fleet.metric_files["before-preview"][h] is not None for h in HOSTS[:3])


def test_check_mode_writes_nothing(fleet: Fleet) -> None:
    run = fleet.runs["check"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    for host in HOSTS:
        assert recap(run)[host]["changed"] > 0 and recap(run)[host]["failed"] == 0
    assert fleet.digests["after-check"] == fleet.digests["fresh"]
    assert fleet.tool_after_check == []  # not even an empty folder


def test_check_mode_on_a_fresh_node_says_what_the_rollout_would_do(fleet: Fleet) -> None:
    """No tool on the node, so its steps are skipped: the preview comes from the
    controller's copy of the tool and the manifest (on 89ee836: nothing at all), and with
    --diff the manifest's patches (each variant: no pin picks one)."""
    out = fleet.runs["check"].stdout
    for host in HOSTS:
        assert re.search(rf"check mode: ascendpatch is not installed on {host}: the rollout "
                         rf"would install ascendpatch {re.escape(__version__)} from the "
                         r"wheelhouse into "
                         rf"{re.escape(str(fleet.host_dir(host)))}/tool/venv, then install the "
                         r"pins of manifest default \(none\), apply \(where they fit the "
                         r"target\) sampler-topk-topp-fallback, and verify\.", out), out[-4000:]
    assert out.count("would apply sampler-topk-topp-fallback (sampler top_k/top_p fallback "
                     "patch): vllm-ascend vllm_ascend/sample/sampler.py") == len(HOSTS)
    assert "This preview is the controller's copy of manifest default" in out
    # --diff: the manifest's patches, from the controller's copy (on main: no diff at all)
    header = ("# manifest default, sampler-topk-topp-fallback, patch 0.18.0rc1.patch for "
              "vllm-ascend >=0.18.0rc1,<0.19.1rc1 (the manifest's change, not a diff against "
              "this node's files)")
    assert out.count(header) == len(HOSTS), out[-4000:]
    assert "+# ascendpatch: sampler-topk-topp-fallback" in out  # the patch's text


def test_check_mode_previews_the_whole_fleet_past_a_pending_canary(fleet: Fleet) -> None:
    """node-1 (the first batch) has its patch reverted: apply only plans, verify finds the
    patch missing. That is pending, not a failure (on 89ee836 it failed node-1 and
    max_fail_percentage: 0 ended the preview there), and the diff is shown."""
    run = fleet.runs["preview"]
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert run.stdout.count("PLAY [Roll ascendpatch out in batches") == 2
    assert recap(run)["node-1"] == {**recap(run)["node-1"], "changed": 1, "failed": 0}
    assert "+# ascendpatch: sampler-topk-topp-fallback" in run.stdout
    assert "check mode: not applied yet; the rollout's apply would apply " \
           "sampler-topk-topp-fallback" in run.stdout
    assert fleet.digests["after-preview"] == fleet.digests["before-preview"]


def test_check_mode_on_converged_nodes_changes_nothing(fleet: Fleet) -> None:
    """Converged means changed=0, in check mode too (on 89ee836 the pip task said changed
    on every node: pip's check mode does for any `state: latest`)."""
    run = fleet.runs["preview"]
    for host in HOSTS[1:]:
        assert recap(run)[host]["changed"] == 0 and recap(run)[host]["failed"] == 0, \
            run.stdout[-4000:]
    assert not re.search(r"Install ascendpatch into its own venv.*?\n(changed|ok): ",
                         run.stdout), run.stdout[-4000:]


def test_limit_and_host_names_still_write_hosts_txt(fleet: Fleet) -> None:
    """`--limit nodes` and `ascendpatch_hosts=node-1,...` (host names, not a group): hosts.txt
    lists the hosts the run targeted (on 89ee836: none written under --limit, and a crash
    on host names)."""
    expected = "".join(f"{h}\n" for h in HOSTS)
    assert fleet.hosts_txt == {"first": expected, "second": expected}
    second = fleet.runs["second"]
    assert second.returncode == 0 and "has no attribute" not in second.stdout + second.stderr


def test_rollout_changes_on_the_first_run_and_nothing_on_the_second(fleet: Fleet) -> None:
    first, second = fleet.runs["first"], fleet.runs["second"]
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-2000:]
    for host in HOSTS:
        assert recap(first)[host]["changed"] >= 3  # wheelhouse, tool venv, patched sampler
        assert recap(second)[host]["changed"] == 0, second.stdout[-3000:]
        assert recap(second)[host]["failed"] == 0
    applied = re.findall(r"TASK \[ascendpatch\.fleet\.ascendpatch : Apply .*?\n(.*?)\n\n",
                         first.stdout, re.S)
    assert applied and all(line.startswith("changed") for b in applied for line in
                           b.splitlines() if line.strip())
    # serial: batches of two, each its own play run
    assert first.stdout.count("PLAY [Roll ascendpatch out in batches") == 2
    sampler = next((fleet.root / "node-2/target").glob("lib/python*/site-packages")) / \
        wheels.SAMPLER
    assert "_ascendpatch_topk_topp_op_available" in sampler.read_text()


def test_module_check_and_diff_modes(fleet: Fleet) -> None:
    revert, plan, reapply = (fleet.runs[k] for k in ("revert", "plan", "reapply"))
    assert revert.returncode == 0 and "node-1 | CHANGED" in revert.stdout, revert.stdout
    assert plan.returncode == 0 and "node-1 | CHANGED" in plan.stdout, plan.stdout
    assert '"command": "plan"' in plan.stdout  # check mode runs plan...
    assert "+# ascendpatch: sampler-topk-topp-fallback" in plan.stdout  # ...and shows its diff
    assert fleet.digests["planned"] == fleet.digests["reverted"]  # and writes nothing
    assert reapply.returncode == 0 and "node-1 | CHANGED" in reapply.stdout
    assert "+# ascendpatch: sampler-topk-topp-fallback" in reapply.stdout


def test_a_node_without_the_tool_is_told_which_role_installs_it(fleet: Fleet) -> None:
    run = fleet.runs["no-tool"]
    assert run.returncode != 0 and "node-2 | FAILED" in run.stdout
    assert "ascendpatch is not installed on this node" in run.stdout
    assert "install it with the role ascendpatch.fleet.ascendpatch" in run.stdout


def test_audit_fails_the_drifted_host_and_passes_the_rest(fleet: Fleet) -> None:
    run = fleet.runs["audit"]
    counts = recap(run)
    assert run.returncode != 0
    assert counts["node-3"]["failed"] == 1, run.stdout[-4000:]
    for host in ("node-1", "node-2", "node-4"):
        assert counts[host]["failed"] == 0 and counts[host]["changed"] == 0, run.stdout[-4000:]
    assert counts["node-gone"]["unreachable"] == 1
    assert re.search(r"ascendpatch drift on node-3: .*sampler", run.stdout)


def test_one_node_is_reached_over_real_ssh(fleet: Fleet) -> None:
    log = (fleet.root / "sshd" / "sshd.log").read_text()
    # (Ansible multiplexes its commands over one ControlMaster connection)
    assert "Accepted publickey for root" in log, log[-2000:]
    assert recap(fleet.runs["first"])[SSH_HOST]["changed"] >= 3


def test_snapshots_arrive_on_the_controller(fleet: Fleet) -> None:
    assert sorted(p.name for p in fleet.snapshots.glob("*.json")) == [f"{h}.json" for h in HOSTS]
    assert (fleet.snapshots / "hosts.txt").read_text().split() == [*HOSTS, "node-gone"]
    node4 = json.loads((fleet.snapshots / "node-4.json").read_text())
    assert node4["kind"] == "ascendpatch-snapshot"
    assert node4["distributions"]["vllm-ascend"]["version"] == OTHER_VERSION


@pytest.fixture(scope="module")
def report(fleet: Fleet) -> tuple[subprocess.CompletedProcess[str], dict[str, object], Path]:
    page = fleet.root / "report.html"
    args: list[str | Path] = [BIN / "ascendpatch", "fleet-report", fleet.snapshots, "--hosts",
            fleet.snapshots / "hosts.txt"]
    text = fleet.run(*args, "-o", page)
    doc = json.loads(fleet.run(*args, "--json").stdout)
    return text, doc, page


def test_fleet_report_names_the_drifted_host_and_the_version_outlier(
        report: tuple[subprocess.CompletedProcess[str], dict[str, object], Path]) -> None:
    text, doc, page = report
    assert text.returncode == 1, text.stdout + text.stderr
    fleet = doc["fleet"]
    assert isinstance(fleet, dict)
    assert fleet["drifted"] == ["node-3"] and fleet["outliers"] == ["node-4"]
    assert fleet["missing"] == ["node-gone"]
    assert re.search(r"\[FAIL\] node-3: drifted, .*sampler\.py", text.stdout)
    assert re.search(rf"\[WARN\] node-4: outlier, .*vllm-ascend {OTHER_VERSION}: a version "
                     "outlier", text.stdout)
    assert "[OK] node-1: as the baseline" in text.stdout
    assert "[FAIL] node-gone: missing" in text.stdout
    assert page.is_file()


def test_report_page_in_a_real_browser(
        report: tuple[subprocess.CompletedProcess[str], dict[str, object], Path]) -> None:
    _, _, page = report
    everything = browser.browse(page.as_uri(), "--dump-dom")
    rows = {h: c for c, h in re.findall(r'<tr class="host (\w+)" id="host-([\w-]+)"',
                                         everything.stdout)}
    assert len(rows) == 5, everything.stdout[:2000] + everything.stderr[-2000:]
    painted = {h: (int(r), int(g), int(b)) for h, r, g, b in re.findall(
        r'id="host-([\w-]+)"[^>]*data-bg="rgb\((\d+), (\d+), (\d+)\)"', everything.stdout)}
    assert rows == {"node-1": "ok", "node-2": "ok", "node-3": "drift", "node-4": "outlier",
                    "node-gone": "missing"}
    red, green, blue = painted["node-3"]  # what the browser computed for the drifted row
    assert red > 200 and green < 200 and blue < 200
    assert "node-1" not in painted or painted["node-1"] != painted["node-3"]
    filtered = browser.browse(page.as_uri() + "#only-drifted", "--dump-dom")
    assert 'data-filter="drifted"' in filtered.stdout
    visible = [h for h in re.findall(r'<tr class="host \w+" id="host-([\w-]+)"[^>]*>',
                                     filtered.stdout)
               if not re.search(rf'id="host-{h}"[^>]*\shidden', filtered.stdout)]
    assert visible == ["node-3", "node-gone"]  # a missing host is kept in sight
    shot = page.parent / "fleet-report.png"
    made = browser.browse(page.as_uri(), f"--screenshot={shot}", "--window-size=1280,760",
                   "--hide-scrollbars")
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", made.stderr[-2000:]
    if os.environ.get("ASCENDPATCH_WRITE_DOCS"):  # refresh the README's screenshot
        shutil.copy(shot, REPO / "docs" / "fleet-report.png")
