#!/usr/bin/env bash
# Prints the path of a Python with the pinned torch, transformers, safetensors and accelerate
# (scripts/python-requirements.txt), making it first when it is not there: a venv in a cache folder
# outside the clone, keyed by the requirements' hash, so that a clone, a CI run and the next
# version of the file each find theirs. The first run downloads about 5.6 GB (torch's CUDA build
# with its nvidia-* wheels) and takes 5-10 minutes; later runs reuse it in a second.
#
#   TP_PYTHON_CACHE   where the environments go (default ${XDG_CACHE_HOME:-~/.cache}/tpstudio)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
req="$here/python-requirements.txt"
# Debian's Python (install-deps installs it with python3-venv), not whichever python3 comes first on
# PATH (pyenv, conda): torch's wheels need a version they are built for, and a venv is tied to the
# interpreter that made it, so the interpreter's version is part of the key.
base=/usr/bin/python3
[ -x "$base" ] || { echo "python-env: $base is missing: bash scripts/install-deps.sh installs it" >&2; exit 1; }
hash="$( (cat "$req"; "$base" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)"
root="${TP_PYTHON_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tpstudio}"
env="$root/python-$hash"
fail() {
  echo "python-env: $1 (TP_SKIP_TRANSFORMERS=1 bash scripts/test.sh runs the other checks without it)" >&2
  exit 1
}
if [ ! -f "$env/.complete" ]; then
  # Python cannot run from a folder whose name is not UTF-8: say so before downloading anything.
  printf '%s' "$env" | iconv -f UTF-8 -t UTF-8 >/dev/null 2>&1 \
    || fail "the cache folder $(printf '%q' "$root") is not a UTF-8 name, which a Python venv needs; set TP_PYTHON_CACHE"
  mkdir -p "$root" 2>/dev/null && [ -w "$root" ] \
    || fail "cannot make or write the cache folder $root; set TP_PYTHON_CACHE to a writable one"
  # A half-made environment (an interrupted download) is made again from nothing.
  rm -rf "$env"
  echo "python-env: making $env from $(basename "$req") (about 5.6 GB the first time)" >&2
  "$base" -m venv "$env" >&2 || fail "$base -m venv $env failed (on Debian it needs python3-venv)"
  "$env/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$req" >&2 \
    || fail "pip could not install $req into $env"
  "$env/bin/python" -c "import torch, transformers, safetensors, accelerate" >&2 || fail "$env does not import its packages"
  cp "$req" "$env/.complete"
fi
echo "$env/bin/python"
