#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 60)
# Prints executions and crashes per target; crash inputs land in fuzz-out/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target fuzz_safetensors_header fuzz_config fuzz_plan fuzz_hardware fuzz_run_record
status=0
for t in fuzz_safetensors_header fuzz_config fuzz_plan fuzz_hardware fuzz_run_record; do
  corpus=tests/fuzz/corpus/${t#fuzz_}
  [ "$t" = fuzz_safetensors_header ] && corpus=tests/fuzz/corpus/safetensors
  out=fuzz-out/$t; mkdir -p "$out/corpus"
  log=$out/log.txt
  if ./build/fuzz/tests/fuzz/$t -max_total_time="$secs" -artifact_prefix="$out/" -max_len=65536 \
       "$out/corpus" "$corpus" >"$log" 2>&1; then res=ok; else res=CRASH; status=1; fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  [ -z "$execs" ] && execs=$(grep -oE '#[0-9]+' "$log" | tail -1 | tr -d '#')
  printf '%-28s %-6s executions=%s seconds=%s\n' "$t" "$res" "${execs:-?}" "$secs"
done
exit $status
