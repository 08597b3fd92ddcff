#include "orchestrate/kernel_cost.h"

#include <fmt/format.h>

#include "ir/primitive.h"

namespace korch {

CostTable fill_cost_table(const Graph& g, const std::vector<KernelCandidate>& candidates,
                          CostProvider& provider) {
  CostTable table;
  table.costs.reserve(candidates.size());
  for (const KernelCandidate& c : candidates) table.costs.push_back(provider.cost(g, c));
  return table;
}

std::string unfusable_reason(const Graph& g, const KernelCandidate& c) {
  if (c.nodes.size() == 1) return "";
  NodeId linear = -1;
  for (NodeId id : c.nodes) {
    const Node& n = g.nodes[static_cast<size_t>(id)];
    const PrimitiveKind k = primitive_kind(g, n);
    if (k == PrimitiveKind::kOpaque || k == PrimitiveKind::kOperator)
      return fmt::format("{} is opaque: it runs as a kernel of its own", n.op_type);
    if (k == PrimitiveKind::kLinear) {
      if (linear >= 0) return "two linear primitives: a library call computes one";
      linear = id;
    }
  }
  if (linear < 0) return "";
  // A linear kernel is a library call plus an epilogue: every other primitive must consume a value
  // computed inside the kernel (so it runs after the linear one) and be elementwise or broadcast.
  std::vector<bool> inside(g.values.size(), false);
  for (NodeId id : c.nodes)
    for (ValueId v : g.nodes[static_cast<size_t>(id)].outputs)
      if (v != kNoValue) inside[static_cast<size_t>(v)] = true;
  for (NodeId id : c.nodes) {
    if (id == linear) continue;
    const Node& n = g.nodes[static_cast<size_t>(id)];
    bool fed_inside = false;
    for (ValueId v : n.inputs) fed_inside |= v != kNoValue && inside[static_cast<size_t>(v)];
    if (!fed_inside || id < linear)
      return fmt::format("{} before {}: linear kernels fuse epilogues only", n.op_type,
                         g.nodes[static_cast<size_t>(linear)].op_type);
    const PrimitiveKind k = primitive_kind(g, n);
    if (k != PrimitiveKind::kElementwise && k != PrimitiveKind::kBroadcast)
      return fmt::format("{} ({}) after {}: linear epilogues are elementwise", n.op_type,
                         primitive_kind_name(k), g.nodes[static_cast<size_t>(linear)].op_type);
  }
  return "";
}

}  // namespace korch
