"""Environment variables the manifest expects and those its artifacts require."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ascendpatch.inspect.checks.base import CheckContext
from ascendpatch.manifest.model import Artifact, Manifest
from ascendpatch.redact import is_secret, shown
from ascendpatch.results import CheckResult, Level


def expected(manifest: Manifest, env: Mapping[str, str]) -> list[CheckResult]:
    results = []
    for name, value in manifest.env.items():
        actual = env.get(name)
        ok = actual == value
        why = (" (this host is offline: the hub must not be contacted)"
               if name == "HF_HUB_OFFLINE" else "")
        if is_secret(name):
            message = (f"{name} is set as the manifest wants (value hidden)" if ok else
                       f"{name} is {'unset' if actual is None else 'set to another value'}, "
                       f"the manifest wants a specific value (values hidden)")
            fix = f"export {name} with the manifest's value"
        else:
            message = (f"{name}={value}" if ok else
                       f"{name} is {'unset' if actual is None else repr(actual)}, the manifest "
                       f"wants {value}{why}")
            fix = f"export {name}={value}"
        results.append(CheckResult(f"env:{name}", "env", Level.OK if ok else Level.FAIL, message,
                                   fix="" if ok else fix))
    return results


def required(artifacts: Sequence[Artifact], env: Mapping[str, str]) -> list[CheckResult]:
    """``options.requires_env`` of artifacts in play: set, and naming a readable file."""
    results = []
    for artifact in artifacts:
        for name in artifact.options.get("requires_env") or ():
            value = env.get(name)
            cid = f"env:{artifact.id}:{name}"
            if not value:
                results.append(CheckResult(cid, "env", Level.FAIL,
                                           f"{name} is not set; {artifact.title} needs it",
                                           fix=f"export {name}=<path>"))
            elif not Path(value).is_file():
                results.append(CheckResult(cid, "env", Level.FAIL,
                                           f"{name}={shown(name, value)}: no such file "
                                           f"({artifact.title})"))
            else:
                results.append(CheckResult(cid, "env", Level.OK,
                                           f"{name}={shown(name, value)}"))
    return results


class ExpectedEnvCheck:
    """The manifest's ``env:``, in the environment of this host's shell."""

    name = "env"

    def run(self, ctx: CheckContext) -> list[CheckResult]:
        return expected(ctx.manifest, ctx.env) if ctx.target.python is not None else []


class RequiredEnvCheck:
    """``requires_env`` of the artifacts in play: enabled (or --with), or in place."""

    name = "requires_env"

    def run(self, ctx: CheckContext) -> list[CheckResult]:
        if ctx.target.python is None:
            return []
        in_play = [a for a in ctx.manifest.artifacts if ctx.enabled(a) or a.id in ctx.applied]
        return required(in_play, ctx.env)
