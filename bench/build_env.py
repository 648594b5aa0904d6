"""Build the benchmark environment (idempotent): real torch CPU + vllm-ascend 0.18.0 + 300 dists.

    python bench/build_env.py  ->  prints the venv's python
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(os.environ.get("ASCENDPATCH_BENCH_DIR", Path.home() / ".cache/ascendpatch-bench"))
VENV = ROOT / "venv"
TORCH = os.environ.get("ASCENDPATCH_BENCH_TORCH", "torch==2.13.0")
VLLM_ASCEND = "vllm-ascend==0.18.0"
GENERATED = 300

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascendpatch.standins import write_distribution  # noqa: E402


def python() -> Path:
    return VENV / "bin" / "python"


def site_packages() -> Path:
    out = subprocess.run([str(python()), "-c", "import sysconfig; "
                          "print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return Path(out)


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


if __name__ == "__main__":
    print(build())
