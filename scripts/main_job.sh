#!/usr/bin/env bash
# The README's main job: build, then load the built-in default models, run them and print what
# Korch knows about them (`korch demo`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec build/korch demo "$@"
