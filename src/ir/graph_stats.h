// Static cost metadata of an operator graph: FLOPs and bytes per node, totals and op histogram.
// Used by `korch inspect` and by the analytic cost model (node_stats).
#pragma once

#include <map>
#include <string>

#include "ir/graph.h"

namespace korch {

// Per node: bytes of every input and output, and FLOPs by primitive kind — linear: 2 x MACs;
// elementwise: one per output element; reduce: one per input element; layout and broadcast: 0
// (data movement). Operators not yet split into primitives get a rough bound.
struct NodeStats {
  double flops = 0;          // multiply-adds count as 2
  double bytes_read = 0;     // all inputs, constants included
  double bytes_written = 0;  // all outputs
};

NodeStats node_stats(const Graph& g, const Node& n);

struct GraphStats {
  std::map<std::string, int> op_histogram;
  double flops = 0, bytes_read = 0, bytes_written = 0;
  int64_t parameters = 0;
  double parameter_bytes = 0;
};

GraphStats graph_stats(const Graph& g);

}  // namespace korch
