#!/usr/bin/env bash
# ascendpatch bootstrap (field note 003: "bash install.sh", idempotent, [OK] lines).
#
#   1. install ascendpatch into a venv of its own: never into the target environment, never
#      touching the image's torch / torch_npu;
#   2. (--sandbox) build a throwaway target: the real vllm-ascend wheel + labelled stand-ins;
#   3. ascendpatch install  (guarded: refuses to replace protected packages);
#   4. ascendpatch apply    (the catalog's fixes for the installed versions);
#   5. ascendpatch verify   (read-only: pins, patches, dependencies, probes, environment).
#
# Like pipx, the `ascendpatch` launcher is linked into ~/.local/bin (or $ASCENDPATCH_BIN_DIR)
# and bash completion (from the argparse parser, via shtab) is written where bash-completion
# finds it; `--uninstall` removes the venv, the link and the completion file (only what this
# prefix's install wrote: PREFIX/installed-files). The target is remembered in the user's config
# (python -m ascendpatch.shell.remember), so later commands need no --python.
#
# Re-running changes nothing and prints the same [OK] lines. A failing step stops the script
# with a non-zero exit code and names the step; every step is itself all-or-nothing.
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: bash install.sh [options]

Target (one of):
  --python PATH          the target interpreter (default: $ASCENDPATCH_PYTHON, then the
                         documented candidates, e.g. /usr/local/python3.12.13/bin/python3, the
                         first with vllm-ascend installed)
  --sandbox [DIR]        build a sandbox target first (default DIR: ./ascendpatch-sandbox) with
                         the real vllm-ascend wheel and stand-ins for torch / torch-npu: runs on
                         any machine, no NPU needed
  --vllm-ascend VERSION  the vllm-ascend release of the sandbox (default 0.18.0)

Options:
  --manifest NAME|PATH   bundled manifest or YAML file (default: the catalog, "default"),
                         e.g. muse-glimmer-w8a8 or vllm-omni-910c
  --wheelhouse DIR       install everything from DIR (no index is contacted); build it on a
                         connected machine with: ascendpatch bundle DIR
  --prefix DIR           where ascendpatch's own venv lives
                         (default: $ASCENDPATCH_PREFIX or ~/.local/share/ascendpatch)
  --bin-dir DIR          where the `ascendpatch` launcher is linked
                         (default: $ASCENDPATCH_BIN_DIR or ~/.local/bin)
  --no-completion        do not write the bash completion file
  --uninstall            remove ascendpatch's venv, and the launcher link and completion
                         file that this prefix's install wrote (listed in PREFIX/installed-files;
                         targets, sandboxes and the config are left alone), then exit
  -h, --help             this help

The target (the sandbox, or --python) is remembered in $XDG_CONFIG_HOME/ascendpatch/config.toml
(default ~/.config/ascendpatch/config.toml) when that file does not exist, so that later
commands need no --python; an existing config that names another target is left as it is
([WARN] with the lines to put in it).

Environment:
  SMOOTH=1                 also apply (and verify) the manifest's SmoothQuant drop-in
  MODEL_DIR                the model's deploy package, for manifests whose sources use it
  ASCENDPATCH_PYTHON       target interpreter when --python is not given
  ASCENDPATCH_PREFIX       default for --prefix
  ASCENDPATCH_BIN_DIR      default for --bin-dir
  ASCENDPATCH_TOOL_PYTHON  the Python (>= 3.10) that runs ascendpatch itself (default: the first
                           of python3, the target's interpreter, /usr/local/python3*/bin/python3
                           that is >= 3.10 and can create a venv: the vllm-omni image's system
                           python3 is a 3.10 without pip)

Exit codes: 0 installed and verified (or uninstalled); otherwise the failing step's code (1 problems found or
refused, 2 invalid input, 3 unexpected error).
USAGE
}

fail() { echo "[FAIL] install.sh: $*" >&2; exit "${code:-1}"; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prefix="${ASCENDPATCH_PREFIX:-$HOME/.local/share/ascendpatch}"
tool_python="${ASCENDPATCH_TOOL_PYTHON:-}"
target_python="${ASCENDPATCH_PYTHON:-}"
manifest="default"
wheelhouse=""
sandbox=""
vllm_ascend="0.18.0"
bin_dir="${ASCENDPATCH_BIN_DIR:-$HOME/.local/bin}"
completion=1
uninstall=0

while [ $# -gt 0 ]; do
    case "$1" in
        --python) [ $# -ge 2 ] || { code=2 fail "--python needs a path"; }
                  target_python="$2"; shift 2 ;;
        --sandbox) if [ $# -ge 2 ] && [ "${2#-}" = "$2" ]; then sandbox="$2"; shift 2
                   else sandbox="$PWD/ascendpatch-sandbox"; shift; fi ;;
        --vllm-ascend) [ $# -ge 2 ] || { code=2 fail "--vllm-ascend needs a version"; }
                       vllm_ascend="$2"; shift 2 ;;
        --manifest) [ $# -ge 2 ] || { code=2 fail "--manifest needs a value"; }
                    manifest="$2"; shift 2 ;;
        --wheelhouse) [ $# -ge 2 ] || { code=2 fail "--wheelhouse needs a folder"; }
                      wheelhouse="$(cd "$2" && pwd)" || { code=2 fail "no folder $2"; }; shift 2 ;;
        --prefix) [ $# -ge 2 ] || { code=2 fail "--prefix needs a folder"; }
                  prefix="$2"; shift 2 ;;
        --bin-dir) [ $# -ge 2 ] || { code=2 fail "--bin-dir needs a folder"; }
                   bin_dir="$2"; shift 2 ;;
        --no-completion) completion=0; shift ;;
        --uninstall) uninstall=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; code=2 fail "unknown option $1" ;;
    esac
done
if [ -n "$sandbox" ] && [ -n "$target_python" ] && [ -z "${ASCENDPATCH_PYTHON:-}" ]; then
    code=2 fail "give either --python or --sandbox, not both"
fi

completion_file="${XDG_DATA_HOME:-$HOME/.local/share}/bash-completion/completions/ascendpatch"
link="$bin_dir/ascendpatch"

# ours LINK: the link points into this prefix's venv (never remove or replace anything else).
ours() { [ -L "$1" ] && [ "$(readlink "$1")" = "$prefix/venv/bin/ascendpatch" ]; }

# The files outside the prefix that this install wrote, one "KIND PATH" line each: --uninstall
# of this prefix removes those and nothing else (another install's completion file stays).
record="$prefix/installed-files"
config_home="${XDG_CONFIG_HOME:-}"
case "$config_home" in /*) ;; *) config_home="$HOME/.config" ;; esac  # relative: ignored (XDG)
config_file="$config_home/ascendpatch/config.toml"
recorded() { [ -f "$record" ] && grep -qxF "$1 $2" "$record"; }
remember_file() {
    recorded "$1" "$2" && return 0
    mkdir -p "$prefix" && echo "$1 $2" >> "$record"
}

do_uninstall() {
    if ours "$link"; then rm -f "$link"; echo "[OK] removed the launcher $link"
    elif [ -e "$link" ] || [ -L "$link" ]; then
        echo "[WARN] $link is not ascendpatch's link into $prefix/venv; left alone"
    fi
    if recorded completion "$completion_file"; then
        rm -f "$completion_file"; echo "[OK] removed the completion file $completion_file"
    elif [ -f "$completion_file" ]; then
        echo "[OK] left the completion file $completion_file: the install in $prefix did not" \
             "write it"
    fi
    if [ -f "$config_file" ] && recorded config "$config_file"; then
        echo "[OK] left the config $config_file (it names your target for the next install;" \
             "remove it by hand if you like)"
    fi
    rm -f "$record"
    if [ -d "$prefix/venv" ]; then rm -rf "$prefix/venv"; echo "[OK] removed $prefix/venv"
    else echo "[OK] no venv at $prefix/venv (already uninstalled)"; fi
    rmdir "$prefix" 2>/dev/null || true
    echo "=== Uninstalled (targets and sandboxes are left as they are) ==="
}
if [ "$uninstall" = 1 ]; then do_uninstall; exit 0; fi

source_args=()
[ -n "$wheelhouse" ] && source_args=(--offline --wheelhouse "$wheelhouse")
with_args=()
[ "${SMOOTH:-0}" = "1" ] && with_args=(--with smoothquant)

# run_step NAME COMMAND...: run one step; on failure stop with its exit code, naming it.
run_step() {
    local name="$1"; shift
    echo "--- $name"
    set +e
    "$@"
    local rc=$?
    set -e
    if [ "$rc" -ne 0 ]; then
        code="$rc" fail "step '$name' failed (exit $rc); see the lines above"
    fi
}

# isolated PYTHON ARGS...: every Python this script runs, with -I: `-m` and `-c` put the
# current folder first on sys.path, and root may run install.sh from /tmp or another user's
# folder, whose json.py, pip.py or argparse.py would then run as uid 0. -I (Python 3.4+) also
# ignores PYTHON* variables and the user's site-packages, which nothing here needs.
isolated() {
    local python="$1"; shift
    "$python" -I "$@"
}

# pick_tool_python: the first Python >= 3.10 that can create a venv with pip in it.
pick_tool_python() {
    local candidate
    for candidate in ${ASCENDPATCH_TOOL_PYTHON:+"$ASCENDPATCH_TOOL_PYTHON"} python3 \
            ${target_python:+"$target_python"} /usr/local/python3*/bin/python3; do
        command -v "$candidate" >/dev/null 2>&1 || continue
        if isolated "$candidate" -c \
                'import sys, venv, ensurepip; assert sys.version_info >= (3, 10)' >/dev/null 2>&1
        then
            tool_python="$candidate"
            return 0
        fi
    done
    echo "[FAIL] no Python >= 3.10 with venv and ensurepip found; set ASCENDPATCH_TOOL_PYTHON" >&2
    return 1
}

install_tool() {
    if [ ! -x "$prefix/venv/bin/python" ]; then
        [ -n "$tool_python" ] || pick_tool_python || return 1
        isolated "$tool_python" -m venv "$prefix/venv" || return 1
    fi
    local pip=(isolated "$prefix/venv/bin/python" -m pip install --quiet --disable-pip-version-check)
    if [ -n "$wheelhouse" ]; then
        "${pip[@]}" --no-index --find-links "$wheelhouse" ascendpatch || return 1
    else
        "${pip[@]}" "$here" || return 1
    fi
    echo "[OK] ascendpatch $("$prefix/venv/bin/ascendpatch" --version | cut -d' ' -f2)" \
         "in $prefix/venv (isolated from the target)"
}

# link_launcher: like pipx, ~/.local/bin/ascendpatch -> the venv's launcher; say how to get
# that folder on PATH when it is not.
link_launcher() {
    mkdir -p "$bin_dir" || return 1
    if [ -e "$link" ] || [ -L "$link" ]; then
        if ! ours "$link"; then
            echo "[WARN] $link exists and is not ascendpatch's link; left alone (run" \
                 "$prefix/venv/bin/ascendpatch, or remove $link and run install.sh again)"
            return 0
        fi
    fi
    ln -sfn "$prefix/venv/bin/ascendpatch" "$link" || return 1
    echo "[OK] launcher $link -> $prefix/venv/bin/ascendpatch"
    case ":$PATH:" in
        *":$bin_dir:"*) ;;
        *) echo "[WARN] $bin_dir is not on PATH; add it (e.g. in ~/.bashrc):"
           echo "export PATH=\"$bin_dir:\$PATH\"" ;;
    esac
}

# install_completion: bash completion from the argparse parser (shtab, the [completion]
# extra); skipped with a note when shtab is not available (an offline wheelhouse without it).
install_completion() {
    [ "$completion" = 1 ] || return 0
    local py="$prefix/venv/bin/python" pip_src=(shtab)
    [ -n "$wheelhouse" ] && pip_src=(--no-index --find-links "$wheelhouse" shtab)
    if ! isolated "$py" -c 'import shtab' >/dev/null 2>&1 && \
       ! isolated "$py" -m pip install --quiet --disable-pip-version-check "${pip_src[@]}" >/dev/null 2>&1
    then
        echo "[SKIP] bash completion: shtab is not installable here (pip install shtab)"
        return 0
    fi
    mkdir -p "$(dirname "$completion_file")" || return 1
    isolated "$py" -m ascendpatch.shell.completion bash > "$completion_file.tmp" && \
        mv -f "$completion_file.tmp" "$completion_file" || return 1
    remember_file completion "$completion_file" || return 1
    echo "[OK] bash completion $completion_file (bash-completion loads it; or add to" \
         "~/.bashrc: source $completion_file)"
}

ap="$prefix/venv/bin/ascendpatch"
run_step "install ascendpatch" install_tool
run_step "launcher" link_launcher
run_step "completion" install_completion
if [ -n "$sandbox" ]; then
    run_step "sandbox" "$ap" sandbox "$sandbox" --vllm-ascend "$vllm_ascend" \
        ${wheelhouse:+--wheelhouse "$wheelhouse"}
    target_python="$sandbox/bin/python"
fi
target_args=()
[ -n "$target_python" ] && target_args=(--python "$target_python")
common=("${target_args[@]}" --manifest "$manifest")

run_step "install" "$ap" "${common[@]}" install "${source_args[@]}"
run_step "apply" "$ap" "${common[@]}" apply "${with_args[@]}"
run_step "verify" "$ap" "${common[@]}" verify "${with_args[@]}"
# remember the target in the user's config, so that later commands need no --python; a config
# that names something else is left alone ([WARN] with the lines to put in it)
next=("${common[@]}")
if [ -n "$target_python" ]; then
    existed=0; [ -e "$config_file" ] && existed=1
    if isolated "$prefix/venv/bin/python" -m ascendpatch.shell.remember --python "$target_python" \
            --manifest "$manifest"; then
        next=()
        [ "$existed" = 1 ] || remember_file config "$config_file"
    fi
fi
echo "next: ascendpatch ${next[*]:+${next[*]} }status"
echo "=== Installation complete ==="
