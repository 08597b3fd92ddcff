// Exact dominance among kernel candidates: candidates that some other candidate (or pair of
// candidates) can replace in every plan at no higher cost are left out of the program before it is
// solved. Fewer variables make the program smaller and less degenerate (ties between near-equal
// kernels are what branch and bound spends its time on) and split it into more regions, without
// changing its optimum.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "orchestrate/kernel_candidate.h"
#include "orchestrate/rewrite_sites.h"

namespace korch {

// Sets the cost of every dominated candidate to infinity in `costs` (parallel to `candidates`) and
// returns how many. Rules (each stated where it is applied): a minimal-output variant no cheaper than
// the full one; a kernel no cheaper than two parts of it; with `allow_recompute`, a kernel that one
// more primitive makes no dearer without reading anything new. Not valid under a memory budget
// (a dominating kernel may hold more memory): the caller skips it there.
int64_t leave_out_dominated(const Graph& g, const std::vector<KernelCandidate>& candidates, std::vector<double>& costs,
                            bool allow_recompute, const RewriteSites* sites);

}  // namespace korch
