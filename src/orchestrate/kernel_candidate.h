// Candidate kernels: the convex subgraphs of a primitive graph, each with an output set.
//
// Worked example. For  x -> A -> B -> y  with  A -> C -> z  (A feeds both B and C):
//   connected convex subsets: {A} {B} {C} {A,B} {A,C} {A,B,C}   ({B,C} is not connected)
//   {A,B}: inputs {x}; external values {a (read by C), y}; sink values {y}
//          -> two candidates: outputs {a, y} ("full") and {y} ("minimal": a is recomputed by
//             whichever kernel computes C, or materialised by another candidate)
// A set S of primitives is convex when no path leaves S and comes back into it; convexity is what
// lets a kernel run as one unit: everything it needs from outside is computed before it starts.
//
// What is offered (and why):
//   * Weakly connected convex subsets (through producer -> consumer edges inside the subset). A
//     disconnected kernel is two kernels launched together; it saves a launch only, which the
//     plan's sum of costs cannot express anyway, and it multiplies the count combinatorially.
//   * At most `max_primitives` primitives, `max_linear` linear primitives, and `max_fanout`
//     consumers of any one primitive per kernel. The
//     enumeration grows connected sets and prunes a set as soon as its convex closure breaks a
//     cap: every convex superset contains the closure, so nothing within the caps is lost.
//   * Opaque primitives (TopK, LSTM, ...) and operators left whole are kernels alone.
//   * Scalar arithmetic (a primitive whose inputs and outputs each hold one element: the scale
//     and zero point of a DynamicQuantizeLinear, from its ReduceMin/ReduceMax) joins no other
//     primitive's kernel. Each weakly connected group of it is offered alone and whole (one
//     candidate, even above `max_primitives`) next to its singletons. Such kernels are
//     launch-bound, so whether a tensor kernel recomputes a scale inline changes microseconds,
//     while every connected subset of a 14-primitive scalar group, times its tensor neighbours,
//     made most of a quantized text model's 39k candidates. A group that is not convex (a path
//     through a tensor primitive leaves it and comes back) or that cannot be emitted whole is
//     enumerated like any other primitives. Off with `whole_scalar_groups = false`.
//   * Row groups: from each reduce, the connected convex set of elementwise, broadcast, reduce
//     and Reshape primitives grown around it breadth-first (at most 32; a layer norm with its
//     bias and residual adds: ~15 primitives; a softmax) is offered whole too, full and minimal
//     outputs, even above `max_primitives`, when fusable. The cap keeps the enumeration small,
//     and left a layer norm in 2-5 kernels, each a pass over the activation that the next reads
//     again; one candidate per group costs one measurement. Its subsets are enumerated as before,
//     so the measured costs choose. Off with `whole_row_groups = false`.
//   * A Concat or view written in place (runtime/memory_plan.h) joins a kernel only with a reader of its
//     output, and runs alone when no node reads it (enumerate_candidates says why).
//   * Output sets: "full" = every value computed inside and read outside or a graph output;
//     "minimal" = only the values of the kernel's sink primitives (those with no consumer inside
//     it). Full is what a no-recompute plan needs; minimal is what recompute needs (the interior
//     value is recomputed by its other consumers' kernels instead of written). Intermediate
//     subsets are not offered: the cost of a kernel grows with each output written, so the two
//     extremes bracket them, and offering 2^k subsets would multiply the program size.
// Rejections are counted by reason, with the first few examples of each kept for `korch explain`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "orchestrate/fusion_rules.h"

namespace korch {

struct KernelCandidate {
  std::vector<NodeId> nodes;    // ascending (= topological: graph nodes are topologically sorted)
  std::vector<ValueId> inputs;  // distinct values read from outside: graph inputs, constants and
                                // values of nodes outside, in order of first use
  std::vector<ValueId> outputs; // the values it writes (ascending)
  int linear = 0;               // linear primitives inside
  bool minimal_outputs = false; // true for the "minimal" output-set variant
};

struct CandidateOptions {
  int max_primitives = 8;
  int max_linear = 1;
  // Most consumers of one primitive inside a kernel. A value read by many primitives (the 20
  // Slices of a detection head) would otherwise put every 7-subset of its readers into a kernel
  // with it: C(20, 7) = 77k candidates that differ only in which reads share a pass. Closed
  // under supersets like the other caps, so pruning stays exact for the capped space.
  int max_fanout = 4;
  bool offer_minimal_outputs = true;  // false: no-recompute candidates only (full output sets)
  bool whole_scalar_groups = true;    // scalar arithmetic as whole groups only (see above)
  bool whole_row_groups = true;       // row groups offered whole too (see above)
  // Drop sets that unfusable_reason(rules) (fusion_rules.h) rejects, and stop growing them: the
  // rule is closed under convex supersets (an offending primitive stays offending), and every
  // convex subset of an emittable set is emittable, so no emittable candidate is lost.
  bool prune_unfusable = true;
  FusionRules rules;  // the target's (Backend::fusion_rules()); the default is the CPU's
  int64_t max_candidates = 4'000'000; // safety stop: enumeration throws kUnsupported beyond it
};

struct RejectedCandidate {
  std::vector<NodeId> nodes;
  std::string reason;
};

struct CandidateSet {
  std::vector<KernelCandidate> candidates;
  int64_t connected_sets = 0;                      // connected subsets visited
  int64_t scalar_primitives = 0;                   // scalar arithmetic fusing only within its group
  int64_t scalar_groups = 0;                       // groups of more than one offered whole (see above)
  int64_t row_groups = 0;                          // row groups offered whole above the caps (see above)
  std::map<std::string, int64_t> rejected;         // reason -> count
  std::vector<RejectedCandidate> rejected_examples;// up to 5 per reason
  void reject(const std::vector<NodeId>& nodes, const std::string& reason);
};

// Values every kernel may read without a producer kernel: graph inputs and constants.
bool is_free_value(const Graph& g, ValueId v);

// Builds one candidate from a set of nodes (need not be convex: the caller checks). `minimal`
// selects the output-set variant described above.
KernelCandidate make_candidate(const Graph& g, std::vector<NodeId> nodes, bool minimal);

// c's first linear primitive (the one its library call runs), or -1 when it has none (c.linear 0).
NodeId linear_node(const Graph& g, const KernelCandidate& c);

// All candidates of `g` (a primitive graph, topologically sorted, dead code removed).
CandidateSet enumerate_candidates(const Graph& g, const CandidateOptions& options);

// The candidate by name, "n,<node names>|o,<output names>", each list sorted: names, unlike ids
// and orders, identify one kernel across the rewrite variants of a model (rewrite_choice.h).
std::string candidate_names(const Graph& g, const KernelCandidate& c);

// Readable one-liner: "Conv+Add+Relu [3 prims, 1 linear]".
std::string describe_candidate(const Graph& g, const KernelCandidate& c);

}  // namespace korch
