#include "orchestrate/kernel_cost.h"

#include "runtime/memory_plan.h"

namespace korch {

bool written_in_place(const Graph& g, const KernelCandidate& c) {
  return c.nodes.size() == 1 && runtime::in_place_offsets(g, c.nodes[0]).has_value();
}

CostTable fill_cost_table(const Graph& g, const std::vector<KernelCandidate>& candidates,
                          CostProvider& provider, bool prepare) {
  CostTable table;
  table.costs.reserve(candidates.size());
  if (prepare) provider.prepare(g, candidates);
  for (const KernelCandidate& c : candidates) table.costs.push_back(provider.cost(g, c));
  return table;
}

}  // namespace korch
