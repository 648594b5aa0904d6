# Copyright: ascendpatch contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Check mode of the ascendpatch module: verify after the rollout's install and apply
(what they would fix is pending), and the controller's preview of a manifest's patches."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.ascendpatch.fleet.plugins.module_utils.tool import (
    base_args,
    failures,
    install_args,
    message_of,
    run_tool,
    with_args,
)


def pending_ids(module, exe):
    """The artifacts ``plan`` would apply (status "pending", since the results contract
    has a status of its own for "a change the real run would make")."""
    planned = run_tool(module, [*base_args(module, exe), "plan", *with_args(module)])[1]
    if planned is None or planned.get("error"):
        return set()
    return {r.get("id") for r in planned.get("results", []) if r.get("status") == "pending"}


def applied_by(item):
    """The artifacts whose apply fixes this verify failure: its own (``artifact:ID``), or those
    its fix names (a probe's "fix: ascendpatch ... apply ID" for the operator the patch
    guards)."""
    rid = item.get("id", "")
    if rid.startswith("artifact:"):
        return [rid.split(":", 1)[1]]
    commands = item.get("fix_commands")  # the tool's argv lists; older tools: only the words
    ids = []
    for argv in commands if commands else [(item.get("fix") or "").split()]:
        if "apply" in argv:
            after = argv[len(argv) - argv[::-1].index("apply"):]
            ids += [w for w in after if not w.startswith("-")]
    return ids


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def pin_of(item):
    """The package of a failed pin check (``pin:NAME``); Python and CANN are no package."""
    rid = item.get("id", "")
    name = rid.split(":", 1)[1] if rid.startswith("pin:") else ""
    return canonical(name) if name and name not in ("python", "cann") else None


def installed_by(module, exe):
    """The packages the rollout's install step would install or change: ``install --dry-run``'s
    plan (``plan:NAME`` results), none when that plan fails or is refused."""
    rc, doc, _ = run_tool(module, [*base_args(module, exe), *install_args(module, True)])
    if rc not in (0, 1) or doc is None or doc.get("error") or failures(doc):
        return {}
    return {canonical(r["data"]["package"]): r["data"].get("new")
            for r in doc.get("results", []) if r.get("id", "").startswith("plan:")
            and isinstance(r.get("data"), dict) and r["data"].get("package")}


def pending_message(pending, pins):
    said = []
    if pins:
        said.append("the rollout's install would install %s" % ", ".join(
            "%s %s" % (name, new) if new else name for name, new in pins))
    if pending:
        said.append("the rollout's apply would apply %s" % ", ".join(pending))
    return "check mode: not applied yet; " + "; ".join(said)


def verify_in_check_mode(module, exe, args):
    """verify after an install and an apply that only planned: what they would fix is pending.
    The task passes when every failure is fixed by such an artifact or install; anything
    else fails it."""
    rc, doc, err = run_tool(module, args)
    result = dict(exit_code=rc, cmd=args, result=doc, stderr=err)
    if rc != 1 or doc is None or doc.get("error") or not failures(doc):
        return rc, result
    pins = [pin_of(r) for r in failures(doc) if pin_of(r)]
    others = [r for r in failures(doc) if not pin_of(r)]
    fixes = [applied_by(r) for r in others]
    would = pending_ids(module, exe) if fixes else set()
    if not all(ids and set(ids) <= would for ids in fixes):
        return rc, result
    installs = installed_by(module, exe) if pins else {}
    if not all(name in installs for name in pins):
        return rc, result
    pending = sorted({aid for ids in fixes for aid in ids})
    result.update(pending=pending, pending_pins=sorted(pins),
                  msg=pending_message(pending, [(n, installs[n]) for n in sorted(pins)]))
    return 0, result


def preview(module, exe):
    """The manifest's patch of each artifact the rollout would apply, as Ansible's diff (check
    mode, on the controller): the manifest's change, not a diff against a node's files."""
    args = [exe, "--json", "--color", "never", "--manifest=" + module.params["manifest"],
            "manifests", "--patches"]
    rc, doc, err = run_tool(module, args)
    found = [r.get("data") or {} for r in (doc or {}).get("results", [])
             if r.get("id") == module.params["manifest"] and r.get("level") != "FAIL"]
    if not found:
        module.fail_json(msg="the controller's ascendpatch cannot preview manifest %s: %s" % (
            module.params["manifest"], message_of(doc, err, rc) if rc else
            "it is not one ascendpatch bundles (a file on the node?)"), rc=rc, cmd=args)
    wanted = set(module.params["with_ids"])
    diffs = []
    for artifact in found[0].get("artifacts", []):
        if not (artifact.get("enabled") or artifact.get("id") in wanted):
            continue
        for patch in artifact.get("patches", []):
            header = "manifest %s, %s, patch %s for %s %s (the manifest's change, not a " \
                     "diff against this node's files)" % (
                         module.params["manifest"], artifact["id"], patch.get("source"),
                         artifact.get("distribution"), patch.get("versions") or "any version")
            diffs.append({"before_header": header, "after_header": header,
                          "prepared": "# %s\n%s" % (header, patch.get("diff") or patch.get(
                              "error", ""))})
    module.exit_json(changed=bool(diffs), exit_code=0, cmd=args, diff=diffs,
                     msg="check mode: %d patch(es) of manifest %s from the controller's copy"
                         % (len(diffs), module.params["manifest"]))
