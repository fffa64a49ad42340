#!/usr/bin/env bash
# The checks .ci/run adds after `make test`, in one clang build with AddressSanitizer, UndefinedBehaviorSanitizer
# and libFuzzer's coverage instrumentation (CPU code, CUDA off, -O1), which serves both:
#   scripts/ci-extra.sh sanitize   configure and build $SAN_BUILD (tests and fuzzers), then ctest -L cpu -LE slow
#   scripts/ci-extra.sh fuzz       build $SAN_BUILD's fuzzers if needed, then each harness of tests/fuzz for FUZZ_SECONDS
#   scripts/ci-extra.sh all        both
# Settings (environment): SAN_BUILD (build-san), FUZZ_SECONDS (20), JOBS (nproc).
# Exits non-zero on any failure. A fuzzer's crash input is kept in $SAN_BUILD/fuzz-artifacts/<harness>/;
# keep it as a seed in tests/fuzz/<harness>/ (named bad_* when it must be refused), which
# tests/test_fuzz_corpus.cpp replays in the regular build.
set -euo pipefail
cd "$(dirname "$0")/.."

SAN_BUILD=${SAN_BUILD:-build-san}
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
JOBS=${JOBS:-$(nproc)}

if command -v llvm-symbolizer >/dev/null; then export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer)}; fi
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# One configure for both passes. clang: libFuzzer exists only there; -O1 (DETAUDIT_SANITIZE_OPT) and
# line tables only, for compile time.
configure() {
  command -v clang++ >/dev/null || { echo "ci-extra: clang++ not found (scripts/setup-debian.sh installs clang)" >&2; return 2; }
  echo "ci-extra: configure $SAN_BUILD (clang, -DDETAUDIT_FUZZ=ON: fuzzer-no-link,address,undefined at -O1)"
  cmake -S . -B "$SAN_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang \
        -DCMAKE_CXX_COMPILER=clang++ -DDETAUDIT_WITH_CUDA=OFF -DDETAUDIT_BUILD_BENCH=OFF -DDETAUDIT_FUZZ=ON
}

sanitize() {
  # For every instrumented process, the worker processes the tests start included. A finding ends the
  # process with a report (-fno-sanitize-recover=all in the build), so its test fails.
  # handle_segv=0: the fault tests make workers die by SIGSEGV on purpose (a null store, raise(SIGSEGV))
  # and check that the parent records the signal; ASan's SEGV handler would turn it into exit code 1. The
  # build leaves out UBSan's null check for the same reason; a real null dereference still crashes.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-handle_segv=0:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}
  configure
  # What the pass runs: the tool, the CPU tests and the fuzzers (not the GPU tests, which it does not run).
  cmake --build "$SAN_BUILD" -j "$JOBS" --target detaudit detaudit_tests fuzzers
  ctest --test-dir "$SAN_BUILD" -L cpu -LE slow --output-on-failure -j "$JOBS"
}

fuzz() {
  [ -f "$SAN_BUILD/CMakeCache.txt" ] || configure
  cmake --build "$SAN_BUILD" -j "$JOBS" --target fuzzers
  local failed=0
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  for src in tests/fuzz/fuzz_*.cpp; do
    local name=${src##*/fuzz_}
    name=${name%.cpp}
    local exe="$SAN_BUILD/fuzz/fuzz_$name" seeds="tests/fuzz/$name" art="$SAN_BUILD/fuzz-artifacts/$name"
    # New corpus entries go to a scratch copy; the checked-in seeds stay as they are.
    rm -rf "$art"
    mkdir -p "$scratch/$name" "$art"
    cp "$seeds"/* "$scratch/$name/"
    local rc=0
    TMPDIR="$scratch" "$exe" -max_total_time="$FUZZ_SECONDS" -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$art/" "$scratch/$name" >"$scratch/$name.log" 2>&1 || rc=$?
    local runs
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/$name.log")
    if [ "$rc" -eq 0 ]; then
      echo "ci-extra: fuzz: $name: ok, ${runs:-?} inputs in ${FUZZ_SECONDS} s, $(ls "$scratch/$name" | wc -l) in corpus"
    else
      failed=1
      # From the first report (an invariant, a sanitizer, an uncaught exception, libFuzzer) on.
      local at
      at=$(grep -n -m1 -E 'fuzz invariant violated|runtime error|==[0-9]+==ERROR|ERROR: libFuzzer|terminate called' \
             "$scratch/$name.log" | cut -d: -f1)
      echo "ci-extra: fuzz: $name: FAILED (exit $rc); its report:"
      if [ -n "$at" ]; then tail -n "+$at" "$scratch/$name.log" | head -n 60; else tail -n 40 "$scratch/$name.log"; fi
      for f in "$art"/*; do
        [ -f "$f" ] || continue
        echo "ci-extra: fuzz: $name: input kept in $f ($(stat -c %s "$f") bytes), first bytes:"
        od -A d -c "$f" | head -n 8
      done
    fi
  done
  return "$failed"
}

case "${1:-}" in
  sanitize) sanitize ;;
  fuzz) fuzz ;;
  all) rc=0; sanitize || rc=1; fuzz || rc=1; exit "$rc" ;;
  *) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
