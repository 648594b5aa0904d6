"""Carry out an InstallPlan: its pip steps, each under the plan's constraints file.

The plan (``env/pipdiff.py``) decided everything; this runs it, as pip-tools' ``sync.sync``
runs what ``sync.diff`` found, and reads the target again so that the caller re-checks what is
really installed, not what was planned.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

from ascendpatch.env import pipadapter
from ascendpatch.env.pipadapter import Source
from ascendpatch.env.pipdiff import InstallPlan
from ascendpatch.env.target import Target, from_python
from ascendpatch.errors import RefusedError
from ascendpatch.results import Hint, Phrase


def execute(plan: InstallPlan, target: Target, source: Source,
            env: Mapping[str, str] | None = None) -> Target:
    """Run the plan's steps in order; return the target as it is afterwards."""
    if plan.refused:  # a refused plan is never executed, whoever calls
        names = ", ".join(r.change.name for r in plan.refusals)
        raise RefusedError(f"the install plan changes protected packages ({names}); nothing "
                           f"was changed",
                           fix=Phrase("see the plan and why: ", Hint(("install", "--dry-run"))))
    if not plan.steps:
        return target
    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "protected-constraints.txt"
        constraints.write_text(plan.constraints)
        for step in plan.steps:
            pipadapter.install(target, step.args, source,
                               ["-c", str(constraints), *step.options], env=env)
    return from_python(target.python) if target.python else target
