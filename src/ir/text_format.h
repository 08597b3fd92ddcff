// The IR text form: a printer and a parser that round-trip (parse(print(g)) == g), so tests and
// bug reports are short. See text_printer.cc for the grammar.
#pragma once

#include <string>

#include "ir/graph.h"

namespace korch {

struct PrintOptions {
  // Constants with more elements than this print as `<elided N values>` (not parseable).
  // -1 prints every value (round-trip).
  int64_t max_constant_elements = -1;
};

std::string print_graph(const Graph& g, const PrintOptions& options = {});
// Throws korch::Error (kInvalid) with line:column on malformed text.
Graph parse_graph(const std::string& text);

}  // namespace korch
