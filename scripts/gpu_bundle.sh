#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh runs on a lent GPU machine (x86-64, no package registries, its
# own system libraries): the korch binary and the test binaries with CUDA cases, stripped, with the
# shared libraries they load beyond the C/C++ runtime (oneDNN, CBC, protobuf, ...), into
# .gpu_bundle/bundle.tar.xz (git-ignored; the device tool carries it: carry [".gpu_bundle"]).
#   scripts/build.sh && scripts/gpu_bundle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
bins=("$B/korch" "$B/tests/korch_codegen_tests" "$B/tests/korch_pipeline_tests" "$B/tests/korch_runtime_tests")
for b in "${bins[@]}"; do [ -x "$b" ] || { echo "gpu_bundle: $b is missing: build first (scripts/build.sh)" >&2; exit 2; }; done
stage=.gpu_bundle/stage
rm -rf .gpu_bundle && mkdir -p "$stage/bin" "$stage/lib"
cp "${bins[@]}" "$stage/bin/"
strip "$stage"/bin/*
# libc, libm, libdl, librt, libpthread and the loader come from the machine itself.
ldd "${bins[@]}" | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libpthread|libdl|librt)\.so|/ld-linux' | xargs -I{} cp -L {} "$stage/lib/"
tar -C "$stage" -cJf .gpu_bundle/bundle.tar.xz bin lib
rm -rf "$stage"
du -h .gpu_bundle/bundle.tar.xz
