// The reference interpreter: Korch's correctness oracle.
//
// Runs a Graph node by node in topological order with each op's reference implementation
// (OpDef::eval). Plain and deterministic; intermediate tensors are released after their last use.
#pragma once

#include <functional>
#include <vector>

#include "ir/graph.h"

namespace korch {

struct InterpreterOptions {
  // Called after each node with its index and outputs (for dumps and debugging); may be empty.
  std::function<void(NodeId, const std::vector<Tensor>&)> on_node;
};

// `inputs` follow g.inputs order. Throws korch::Error when an input's dtype/shape does not match
// the graph (naming the input) or when a node fails (naming the node).
std::vector<Tensor> interpret(const Graph& g, const std::vector<Tensor>& inputs,
                              const InterpreterOptions& options = {});

// Checks one input tensor against the graph input `index`; throws with a message naming it.
void check_input(const Graph& g, size_t index, const Tensor& t);

}  // namespace korch
