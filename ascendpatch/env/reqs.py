"""Requirements as the target sees them: parsed with packaging, markers evaluated in the
target's PEP 508 environment (base requirements only: extras are not requested)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement


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
