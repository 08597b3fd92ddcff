#!/usr/bin/env bash
# Idempotent install of everything Korch needs on a fresh Debian 12 machine.
# Called by both README commands and by .ci/run. Safe to run repeatedly: it only
# installs what is missing.
#
#   scripts/install_deps.sh            C++ build + test dependencies, Python peers
#   KORCH_SKIP_PY=1 scripts/install_deps.sh   C++ only
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

APT_PKGS=(
  build-essential cmake ninja-build pkg-config git
  libprotobuf-dev protobuf-compiler libonnx-dev
  libcli11-dev libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  coinor-libcbc-dev libglpk-dev libdnnl-dev libsqlite3-dev libboost-context-dev
  python3-venv python3-numpy python3-torch python3-torchvision unzip
  pybind11-dev python3-dev clang libclang-rt-14-dev graphviz chromium
)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[install] apt: ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[[ "${KORCH_SKIP_PY:-0}" == 1 ]] && exit 0

# Python side: a venv over Debian's torch (CPU, 1.13) for model export, plus the CPU peers
# (onnxruntime, openvino), onnx 1.22.0 (the last release that ships the backend node tests) and
# scikit-build-core (pip wheel . builds the Python API as a wheel: pyproject.toml).
VENV="${KORCH_VENV:-$here/.venv}"
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "[install] venv at $VENV"
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi
want_py() { "$VENV/bin/python" - "$@" <<'PY'
import sys, importlib.metadata as m
missing = []
for spec in sys.argv[1:]:
    name, _, ver = spec.partition("==")
    try:
        have = m.version(name)
        if ver and have != ver: missing.append(spec)
    except m.PackageNotFoundError:
        missing.append(spec)
print(" ".join(missing))
PY
}
need=$(want_py onnx==1.22.0 onnxruntime openvino pytest scikit-build-core)
if [[ -n "$need" ]]; then
  echo "[install] pip: $need"
  "$VENV/bin/pip" install -q $need
fi
# Exporter add-ons, installed --no-deps so they never pull a CUDA torch from PyPI.
# numpy<2 (+ ml_dtypes 0.5.4): Debian's torch 1.13 is built against numpy 1.x and
# the onnx/onnxruntime line above pulls numpy 2. transformers 4.46.3 insists on
# huggingface_hub<1.0 and tokenizers<0.21. pytest runs tests/e2e.
need=$(want_py transformers==4.46.3 timm==1.0.11 tokenizers==0.20.3 huggingface_hub==0.26.5 safetensors pixeltable-yolox wf-pytorch-yolo-v4 regex numpy==1.26.4 ml_dtypes==0.5.4 filelock fsspec tqdm pytest iniconfig pluggy)
if [[ -n "$need" ]]; then
  echo "[install] pip --no-deps: $need"
  "$VENV/bin/pip" install -q --no-deps $need
fi

# ONNX backend node tests (conformance data): unpacked from the onnx 1.22.0 wheel (1765 cases).
# Fallback when PyPI is unreachable: Debian's libonnx-testdata (onnx 1.12, 932 cases, no light/).
DATA="${KORCH_DATA:-$here/.data}"
if [[ ! -d "$DATA/onnx-node-tests/node" ]]; then
  echo "[install] onnx 1.22.0 backend node tests -> $DATA/onnx-node-tests"
  tmp=$(mktemp -d)
  mkdir -p "$DATA/onnx-node-tests"
  if "$VENV/bin/pip" download -q --no-deps --only-binary=:all: -d "$tmp" onnx==1.22.0; then
    unzip -q -o "$tmp"/onnx-1.22.0-*.whl 'onnx/backend/test/data/node/*' 'onnx/backend/test/data/light/*' -d "$tmp/x"
    rm -rf "$DATA/onnx-node-tests/node" "$DATA/onnx-node-tests/light"
    mv "$tmp/x/onnx/backend/test/data/node" "$tmp/x/onnx/backend/test/data/light" "$DATA/onnx-node-tests/"
  else
    echo "[install] PyPI unavailable: falling back to Debian's libonnx-testdata"
    SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libonnx-testdata >/dev/null
    cp -r /usr/share/libonnx-testdata/data/node "$DATA/onnx-node-tests/node"
    mkdir -p "$DATA/onnx-node-tests/light"
  fi
  rm -rf "$tmp"
fi
