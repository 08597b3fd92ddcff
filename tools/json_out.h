// `--json` on inspect, compile, run and explain: one JSON document on stdout instead of the text.
// Keys are stable; times are seconds (floats, keys ending in _s), sizes are bytes (integers), and a
// fact that does not apply is null rather than missing. Errors stay the one `korch: error:` line
// on stderr with nothing on stdout.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "ir/tensor.h"

namespace korch::cli {

// {"name", "dtype" (the IR's names: f32, i64, ...), "shape": [dims]}.
nlohmann::json tensor_json(const std::string& name, const TensorType& type);

// The document, indented, and a newline on stdout.
void print_json(const nlohmann::json& j);

// While alive, whatever writes to file descriptor 1 (a solver's log, a stray print) lands on
// stderr, so the document printed after it is all that stdout carries.
class StdoutToStderr {
 public:
  StdoutToStderr();
  ~StdoutToStderr();
  StdoutToStderr(const StdoutToStderr&) = delete;
  StdoutToStderr& operator=(const StdoutToStderr&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace korch::cli
