#include "ir/text_format.h"

namespace korch {

std::string print_graph(const Graph& g, const PrintOptions& options) {
  fail_unsupported("print_graph: not implemented yet");
}

}  // namespace korch
