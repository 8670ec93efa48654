#!/usr/bin/env bash
# Writes tpstudio-cli.1 from the program's own --help (help2man), with every verb's help as a section.
#   make-manpage.sh TPSTUDIO_CLI OUTPUT
set -euo pipefail
cli="$1"
out="$2"
include="$(mktemp)"
trap 'rm -f "$include"' EXIT
{
  echo "[COMMANDS]"
  for verb in "inspect" "catalog" "plan show" "plan validate" "plan preview" "plan search" "plan export" "run" "report" \
              "devices" "bench load" "bench plan" "bench comm" "bench gemm"; do
    echo ".SS $verb"
    echo ".nf"
    # shellcheck disable=SC2086
    "$cli" $verb --help | sed -e 's/\\/\\\\/g' -e 's/^\./\\\&./'
    echo ".fi"
  done
  echo "[SEE ALSO]"
  echo "tpstudio(1): the graphical plan editor. docs/metrics.md in the source tree documents every figure."
} > "$include"
help2man --no-info --no-discard-stderr --name "plan and profile tensor parallelism for Transformer language models" \
  --include "$include" --output "$out" "$cli"
