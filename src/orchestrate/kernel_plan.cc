#include "orchestrate/kernel_plan.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "orchestrate/graph_index.h"
#include "runtime/memory_plan.h"
#include "support/error.h"

namespace korch {

double KernelPlan::total_seconds() const {
  double s = 0;
  for (const PlannedKernel& k : kernels) s += k.seconds;
  return s;
}

ScheduleResult schedule(const Graph& g, const std::vector<KernelCandidate>& candidates,
                        const std::vector<int>& selected) {
  std::vector<bool> available(g.values.size(), false);
  for (size_t v = 0; v < g.values.size(); ++v) available[v] = is_free_value(g, static_cast<ValueId>(v));
  std::vector<int> pending = selected;
  std::sort(pending.begin(), pending.end(), [&](int a, int b) {
    const auto& na = candidates[static_cast<size_t>(a)].nodes;
    const auto& nb = candidates[static_cast<size_t>(b)].nodes;
    return na.front() != nb.front() ? na.front() < nb.front() : a < b;
  });
  ScheduleResult r;
  // Repeatedly run the first ready kernel. Quadratic in the worst case, but selections are small
  // (hundreds to a few thousand kernels) and mostly already in order, so the scan ends early.
  while (!pending.empty()) {
    size_t pick = pending.size();
    for (size_t i = 0; i < pending.size() && pick == pending.size(); ++i) {
      bool ready = true;
      for (ValueId v : candidates[static_cast<size_t>(pending[i])].inputs) ready &= available[static_cast<size_t>(v)];
      if (ready) pick = i;
    }
    if (pick == pending.size()) {
      r.blocked = pending;
      return r;
    }
    const int c = pending[pick];
    pending.erase(pending.begin() + static_cast<long>(pick));
    r.order.push_back(c);
    for (ValueId v : candidates[static_cast<size_t>(c)].outputs) available[static_cast<size_t>(v)] = true;
  }
  r.ok = true;
  return r;
}

KernelPlan make_plan(const Graph& g, const std::vector<KernelCandidate>& candidates,
                     const std::vector<int>& order, const std::vector<double>& seconds,
                     const std::vector<std::string>& notes) {
  // Drop kernels nothing needs, from the back: a value is needed when it is a graph output or read
  // by a kept kernel.
  std::vector<bool> needed(g.values.size(), false);
  for (ValueId v : g.outputs) needed[static_cast<size_t>(v)] = true;
  std::vector<int> kept;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const KernelCandidate& c = candidates[static_cast<size_t>(*it)];
    bool useful = false;
    for (ValueId v : c.outputs) useful |= needed[static_cast<size_t>(v)];
    if (!useful) continue;
    kept.push_back(*it);
    for (ValueId v : c.inputs) needed[static_cast<size_t>(v)] = true;
  }
  std::reverse(kept.begin(), kept.end());

  KernelPlan plan;
  std::vector<int> producer(g.values.size(), -1), last_use(g.values.size(), -1);
  for (int ci : kept) {
    const KernelCandidate& c = candidates[static_cast<size_t>(ci)];
    const int step = static_cast<int>(plan.kernels.size());
    plan.kernels.push_back({ci, c.nodes, c.inputs, c.outputs, seconds[static_cast<size_t>(ci)],
                            notes.empty() ? "" : notes[static_cast<size_t>(ci)]});
    for (ValueId v : c.inputs) last_use[static_cast<size_t>(v)] = step;
    for (ValueId v : c.outputs) {
      if (producer[static_cast<size_t>(v)] >= 0) continue;
      producer[static_cast<size_t>(v)] = step;
      plan.tensors.push_back({v, step, -1, static_cast<double>(g.type(v).byte_size())});
    }
  }
  const int end = static_cast<int>(plan.kernels.size());
  for (ValueId v : g.outputs) last_use[static_cast<size_t>(v)] = end;
  // A value no later kernel reads (its readers recompute it) lives only for its own step.
  for (PlannedTensor& t : plan.tensors) t.last_use = std::max(t.producer, last_use[static_cast<size_t>(t.value)]);
  return plan;
}

void verify_plan(const Graph& g, const KernelPlan& plan) {
  const GraphIndex gi(g);
  const int n = gi.num_nodes();
  std::vector<int> written_at(g.values.size(), -1);
  std::vector<int> in_kernel(static_cast<size_t>(n), -1);
  for (size_t step = 0; step < plan.kernels.size(); ++step) {
    const PlannedKernel& k = plan.kernels[step];
    const int s = static_cast<int>(step);
    if (k.nodes.empty()) fail("plan kernel {} has no primitives", step);
    for (NodeId id : k.nodes) {
      if (id < 0 || id >= n) fail("plan kernel {} names primitive #{} that does not exist", step, id);
      in_kernel[static_cast<size_t>(id)] = s;
    }
    auto inside = [&](NodeId id) { return id >= 0 && in_kernel[static_cast<size_t>(id)] == s; };
    // Convexity: no path leaves the kernel and re-enters it.
    std::vector<NodeId> stack;
    std::set<NodeId> outside_reach;
    for (NodeId id : k.nodes)
      for (NodeId u : gi.succs[static_cast<size_t>(id)])
        if (!inside(u)) stack.push_back(u);
    const NodeId last = *std::max_element(k.nodes.begin(), k.nodes.end());
    while (!stack.empty()) {
      const NodeId u = stack.back();
      stack.pop_back();
      if (u > last || !outside_reach.insert(u).second) continue;
      for (NodeId w : gi.succs[static_cast<size_t>(u)]) {
        if (inside(w))
          fail("plan kernel {} is not convex: a path leaves it at '{}' and comes back at '{}'", step,
               g.nodes[static_cast<size_t>(u)].name, g.nodes[static_cast<size_t>(w)].name);
        stack.push_back(w);
      }
    }
    std::vector<ValueId> reads;
    for (NodeId id : k.nodes)
      for (ValueId v : g.nodes[static_cast<size_t>(id)].inputs)
        if (v != kNoValue && !inside(g.value(v).producer) &&
            std::find(reads.begin(), reads.end(), v) == reads.end())
          reads.push_back(v);
    std::vector<ValueId> listed = k.inputs;
    std::sort(reads.begin(), reads.end());
    std::sort(listed.begin(), listed.end());
    if (reads != listed) fail("plan kernel {} lists inputs that differ from what its primitives read", step);
    for (ValueId v : k.inputs)
      if (!is_free_value(g, v) && written_at[static_cast<size_t>(v)] < 0)
        fail("plan kernel {} reads '{}' before any kernel writes it", step, g.value(v).name);
    for (ValueId v : k.outputs) {
      if (v < 0 || static_cast<size_t>(v) >= g.values.size() || !inside(g.value(v).producer))
        fail("plan kernel {} writes a value none of its primitives computes", step);
      if (written_at[static_cast<size_t>(v)] < 0) written_at[static_cast<size_t>(v)] = s;
    }
  }
  for (ValueId v : g.outputs)
    if (!is_free_value(g, v) && written_at[static_cast<size_t>(v)] < 0)
      fail("plan never writes graph output '{}'", g.value(v).name);
  for (const PlannedTensor& t : plan.tensors) {
    if (t.value < 0 || static_cast<size_t>(t.value) >= g.values.size() ||
        written_at[static_cast<size_t>(t.value)] != t.producer)
      fail("plan tensor #{} does not match the kernel that first writes it", t.value);
    if (t.last_use < t.producer)
      fail("plan tensor '{}' is last used before it is written", g.value(t.value).name);
  }
}

int64_t plan_peak_bytes(const Graph& g, const std::vector<KernelCandidate>& candidates, const std::vector<int>& order) {
  std::vector<runtime::StepIo> steps;
  for (int c : order) {
    const KernelCandidate& k = candidates[static_cast<size_t>(c)];
    steps.push_back({k.inputs, k.outputs});
  }
  return runtime::plan_arena(g, steps).arena_bytes;
}

std::map<ValueId, ValueId> possible_holders(const Graph& g) {
  std::map<ValueId, ValueId> holder;
  for (const auto& [node, offsets] : runtime::in_place_nodes(g)) {
    const Node& n = g.nodes[static_cast<size_t>(node)];
    for (ValueId v : runtime::in_place_inputs(n)) holder[v] = n.outputs[0];
  }
  for (auto& [v, h] : holder)  // outermost (acyclic: a holder follows what it holds)
    for (auto up = holder.find(h); up != holder.end(); up = holder.find(h)) h = up->second;
  return holder;
}

int64_t step_bytes(const Graph& g, const KernelCandidate& c, const std::map<ValueId, ValueId>& holders) {
  const auto aligned = [&](ValueId v) { return runtime::align_up(g.type(v).byte_size()); };
  const std::set<ValueId> outputs(g.outputs.begin(), g.outputs.end());
  std::map<ValueId, int64_t> by_holder;  // the values that may share one buffer: the largest
  const auto add = [&](ValueId v) {
    auto h = holders.find(v);
    const ValueId where = h == holders.end() ? v : h->second;
    if (outputs.count(where)) return;  // in a graph output's tensor, not in the arena
    by_holder[where] = std::max(by_holder[where], aligned(v));
  };
  for (ValueId v : c.inputs)
    if (!is_free_value(g, v)) add(v);
  for (ValueId v : c.outputs) add(v);
  int64_t bytes = 0;
  for (const auto& [where, b] : by_holder) bytes += b;
  return bytes;
}

}  // namespace korch
