#include "orchestrate/fusion_rules.h"

#include <algorithm>

#include <fmt/format.h>

#include "orchestrate/kernel_candidate.h"

namespace korch {

namespace {

bool has(const std::vector<PrimitiveKind>& kinds, PrimitiveKind k) {
  return std::find(kinds.begin(), kinds.end(), k) != kinds.end();
}

}  // namespace

std::string unfusable_reason(const Graph& g, const KernelCandidate& c, const FusionRules& rules) {
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
  // linear one (consume a value computed inside the kernel) and be of an epilogue kind. The
  // exception is an epilogue operand computed from constants alone (an Expand of a bias): a
  // library binary post-op reads such an operand broadcast.
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
    if (from_free_only && has(rules.linear_constant_operands, k)) continue;
    if (rules.linear_epilogue.empty())
      return fmt::format("{} cannot join {}: linear primitives run alone here ({})", n.op_type, lin, rules.name);
    if (!fed_inside || id < linear)
      return fmt::format("{} is not downstream of {}: linear kernels fuse epilogues only", n.op_type, lin);
    if (!has(rules.linear_epilogue, k))
      return fmt::format("{} ({}) after {}: linear epilogues are elementwise", n.op_type, primitive_kind_name(k), lin);
  }
  return "";
}

}  // namespace korch
