#!/bin/sh
# `cmake --install` gives a relocatable install: installed, then moved to another folder, and used
# from a third one, the binary compiles and benches (finding the peers' script next to itself),
# the Python package imports and loads an artifact, and a C++ program builds against the installed
# headers and libraries (find_package(korch)) and runs the artifact. Nothing installed names the
# install prefix or the source tree.
#   relocatable.sh BUILD_DIR SOURCE_DIR PYTHON
set -eu
build="$1" src="$2" py="$3"
tmp=$(mktemp -d /tmp/korch-install-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/first" >/dev/null
mv "$tmp/first" "$tmp/moved"
p="$tmp/moved"
if grep -rIl -e "$tmp/first" -e "$src" "$p"; then
  echo "the files above name the install prefix or the source tree" >&2
  exit 1
fi
mkdir "$tmp/work" && cd "$tmp/work"
export KORCH_CACHE_DIR="$tmp/cache" KORCH_PROGRESS=0
"$p/bin/korch" compile builtin:tiny_convnet --cost analytic -o art -q >/dev/null
KORCH_PYTHON="$py" "$p/bin/korch" bench --artifact art --peers onnxruntime --runs 3 --rounds 1 --json bench.json >/dev/null
"$py" - "$p" <<'PY'
import json, sys
j = json.load(open("bench.json"))
assert j["peer_script"].startswith(sys.argv[1] + "/share/korch/"), j["peer_script"]
assert j["onnxruntime"]["median_ms"] > 0, j
PY
PYTHONPATH="$p/lib/korch/python" "$py" - "$p" <<'PY'
import sys
import korch
assert korch.__file__.startswith(sys.argv[1]), korch.__file__
exe = korch.load("art")
import numpy as np
out = exe.run({i.name: np.ones(i.shape, i.dtype) for i in exe.inputs})
assert all(np.isfinite(v).all() for v in out.values())
PY
cmake -S "$src/tests/install/consumer" -B consumer -G Ninja -DCMAKE_PREFIX_PATH="$p" \
  -DKORCH_EXAMPLE_SOURCE="$src/examples/run_artifact.cc" >/dev/null
cmake --build consumer >/dev/null
./consumer/run_artifact art >/dev/null
echo "relocatable install: binary, bench peers, Python package and a C++ consumer work from $p"
