// The exact no-recompute optimum: a shortest path over execution states.
//
// An execution state is a set of primitives closed under predecessors (a downset). Running a
// kernel K from state D is allowed when K is disjoint from D and all of K's predecessors outside
// K are in D; it leads to D ∪ K. Every path from the empty state to the full one is a plan in
// which each primitive is computed exactly once (no recompute), and every such plan is a path, so
// the shortest path is the optimal no-recompute plan for the candidate set and its costs.
// Example: a -> b -> c with candidates {a} {b} {c} {a,b} {b,c}: states {} {a} {a,b} {a,b,c};
// paths {a}{b}{c}, {a,b}{c}, {a}{b,c}.
//
// The orchestrator uses it as the BLP's warm start and tests use it as an oracle. Only "full"
// output-set candidates take part (a disjoint plan must write every value read outside its kernel).
// States are visited by size (every step adds a primitive), stored as (prefix length, bits after
// the prefix): in topological numbering most states are a long done prefix plus a few nodes.
// The number of states can grow as the product of independent branch lengths; past
// `state_limit` the search stops and reports that it did not complete.
//
// With `window` > 0 the search is a heuristic instead: it only keeps states whose nodes past the
// done prefix all lie within `window` positions of it. Running the primitives one by one in
// topological order stays possible, so it always reaches the full state (when singletons can be
// emitted), with few states; the plan it returns is a valid no-recompute plan, not a proven
// optimum. The orchestrator uses it as the BLP's warm start when the exact search gives up.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "orchestrate/kernel_candidate.h"

namespace korch {

struct DpResult {
  bool completed = false;   // false: state or time limit hit (or no path: see `feasible`)
  bool feasible = false;    // a path to the full state exists
  double cost = 0;
  std::vector<int> chosen;  // candidate indices in execution order
  int64_t states = 0;       // states visited
  double seconds = 0;
};

// `costs[i]` is candidate i's cost (infinity: unusable). `max_seconds` > 0 also stops the search
// (as the state limit does) once it has run that long.
DpResult shortest_path_over_states(const Graph& g, const std::vector<KernelCandidate>& candidates,
                                   const std::vector<double>& costs, int64_t state_limit, int window = 0,
                                   double max_seconds = 0);

}  // namespace korch
