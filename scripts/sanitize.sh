#!/usr/bin/env bash
# The sanitizer subset CI can afford: the engine suites (parsers, plans, sharded graph, the engine and
# its communicators) under AddressSanitizer + UBSan, and the engine suite under ThreadSanitizer, with
# TP_TEST_REDUCED=1: every kind of case, the slowest smaller (the local all-reduce without its 8 MiB
# buffers, the allocation check over 2 iterations of 2 steps, the ops on T = 1, 8 shapes and the odd ones).
# The full suite under ASan: cmake --preset asan && cmake --build --preset asan && ctest --preset asan
set -euo pipefail
export TP_TEST_REDUCED=1
cd "$(dirname "$0")/.."
. scripts/stage.sh
suites="tst_status tst_config tst_safetensors tst_plan tst_shard tst_backend_ops tst_engine"
cmake --preset asan > /dev/null
stage "asan build (engine suites)" cmake --build --preset asan --target $suites
stage "asan+ubsan tests" ctest --preset asan -R "^($(tr ' ' '|' <<< "$suites"))\$"
cmake --preset tsan > /dev/null
stage "tsan build" cmake --build --preset tsan
stage "tsan tests" ctest --preset tsan
