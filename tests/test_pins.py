"""verify's stack pins: packages, Python and CANN against what the target has."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ascendpatch.env.target import Target, from_site_packages
from ascendpatch.inspect.checks import pins
from ascendpatch.manifest.model import Manifest, PackagePin, Stack
from ascendpatch.results import Level
from tests.kit import make_dist


def _target(site: Path) -> Target:
    make_dist(site, "demo", "1.2.0", {"demo/__init__.py": ""})
    return from_site_packages(site)


def _manifest(**stack: object) -> Manifest:
    return Manifest(name="m", path=None, stack=Stack(**stack))  # type: ignore[arg-type]


def test_package_pins_say_what_is_installed_and_how_to_fix_it(site: Path) -> None:
    target = _target(site)
    ok, wrong, missing = pins.check(_manifest(packages=(
        PackagePin("demo", "==1.2.0"),
        PackagePin("Demo", ">=2", reason="the sampler fix needs 2.x"),
        PackagePin("absent", "==1.0"))), target, None)
    assert (ok.level, ok.message) == (Level.OK, "demo 1.2.0 matches ==1.2.0")
    assert wrong.level is Level.FAIL
    assert wrong.message == "Demo 1.2.0 does not match >=2 (the sampler fix needs 2.x)"
    assert wrong.fix == "ascendpatch install (installs Demo>=2)"
    assert missing.level is Level.FAIL and "absent is not installed" in missing.message
    assert missing.fix == "ascendpatch install"


def test_python_pin_needs_an_interpreter(site: Path) -> None:
    folder_only = _target(site)
    checked = pins.check(_manifest(python=">=3.10"), folder_only, None)
    assert [(r.id, r.level) for r in checked] == [("pin:python", Level.SKIP)]
    # (the version an interpreter target reports from inside, as from_python records it)
    target = dataclasses.replace(folder_only, python_version="3.11.7")
    (good,) = pins.check(_manifest(python=">=3.10"), target, None)
    assert (good.level, good.message, good.fix) == (Level.OK, "Python 3.11.7 matches >=3.10", "")
    (bad,) = pins.check(_manifest(python="<3.10"), target, None)
    assert (bad.level, bad.message) == (Level.FAIL, "Python 3.11.7 does not match <3.10")
    assert bad.fix == "use the image's own interpreter (--python)"
    assert pins.check(_manifest(python="not a specifier"), target, None) == []


def test_cann_pin_matches_the_release_and_its_patch_levels(site: Path) -> None:
    target = _target(site)

    def cann(spec: str, found: str | None) -> tuple[Level, str]:
        (result,) = pins.check(_manifest(cann=spec), target, found)
        return result.level, result.message

    assert cann("==8.1.RC1", "8.1.rc1") == (Level.OK, "CANN 8.1.rc1 matches ==8.1.RC1")
    assert cann("8.1.0", "8.1.0.1")[0] is Level.OK  # a patch level of the pinned release
    assert cann("==8.1.0", "8.0.0") == (Level.FAIL, "CANN 8.0.0 does not match ==8.1.0")
    assert cann("==8.1.0", "8.10.0")[0] is Level.FAIL  # not a prefix match on the text
    level, message = cann("==8.1.0", None)
    assert level is Level.WARN and "ascend-toolkit/set_env.sh" in message
