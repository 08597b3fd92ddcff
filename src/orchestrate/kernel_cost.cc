#include "orchestrate/kernel_cost.h"

namespace korch {

CostTable fill_cost_table(const Graph& g, const std::vector<KernelCandidate>& candidates,
                          CostProvider& provider, bool prepare) {
  CostTable table;
  table.costs.reserve(candidates.size());
  if (prepare) provider.prepare(g, candidates);
  for (const KernelCandidate& c : candidates) table.costs.push_back(provider.cost(g, c));
  return table;
}

}  // namespace korch
