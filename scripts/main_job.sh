#!/usr/bin/env bash
# The README's main job: build, then for the built-in default models
#   1. load, run in the reference interpreter and print what Korch knows (`korch demo`), and
#      cross-check the reference with onnxruntime;
#   2. compile for this CPU with measured kernel costs (`korch compile`: every candidate kernel is
#      generated, checked against the reference and timed; results kept in the tuning database),
#      explain the plan;
#   3. run the artifact in a fresh process and check it against the reference interpreter;
#   4. time it next to onnxruntime, OpenVINO and Korch's unfused plan (`korch bench`);
#   5. compile it for CUDA (analytic H200 costs, NVRTC PTX for sm_90, every kernel checked on the
#      host emulator) and run the CUDA artifact on the emulator against the reference (no GPU here);
# then the same on a real architecture, torchvision's ResNet-18 (seeded random weights, exported by
# scripts/export_models.py into .cache/models): compile with measured costs, explain, check the
# artifact against the reference, bench it against onnxruntime and OpenVINO, and the same model
# through the Python API (examples/python_api.py, checked against onnxruntime).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build/korch demo --out build/demo "$@"
echo "=== cross-check the reference interpreter with onnxruntime (same seeded inputs) ==="
for m in build/demo/*.onnx; do
  echo "--- $(basename "$m")"
  .venv/bin/python scripts/compare_with_ort.py "$m" --korch build/korch
done
for m in build/demo/*.onnx; do
  name="$(basename "$m" .onnx)"
  art="build/demo/$name.artifact"
  echo "=== $name: compile for this CPU with measured costs ==="
  build/korch compile "$m" --device cpu -o "$art"
  build/korch explain "$art" --top 6
  echo "=== $name: run the artifact in a fresh process, check it against the reference ==="
  rm -rf "build/demo/$name.out" "build/demo/$name.ref"
  build/korch run --artifact "$art" --random-inputs 7 --outputs "build/demo/$name.out"
  build/korch run "$m" --backend reference --inputs "build/demo/$name.out" --outputs "build/demo/$name.ref" >/dev/null
  .venv/bin/python scripts/compare_outputs.py "build/demo/$name.out" "build/demo/$name.ref" --tol 1e-4
  echo "=== $name: bench ==="
  build/korch bench --artifact "$art" --runs 50 --rounds 3
done
for m in build/demo/*.onnx; do
  name="$(basename "$m" .onnx)"
  art="build/demo/$name.cuda"
  echo "=== $name: compile for CUDA, run the artifact on the host emulator, check it against the reference ==="
  build/korch compile "$m" --device cuda -o "$art"
  rm -rf "build/demo/$name.cuda.out" "build/demo/$name.cuda.ref"
  build/korch run --artifact "$art" --emulate --random-inputs 7 --outputs "build/demo/$name.cuda.out"
  build/korch run "$m" --backend reference --inputs "build/demo/$name.cuda.out" --outputs "build/demo/$name.cuda.ref" >/dev/null
  .venv/bin/python scripts/compare_outputs.py "build/demo/$name.cuda.out" "build/demo/$name.cuda.ref" --tol 1e-4
done

echo "=== a real model: torchvision resnet18 (seeded random weights) ==="
.venv/bin/python scripts/export_models.py resnet18
m=.cache/models/resnet18.onnx
art=build/demo/resnet18.artifact
build/korch compile "$m" --device cpu -o "$art"
build/korch explain "$art" --top 6
rm -rf build/demo/resnet18.out build/demo/resnet18.ref
build/korch run --artifact "$art" --random-inputs 7 --outputs build/demo/resnet18.out
build/korch run "$m" --backend reference --inputs build/demo/resnet18.out --outputs build/demo/resnet18.ref >/dev/null
.venv/bin/python scripts/compare_outputs.py build/demo/resnet18.out build/demo/resnet18.ref --tol 1e-4
build/korch bench --artifact "$art" --runs 30 --rounds 3
echo "=== resnet18 through the Python API ==="
.venv/bin/python examples/python_api.py "$m" --out build/demo/resnet18.py-artifact
