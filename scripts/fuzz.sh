#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/: the ONNX loader, the IR text parser, the artifact loader)
# with clang and AddressSanitizer in build-fuzz/, and runs each for SECONDS (default 20). Seeds come
# from the normal build (build/korch: the built-in models as ONNX, their IR text, a compiled
# artifact) and tests/fuzz/regressions/<target>/ (every crash found so far, also replayed by the
# normal build's FuzzRegressions test). A crash leaves its input in build-fuzz/crashes/ and makes
# this script fail: add that file to tests/fuzz/regressions/<target>/ with the fix.
#   scripts/fuzz.sh [SECONDS]
#   scripts/fuzz.sh --ci     what the test command runs: a fixed seed and a fixed number of inputs
#                            per target (about 10 s each here), so a CI run is reproducible and a
#                            new finding shows up locally first
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-20}"
declare -A ci_runs=([onnx_loader]=50000 [ir_text]=50000 [artifact_loader]=5000)
targets=(onnx_loader ir_text artifact_loader)
# -O0 and ASan alone (no UBSan): CI builds this from scratch every time; it takes 116 s of CPU here,
# against about 330 s at -O1 with UBSan (measured while other builds ran).
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O0 -DKORCH_FUZZ=ON \
  -DKORCH_BUILD_TESTS=OFF -DKORCH_PYTHON_API=OFF -DKORCH_NATIVE=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/#/korch_fuzz_}"

seeds=build-fuzz/seeds
rm -rf "$seeds" && mkdir -p "$seeds"/{onnx_loader,ir_text,artifact_loader}
if [[ -x build/korch ]]; then
  export KORCH_CACHE_DIR="$PWD/build-fuzz/cache" KORCH_PROGRESS=0
  build/korch demo --out "$seeds/onnx_loader" >/dev/null
  for m in "$seeds"/onnx_loader/*.onnx; do
    build/korch inspect "$m" --ir >"$seeds/ir_text/$(basename "$m" .onnx).txt" 2>/dev/null || true
    art="build-fuzz/art-$(basename "$m" .onnx)"
    build/korch compile "$m" --cost analytic -o "$art" -q --force >/dev/null
    { cat "$art/manifest.json"; printf '\0'; cat "$art/program.json"; printf '\0'; cat "$art/weights.bin"; } \
      >"$seeds/artifact_loader/$(basename "$m" .onnx).bin"
  done
fi

mkdir -p build-fuzz/crashes
status=0
for t in "${targets[@]}"; do
  corpus="build-fuzz/corpus/$t"
  mkdir -p "$corpus"
  dirs=("$corpus" "$seeds/$t")
  [[ -d "tests/fuzz/regressions/$t" ]] && dirs+=("tests/fuzz/regressions/$t")
  if [[ "$secs" == --ci ]]; then
    budget=(-seed=1 -runs="${ci_runs[$t]}")
    echo "=== fuzz $t: ${ci_runs[$t]} inputs, seed 1 ==="
  else
    budget=(-max_total_time="$secs")
    echo "=== fuzz $t for ${secs} s ==="
  fi
  # Each input may take 10 s and 2 GB at most (a slower or bigger one is a finding too).
  if ! ASAN_OPTIONS=detect_leaks=0 "build-fuzz/fuzz/korch_fuzz_$t" "${budget[@]}" -timeout=10 \
      -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 -artifact_prefix="build-fuzz/crashes/$t-" \
      "${dirs[@]}" 2>"build-fuzz/$t.log"; then
    status=1
    tail -40 "build-fuzz/$t.log"
    echo "fuzz $t: FAILED (input saved under build-fuzz/crashes/)"
  else
    grep -E "stat::number_of_executed_units|stat::new_units_added" "build-fuzz/$t.log" | tr '\n' ' '
    echo
  fi
done
exit $status
