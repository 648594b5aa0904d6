"""The lock's ``no_deps`` section: packages pinned with their hashes, installed with --no-deps.

A hashed requirements file cannot say "this one without its dependencies": pip applies
``--no-deps`` to a whole run, and ``--require-hashes`` would demand hashes for every dependency
of such a package. So ``lock`` records the manifest's ``no_deps`` pins as comment lines
(``#no-deps: NAME==VERSION --hash=sha256:HEX``), which pip skips, and ``install --lock`` reads
them back into a second, ``--no-deps`` step, as ``install`` does without a lock. Their hashes
are the index's own, from pip's report (``download_info``), or, where the index gives none
(a ``--find-links`` folder), the sha256 of the file pip downloads.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ascendpatch import hashing, paths
from ascendpatch.env import pipadapter
from ascendpatch.env.pipadapter import PipError, Source
from ascendpatch.errors import InvalidInputError

MARK = "#no-deps: "
HEADER = ("# manifest no_deps: installed by 'install --lock' with pip --no-deps; their own "
          "dependencies are not locked\n")
MAX_LOCK_BYTES = 16 * 1024 * 1024
_HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


def section(report: Mapping[str, Any], names: Iterable[str], python: Path,
            source: Source) -> str:
    """The lock lines of the ``no_deps`` packages that pip's report (of the stack's pins,
    ``--no-deps``) resolved: exact version and sha256 each."""
    wanted = {str(canonicalize_name(n)) for n in names}
    lines = []
    for item in report.get("install", []):
        meta = item["metadata"]
        name = str(canonicalize_name(meta["name"]))
        if name in wanted:
            pin = f"{name}=={meta['version']}"
            digest = _index_hash(item) or _downloaded_hash(pin, python, source)
            lines.append(f"{MARK}{pin} --hash=sha256:{digest}\n")
    return HEADER + "".join(sorted(lines)) if lines else ""


def _index_hash(item: Mapping[str, Any]) -> str | None:
    info = (item.get("download_info") or {}).get("archive_info") or {}
    found = (info.get("hashes") or {}).get("sha256")
    if found is None and str(info.get("hash", "")).startswith("sha256="):
        found = str(info["hash"]).removeprefix("sha256=")
    return str(found) if found else None


def _downloaded_hash(pin: str, python: Path, source: Source) -> str:
    """The sha256 of the wheel pip downloads for ``python`` (an index that gives no hash)."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = pipadapter.run_pip(["--python", str(python), "download", "--no-deps",
                                   "--only-binary", ":all:", "--disable-pip-version-check",
                                   "-d", tmp, *source.args(), pin])
        files = sorted(Path(tmp).iterdir())
        if proc.returncode != 0 or len(files) != 1:
            raise PipError(f"cannot download {pin} to hash it for the lock: "
                           f"{pipadapter.explain(proc.stderr) or proc.returncode}")
        return hashing.sha256_file(files[0])


def read(lock: Path) -> list[str]:
    """The ``no_deps`` lines of a lock, each ``NAME==VERSION --hash=sha256:HEX``; a line of
    that section that is anything else is invalid input (exit 2), as is a lock that is no
    regular file, is over 16 MiB, or that another user owns or can write."""
    return _no_deps(_trusted(lock), lock)


def take(lock: Path, folder: Path) -> tuple[Path, list[str]]:
    """The lock read once (checked as :func:`read` does) and copied into ``folder`` (a
    private temp folder of this run): the copy pip reads with ``-r`` for the plan and for the
    install (the user's file is not opened again, so it cannot change in between), and the
    ``no_deps`` lines."""
    data = _trusted(lock)
    loose = _no_deps(data, lock)
    copy = folder / "lock.txt"
    copy.write_bytes(data)
    return copy, loose


def _trusted(lock: Path) -> bytes:
    """The lock's bytes; refused when another user could have chosen them: the rest of the
    lock goes to pip, which takes index URLs, find-links and ``name @ URL`` sdists it builds
    (code run as the user, root on a shared host)."""
    try:
        data, info = paths.read_regular_with_stat(lock, MAX_LOCK_BYTES)
    except (OSError, paths.NotRegularFileError) as exc:
        raise InvalidInputError(f"cannot read the lock {paths.shown(lock)}: {exc}") from None
    why = paths.untrusted(info)
    if why is not None:
        raise InvalidInputError(f"the lock {paths.shown(lock)} is {why}; a lock another user "
                                "can change is never handed to pip, nothing was changed",
                                fix="chown/chmod go-w it, or write your own lock")
    return data


def _no_deps(data: bytes, lock: Path) -> list[str]:
    text = data.decode("utf-8", errors="replace")
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(MARK):
            found.append(_checked(line.removeprefix(MARK).strip(), lock, number))
    return found


def _checked(entry: str, lock: Path, number: int) -> str:
    words = entry.split()
    bad = InvalidInputError(f"{paths.shown(lock)} line {number}: a no-deps line must be "
                            f"NAME==VERSION --hash=sha256:HEX, not {entry[:200]!r}",
                            fix="write the lock again with 'lock -o FILE'")
    if len(words) < 2 or not all(_HASH.fullmatch(w) for w in words[1:]):
        raise bad
    try:
        req = Requirement(words[0])
    except InvalidRequirement:
        raise bad from None
    specs = list(req.specifier)
    if req.url or req.marker or len(specs) != 1 or specs[0].operator != "==":
        raise bad
    return " ".join(words)


def write_requirements(lines: Sequence[str], folder: Path) -> Path:
    """The ``no_deps`` lines as a requirements file pip can take with --require-hashes."""
    path = folder / "no-deps.txt"
    path.write_text("".join(f"{line}\n" for line in lines))
    return path
