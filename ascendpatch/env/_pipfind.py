# Runs in ascendpatch's OWN interpreter (env/pipindex.py, through env/pipadapter), never in a
# target: pip's `download` command up to the point where it would build anything. pip parses
# its configuration exactly as `pip download` does (global, user and site pip.conf, PIP_*
# variables, the options given) and builds its own session (certificates, proxies, trusted
# hosts, netrc and keyring credentials, retries) and finder (index-url, extra-index-url,
# find-links, no-index). `pip download --no-binary :all:` cannot be used for an sdist: it
# builds the sdist's metadata first, which vllm-ascend's cannot have without CANN.
#   where                           -> {"where": [...]}: the indexes and links pip would read
#   sdist NAME VERSION DEST CAP ... -> the sdist of NAME==VERSION saved in the folder DEST (at
#                                      most CAP bytes): {"where", "filename", "sha256"}
# Any further words are pip options. Prints one JSON document; URLs with pip's own redaction.
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pip._internal.commands import create_command
from pip._internal.commands.download import DownloadCommand
from pip._internal.utils.misc import redact_auth_from_url
from pip._vendor.packaging.version import Version


def _where(options: Any) -> list[str]:
    indexes = [] if options.no_index else [options.index_url, *options.extra_index_urls]
    return [redact_auth_from_url(u) for u in [*indexes, *options.find_links]]


def _sdist_link(command: DownloadCommand, options: Any, session: Any, name: str,
                version: str) -> Any:
    finder = command._build_package_finder(options=options, session=session,
                                           ignore_requires_python=True)
    for candidate in finder.find_all_candidates(name):
        link = candidate.link
        if candidate.version == Version(version) and link.filename.endswith(".tar.gz"):
            return link
    return None


def _save(session: Any, link: Any, dest: str, cap: int) -> dict[str, Any]:
    size = 0
    with session.get(link.url_without_fragment, stream=True,
                     headers={"Accept-Encoding": "identity"}) as resp:
        resp.raise_for_status()
        with (Path(dest) / Path(link.filename).name).open("wb") as out:
            for chunk in resp.iter_content(1 << 20):
                size += len(chunk)
                if size > cap:
                    return {"filename": link.filename, "too_big": True}
                out.write(chunk)
    published = getattr(link, "_hashes", None) or {}  # every hash the index gave (PEP 691)
    sha256 = published.get("sha256") or (link.hash if link.hash_name == "sha256" else None)
    return {"filename": link.filename, "sha256": sha256}


def _fetch(command: DownloadCommand, options: Any, name: str, version: str, dest: str,
           cap: int) -> dict[str, Any]:
    with command._build_session(options) as session:
        link = _sdist_link(command, options, session, name, version)
        if link is None:
            return {"filename": None}
        try:
            return _save(session, link, dest, cap)
        except Exception as exc:  # requests' and urllib3's errors, OSError
            return {"filename": link.filename, "error": " ".join(str(exc).split())[:300]}


def main(argv: list[str]) -> dict[str, Any]:
    action, rest = argv[0], argv[1:]
    pip_args = rest if action == "where" else rest[4:]
    command = create_command("download")
    assert isinstance(command, DownloadCommand)
    options, _args = command.parse_args(["--disable-pip-version-check", *pip_args])
    if options.cache_dir:  # as pip's main does (a relative PIP_CACHE_DIR)
        options.cache_dir = str(Path(options.cache_dir).expanduser().absolute())
    found: dict[str, Any] = {"where": _where(options)}
    if action == "sdist":
        name, version, dest, cap = rest[:4]
        found.update(_fetch(command, options, name, version, dest, int(cap)))
    return found


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
