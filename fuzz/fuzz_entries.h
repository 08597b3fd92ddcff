// Fuzz entry points: what each libFuzzer target (fuzz/*_fuzzer.cc) feeds its input to, and what
// the regression test (tests/fuzz/regressions_test.cc) replays every saved crash input through
// in the normal build. Malformed input must end in a korch::Error (or be accepted), never a crash,
// a hang or an abort; each function swallows korch::Error and lets anything else through.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace korch::fuzz {

// The bytes as a serialized ONNX ModelProto through the whole frontend (load_onnx_bytes: parse,
// control flow, conversion, shape inference with folding, simplification).
void onnx_loader(const uint8_t* data, size_t size);
// The bytes as the IR text form (parse_graph), then verify_graph on what parses.
void ir_text(const uint8_t* data, size_t size);
// The bytes as an artifact folder: split at the first two NUL bytes into manifest.json,
// program.json and weights.bin, written to a scratch folder, then Executable::load and, when it
// loads, one run on zero inputs.
void artifact_loader(const uint8_t* data, size_t size);

}  // namespace korch::fuzz
