// The IR text form: a printer and a parser that round-trip, so tests and bug reports are short.
// The grammar, with a worked example, is at the top of text_printer.cc. In brief:
//
//   graph tiny (opset 17) {
//     input x: f32[1,3,8,8]
//     const w: f32[4,3,1,1] = [0.1, -0.2, ...]
//     %y: f32[1,4,8,8] = Conv(x, w, _) {pads=[0, 0, 0, 0], alpha=0.5} name="conv0"
//     output y
//   }
//
// Round trip: parse_graph(print_graph(g)) has g's name, opset, inputs, outputs, nodes (op, name,
// domain, attributes, inputs, outputs) and values (names, types, constants bit for bit, every
// dtype, NaN payloads included), and printing it again yields the same text. Value ids may differ:
// the parser numbers values in declaration order (inputs, constants, node outputs). Values that
// are neither inputs, constants nor node outputs are not printed.
#pragma once

#include <string>

#include "ir/graph.h"

namespace korch {

struct PrintOptions {
  // Constants (and tensor attributes) with more elements than this print as
  // `<elided N values>`, which parse_graph rejects. -1 prints every value (round-trip).
  int64_t max_constant_elements = -1;
};

// Never throws for a well-formed graph. Values whose name is empty or repeats an earlier value's
// print as "<name>#<id>" so that the text stays parseable.
std::string print_graph(const Graph& g, const PrintOptions& options = {});

// Builds the graph with Graph::add_input/add_constant/add_value/add_node; the node output types
// are the ones written in the text (no shape inference, no op registry lookup). Values must be
// defined before they are used, so the node order is topological.
// Throws korch::Error (kInvalid) "line L:C: expected X, got Y" (or a similar message with the
// position) on malformed text: unknown dtype, undefined or duplicate value, wrong value count,
// out-of-range number, truncated text, ...
Graph parse_graph(const std::string& text);

}  // namespace korch
