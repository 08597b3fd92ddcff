// The greedy-fusion baseline: what a rule-based fuser (TVM-style) would have run, priced on the
// orchestrator's own costs, so report.html can set the plan beside it.
//
// Grouping, walking the primitives in topological (= node id) order:
//   * a linear primitive starts a group; an opaque primitive or an operator kept whole is a group
//     alone that nothing joins;
//   * an injective primitive that reads only graph inputs and constants and has one consumer (the
//     Expand of a bias) goes into its consumer's group;
//   * an injective primitive (elementwise, broadcast, layout) joins the group of one of its
//     producers (the first in id order that qualifies) when it is that producer's only consumer, or
//     when the producer is elementwise or linear (its value is written anyway or fused as an
//     epilogue);
//   * a reduction joins the group of an injective producer under the same condition, when that
//     group holds no linear primitive: it absorbs its elementwise producers and is the group's sink
//     (nothing joins a group after its reduction); a reduction with no such producer is a group
//     alone, a sink too;
//   * a join that would make the groups cyclic (the new member's other producers are reachable from
//     the group) is refused, so every group is convex and the groups can be scheduled.
// Pricing: a group whose exact node set was a candidate (full output set, finite cost) costs what
// the orchestrator had for that candidate. Otherwise it is split from its first primitive on into
// the longest prefixes (in id order) that were such candidates, single primitives at worst. The
// baseline is the sum; it exists only when every piece has a finite cost.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "orchestrate/kernel_candidate.h"

namespace korch {

struct GreedyFusion {
  bool ok = false;
  double seconds = 0;                       // sum of the pieces' costs (when ok)
  std::vector<std::vector<NodeId>> groups;  // what the rules formed, each ascending, by first node
  std::vector<int> kernels;                 // candidate indices of the pieces, in execution order
  int split_groups = 0;                     // groups no single candidate covers
  std::string why;                          // when !ok: which primitive could not be priced
};

// The grouping alone (no costs): for tests and for the report's description.
std::vector<std::vector<NodeId>> greedy_fusion_groups(const Graph& g);

// The grouping priced on `costs` (one per candidate, infinity for those that cannot be emitted).
GreedyFusion greedy_fusion_cost(const Graph& g, const std::vector<KernelCandidate>& candidates,
                                const std::vector<double>& costs);
// The same with costs asked of `cost_of(candidate index)`, only for the candidates that could be
// pieces (exact prefixes of a group): a provider that hashes each kernel it is asked about stays
// cheap on a model of 60k candidates.
GreedyFusion greedy_fusion_cost(const Graph& g, const std::vector<KernelCandidate>& candidates,
                                const std::function<double(int)>& cost_of);

}  // namespace korch
