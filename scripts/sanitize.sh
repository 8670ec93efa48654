#!/usr/bin/env bash
# The sanitizer subset CI can afford: the engine suites (parsers, plans, sharded graph, the engine and
# its communicators) under AddressSanitizer + UBSan, and the engine suite under ThreadSanitizer.
# The full suite under ASan: cmake --preset asan && cmake --build --preset asan && ctest --preset asan
set -euo pipefail
cd "$(dirname "$0")/.."
suites="tst_status tst_config tst_safetensors tst_plan tst_shard tst_backend_ops tst_engine"
cmake --preset asan > /dev/null
cmake --build --preset asan --target $suites
ctest --preset asan -R "^($(tr ' ' '|' <<< "$suites"))\$"
cmake --preset tsan > /dev/null
cmake --build --preset tsan
ctest --preset tsan
