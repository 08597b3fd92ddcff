#!/bin/sh
# pyproject.toml builds a wheel (scikit-build-core): built from the source tree, installed into a
# fresh virtual environment, `import korch` there compiles and runs a model and matches the
# reference interpreter, with nothing from the build folder on the path. Minutes (it builds the
# module and the stage libraries again, in build/wheel), so it is label extra_slow.
#   wheel.sh SOURCE_DIR PYTHON      (PYTHON: the project .venv's, which has scikit-build-core)
set -eu
src="$1" py="$2"
tmp=$(mktemp -d /tmp/korch-wheel-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip wheel "$src" --no-build-isolation --no-deps -q -w "$tmp/dist"
wheel=$(ls "$tmp"/dist/korch-*.whl)
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"  # numpy from Debian, as the README's .venv
"$tmp/venv/bin/pip" install -q --no-deps --no-index "$wheel"
mkdir "$tmp/work" && cd "$tmp/work"
KORCH_CACHE_DIR="$tmp/cache" KORCH_PROGRESS=0 PYTHONPATH= "$tmp/venv/bin/python" - "$tmp" <<'PY'
import sys
import numpy as np
import korch
assert korch.__file__.startswith(sys.argv[1] + "/venv/"), korch.__file__
exe = korch.compile("builtin:tiny_convnet", cost="analytic")
x = np.random.default_rng(0).standard_normal(exe.inputs[0].shape).astype(np.float32)
got = exe.run({exe.inputs[0].name: x})
want = korch.run_reference("builtin:tiny_convnet", {exe.inputs[0].name: x})
for name, w in want.items():
    assert np.abs(w).max() > 0, name  # a zero output would make the check vacuous
    err = np.linalg.norm(got[name] - w) / np.linalg.norm(w)
    assert err < 1e-4, (name, err)
print("wheel ok:", korch.__file__)
PY
