// The plan: selected kernels in execution order, the tensors they materialise and their lifetimes.
//
// schedule() orders a selection: a kernel runs once every value it reads is a graph input, a
// constant, or written by a kernel that ran before; among ready kernels the one with the smallest
// first primitive goes first (deterministic). A selection can be unschedulable even when every
// kernel is convex: A = {a, d}, B = {c, b} with a->b, c->b, c->d, a->d are both convex, yet A needs
// c from B and B needs a from A. The orchestrator then cuts the cycle and solves again.
// Kernels none of whose outputs is read later or is a graph output are dropped (a solver may keep
// a zero-cost kernel that nothing needs).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "orchestrate/kernel_candidate.h"

namespace korch {

struct PlannedKernel {
  int candidate = -1;  // index into the candidate list the plan was made from
  std::vector<NodeId> nodes;
  std::vector<ValueId> inputs, outputs;
  double seconds = 0;
  std::string cost_note;
};

struct PlannedTensor {
  ValueId value = kNoValue;
  int producer = -1;  // step of the first kernel that writes it
  int last_use = -1;  // last step that reads it; kernels.size() for graph outputs
  double bytes = 0;
};

struct KernelPlan {
  std::vector<PlannedKernel> kernels;
  std::vector<PlannedTensor> tensors;  // every value a kernel writes, by producer step
  double total_seconds() const;
};

struct ScheduleResult {
  bool ok = false;
  std::vector<int> order;    // selected candidate indices in execution order (when ok)
  std::vector<int> blocked;  // selected candidates that could never run (when !ok)
};
ScheduleResult schedule(const Graph& g, const std::vector<KernelCandidate>& candidates,
                        const std::vector<int>& selected);

// Builds the plan from a schedulable order (schedule().order). `seconds`/`notes` per candidate.
KernelPlan make_plan(const Graph& g, const std::vector<KernelCandidate>& candidates,
                     const std::vector<int>& order, const std::vector<double>& seconds,
                     const std::vector<std::string>& notes);

// The peak intermediate memory of running `order` (schedule().order): the arena the runtime's
// static memory plan gives those kernels (runtime/memory_plan.h), in bytes.
int64_t plan_peak_bytes(const Graph& g, const std::vector<KernelCandidate>& candidates, const std::vector<int>& order);

// Each value a Concat or view could hold in place (runtime/memory_plan.h) -> its outermost
// possible holder.
std::map<ValueId, ValueId> possible_holders(const Graph& g);
// What one kernel's step alone holds in that arena: its inputs other than graph inputs and
// constants, and its outputs other than graph outputs, each aligned as the arena aligns them;
// values that may lie in one holder's buffer (`holders`: possible_holders(g)) count once, at the
// largest, and not at all when that holder is a graph output. Every plan that runs the kernel
// peaks at no less.
int64_t step_bytes(const Graph& g, const KernelCandidate& c, const std::map<ValueId, ValueId>& holders);

// Checks a plan against its graph: every kernel is a non-empty convex set of existing primitives;
// its inputs are exactly the values it reads from outside, each a graph input, a constant or
// written by an earlier kernel; its outputs are values of its own primitives; every graph output is
// written; tensor lifetimes match the kernels. Throws korch::Error (kInvalid) naming the kernel.
void verify_plan(const Graph& g, const KernelPlan& plan);

}  // namespace korch
