#!/usr/bin/env bash
# The README's test command (and what .ci/run calls): build, then run every test through ctest:
# unit tests, the ONNX conformance suite, CLI error tests and the end-to-end model tests.
#   KORCH_TEST_LABEL_EXCLUDE=slow scripts/test.sh   skips the slow model tests
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
args=(--test-dir build --output-on-failure -j2)
# The heavy extra models (minutes of export each) stay out of the default run: ctest -L extra_slow.
args+=(-LE "${KORCH_TEST_LABEL_EXCLUDE:-extra_slow}")
ctest "${args[@]}"
