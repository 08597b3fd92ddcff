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

namespace {

bool is_view(const std::string& op) {
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze";
}

}  // namespace

std::vector<ValueId> in_place_inputs(const Node& n) {
  std::vector<ValueId> out;
  if (n.op_type == "Concat") out = n.inputs;
  else if (is_view(n.op_type) && !n.inputs.empty()) out = {n.inputs[0]};
  std::erase(out, kNoValue);
  return out;
}

std::map<NodeId, std::vector<int64_t>> in_place_nodes(const Graph& g) {
  std::set<ValueId> graph_outputs(g.outputs.begin(), g.outputs.end());
  std::map<ValueId, int> holders;  // value -> how many nodes could hold it
  for (const Node& n : g.nodes) {
    const std::vector<ValueId> held = in_place_inputs(n);
    for (ValueId v : std::set<ValueId>(held.begin(), held.end())) ++holders[v];
  }
  std::map<NodeId, std::vector<int64_t>> out;
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    const std::vector<ValueId> held = in_place_inputs(n);
    if (held.empty() || n.inputs.empty() || n.outputs.size() != 1 || n.outputs[0] == kNoValue) continue;
    const TensorType& t = g.type(n.outputs[0]);
    bool ok = true;
    if (n.op_type == "Concat") {
      const int64_t rank = static_cast<int64_t>(t.shape.size());
      int64_t axis = n.attrs.get_int("axis", 0);
      if (axis < 0) axis += rank;
      ok = axis >= 0 && axis < rank && held.size() == n.inputs.size();
      for (int64_t d = 0; ok && d < axis; ++d) ok = t.shape[static_cast<size_t>(d)] == 1;
    } else {  // a view: its shape or axes are constants
      for (size_t i = 1; i < n.inputs.size(); ++i)
        ok = ok && (n.inputs[i] == kNoValue || g.value(n.inputs[i]).is_constant());
    }
    std::vector<int64_t> offsets;
    std::set<ValueId> seen;
    int64_t at = 0;
    for (ValueId v : held) {
      if (!ok) break;
      ok = !g.value(v).is_constant() && g.value(v).producer >= 0 && !graph_outputs.count(v) && seen.insert(v).second &&
           holders[v] == 1 && at % kArenaAlignment == 0 && g.type(v).dtype == t.dtype;
      offsets.push_back(at);
      at += g.type(v).byte_size();
    }
    if (ok && at == t.byte_size()) out.emplace(static_cast<NodeId>(id), std::move(offsets));
  }
  return out;
}

std::optional<std::vector<int64_t>> in_place_offsets(const Graph& g, NodeId id) {
  if (in_place_inputs(g.nodes[static_cast<size_t>(id)]).empty()) return std::nullopt;
  std::map<NodeId, std::vector<int64_t>> all = in_place_nodes(g);
  auto it = all.find(id);
  if (it == all.end()) return std::nullopt;
  return std::move(it->second);
}

namespace {

// The nodes written in place among `steps` (a step that is one such node alone: it writes the
// output and reads exactly the inputs it holds, constants aside): piece -> (its outermost holder,
// byte offset there).
std::map<ValueId, std::pair<ValueId, int64_t>> in_place_pieces(const Graph& g, const std::vector<StepIo>& steps) {
  std::map<ValueId, std::pair<ValueId, int64_t>> piece_of;
  const std::map<NodeId, std::vector<int64_t>> holders = in_place_nodes(g);
  if (holders.empty()) return piece_of;
  for (const StepIo& s : steps) {
    if (s.writes.size() != 1 || s.writes[0] == kNoValue) continue;
    const NodeId p = g.value(s.writes[0]).producer;
    auto it = holders.find(p);
    if (it == holders.end()) continue;
    const std::vector<ValueId> held = in_place_inputs(g.nodes[static_cast<size_t>(p)]);
    std::set<ValueId> reads;
    for (ValueId v : s.reads)
      if (v != kNoValue && !g.value(v).is_constant()) reads.insert(v);
    if (reads != std::set<ValueId>(held.begin(), held.end())) continue;
    for (size_t i = 0; i < held.size(); ++i) piece_of[held[i]] = {s.writes[0], it->second[i]};
  }
  // A holder held in turn (a Concat of Concats, a view of a Concat): each piece in the outermost
  // holder (acyclic: a holder follows its pieces).
  for (auto& [v, at] : piece_of)
    for (auto up = piece_of.find(at.first); up != piece_of.end(); up = piece_of.find(at.first))
      at = {up->second.first, at.second + up->second.second};
  return piece_of;
}

}  // namespace

ArenaPlan plan_arena(const Graph& g, const std::vector<StepIo>& steps) {
  std::set<ValueId> graph_outputs(g.outputs.begin(), g.outputs.end());
  ArenaPlan out;
  out.piece_of = in_place_pieces(g, steps);
  // A piece's reads and writes are its holder's.
  const auto holder = [&](ValueId v) {
    auto it = out.piece_of.find(v);
    return it == out.piece_of.end() ? v : it->second.first;
  };
  std::map<ValueId, BufferLifetime> live;  // ordered: deterministic buffer order
  for (size_t s = 0; s < steps.size(); ++s) {
    int step = static_cast<int>(s);
    for (ValueId written : steps[s].writes) {
      const ValueId v = written == kNoValue ? kNoValue : holder(written);
      if (v == kNoValue || graph_outputs.count(v)) continue;
      KORCH_CHECK(!g.value(v).is_constant() && g.value(v).producer >= 0, "step {} writes graph input or constant {}",
                  s, g.value(v).name);
      auto [it, fresh] = live.try_emplace(v, BufferLifetime{g.type(v).byte_size(), step, step});
      if (!fresh) it->second.last = std::max(it->second.last, step);
    }
    for (ValueId v : steps[s].reads) {
      auto it = live.find(v == kNoValue ? v : holder(v));
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
