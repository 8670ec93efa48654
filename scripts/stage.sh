# Sourced by .ci/run, scripts/test.sh and scripts/sanitize.sh. `stage NAME COMMAND...` runs COMMAND,
# says on stderr how long it took and, when TP_STAGE_TIMES names a file, appends
# "NAME<TAB>seconds<TAB>exit status" to it (.ci/run prints those as its timing table).
stage() {
  local name=$1 t0 rc=0 dt
  shift
  t0=$(date +%s)
  "$@" || rc=$?
  dt=$(( $(date +%s) - t0 ))
  echo "stage: $name: $dt s$([ "$rc" = 0 ] || echo ", exit $rc")" >&2
  if [ -n "${TP_STAGE_TIMES:-}" ]; then printf '%s\t%s\t%s\n' "$name" "$dt" "$rc" >> "$TP_STAGE_TIMES"; fi
  return "$rc"
}
