#!/usr/bin/env bash
# Installs dependencies (idempotent) and builds Korch into build/ (the CLI lands at build/korch).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
# The Python API (python/, README): build/python on the project .venv's path, so `import korch` works there.
venv="${KORCH_VENV:-$PWD/.venv}"
if [[ -x "$venv/bin/python" && -f build/python/korch/__init__.py ]]; then
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$PWD/build/python" >"$site/korch.pth"
fi
