"""Build the benchmark environments (idempotent, cached in ``$ASCENDPATCH_BENCH_DIR``).

- ``venv``: the real torch CPU wheel + vllm-ascend 0.18.0 (both ``--no-deps``) + 300 generated
  distributions that require each other.
- ``tool``: ascendpatch itself as install.sh leaves it, a venv of its own with a regular (not
  editable) install of this checkout and its ``fast`` extra (uv); reinstalled from the checkout
  at every :func:`tool` call, its dependencies (and pytest, for tests/kit) installed once. In
  an editable install ``python -c pass`` takes 19-20 ms, not 10 (setuptools' editable finder
  imports pathlib, re, fnmatch and urllib at every start), which no user pays.
- ``git``: a git index of that site-packages (``git add -A`` into a separate git dir, so the
  target stays untouched), for ``git status`` as a reference.
- ``sandbox``: ``ascendpatch sandbox`` (vllm-ascend 0.18.0 with labelled stand-ins).
- ``scale-K`` (K = 2, 4): a site-packages folder holding K copies of the benchmark's: the first
  is the original tree, each other copy every distribution again under a new name (``-xN``),
  its files hard links to the original (same bytes, no extra disk), its RECORD rewritten.

    python bench/build_env.py  ->  prints the venv's python
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(os.environ.get("ASCENDPATCH_BENCH_DIR", Path.home() / ".cache/ascendpatch-bench"))
VENV = ROOT / "venv"
TOOL = ROOT / "tool"
REPO = Path(__file__).resolve().parent.parent
GIT_DIR = ROOT / "git"
SANDBOX = ROOT / "sandbox"
TORCH = os.environ.get("ASCENDPATCH_BENCH_TORCH", "torch==2.13.0")
VLLM_ASCEND = "vllm-ascend==0.18.0"
GENERATED = 300
# the test suite's download cache: the sandbox reuses its vllm-ascend wheel when it is there
WHEELS = Path(os.environ.get("ASCENDPATCH_TEST_CACHE", Path.home() / ".cache/ascendpatch-test"),
              "wheels")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascendpatch.env.standins import write_distribution  # noqa: E402


def python() -> Path:
    return VENV / "bin" / "python"


def site_packages() -> Path:
    out = subprocess.run([str(python()), "-c", "import sysconfig; "
                          "print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return Path(out)


def tool() -> Path:
    """The interpreter of the ``tool`` venv, this checkout freshly installed in it."""
    python = TOOL / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    # the dependencies are installed again when pyproject.toml (which lists them) changes
    listed = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()[:16]
    marker = TOOL / f"complete-{listed}"
    if not marker.exists():
        shutil.rmtree(TOOL, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(TOOL)], check=True)
        subprocess.run([*pip, "--upgrade", "pip", "setuptools>=77"], check=True)
        # pytest: the benchmarks build their worlds with tests/kit, which imports it
        subprocess.run([*pip, f"{REPO}[fast]", "pytest"], check=True)
        marker.touch()
    # setuptools builds in the checkout's build/: a module deleted since would be packaged
    shutil.rmtree(REPO / "build" / "lib", ignore_errors=True)
    subprocess.run([*pip, "--no-deps", "--force-reinstall", "--no-build-isolation", str(REPO)],
                   check=True)
    return python


def in_tool() -> None:
    """Run the calling benchmark again in the ``tool`` venv (once: from there, nothing): every
    ``sys.executable -m ascendpatch`` it times is then ascendpatch as installed, and every
    baseline it starts with ``sys.executable`` (``python -c pass``, the stat loop, pip) the
    same interpreter and site."""
    if Path(sys.prefix).resolve() == TOOL.resolve():
        return
    python = tool()
    print(f"[bench] re-run in {TOOL} (ascendpatch installed from {REPO}, not editable)",
          flush=True)
    # from the tool's folder: `python -m ascendpatch` puts the working folder first on
    # sys.path, and from the checkout that would import the checkout, not the installed copy
    script = str(Path(sys.argv[0]).resolve())
    os.chdir(TOOL)
    os.execv(python, [str(python), script, *sys.argv[1:]])


def build() -> Path:
    marker = ROOT / "complete"
    if marker.exists():
        return python()
    ROOT.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(python()), "-m", "pip", "install", "-q", "--no-deps",
           "--disable-pip-version-check"]
    subprocess.run([*pip, TORCH], check=True)
    subprocess.run([*pip, "--only-binary", ":all:", VLLM_ASCEND], check=True)
    site = site_packages()
    for i in range(GENERATED):
        requires = [f"bench-pkg-{j}>=1.0" for j in (i // 2, i // 3) if j != i]
        files = {f"bench_pkg_{i}/__init__.py": f"VALUE = {i}\n",
                 f"bench_pkg_{i}/core.py": "def f():\n    return 1\n" * 20,
                 f"bench_pkg_{i}/data.json": f'{{"k": {i}}}\n'}
        write_distribution(site, f"bench-pkg-{i}", "1.0", files, requires,
                           summary="generated benchmark distribution", installer="pip")
    marker.write_text("ok\n")
    return python()


def git_index() -> Path:
    """A git index of the benchmark's site-packages, kept outside it."""
    site = site_packages()
    if not (GIT_DIR / "index").exists():
        git = ["git", f"--git-dir={GIT_DIR}", f"--work-tree={site}"]
        subprocess.run(["git", "init", "-q", "--bare", str(GIT_DIR)], check=True)
        subprocess.run([*git, "config", "core.bare", "false"], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
    return GIT_DIR


def sandbox(tool: list[str]) -> Path:
    """``ascendpatch sandbox`` once; returns its python."""
    made = SANDBOX / "bin" / "python"
    if not made.exists():
        extra = ["--wheelhouse", str(WHEELS)] if any(WHEELS.glob("vllm_ascend-0.18.0-*")) else []
        subprocess.run([*tool, "sandbox", str(SANDBOX), *extra], check=True,
                       stdout=subprocess.DEVNULL)
    return made


def _record_form(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _clone(site: Path, into: Path, info: Path, copy: int) -> None:
    """Distribution ``info`` (a .dist-info in ``site``) again in ``into``, renamed ``-x{copy}``:
    top-level names get the suffix, files are hard links, METADATA and RECORD are rewritten."""
    stem, _, version = info.name[: -len(".dist-info")].rpartition("-")
    suffix = f"_x{copy}"
    new_info = f"{stem}{suffix}-{version}.dist-info"

    def renamed(rel: str) -> str | None:
        first, sep, rest = rel.partition("/")
        if first == "..":
            return None  # scripts outside site-packages: not cloned
        if first == info.name:
            return f"{new_info}/{rest}"
        if not sep:  # a top-level module file
            name, dot, ext = first.partition(".")
            return f"{name}{suffix}{dot}{ext}"
        return f"{first}{suffix}/{rest}"

    rows = []
    record = (info / "RECORD").read_text(encoding="utf-8").splitlines()
    for line in record:
        rel = line.rsplit(",", 2)[0] if '"' not in line else None
        if not rel:
            continue
        new = renamed(rel)
        if new is None:
            continue
        target = into / new
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel == f"{info.name}/RECORD":
            continue
        if rel == f"{info.name}/METADATA":
            lines = (site / rel).read_bytes().split(b"\n")
            at = next(i for i, line in enumerate(lines) if line.startswith(b"Name: "))
            lines[at] += f"-x{copy}".encode()
            text = b"\n".join(lines)
            target.write_bytes(text)
            rows.append(f"{new},{_record_form(text)},{len(text)}")
            continue
        if not (site / rel).is_file():
            continue
        if not target.exists():
            os.link(site / rel, target)
        rows.append(line.replace(rel, new, 1) if line.startswith(rel) else f"{new},,")
    rows.append(f"{new_info}/RECORD,,")
    (into / new_info).mkdir(parents=True, exist_ok=True)
    (into / new_info / "RECORD").write_text("\n".join(rows) + "\n", encoding="utf-8")


def scale(times: int) -> Path:
    """A site-packages folder with ``times`` copies of the benchmark's distributions."""
    if times == 1:
        return site_packages()
    folder = ROOT / f"scale-{times}" / "site-packages"
    marker = folder.parent / "complete"
    if marker.exists():
        return folder
    shutil.rmtree(folder.parent, ignore_errors=True)
    site = site_packages()
    folder.parent.mkdir(parents=True)
    subprocess.run(["cp", "-al", str(site), str(folder)], check=True)  # folder does not exist
    shutil.rmtree(folder / ".ascendpatch", ignore_errors=True)
    for record in folder.glob("*.dist-info/RECORD"):  # scripts in ../bin are not copied
        lines = record.read_text(encoding="utf-8").splitlines()
        record.unlink()  # a hard link to the original: never write through it
        record.write_text("".join(f"{line}\n" for line in lines if not line.startswith("../")),
                          encoding="utf-8")
    for copy in range(1, times):
        for info in sorted(site.glob("*.dist-info")):
            if (info / "RECORD").is_file():
                _clone(site, folder, info, copy)
    marker.write_text("ok\n")
    return folder


if __name__ == "__main__":
    print(build())
