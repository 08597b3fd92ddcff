// The cost interface between measurement and selection.
//
// The orchestrator never measures anything: it asks a CostProvider for one number per candidate
// kernel and reads them from a CostTable. Providers: AnalyticCost (analytic_cost.h, a roofline
// over a device spec), and the measured CPU/CUDA providers of the backends. Tests hand the
// orchestrator a table of their own. A candidate no backend could emit gets an infinite cost with
// the reason, and the orchestrator drops it.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "orchestrate/fusion_rules.h"
#include "orchestrate/kernel_candidate.h"

namespace korch {

struct KernelCost {
  double seconds = std::numeric_limits<double>::infinity();
  std::string reason;  // for an infinite cost: why the kernel cannot be emitted; else a short
                       // note on what bounds it ("memory-bound 1.2 MB", "linear 3.1 GFLOP")
  std::string variant;  // the backend's schedule variant the time belongs to ("" = its default):
                        // the one emit() is asked for when the kernel is planned
  bool feasible() const { return seconds < std::numeric_limits<double>::infinity(); }
  static KernelCost infeasible(std::string why) { return {std::numeric_limits<double>::infinity(), std::move(why), ""}; }
};

// A Concat or a view alone whose inputs the memory plan writes in place (runtime/memory_plan.h):
// it runs nothing, so every provider prices it at in_place_cost() without measuring it.
bool written_in_place(const Graph& g, const KernelCandidate& c);
inline KernelCost in_place_cost() { return {0, "in place: its inputs are written into its output", ""}; }

class CostProvider {
 public:
  virtual ~CostProvider() = default;
  virtual std::string name() const = 0;  // "analytic:cpu", "measured:cpu", ...
  // Called once by fill_cost_table before any cost(): a measuring provider generates, compiles and
  // times the whole batch here (compiling kernels one at a time would cost a compiler start each).
  virtual void prepare(const Graph& g, const std::vector<KernelCandidate>& candidates) {
    (void)g;
    (void)candidates;
  }
  virtual KernelCost cost(const Graph& g, const KernelCandidate& c) = 0;
};

struct CostTable {
  std::vector<KernelCost> costs;  // one per candidate, same order
};

// Asks `provider` for every candidate, in order (after provider.prepare unless `prepare` is false).
CostTable fill_cost_table(const Graph& g, const std::vector<KernelCandidate>& candidates,
                          CostProvider& provider, bool prepare = true);

}  // namespace korch
