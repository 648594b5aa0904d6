"""The README's release matrix and its prose agree with the one list of releases
(ascendpatch/data/releases.yaml), so a new release is added in one place and a README left
behind fails here."""

from __future__ import annotations

from packaging.version import Version

from ascendpatch.env.releases import KnownRelease, known_releases
from tests.kit import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
KNOWN = known_releases()
FIX = "sampler-topk-topp-fallback"


def _matrix() -> dict[str, str]:
    header = next(line for line in README.splitlines() if line.startswith("| artifact |"))
    row = next(line for line in README.splitlines() if line.startswith(f"| {FIX} |"))
    columns = [c.strip() for c in header.strip("|").split("|")][1:]
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    return dict(zip(columns, cells, strict=True))


def _omitted() -> list[KnownRelease]:
    first = next(iter(_matrix()))
    return KNOWN[:[r.version for r in KNOWN].index(first)]


def test_the_list_is_oldest_first_and_each_release_once() -> None:
    versions = [Version(r.version) for r in KNOWN]
    assert versions == sorted(set(versions))
    assert {r.sampler_fix for r in KNOWN} <= {"applies", "not needed",
                                             "not needed (fixed upstream)"}
    named = {r.version for r in KNOWN}
    assert {r.sampler_as for r in KNOWN if r.sampler_as} <= named


def test_readme_matrix_is_the_list() -> None:
    shown = {r.version: r.sampler_fix for r in KNOWN if r not in _omitted()}
    assert _matrix() == shown


def test_readme_names_the_releases_left_out_of_the_matrix() -> None:
    left = _omitted()
    assert {r.sampler_fix for r in left} == {"not needed"}
    assert f"({left[0].version} … {left[-1].version}: not needed, omitted here.)" in README


def test_readme_prose_counts_the_affected_releases() -> None:
    affected = [r for r in KNOWN if r.sampler_fix == "applies"]
    with_wheels = [r.version for r in affected if r.wheel]
    sdist_only = ", ".join(r.version for r in affected if not r.wheel)
    prose = " ".join(README.split())
    assert f"vllm-ascend {affected[0].version} … {affected[-1].version} select" in prose
    assert f"for the {len(with_wheels)} releases with wheels and the sdist-only {sdist_only})" \
        in prose
    fixed = ", ".join(r.version for r in KNOWN if r.sampler_fix.endswith("(fixed upstream)"))
    assert f"(fixed upstream)\" ({fixed})" in prose
    patches = sorted((REPO / "patches" / "vllm-ascend" / FIX).glob("*.patch"))
    assert f"{len(patches)} patches for the" in prose


def test_each_sampler_patch_is_named_after_a_release_it_fixes() -> None:
    own = {r.version for r in KNOWN if r.sampler_fix == "applies" and r.sampler_as is None}
    patches = {p.stem for p in (REPO / "patches" / "vllm-ascend" / FIX).glob("*.patch")}
    assert patches <= own
