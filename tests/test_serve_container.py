"""The container recipe of docs/serving.md in a real container (podman, integration tier): its
ENTRYPOINT ``["ascendpatch", "serve", "--foreground", "--"]`` is PID 1 of the container, the real
vLLM CPU server (tests/kit/realserver.py) becomes ready, and ``podman stop`` (TERM to PID 1)
ends the server with everything it started and exit code 0.

The base image is built here, from files of this machine (bash, env, lscpu, the C libraries;
no registry). The interpreter, ascendpatch's venv and checkout, the server's venv and model, and
the host's /usr/bin, /usr/lib, /usr/include and /usr/libexec (vLLM's CPU worker compiles with a
C++ compiler) are bind-mounted read-only at their own paths; /usr/local is the image's, with
stand-in set_env.sh scripts at the standard paths. The recipe's ``RUN ascendpatch install &&
ascendpatch apply`` needs an Ascend image's vllm-ascend, so the image built here takes the
recipe's ENTRYPOINT line verbatim and no RUN line.

Where podman cannot run a container, the test skips and says why. On these machines (Debian 12,
podman 4.3, cgroups v1 hybrid, inside a container without CAP_SYS_RESOURCE) it runs with
``--runtime runc`` (crun refuses hybrid cgroups) and rlimits no higher than the current ones.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit import REPO, realserver

pytestmark = pytest.mark.integration
DOC = REPO / "docs" / "serving.md"
BASE_FILES = ("/bin/bash", "/usr/bin/env", "/bin/sh", "/usr/bin/lscpu")  # vLLM CPU runs lscpu


def _podman() -> tuple[list[str], list[str]]:
    """podman's command and the rlimits a container may have here."""
    podman = shutil.which("podman")
    if podman is None or shutil.which("runc") is None:
        pytest.skip("podman and runc are not installed (apt-get install podman runc)")
    limits = []
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        hard = resource.getrlimit(which)[1]
        value = 16384 if hard == resource.RLIM_INFINITY else min(hard, 16384)
        limits.append(f"--ulimit={name}={value}:{value}")
    return [podman, "--runtime", "runc"], limits


def _libraries(paths: list[str]) -> set[str]:
    found = set(paths)
    for path in paths:
        out = subprocess.run(["ldd", path], capture_output=True, text=True, check=False).stdout
        found |= set(re.findall(r"(/\S+) \(0x", out))
        found |= set(re.findall(r"=> (/\S+)", out))
    return found


def _python_files() -> list[str]:
    """The interpreter and the extensions of its stdlib, the server's venv and ascendpatch's
    (their system libraries are what the image needs)."""
    interpreter = os.path.realpath(realserver.python())
    folders = (realserver.venv(), Path(sys.prefix), Path(interpreter).parents[1] / "lib")
    sos = [str(p) for folder in folders for p in folder.rglob("*.so*") if p.is_file()]
    return [interpreter, *sos]


def _base_image(podman: list[str], tmp: Path) -> str:
    files = sorted(f for f in _libraries([*BASE_FILES, *_python_files()])
                   if not f.startswith((str(realserver.venv()), str(Path.home()))))
    tag = "localhost/ascendpatch-test-base:" + hashlib.sha256(
        "\0".join(files).encode()).hexdigest()[:12]
    if subprocess.run([*podman, "image", "exists", tag], check=False).returncode == 0:
        return tag
    root = tmp / "rootfs"
    for name in ("tmp", "run", "proc", "dev", "sys", "etc", "root", "usr/local/bin"):
        (root / name).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    for name in ("bin", "lib", "lib64", "sbin"):
        (root / name).symlink_to(f"usr/{name}")
        (root / "usr" / name).mkdir(exist_ok=True)
    for source in files:
        real = Path(os.path.realpath(source))
        for where in {Path(source), real}:
            dest = root / Path(os.path.normpath(where)).relative_to("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            if not dest.exists():
                shutil.copy2(real, dest)
    tar = tmp / "rootfs.tar"
    subprocess.run(["tar", "-C", str(root), "-cf", str(tar), "."], check=True)
    subprocess.run([*podman, "import", str(tar), tag], check=True, capture_output=True)
    return tag


def _stand_in_cann(folder: Path) -> None:
    """TEST STAND-INS for the CANN toolkit's and ATB's set_env.sh, at the standard paths of
    the image (/usr/local/Ascend/...), with the folders and libraries they name."""
    for script, var, lib in (("ascend-toolkit", "ASCEND_TOOLKIT_HOME", "libhccl.so"),
                             ("nnal/atb", "ATB_HOME_PATH", "libatb.so")):
        home = f"/usr/local/Ascend/{script}/latest"
        (folder / script / "latest" / "lib64").mkdir(parents=True)
        (folder / script / "latest" / "lib64" / lib).write_bytes(b"")
        (folder / script / "set_env.sh").write_text(
            f"# TEST STAND-IN (tests/test_serve_container.py)\nexport {var}={home}\n"
            f"export LD_LIBRARY_PATH={home}/lib64:${{LD_LIBRARY_PATH}}\n")


def _recipe_image(podman: list[str], base: str, tmp: Path) -> str:
    (entry,) = re.findall(r"^ENTRYPOINT .*$", DOC.read_text(), re.M)
    launcher = tmp / "ctx" / "ascendpatch"
    launcher.parent.mkdir()
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} -m ascendpatch \"$@\"\n")
    launcher.chmod(0o755)
    _stand_in_cann(tmp / "ctx" / "Ascend")
    (tmp / "ctx" / "Containerfile").write_text(
        f"FROM {base}\nCOPY ascendpatch /usr/local/bin/ascendpatch\n"
        "COPY Ascend /usr/local/Ascend\n"
        f"ENV PATH=/usr/local/bin:/usr/bin:/bin PYTHONPATH={REPO} HOME=/tmp "
        f"ASCENDPATCH_PYTHON={realserver.python()}\n{entry}\n")
    tag = "localhost/ascendpatch-test-serve:latest"
    build = subprocess.run([*podman, "build", "--network=none", "-t", tag, str(tmp / "ctx")],
                           capture_output=True, text=True, check=False, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    return tag


def _mounts() -> list[str]:
    shared = {Path(sys.prefix), Path(os.path.realpath(sys.executable)).parents[1], REPO,
              realserver.venv(), realserver.model(),
              Path(os.path.realpath(realserver.python())).parents[1]}
    # vLLM's CPU worker compiles with torch inductor even with --enforce-eager: the host's
    # compiler and headers, read-only (/usr/local, the image's own, stays the image's)
    shared |= {Path(p) for p in ("/usr/bin", "/usr/lib", "/usr/lib64", "/usr/include",
                                 "/usr/libexec") if Path(p).is_dir() and not Path(p).is_symlink()}
    return [f"--volume={p}:{p}:ro" for p in sorted(shared)]


@contextlib.contextmanager
def _container(podman: list[str], limits: list[str], image: str, port: int) -> Iterator[str]:
    name = f"ascendpatch-serve-test-{os.getpid()}"
    env = [f"--env={k}={v}" for k, v in realserver.ENV.items()]
    run = subprocess.run([*podman, "run", "--detach", "--name", name, "--network=host",
                          "--shm-size=1g", *limits, *env, *_mounts(), image,
                          *realserver.serve_argv(port)], capture_output=True, text=True,
                         check=False, timeout=300)
    try:
        assert run.returncode == 0, run.stdout + run.stderr
        yield name
    finally:
        subprocess.run([*podman, "rm", "--force", "--time", "5", name], capture_output=True,
                       check=False, timeout=300)


def test_the_container_recipe_serves_and_stops_with_podman_stop(tmp_path: Path) -> None:
    podman, limits = _podman()
    probe = subprocess.run([*podman, "info"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"podman cannot run here: {probe.stderr.strip()[-300:]}")
    image = _recipe_image(podman, _base_image(podman, tmp_path), tmp_path)
    port = realserver.free_port()
    with _container(podman, limits, image, port) as name:
        server = realserver.Server(subprocess.Popen(["sleep", "infinity"]), port, "",
                                   tmp_path / "none.log")
        try:
            # Ready is when serve says so (its own poll of the marker and /v1/models), not
            # when our probe first gets a 200: stopping in between is a TERM during the
            # start, which serve rightly does not call ready (CI run of 17f47b0).
            deadline = time.monotonic() + realserver.READY_TIMEOUT
            while not _said_ready(podman, name) and time.monotonic() < deadline:
                state = subprocess.run([*podman, "inspect", "-f", "{{.State.Running}}", name],
                                       capture_output=True, text=True, check=False).stdout
                assert state.strip() == "true", _logs(podman, name)
                time.sleep(1)
            assert server.ready(), _logs(podman, name)
        finally:
            server.process.kill()
            server.process.wait()
        top = subprocess.run([*podman, "top", name, "pid", "args"], capture_output=True,
                             text=True, check=False).stdout
        stop = subprocess.run([*podman, "stop", "--time", "60", name], capture_output=True,
                              text=True, check=False, timeout=300)
        code = subprocess.run([*podman, "inspect", "-f", "{{.State.ExitCode}}", name],
                              capture_output=True, text=True, check=False).stdout.strip()
        logs = _logs(podman, name, tail=None)
    first = top.splitlines()[1].split(None, 1)
    assert first[0] == "1" and "ascendpatch serve --foreground" in first[1], top
    assert "VLLM::EngineCore" in top, top
    assert stop.returncode == 0, stop.stderr
    assert "[OK] ready after" in logs and "Application startup complete" in logs, logs[-6000:]
    assert "the API server exited with code 0" in logs and code == "0", logs[-6000:]


def _said_ready(podman: list[str], name: str) -> bool:
    return "[OK] ready after" in _logs(podman, name, tail=None)


def _logs(podman: list[str], name: str, tail: int | None = 6000) -> str:
    """The container's output (stdout then stderr, as podman keeps them apart); ``tail``: only
    its last characters, for an assertion's message."""
    run = subprocess.run([*podman, "logs", name], capture_output=True, text=True, check=False)
    both = run.stdout + run.stderr
    return both if tail is None else both[-tail:]
