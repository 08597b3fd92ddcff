// Node-level adjacency of a graph, built once and shared by the orchestration passes.
//
// Edges go producer node -> consumer node through values; graph inputs and constants make no
// edges (every kernel may read them). Node ids are topological indices (graph nodes are sorted),
// so every edge goes from a smaller to a larger id, which the passes use to bound searches.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace korch {

struct GraphIndex {
  std::vector<std::vector<NodeId>> preds, succs;        // distinct, ascending
  std::vector<std::vector<NodeId>> consumers;           // per value: consuming nodes (distinct)
  std::vector<bool> is_output;                          // per value: a graph output
  explicit GraphIndex(const Graph& g);
  int num_nodes() const { return static_cast<int>(preds.size()); }
};

}  // namespace korch
