// The runtime's memory plan: where every intermediate tensor lives inside one arena.
//
// An intermediate is a value written by a kernel that is not a graph output (graph outputs get
// their own tensors, graph inputs are read in place, constants live in weights.bin). Its lifetime
// is [first writer step, last reader step] (a value nobody reads lives for its writer's step
// only). Two intermediates whose lifetimes overlap never overlap in memory; the others may share.
//
// Placement is greedy, largest first, at the lowest 64-byte-aligned offset that clears every
// already placed buffer it is live with. Example (bytes, [first, last]):
//     a 256 [0,1]   b 128 [1,2]   c 256 [2,3]
//   a -> 0; c is not live with a -> 0; b is live with both -> 256. Arena 384 bytes (sum: 640).
// What holds after: offsets are multiples of the alignment; live-overlapping buffers are disjoint;
// arena_bytes = max(offset + aligned size) <= sum of aligned sizes.
//
// Written in place. Two kinds of node need not copy their inputs at all: a Concat whose output is
// laid out as its inputs one after another (every axis before the Concat axis has extent 1: a
// channel Concat at batch 1 in NCHW, the detection boxes of a YOLO head), and a view (Reshape,
// Flatten, Squeeze, Unsqueeze: the same bytes under another shape). The kernels that write their
// inputs can write them straight into their places in the output. plan_arena() does that for every
// step that is such a node alone: each input becomes a piece of the output (no buffer of its own),
// and the output lives from the first piece's writer to the last reader of it or of any piece.
// The node's kernel (runtime/kernel_recipe.h "in_place") then finds its inputs in place and does
// nothing; run by itself (a correctness check, a measurement) it copies them. The orchestrator
// prices such a node at zero and fuses it only with a reader of its output
// (orchestrate/kernel_cost.h, kernel_candidate.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace korch::runtime {

constexpr int64_t kArenaAlignment = 64;

// n rounded up to a multiple of a (a > 0).
inline int64_t align_up(int64_t n, int64_t a = kArenaAlignment) { return (n + a - 1) / a * a; }

struct BufferLifetime {
  int64_t bytes = 0;
  int first = 0;  // step that first writes it
  int last = 0;   // last step that reads it (>= first)
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // one per buffer, in the caller's order
  int64_t arena_bytes = 0;       // peak: the arena size
};

// Pure function of its input (steps are kernel positions); KORCH_CHECKs 0 <= first <= last and
// bytes >= 0. Cost: each buffer looks only at buffers placed at its steps.
MemoryPlan plan_memory(const std::vector<BufferLifetime>& buffers, int64_t alignment = kArenaAlignment);

// One step of execution (a kernel): the graph values it reads and writes.
struct StepIo {
  std::vector<ValueId> reads;
  std::vector<ValueId> writes;
};

// The arena of a kernel sequence over graph `g`: which values are intermediates (see above) and
// their offsets. kNoValue entries are ignored.
struct ArenaPlan {
  std::map<ValueId, int64_t> offset;  // intermediates only (not the pieces below)
  // Inputs written in place: value -> (the value whose buffer holds it, byte offset in it). The
  // holder is an intermediate above or a graph output, never itself a piece.
  std::map<ValueId, std::pair<ValueId, int64_t>> piece_of;
  int64_t arena_bytes = 0;
  int64_t intermediate_bytes = 0;     // sum of aligned sizes: the arena without reuse
};
ArenaPlan plan_arena(const Graph& g, const std::vector<StepIo>& steps);

// The nodes of `g` whose inputs can be written in place (above): node -> the byte offset in the
// output of each input it holds (in_place_inputs). Required: a Concat's axes before its axis have
// extent 1; a view's other inputs (shape, axes) are constants; each held input is computed by a
// node (not a graph input or constant), is not a graph output, appears once and is held by no
// other such node; each offset is a multiple of kArenaAlignment (kernels assume aligned arguments).
std::map<NodeId, std::vector<int64_t>> in_place_nodes(const Graph& g);
// The inputs such a node would hold: a Concat's inputs, a view's first (kNoValue skipped); empty
// for any other node.
std::vector<ValueId> in_place_inputs(const Node& n);
// Node `id`'s entry of in_place_nodes(g), or nullopt when it is not written in place (without
// looking at the rest of the graph when it is neither a Concat nor a view).
std::optional<std::vector<int64_t>> in_place_offsets(const Graph& g, NodeId id);

// The unfused baseline's steps: one per node in graph order, every node output materialised.
std::vector<StepIo> unfused_steps(const Graph& g);

// What the artifact costs in memory, in bytes.
struct MemoryReport {
  int64_t arena_bytes = 0;           // the plan's peak arena
  int64_t unfused_arena_bytes = 0;   // the same planner on the unfused baseline
  int64_t intermediate_bytes = 0;    // the plan's intermediates without reuse
  int64_t weights_bytes = 0;         // weights.bin payload
};

}  // namespace korch::runtime
