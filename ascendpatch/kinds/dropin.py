"""Kind ``dropin``: replace a whole file, only over a known original.

The file is *pristine* when its sha256 is one of the declared originals (``sha256.before``)
or the RECORD hash of the installed wheel, *applied* when it already equals the drop-in, and
a *conflict* otherwise: only ``--force`` overwrites content ascendpatch does not recognise.
"""

from __future__ import annotations

from collections.abc import Sequence

from ascendpatch.inspect.checks.base import Check
from ascendpatch.inspect.checks.smoothquant import Halves, SmoothQuantCheck
from ascendpatch.kinds.base import UNKNOWN, ArtifactSite, Content, FileFinding, SingleFileKind
from ascendpatch.manifest import schema as s
from ascendpatch.manifest.model import Artifact
from ascendpatch.pipeline.filestate import FileState


class DropinKind(SingleFileKind):
    name = "dropin"
    options_schema = s.Obj({  # a SmoothQuant drop-in: verify and logs check its other halves
        "scales_env": s.Str(s.env_name),  # the variable that names the scales file
        "scale_vectors": s.Int(),  # how many scale vectors each rank logs it loaded
    })

    def checks(self, artifacts: Sequence[Artifact]) -> Sequence[Check]:
        """A SmoothQuant drop-in (``scales_env``): its scales file too, and the serve log."""
        smooth = tuple(Halves(a, str(a.options["scales_env"])) for a in artifacts
                       if a.options.get("scales_env"))
        return (SmoothQuantCheck(smooth),) if smooth else ()

    def inspect(self, site: ArtifactSite) -> list[FileFinding]:
        one = self.one_file(site)
        rel, path, current, new = one.rel, one.path, one.current, one.new
        hashes = site.variant.sha256.get(rel)
        originals = set(hashes.before if hashes else ())
        record = site.record_sha256(rel)
        if record:
            originals.add(record)
        if current is None:
            return [FileFinding(rel, path, FileState.CONFLICT, None, Content(new), UNKNOWN,
                                f"{rel}: missing (the file this drop-in replaces is not installed)",
                                forceable=True)]
        now = Content(current)  # one Content: its digest is computed once for the finding too
        digest = now.sha256 or ""
        if current == new:
            return [FileFinding(rel, path, FileState.APPLIED, current, now, UNKNOWN,
                                f"{rel}: drop-in installed")]
        if digest in originals:
            return [FileFinding(rel, path, FileState.PRISTINE, current, Content(new),
                                now, f"{rel}: known original ({digest[:12]})")]
        return [FileFinding(rel, path, FileState.CONFLICT, current, Content(new), now,
                            f"{rel}: unrecognised content (sha256 {digest[:12]}…, not a known "
                            f"original)", forceable=True)]
