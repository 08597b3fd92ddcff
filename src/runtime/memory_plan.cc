#include "runtime/memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>

namespace korch::runtime {

MemoryPlan plan_memory(const std::vector<BufferLifetime>& buffers, int64_t alignment) {
  KORCH_CHECK(alignment > 0);
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; ties by first step then index, so the plan is deterministic.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].first < buffers[b].first;
  });
  // Placed buffers by the steps they live at, so a buffer only looks at those it is live with
  // (a model's unfused baseline has tens of thousands of short-lived buffers).
  int last_step = 0;
  for (const auto& b : buffers) last_step = std::max(last_step, b.last);
  std::vector<std::vector<size_t>> at_step(static_cast<size_t>(last_step) + 1);
  std::vector<size_t> seen(buffers.size(), SIZE_MAX);  // stamp: the buffer being placed
  for (size_t i : order) {
    const BufferLifetime& b = buffers[i];
    KORCH_CHECK(b.bytes >= 0 && b.first >= 0 && b.first <= b.last, "buffer {}: {} bytes live [{}, {}]", i, b.bytes,
                b.first, b.last);
    int64_t size = align_up(b.bytes, alignment);
    // The [begin, end) ranges of placed buffers live at the same time, by begin.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int s = b.first; s <= b.last; ++s)
      for (size_t j : at_step[static_cast<size_t>(s)]) {
        if (seen[j] == i) continue;
        seen[j] = i;
        busy.emplace_back(plan.offsets[j], plan.offsets[j] + align_up(buffers[j].bytes, alignment));
      }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (begin >= offset + size) break;  // the gap before `begin` fits
      offset = std::max(offset, end);
    }
    plan.offsets[i] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    for (int s = b.first; s <= b.last; ++s) at_step[static_cast<size_t>(s)].push_back(i);
  }
  return plan;
}

ArenaPlan plan_arena(const Graph& g, const std::vector<StepIo>& steps) {
  std::set<ValueId> graph_outputs(g.outputs.begin(), g.outputs.end());
  std::map<ValueId, BufferLifetime> live;  // ordered: deterministic buffer order
  for (size_t s = 0; s < steps.size(); ++s) {
    int step = static_cast<int>(s);
    for (ValueId v : steps[s].writes) {
      if (v == kNoValue || graph_outputs.count(v)) continue;
      KORCH_CHECK(!g.value(v).is_constant() && g.value(v).producer >= 0, "step {} writes graph input or constant {}",
                  s, g.value(v).name);
      auto [it, fresh] = live.try_emplace(v, BufferLifetime{g.type(v).byte_size(), step, step});
      if (!fresh) it->second.last = std::max(it->second.last, step);
    }
    for (ValueId v : steps[s].reads) {
      auto it = live.find(v);
      if (it != live.end()) it->second.last = std::max(it->second.last, step);
    }
  }
  std::vector<ValueId> ids;
  std::vector<BufferLifetime> buffers;
  for (const auto& [v, b] : live) {
    ids.push_back(v);
    buffers.push_back(b);
  }
  MemoryPlan mp = plan_memory(buffers);
  ArenaPlan out;
  out.arena_bytes = mp.arena_bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    out.offset[ids[i]] = mp.offsets[i];
    out.intermediate_bytes += align_up(buffers[i].bytes, kArenaAlignment);
  }
  return out;
}

std::vector<StepIo> unfused_steps(const Graph& g) {
  std::vector<StepIo> steps;
  for (const Node& n : g.nodes) steps.push_back({n.inputs, n.outputs});
  return steps;
}

}  // namespace korch::runtime
