# Runs INSIDE the target interpreter (Python 3.8+), stdlib only. It must never import torch,
# torch_npu, vllm or vllm_ascend: importing them needs CANN and can take seconds or crash.
# Prints one JSON document on stdout. Its start is on a cold run's critical path (the tool
# waits for this report): annotations are strings, never evaluated, so that 3.8 reads
# list[str] and nothing imports typing (3 ms of a 22 ms run).
import json
import os
import site
import sys
import sysconfig


def _site_dirs() -> "list[str]":
    dirs = []  # type: list[str]
    for key in ("purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path and path not in dirs:
            dirs.append(path)
    getter = getattr(site, "getsitepackages", None)
    for path in (getter() if getter else []):
        if path not in dirs:
            dirs.append(path)
    return [d for d in dirs if os.path.isdir(d)]


def _egg_version(path: str) -> str:
    try:
        with open(os.path.join(path, "PKG-INFO"), encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _distributions() -> "list[dict[str, str]]":
    """Every installed distribution along sys.path, first one wins (as the import system sees
    it). Name and version come from the ``name-version.dist-info`` folder name, which the wheel
    spec normalises: no METADATA has to be parsed, so this stays fast with hundreds of them."""
    found = []  # type: list[dict[str, str]]
    seen = set()
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry))
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info"):
                stem = name[: -len(".dist-info")]
            elif name.endswith(".egg-info"):
                stem = name[: -len(".egg-info")].split("-py")[0]
            else:
                continue
            dist_name, sep, version = stem.rpartition("-")
            path = os.path.join(entry, name)
            if not sep:
                dist_name, version = stem, _egg_version(path)
            if not os.path.isdir(path) or not dist_name:
                continue
            key = dist_name.lower().replace("_", "-").replace(".", "-")
            if key in seen:
                continue
            seen.add(key)
            found.append({"name": dist_name, "version": version, "path": path})
    return found


def _markers() -> "dict[str, str]":
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


def main() -> None:
    info = {
        "format": 1,
        "executable": sys.executable,
        "python_version": "%d.%d.%d" % sys.version_info[:3],
        "implementation": sys.implementation.name,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "site_packages": _site_dirs(),
        "sys_path": [p for p in sys.path if p],
        # where a user site would be: the cache of this report watches it appear
        "user_site": site.getusersitepackages() if getattr(site, "ENABLE_USER_SITE", False)
        and hasattr(site, "getusersitepackages") else None,
        "distributions": _distributions(),
        "markers": _markers(),
    }
    sys.stdout.write(json.dumps(info))


main()
