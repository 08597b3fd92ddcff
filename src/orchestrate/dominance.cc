#include "orchestrate/dominance.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "orchestrate/graph_index.h"

namespace korch {

int64_t leave_out_dominated(const Graph& g, const std::vector<KernelCandidate>& candidates, std::vector<double>& costs,
                            bool allow_recompute, const RewriteSites* sites) {
  // Dominance (exact): a minimal-output variant that costs no less than the full variant of the
  // same primitives can be replaced by it in any plan (same inputs, more outputs), so it is left
  // out. Compute-bound kernels tie this way, which on big programs removes many variables.
  int64_t dominated = 0;
  std::map<std::vector<NodeId>, size_t> full_of;  // primitives -> their full-output candidate
  for (size_t i = 0; i < candidates.size(); ++i)
    if (!candidates[i].minimal_outputs) full_of.emplace(candidates[i].nodes, i);
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!candidates[i].minimal_outputs) continue;
    auto it = full_of.find(candidates[i].nodes);
    if (it != full_of.end() && costs[it->second] <= costs[i]) {
      costs[i] = std::numeric_limits<double>::infinity();
      ++dominated;
    }
  }
  // Dominance (exact): a kernel K of several primitives is left out when it costs no less than
  // running it in two parts, a prefix A of its primitives (in topological order) and the rest B,
  // each part as a candidate of its own or one primitive at a time. A and B read K's inputs and
  // write every value K writes (full outputs), A then B runs where K ran, so any plan with K has
  // one without it at no higher cost. A split into primitives is such a chain of splits. With
  // measured costs this leaves out a third of YOLOv4's fused candidates (slow fusions of big
  // convolutions); analytic costs have none. Fewer candidates also split the program into more,
  // smaller regions.
  {
    const std::vector<double> before = costs;  // parts are priced as they were before this pass
    std::vector<double> alone(g.nodes.size(), std::numeric_limits<double>::infinity());
    for (size_t i = 0; i < candidates.size(); ++i)
      if (!candidates[i].minimal_outputs && candidates[i].nodes.size() == 1)
        alone[static_cast<size_t>(candidates[i].nodes[0])] = costs[i];
    // The cheaper of a part's own candidate (if any) and its primitives one by one.
    std::vector<NodeId> part;
    auto part_cost = [&](std::vector<NodeId>::const_iterator b, std::vector<NodeId>::const_iterator e) {
      double one_by_one = 0;
      for (auto it = b; it != e; ++it) one_by_one += alone[static_cast<size_t>(*it)];
      if (e - b == 1) return one_by_one;
      part.assign(b, e);
      auto it = full_of.find(part);
      return it == full_of.end() ? one_by_one : std::min(one_by_one, before[it->second]);
    };
    for (size_t i = 0; i < candidates.size(); ++i) {
      const std::vector<NodeId>& nodes = candidates[i].nodes;  // sorted: topological
      if (nodes.size() < 2 || !std::isfinite(costs[i])) continue;
      for (auto cut = nodes.begin() + 1; cut != nodes.end(); ++cut) {
        if (part_cost(nodes.begin(), cut) + part_cost(cut, nodes.end()) <= costs[i]) {
          costs[i] = std::numeric_limits<double>::infinity();
          ++dominated;
          break;
        }
      }
    }
  }
  // Dominance (exact, with recompute): a kernel A of two or more primitives is left out when a
  // full-output candidate B of A's primitives and one more costs no more, reads nothing that A does
  // not read (besides constants and graph inputs) and writes every value A writes. B can then run
  // where A ran in any plan: its inputs are there, it covers A's primitives (the extra one possibly
  // twice, which recompute allows) and leaves every value A left. Chains of such steps grow
  // strictly, so they end at a candidate that stays. Typical: B also broadcasts the constant A reads
  // expanded. Not across primitives of rewrite sites, whose rows would bind B and not A.
  if (allow_recompute) {
    const GraphIndex gi(g);
    auto subset = [](std::vector<ValueId> a, std::vector<ValueId> b) {
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      return std::includes(b.begin(), b.end(), a.begin(), a.end());
    };
    std::vector<NodeId> bigger;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const KernelCandidate& a = candidates[i];
      if (a.nodes.size() < 2 || !std::isfinite(costs[i])) continue;
      std::set<NodeId> next_to;
      for (NodeId n : a.nodes) {
        next_to.insert(gi.preds[static_cast<size_t>(n)].begin(), gi.preds[static_cast<size_t>(n)].end());
        next_to.insert(gi.succs[static_cast<size_t>(n)].begin(), gi.succs[static_cast<size_t>(n)].end());
      }
      for (NodeId n : next_to) {
        if (std::binary_search(a.nodes.begin(), a.nodes.end(), n) || (sites && sites->optional(n))) continue;
        bigger = a.nodes;
        bigger.insert(std::upper_bound(bigger.begin(), bigger.end(), n), n);
        auto it = full_of.find(bigger);
        if (it == full_of.end() || !(costs[it->second] <= costs[i])) continue;
        const KernelCandidate& b = candidates[it->second];
        std::vector<ValueId> reads;
        for (ValueId v : b.inputs)
          if (!is_free_value(g, v)) reads.push_back(v);
        if (!subset(reads, a.inputs) || !subset(a.outputs, b.outputs)) continue;
        costs[i] = std::numeric_limits<double>::infinity();
        ++dominated;
        break;
      }
    }
  }
  return dominated;
}

}  // namespace korch
