#include "orchestrate/greedy_fusion.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "ir/primitive.h"
#include "orchestrate/graph_index.h"
#include "orchestrate/kernel_plan.h"

namespace korch {

namespace {

bool injective(PrimitiveKind k) {
  return k == PrimitiveKind::kElementwise || k == PrimitiveKind::kBroadcast || k == PrimitiveKind::kLayout;
}

struct Group {
  std::vector<NodeId> nodes;
  bool closed = false;  // an opaque primitive, an operator, or a reduction sink: nothing joins
  bool has_linear = false;
  std::set<int> succs;  // groups that read a value of this one
};

// Whether group `to` can be reached from group `from` along the groups' edges.
bool reaches(const std::vector<Group>& groups, int from, int to) {
  std::vector<int> stack = {from};
  std::vector<bool> seen(groups.size(), false);
  seen[static_cast<size_t>(from)] = true;
  while (!stack.empty()) {
    const int x = stack.back();
    stack.pop_back();
    if (x == to) return true;
    for (int s : groups[static_cast<size_t>(x)].succs)
      if (!seen[static_cast<size_t>(s)]) {
        seen[static_cast<size_t>(s)] = true;
        stack.push_back(s);
      }
  }
  return false;
}

}  // namespace

std::vector<std::vector<NodeId>> greedy_fusion_groups(const Graph& g) {
  const GraphIndex index(g);
  std::vector<PrimitiveKind> kind;
  for (const Node& n : g.nodes) kind.push_back(primitive_kind(g, n));
  std::vector<Group> groups;
  std::vector<int> group_of(g.nodes.size(), -1);
  // An injective primitive that reads only graph inputs and constants, for one consumer (the
  // Expand of a bias), waits for that consumer and goes into its group (a fuser folds or inlines
  // it; alone it would be a kernel no fuser writes).
  const auto floating = [&](NodeId n) {
    return injective(kind[static_cast<size_t>(n)]) && index.preds[static_cast<size_t>(n)].empty() &&
           index.succs[static_cast<size_t>(n)].size() == 1;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const PrimitiveKind k = kind[i];
    if (floating(static_cast<NodeId>(i))) continue;
    std::vector<NodeId> preds, pulled;
    for (NodeId p : index.preds[i]) (floating(p) ? pulled : preds).push_back(p);
    int join = -1;
    if (injective(k) || k == PrimitiveKind::kReduce) {
      for (NodeId p : preds) {
        const int gp = group_of[static_cast<size_t>(p)];
        const Group& G = groups[static_cast<size_t>(gp)];
        const PrimitiveKind kp = kind[static_cast<size_t>(p)];
        if (G.closed) continue;
        const bool only_consumer = index.succs[static_cast<size_t>(p)].size() == 1;
        if (!only_consumer && kp != PrimitiveKind::kElementwise && kp != PrimitiveKind::kLinear) continue;
        if (k == PrimitiveKind::kReduce && (!injective(kp) || G.has_linear)) continue;
        bool acyclic = true;
        for (NodeId q : preds) {
          const int gq = group_of[static_cast<size_t>(q)];
          if (gq != gp && reaches(groups, gp, gq)) acyclic = false;
        }
        if (!acyclic) continue;
        join = gp;
        break;
      }
    }
    if (join < 0) {
      join = static_cast<int>(groups.size());
      groups.emplace_back();
      groups.back().closed = !(injective(k) || k == PrimitiveKind::kLinear);
    }
    Group& G = groups[static_cast<size_t>(join)];
    for (NodeId f : pulled) {
      G.nodes.push_back(f);
      group_of[static_cast<size_t>(f)] = join;
    }
    G.nodes.push_back(static_cast<NodeId>(i));
    G.has_linear |= k == PrimitiveKind::kLinear;
    if (k == PrimitiveKind::kReduce) G.closed = true;
    group_of[i] = join;
    for (NodeId q : preds) {
      const int gq = group_of[static_cast<size_t>(q)];
      if (gq != join) groups[static_cast<size_t>(gq)].succs.insert(join);
    }
  }
  std::vector<std::vector<NodeId>> out;
  for (Group& G : groups) {
    std::sort(G.nodes.begin(), G.nodes.end());
    out.push_back(std::move(G.nodes));
  }
  std::sort(out.begin(), out.end());
  return out;
}

GreedyFusion greedy_fusion_cost(const Graph& g, const std::vector<KernelCandidate>& candidates,
                                const std::vector<double>& costs) {
  return greedy_fusion_cost(g, candidates, [&](int c) {
    return static_cast<size_t>(c) < costs.size() ? costs[static_cast<size_t>(c)]
                                                 : std::numeric_limits<double>::infinity();
  });
}

GreedyFusion greedy_fusion_cost(const Graph& g, const std::vector<KernelCandidate>& candidates,
                                const std::function<double(int)>& cost_of) {
  GreedyFusion r;
  r.groups = greedy_fusion_groups(g);
  // Full-output candidates by their first node.
  std::vector<std::vector<int>> by_first(g.nodes.size());
  for (size_t c = 0; c < candidates.size(); ++c)
    if (!candidates[c].minimal_outputs && !candidates[c].nodes.empty())
      by_first[static_cast<size_t>(candidates[c].nodes.front())].push_back(static_cast<int>(c));
  std::vector<int> selected;
  for (const std::vector<NodeId>& group : r.groups) {
    size_t at = 0;
    int pieces = 0;
    while (at < group.size()) {
      // The longest candidate that is exactly group[at, at + len); the cheaper one on a tie.
      int best = -1;
      size_t best_len = 0;
      double best_cost = 0;
      for (int c : by_first[static_cast<size_t>(group[at])]) {
        const auto& nodes = candidates[static_cast<size_t>(c)].nodes;
        if (nodes.size() < best_len || nodes.size() > group.size() - at ||
            !std::equal(nodes.begin(), nodes.end(), group.begin() + static_cast<long>(at)))
          continue;
        const double cost = cost_of(c);  // asked only for exact prefixes: a provider may be slow
        if (!std::isfinite(cost)) continue;
        if (nodes.size() > best_len || cost < best_cost) {
          best = c;
          best_len = nodes.size();
          best_cost = cost;
        }
      }
      if (best < 0) {
        const Node& n = g.nodes[static_cast<size_t>(group[at])];
        r.why = fmt::format("primitive '{}' ({}) has no single-primitive kernel with a finite cost", n.name, n.op_type);
        r.seconds = 0;
        return r;
      }
      selected.push_back(best);
      r.seconds += best_cost;
      at += best_len;
      ++pieces;
    }
    if (pieces > 1) ++r.split_groups;
  }
  // Convex groups split into prefixes always schedule; checked all the same, since a baseline
  // that could not run would be a number about nothing.
  ScheduleResult s = schedule(g, candidates, selected);
  if (!s.ok) {
    r.why = fmt::format("the greedy groups cannot be scheduled ({} kernels blocked)", s.blocked.size());
    r.seconds = 0;
    return r;
  }
  r.kernels = s.order;
  r.ok = true;
  return r;
}

}  // namespace korch
