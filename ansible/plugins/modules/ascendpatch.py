#!/usr/bin/python
# Copyright: ascendpatch contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Run the ascendpatch tool installed on a node and map its --json result onto Ansible."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: ascendpatch
short_description: Apply, revert, verify, audit and snapshot vllm-ascend patches with ascendpatch
version_added: "0.1.0"
description:
  - Runs the C(ascendpatch) tool installed on the node (see the C(ascendpatch.fleet.ascendpatch)
    role, which installs it from a wheelhouse) with C(--json) and maps its result onto Ansible.
  - C(changed) is true only when bytes of the target changed (C(apply), C(revert), C(install)).
    C(verify), C(audit) and C(snapshot) never change the target.
  - The task fails when the tool exits 1 (problems found or refused), 2 (invalid input) or 3
    (unexpected error), with the tool's own message.
  - In check mode C(apply) runs C(ascendpatch plan), C(revert) runs C(ascendpatch status) and
    C(install) runs C(ascendpatch install --dry-run); nothing is written. C(snapshot) is
    skipped in check mode.
  - In check mode C(verify) still runs for real (it only reads). With I(after_apply), the
    artifacts that the C(apply) before it would apply (C(ascendpatch plan) says C(pending))
    are reported as C(pending), not failed, so that C(--check) previews a whole rollout
    instead of stopping at its first node.
  - In diff mode C(apply) returns the unified diff of what it changes (or would change).
  - C(preview) (check mode, run on the controller with C(delegate_to), for a node that has no
    ascendpatch yet) returns as its diff the patch of each artifact the rollout would apply,
    from the controller's copy of the manifest (C(ascendpatch manifests --patches)), that is the
    manifest's change, not a diff against that node's files, which it cannot read before the
    tool is installed there. Outside check mode it is skipped.
options:
  command:
    description: The ascendpatch command to run.
    type: str
    required: true
    choices: [apply, revert, verify, audit, snapshot, install, preview]
  ids:
    description:
      - Artifact ids to apply or revert (default, the manifest's required ones).
      - Ids are data, passed after C(--); a value starting with C(-) fails the task and
        nothing is run (it would otherwise be read as an option such as C(--force) or
        C(--python=...)). The same holds for I(with_ids) and every path option.
    type: list
    elements: str
    default: []
  with_ids:
    description: Optional artifacts to add (C(--with)), for C(apply) and C(verify).
    type: list
    elements: str
    default: []
    aliases: [with]
  python:
    description: The target interpreter (C(--python)).
    type: path
  site_packages:
    description: A site-packages folder to operate on without running an interpreter.
    type: path
  manifest:
    description: A bundled manifest name or the path of a manifest YAML on the node.
    type: str
    default: default
  output:
    description: Where C(snapshot) writes its JSON on the node. Required for C(snapshot).
    type: path
  baseline:
    description: For C(audit), also report packages changed since this snapshot on the node.
    type: path
  wheelhouse:
    description:
      - For C(install), install from this folder only (C(--offline --wheelhouse)).
      - For C(verify) with I(after_apply) in check mode, the folder the rollout's install
        step uses (its C(--dry-run) plan decides which unmet pins are pending).
    type: path
  no_probes:
    description: For C(verify), skip the operator probes.
    type: bool
    default: false
  prometheus:
    description:
      - For C(verify), also write its result as a Prometheus textfile at this path on the
        node (C(--prometheus)), atomically, for node_exporter's textfile collector (its
        C(--collector.textfile.directory)); the file must be a regular file or absent.
      - Not written in check mode (nothing on the node changes then).
    type: path
  after_apply:
    description:
      - For C(verify) in check mode, this task follows an C(apply) that only planned (as in
        the rollout), so an artifact that C(ascendpatch plan) would apply is C(pending), not a
        failure, and so is a failure whose fix is to apply such an artifact (the probe of the
        operator a patch guards). A pin that is not met is C(pending) too when the rollout's
        C(install) step would install or change that package (C(ascendpatch install
        --dry-run), from I(wheelhouse) when given, as that step does). Every other failure
        still fails the task.
      - No effect outside check mode.
    type: bool
    default: false
  lock_timeout:
    description: Seconds to wait for another run's lock on the target.
    type: float
    default: 300
  executable:
    description:
      - The ascendpatch executable. Default, C(ascendpatch) on the PATH, then
        C(~/.local/share/ascendpatch/venv/bin/ascendpatch) (where the role installs it). A
        name without a C(/) is looked up on the PATH.
    type: path
attributes:
  check_mode:
    description: Runs the read-only counterpart (plan, status, install --dry-run).
    support: full
  diff_mode:
    description: Returns the unified diff of what apply changes or would change.
    support: full
notes:
  - The node needs ascendpatch installed; the C(ascendpatch.fleet.ascendpatch) role does it.
author:
  - ascendpatch maintainers (@ascendpatch)
"""

EXAMPLES = r"""
- name: Apply the catalog's fixes to the serving environment
  ascendpatch.fleet.ascendpatch:
    command: apply
    python: /usr/local/python3.11.14/bin/python3

- name: Verify, with the SmoothQuant drop-in expected
  ascendpatch.fleet.ascendpatch:
    command: verify
    python: /usr/local/python3.11.14/bin/python3
    with: [smoothquant]

- name: Snapshot the environment, to fetch it to the controller
  ascendpatch.fleet.ascendpatch:
    command: snapshot
    python: /usr/local/python3.11.14/bin/python3
    output: /tmp/ascendpatch-snapshot.json
"""

RETURN = r"""
exit_code:
  description:
    - The tool's exit code (0 desired state, 1 problems, 2 invalid input, 3 bug). In check mode
      1 means "something would change" and is no failure (Ansible fails any result whose C(rc)
      is not 0, hence this name; a failed task also returns C(rc)).
  returned: always
  type: int
  sample: 0
cmd:
  description: The command line that ran.
  returned: always
  type: list
  elements: str
result:
  description: The tool's C(--json) document (results, notes, exit code).
  returned: when the tool ran
  type: dict
changed_files:
  description: Files whose bytes changed (or would change in check mode).
  returned: for apply, revert
  type: list
  elements: str
  sample: [vllm_ascend/sample/sampler.py]
snapshot:
  description: The path of the snapshot written on the node.
  returned: for snapshot
  type: str
pending:
  description: Artifacts verify found not applied that the rollout's apply would apply.
  returned: for verify in check mode with after_apply
  type: list
  elements: str
  sample: [sampler-topk-topp-fallback]
pending_pins:
  description: Packages whose pin verify found unmet that the rollout's install would install.
  returned: for verify in check mode with after_apply
  type: list
  elements: str
  sample: [vllm-ascend]
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascendpatch.fleet.plugins.module_utils.checkmode import (
    preview,
    verify_in_check_mode,
)
from ansible_collections.ascendpatch.fleet.plugins.module_utils.tool import (
    base_args,
    failures,
    ids_args,
    install_args,
    message_of,
    run_tool,
    with_args,
)

ROLE = "ascendpatch.fleet.ascendpatch"
APPLIED = ("already-applied", "applied", "partial")


def find_executable(module):
    given = module.params["executable"]
    if given and os.sep not in given:  # a bare name (the role's controller default): on PATH
        return module.get_bin_path(given)
    if given:
        return given if os.access(given, os.X_OK) else None
    found = module.get_bin_path("ascendpatch")
    if found:
        return found
    default = os.path.join(os.environ.get("HOME", "/root"),
                           ".local/share/ascendpatch/venv/bin/ascendpatch")
    return default if os.access(default, os.X_OK) else None


def check_values(module):
    """Every value that becomes a word of the command line is data, never an option: an id
    such as "--force" or "--python=/x" would otherwise change what runs (and which
    interpreter runs as root). Values are passed as --option=VALUE and ids after "--"."""
    for key in ("ids", "with_ids"):
        for index, value in enumerate(module.params[key]):
            if not value or value.startswith("-"):
                module.fail_json(msg="%s[%d] %r is not an artifact id (an id never starts "
                                     "with '-'); nothing was run" % (key, index, value))
    for key in ("manifest", "python", "site_packages", "output", "baseline", "wheelhouse"):
        value = module.params[key]
        if value is not None and str(value).startswith("-"):
            module.fail_json(msg="%s %r starts with '-'; give a name or a path (./%s)"
                                 "; nothing was run" % (key, value, value))


def command_args(module, check):
    """The subcommand and its options: the read-only stand-in in check mode."""
    p = module.params
    name = p["command"]
    if name == "apply":
        return (["plan"] if check else ["apply"]) + with_args(module) + ids_args(module)
    if name == "revert":
        return (["status"] if check else ["revert"]) + ids_args(module)
    if name == "install":
        return install_args(module, check)
    if name == "verify":
        metrics = ["--prometheus=" + p["prometheus"]] if p["prometheus"] and not check else []
        return ["verify"] + (["--no-probes"] if p["no_probes"] else []) + metrics + \
            with_args(module)
    if name == "audit":
        return ["audit"] + (["--baseline=" + p["baseline"]] if p["baseline"] else [])
    return ["snapshot", "--output=" + p["output"]]


def changed_files(doc, mode):
    """Files whose bytes changed ("written"), would change on apply ("pending") or on revert
    ("applied": what is applied now)."""
    statuses = {"pending": ("pending", "not-applied", "partial"), "applied": APPLIED}.get(mode)
    files = []
    for item in doc.get("results", []):
        for entry in item.get("files", []):
            if statuses is not None:
                wanted = item.get("status") in statuses
            else:
                wanted = entry.get("sha256_before") != entry.get("sha256_after")
            if wanted:
                files.append(entry["path"])
    return files


def file_mode(name, check):
    if not check:
        return "written"
    return "pending" if name == "apply" else "applied"


def is_changed(name, doc, check):
    if name == "install":
        return any(r.get("id", "").startswith("plan:") for r in doc.get("results", []))
    if name in ("apply", "revert"):
        return bool(changed_files(doc, file_mode(name, check)))
    return False


def apply_diff(doc):
    parts = [r["diff"] for r in doc.get("results", []) if r.get("diff")]
    return {"prepared": "".join(parts)} if parts else None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            command=dict(type="str", required=True,
                         choices=["apply", "revert", "verify", "audit", "snapshot", "install",
                                  "preview"]),
            ids=dict(type="list", elements="str", default=[]),
            with_ids=dict(type="list", elements="str", default=[], aliases=["with"]),
            python=dict(type="path"),
            site_packages=dict(type="path"),
            manifest=dict(type="str", default="default"),
            output=dict(type="path"),
            baseline=dict(type="path"),
            wheelhouse=dict(type="path"),
            no_probes=dict(type="bool", default=False),
            prometheus=dict(type="path"),
            after_apply=dict(type="bool", default=False),
            lock_timeout=dict(type="float", default=300),
            executable=dict(type="path"),
        ),
        mutually_exclusive=[["python", "site_packages"]],
        required_if=[["command", "snapshot", ["output"]]],
        supports_check_mode=True,
    )
    name = module.params["command"]
    check = module.check_mode
    check_values(module)
    exe = find_executable(module)
    if exe is None:
        module.fail_json(msg="ascendpatch is not installed on this node (looked for %s); "
                             "install it with the role %s" % (
                                 module.params["executable"] or "ascendpatch on the PATH and "
                                 "~/.local/share/ascendpatch/venv/bin/ascendpatch", ROLE))
    if name == "preview":
        if not check:
            module.exit_json(changed=False, skipped=True, exit_code=0, cmd=[],
                             msg="preview runs in check mode only")
        preview(module, exe)
    if name == "snapshot" and check:
        module.exit_json(changed=False, skipped=True, exit_code=0, cmd=[],
                         msg="check mode: no snapshot written")
    diff = None
    if name == "apply" and module._diff and not check:
        plan_args = [*base_args(module, exe), "plan", *with_args(module), *ids_args(module)]
        planned = run_tool(module, plan_args)[1]
        diff = apply_diff(planned) if planned else None
    args = base_args(module, exe) + command_args(module, check)
    if name == "verify" and check and module.params["after_apply"]:
        rc, result = verify_in_check_mode(module, exe, args)
        doc, err = result["result"], result["stderr"]
    else:
        rc, doc, err = run_tool(module, args)
        result = dict(exit_code=rc, cmd=args, result=doc, stderr=err)
    # check mode stand-ins (plan, status, install --dry-run) exit 1 when something is pending:
    # that is a change to report, not a failure, as long as no result failed
    pending = (check and name in ("apply", "revert", "install") and rc == 1
               and doc is not None and not doc.get("error") and not failures(doc))
    if rc != 0 and not pending:
        module.fail_json(msg=message_of(doc, err, rc), rc=rc, **result)
    if name == "apply" and check:
        diff = apply_diff(doc)
    if name in ("apply", "revert"):
        result["changed_files"] = changed_files(doc, file_mode(name, check))
    if name == "snapshot":
        result["snapshot"] = module.params["output"]
    if diff and module._diff:
        result["diff"] = diff
    module.exit_json(changed=is_changed(name, doc, check), **result)


if __name__ == "__main__":
    main()
