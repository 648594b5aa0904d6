"""Requirements as the target sees them: parsed with packaging, markers evaluated in the
target's PEP 508 environment (base requirements only: extras are not requested)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from ascendpatch.errors import InvalidInputError


def parse(raw: str) -> Requirement:
    """``raw`` as a PEP 508 requirement, or an InvalidInputError of one line saying where it
    fails (packaging's own message spans three lines: the reason, the text, a caret)."""
    try:
        return Requirement(raw)
    except InvalidRequirement as exc:
        raise InvalidInputError(f"requirement {raw!r} is not valid PEP 508: {why(exc, raw)}",
                                fix="write it as pip takes it, e.g. 'six>=1.16'") from None


def exact_version(specifier: SpecifierSet) -> Version | None:
    """The one version ``specifier`` pins (``==X`` or ``===X``, no wildcard), if it pins one."""
    for item in specifier:
        if item.operator in ("==", "===") and "*" not in item.version:
            try:
                return Version(item.version)
            except InvalidVersion:
                return None
    return None


def why(exc: InvalidRequirement, raw: str) -> str:
    """packaging's reason on one line, with the text from where its caret points."""
    lines = str(exc).splitlines()
    reason = lines[0] if lines else "not a requirement"
    caret = lines[-1] if len(lines) >= 3 else ""
    if "^" not in caret:
        return reason
    column = max(caret.index("^") - 4, 0)  # packaging indents the text and its caret by 4
    rest = raw[column:]
    return f"{reason}, at {rest!r}" if rest else f"{reason}, at the end"


def applicable(raws: Iterable[str], markers: Mapping[str, str] | None) -> Iterator[Requirement]:
    """Each requirement whose marker holds (unparseable lines are skipped, as pip does).

    ``markers`` is the target's environment; None (a --site-packages target, whose interpreter
    is not run) falls back to this process's own."""
    base = markers if markers else {k: str(v) for k, v in default_environment().items()}
    env = {**base, "extra": ""}
    for raw in raws:
        try:
            req = Requirement(raw)
        except InvalidRequirement:
            continue
        if req.marker is None or req.marker.evaluate(env):
            yield req
