#include "orchestrate/kernel_cost.h"

#include <algorithm>

#include <fmt/format.h>

#include "ir/primitive.h"

namespace korch {

CostTable fill_cost_table(const Graph& g, const std::vector<KernelCandidate>& candidates,
                          CostProvider& provider) {
  CostTable table;
  table.costs.reserve(candidates.size());
  provider.prepare(g, candidates);
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
  // A linear kernel is a library call plus an epilogue: every other primitive must run after the
  // linear one (consume a value computed inside the kernel) and be elementwise or broadcast. The
  // exception is an epilogue operand computed from constants alone (an Expand of
  // a bias): a library binary post-op reads such an operand broadcast.
  // Called for every set the enumeration grows, so no per-call table over the graph's values: a
  // value is inside when its producer is one of the kernel's (sorted) nodes.
  auto inside = [&](ValueId v) {
    const NodeId p = g.value(v).producer;
    return p >= 0 && std::binary_search(c.nodes.begin(), c.nodes.end(), p);
  };
  const std::string& lin = g.nodes[static_cast<size_t>(linear)].op_type;
  for (NodeId id : c.nodes) {
    if (id == linear) continue;
    const Node& n = g.nodes[static_cast<size_t>(id)];
    bool fed_inside = false, from_free_only = true;
    for (ValueId v : n.inputs) {
      if (v == kNoValue) continue;
      fed_inside |= inside(v);
      from_free_only &= g.value(v).is_constant();
    }
    for (ValueId out : n.outputs)  // an operand of the linear primitive itself is a prologue
      for (ValueId in : g.nodes[static_cast<size_t>(linear)].inputs) from_free_only &= out != in;
    const PrimitiveKind k = primitive_kind(g, n);
    if (from_free_only && (k == PrimitiveKind::kElementwise || k == PrimitiveKind::kBroadcast ||
                           k == PrimitiveKind::kLayout))
      continue;
    if (!fed_inside || id < linear)
      return fmt::format("{} is not downstream of {}: linear kernels fuse epilogues only", n.op_type, lin);
    if (k != PrimitiveKind::kElementwise && k != PrimitiveKind::kBroadcast)
      return fmt::format("{} ({}) after {}: linear epilogues are elementwise", n.op_type, primitive_kind_name(k), lin);
  }
  return "";
}

}  // namespace korch
