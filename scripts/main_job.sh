#!/usr/bin/env bash
# The README's main job: build, then load the built-in default models, run them and print what
# Korch knows about them (`korch demo`), cross-check the results with onnxruntime, and choose the
# kernels for each (`korch compile --cost analytic`, then `korch explain`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build/korch demo --out build/demo "$@"
echo "=== cross-check with onnxruntime (same seeded inputs) ==="
for m in build/demo/*.onnx; do
  echo "--- $(basename "$m")"
  .venv/bin/python scripts/compare_with_ort.py "$m" --korch build/korch
done
echo "=== kernel orchestration (analytic costs, this CPU's spec) ==="
for m in build/demo/*.onnx; do
  name="$(basename "$m" .onnx)"
  build/korch compile "$m" --device cpu --cost analytic -o "build/demo/$name.artifact"
  build/korch explain "build/demo/$name.artifact" --top 8
done
