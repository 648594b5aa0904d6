# Copyright: ascendpatch contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The ascendpatch tool's command line and its --json result, for the ascendpatch module."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json


def base_args(module, exe):
    p = module.params
    args = [exe, "--json", "--color", "never", "--manifest=" + p["manifest"],
            "--lock-timeout=" + str(p["lock_timeout"])]
    if p["python"]:
        args += ["--python=" + p["python"]]
    elif p["site_packages"]:
        args += ["--site-packages=" + p["site_packages"]]
    return args


def with_args(module):
    return ["--with=" + aid for aid in module.params["with_ids"]]


def ids_args(module):
    """The artifact ids, after "--": positional whatever they look like."""
    return ["--", *module.params["ids"]] if module.params["ids"] else []


def install_args(module, dry_run):
    wheelhouse = module.params["wheelhouse"]
    source = ["--offline", "--wheelhouse=" + wheelhouse] if wheelhouse else []
    return ["install"] + (["--dry-run"] if dry_run else []) + source


def run_tool(module, args):
    rc, out, err = module.run_command(args, check_rc=False)
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    return rc, doc, err


def message_of(doc, err, rc):
    if doc is None:
        return (err or "").strip() or "ascendpatch exited %d without a JSON result" % rc
    if doc.get("error"):
        return doc["error"]["message"]
    bad = [r["message"] for r in doc.get("results", []) if r.get("level") == "FAIL"]
    return "; ".join(bad) or "ascendpatch exited %d" % rc


def failures(doc):
    return [r for r in doc.get("results", []) if r.get("level") == "FAIL"]
