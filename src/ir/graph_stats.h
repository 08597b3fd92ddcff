// Static cost metadata of an operator graph: FLOPs and bytes per node, totals and op histogram.
// Used by `korch inspect` now and by the analytic cost model later.
#pragma once

#include <map>
#include <string>

#include "ir/graph.h"

namespace korch {

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
