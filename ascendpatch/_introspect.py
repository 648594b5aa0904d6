# Runs INSIDE the target interpreter (Python 3.8+), stdlib only. It must never import torch,
# torch_npu, vllm or vllm_ascend: importing them needs CANN and can take seconds or crash.
# Prints one JSON document on stdout.
import json
import os
import site
import sys
import sysconfig
from typing import Any, Dict, List


def _metadata_module() -> Any:
    try:
        import importlib.metadata as metadata
    except ImportError:  # pragma: no cover - Python < 3.8 is not supported
        return None
    return metadata


def _site_dirs() -> List[str]:
    dirs = []  # type: List[str]
    for key in ("purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path and path not in dirs:
            dirs.append(path)
    getter = getattr(site, "getsitepackages", None)
    for path in (getter() if getter else []):
        if path not in dirs:
            dirs.append(path)
    return [d for d in dirs if os.path.isdir(d)]


def _distributions() -> List[Dict[str, str]]:
    found = []  # type: List[Dict[str, str]]
    metadata = _metadata_module()
    if metadata is None:
        return found
    seen = set()
    for dist in metadata.distributions():
        path = getattr(dist, "_path", None)
        try:
            name = dist.metadata["Name"]
            version = dist.version
        except Exception:
            continue
        if not name or path is None:
            continue
        key = name.lower().replace("_", "-").replace(".", "-")
        if key in seen:
            continue  # shadowed by an earlier sys.path entry, as the import system sees it
        seen.add(key)
        found.append({"name": name, "version": version, "path": str(path)})
    return found


def _markers() -> Dict[str, str]:
    """The PEP 508 marker environment, as packaging.markers.default_environment computes it."""
    import platform

    impl = sys.implementation
    version = "%d.%d.%d" % impl.version[:3]
    kind = impl.version.releaselevel
    if kind != "final":
        version += kind[0] + str(impl.version.serial)
    return {
        "implementation_name": impl.name,
        "implementation_version": version,
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    }


def _drop_cwd() -> None:
    """``python -c`` puts the caller's working directory first on sys.path: the target's view
    (and its imports) must not depend on where the user happens to stand."""
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]


def main() -> None:
    _drop_cwd()
    info = {
        "format": 1,
        "executable": sys.executable,
        "python_version": "%d.%d.%d" % sys.version_info[:3],
        "implementation": sys.implementation.name,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "site_packages": _site_dirs(),
        "sys_path": [p for p in sys.path if p],
        "distributions": _distributions(),
        "markers": _markers(),
    }
    sys.stdout.write(json.dumps(info))


main()
