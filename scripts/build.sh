#!/usr/bin/env bash
# Installs dependencies (idempotent) and builds Korch into build/ (the CLI lands at build/korch).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
