#include "orchestrate/graph_index.h"

#include <algorithm>

namespace korch {

namespace {
void sort_unique(std::vector<NodeId>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}
}  // namespace

GraphIndex::GraphIndex(const Graph& g)
    : preds(g.nodes.size()), succs(g.nodes.size()), consumers(g.values.size()),
      is_output(g.values.size(), false) {
  for (ValueId v : g.outputs) is_output[static_cast<size_t>(v)] = true;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (ValueId v : g.nodes[i].inputs) {
      if (v == kNoValue) continue;
      consumers[static_cast<size_t>(v)].push_back(static_cast<NodeId>(i));
      const NodeId p = g.value(v).producer;
      if (p < 0) continue;
      preds[i].push_back(p);
      succs[static_cast<size_t>(p)].push_back(static_cast<NodeId>(i));
    }
  }
  for (auto& l : preds) sort_unique(l);
  for (auto& l : succs) sort_unique(l);
  for (auto& l : consumers) sort_unique(l);
}

}  // namespace korch
