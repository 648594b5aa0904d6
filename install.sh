#!/usr/bin/env bash
# ascendpatch bootstrap: install the tool into a venv of its own (never into the target
# environment, never touching the image's torch / torch_npu), then apply the catalog to the
# target interpreter. Idempotent: a re-run changes nothing and prints the same [OK] lines.
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: bash install.sh [--python PATH] [--manifest NAME|PATH] [--prefix DIR] [-h|--help]

  --python PATH      target interpreter (default: $ASCENDPATCH_PYTHON, then the candidates
                     ascendpatch documents, e.g. /usr/local/python3.12.13/bin/python3)
  --manifest NAME    bundled manifest name or YAML path (default: the catalog, "default")
  --prefix DIR       where ascendpatch's own venv lives (default: $ASCENDPATCH_PREFIX or
                     ~/.local/share/ascendpatch)
  -h, --help         this help

Environment:
  ASCENDPATCH_PYTHON   target interpreter when --python is not given
  ASCENDPATCH_PREFIX   default for --prefix
  ASCENDPATCH_TOOL_PYTHON  the Python (>= 3.10) that runs ascendpatch itself (default: python3)
USAGE
}

die() { echo "[FAIL] install.sh: $*" >&2; exit 1; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prefix="${ASCENDPATCH_PREFIX:-$HOME/.local/share/ascendpatch}"
tool_python="${ASCENDPATCH_TOOL_PYTHON:-python3}"
target_args=()
manifest_args=()

while [ $# -gt 0 ]; do
    case "$1" in
        --python) [ $# -ge 2 ] || die "--python needs a path"; target_args=(--python "$2"); shift 2 ;;
        --manifest) [ $# -ge 2 ] || die "--manifest needs a value"; manifest_args=(--manifest "$2"); shift 2 ;;
        --prefix) [ $# -ge 2 ] || die "--prefix needs a folder"; prefix="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; echo "[FAIL] install.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

step() { echo "--- $*"; }

step "install ascendpatch into $prefix/venv"
if [ ! -x "$prefix/venv/bin/python" ]; then
    "$tool_python" -m venv "$prefix/venv" || die "step 'venv': cannot create $prefix/venv"
fi
"$prefix/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$here" \
    || die "step 'install tool': pip could not install ascendpatch from $here"
echo "[OK] ascendpatch $("$prefix/venv/bin/ascendpatch" --version | cut -d' ' -f2) in $prefix/venv"

step "apply"
"$prefix/venv/bin/ascendpatch" "${target_args[@]}" "${manifest_args[@]}" apply \
    || die "step 'apply' failed (see the [FAIL] lines above)"

echo "=== Installation complete ==="
