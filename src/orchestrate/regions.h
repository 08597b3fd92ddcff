// Exact decomposition of kernel selection into independent regions.
//
// Two primitives belong to one region when some usable candidate contains both (transitively);
// regions whose producer -> consumer edges form a cycle are merged, so the regions are a DAG and
// are returned in topological order. No candidate crosses a region boundary, which makes the
// selection separable:
//   * a value v produced in region R and read by a primitive p of another region must be written
//     in every plan: whatever kernel computes p lies outside R, so it cannot contain v's producer,
//     so it reads v. v is therefore an output of R's subproblem (as a graph output is) and a free
//     input of the reader's;
//   * a kernel of R only reads values of R or of regions before it, so running the regions' plans
//     one after the other (each schedulable on its own) is a schedulable plan.
// So the optimum of the whole program is the sum of the regions' optima, and each region can be
// solved alone: the state search completes on regions where the whole graph has too many states,
// and the BLP solver closes small programs that it cannot close as one. On the CPU a Conv can only
// take epilogues downstream of it, so every Conv's input is a boundary, and a CNN falls apart into
// one region per Conv and its epilogue.
// Example: a -> b -> Conv -> c with candidates {a} {b} {a,b} {Conv} {Conv,c} {c}: regions {a, b}
// (output b's value) and {Conv, c} (input b's value, free).
#pragma once

#include <cmath>
#include <vector>

#include "ir/graph.h"
#include "orchestrate/kernel_candidate.h"
#include "orchestrate/rewrite_sites.h"

namespace korch {

struct SelectionRegion {
  std::vector<NodeId> nodes;       // original node ids, ascending
  std::vector<int> candidates;     // original indices of the usable candidates inside it
  // The region as a graph of its own: its nodes renumbered 0.. in order, every value kept under
  // its id (values produced outside the region become free: producer -1), outputs = the graph
  // outputs it computes plus the values other regions read. Candidates renumbered to match.
  Graph graph;
  std::vector<KernelCandidate> local_candidates;  // parallel to `candidates`
  RewriteSites sites;  // with rewrite sites: theirs in the region's node ids (every site's y kept)
};

// Whether a candidate at cost `seconds` takes part in the program: a finite cost, and (without
// recompute) not a variant that writes only its minimal outputs.
inline bool usable_candidate(const KernelCandidate& c, double seconds, bool allow_recompute) {
  return std::isfinite(seconds) && (allow_recompute || !c.minimal_outputs);
}
// usable_candidate for each candidate (costs parallel to `candidates`).
std::vector<bool> usable_candidates(const std::vector<KernelCandidate>& candidates, const std::vector<double>& costs,
                                    bool allow_recompute);

// `usable[i]`: candidate i may be selected (usable_candidates). Regions
// in topological order; a graph without any usable candidate for a node still gets that node in
// a region (alone), so the subproblem reports it as infeasible.
// With rewrite sites (rewrite_choice.h), each site's nodes (those it removes and those it adds)
// share a region, with the producers of the values only one of its variants reads, and sites that
// exclude each other share one too: then a value read across a boundary is read whichever
// variants are chosen, and the argument above holds for every choice.
std::vector<SelectionRegion> split_into_regions(const Graph& g, const std::vector<KernelCandidate>& candidates,
                                                const std::vector<bool>& usable,
                                                const RewriteSites* sites = nullptr);

}  // namespace korch
