"""The CANN / ATB environment, read from this process's environment without importing anything.

Without the toolkit's and ATB's set_env.sh, `import torch_npu` fails on libhccl.so and
EngineCore on libatb.so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ascendpatch.inspect.checks.base import CheckContext
from ascendpatch.results import CheckResult, Level

TOOLKIT_SETENV = "/usr/local/Ascend/ascend-toolkit/set_env.sh"
ATB_SETENV = "/usr/local/Ascend/nnal/atb/set_env.sh"
_VERSION = re.compile(r"^\s*(?:version|Version)\s*=\s*(\S+)", re.M)


def find_library(name: str, env: Mapping[str, str]) -> Path | None:
    for folder in (env.get("LD_LIBRARY_PATH") or "").split(":"):
        if folder and (Path(folder) / name).exists():
            return Path(folder) / name
    return None


def toolkit_home(env: Mapping[str, str]) -> Path | None:
    for var in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"):
        value = env.get(var)
        if value and Path(value).is_dir():
            return Path(value)
    return None


def cann_version(env: Mapping[str, str]) -> str | None:
    """From the toolkit's install info (ascend_toolkit_install.info: ``version=9.0.0``)."""
    home = toolkit_home(env)
    if home is None:
        return None
    for info in sorted(home.glob("*install.info")) + sorted(home.glob("*/*install.info")):
        match = _VERSION.search(info.read_text(errors="replace"))
        if match:
            return match.group(1)
    return None


def check(env: Mapping[str, str]) -> list[CheckResult]:
    results: list[CheckResult] = []
    home = toolkit_home(env)
    if home is None:
        results.append(CheckResult("cann:toolkit", "cann", Level.FAIL,
                                   "CANN toolkit environment not loaded (ASCEND_TOOLKIT_HOME / "
                                   "ASCEND_HOME_PATH unset or missing)",
                                   fix=f"source {TOOLKIT_SETENV}"))
    else:
        results.append(CheckResult("cann:toolkit", "cann", Level.OK, f"CANN toolkit at {home}"))
    atb = env.get("ATB_HOME_PATH")
    if atb and Path(atb).is_dir():
        results.append(CheckResult("cann:atb", "cann", Level.OK, f"ATB at {atb}"))
    else:
        results.append(CheckResult("cann:atb", "cann", Level.FAIL,
                                   "ATB environment not loaded (ATB_HOME_PATH unset or missing)",
                                   fix=f"source {ATB_SETENV}"))
    for lib, script in (("libhccl.so", TOOLKIT_SETENV), ("libatb.so", ATB_SETENV)):
        found = find_library(lib, env)
        if found:
            results.append(CheckResult(f"cann:{lib}", "cann", Level.OK, f"{lib} at {found}"))
        else:
            results.append(CheckResult(f"cann:{lib}", "cann", Level.FAIL,
                                       f"{lib} is not on LD_LIBRARY_PATH",
                                       fix=f"source {script}"))
    return results


class CannCheck:
    name = "cann"

    def run(self, ctx: CheckContext) -> list[CheckResult]:
        if ctx.target.python is None:
            return []  # the "host" line says what is not checked
        if ctx.sandbox:
            return [CheckResult("cann", "cann", Level.SKIP,
                                "sandbox (simulated NPU stack): there is no CANN / ATB "
                                "environment to check on this host")]
        return check(ctx.env)
