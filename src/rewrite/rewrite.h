// The rewrite stage: algebraic and layout rewrites on the primitive graph (after fission).
//
// A rewrite pass is `bool pass(Graph&)`: it edits the graph in place and returns whether it
// changed something. Passes keep the graph's function (same outputs for the same inputs, up to
// fp rounding where a rule reassociates exact-in-real-arithmetic math), its input/output names and
// types, and its invariants (verify_graph).
//
// GREEDY APPLICATION IS USED ONLY FOR RULES THAT NEVER LOSE: each rule below removes work or
// leaves it equal (a node removed, two nodes merged into one, a constant computed once, a scale
// moved into weights that are constant anyway), so applying it wherever it matches can never make
// the graph slower. simplify() runs these families to a fixed point.
// Rules that CAN lose — merging MatMuls that share an operand, moving a division or a scale across
// a MatMul, splitting or reordering reductions, layout changes that help one consumer and hurt
// another — are NOT applied here: they will be offered to the orchestrator as alternatives whose
// cost it measures (next slice).
//
// Families (one file each):
//   layout_simplify.cc   Squeeze/Unsqueeze/Flatten (and Transposes that only move size-1 dims) ->
//                        Reshape; Transpose∘Transpose -> one Transpose or nothing; Reshape∘Reshape
//                        -> one Reshape; no-op Reshape/Transpose/Expand/Slice/Concat removed;
//                        Slice of a Concat selecting exactly one input -> that input
//   algebra_simplify.cc  x*1, x+0, x-0, x/1, x^1, Neg(Neg(x)), Identity removed; constant folding
//                        (not growing); common-subexpression elimination (identical constants too)
//   fold_into_linear.cc  a constant per-output-channel scale after Conv (constant weights) or
//                        after MatMul (constant right operand) folded into the weights, through a
//                        bias Add (bias scaled too); two consecutive bias Adds merged into one
//   concat_simplify.cc   a Concat of Slices of one value at a constant stride -> one Slice of a view;
//                        a Concat of same elementwise ops on constants -> the op on the Concat;
//                        a Slice of an elementwise op of a Concat selecting one input -> the op on it
//   broadcast_sinking.cc an elementwise op over Expands of same-shaped sources computed on the
//                        sources, then expanded once
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace korch {

using RewritePassFn = std::function<bool(Graph&)>;
struct RewritePass {
  std::string name;
  RewritePassFn run;
};

// The never-losing simplification passes, in the order simplify() runs them.
const std::vector<RewritePass>& simplification_passes();

struct SimplifyOptions {
  int max_iterations = 20;  // rounds over all passes; the fixed point is usually reached in 2-4
#ifdef NDEBUG
  bool verify = false;      // verify_graph(g, true) after every pass that changed something
#else
  bool verify = true;
#endif
  // Called after every pass that changed the graph (KORCH_DUMP writes the graph there).
  std::function<void(const std::string& pass, const Graph& g)> after_pass;
};

struct SimplifyReport {
  int iterations = 0;
  bool fixed_point = false;               // false when max_iterations stopped it
  std::map<std::string, int> changed_by;  // pass name -> rounds in which it changed the graph
  int nodes_before = 0, nodes_after = 0;
};

// Runs simplification_passes() to a fixed point (each round: every pass, dead code removed after
// each pass that changed something), then remove_dead_code. Throws korch::Error naming the pass
// when verification fails.
void simplify(Graph& g, const SimplifyOptions& options = {}, SimplifyReport* report = nullptr);

// --- broadcast_sinking.cc ---
bool sink_broadcasts(Graph& g);           // op(Expand(a), Expand(b)) -> Expand(op(a, b)), single-use Expands

// --- layout_simplify.cc ---
bool normalize_reshapes(Graph& g);        // Squeeze/Unsqueeze/Flatten, size-1-only Transpose -> Reshape
bool merge_transposes(Graph& g);          // Transpose(Transpose(x, p1), p2) -> Transpose(x, p1∘p2) or x
bool merge_reshapes(Graph& g);            // Reshape(Reshape(x)) -> Reshape(x)
bool merge_view_chains(Graph& g);         // Transpose/Reshape chain that keeps memory order -> Reshape(x)
bool remove_noop_layout(Graph& g);        // Reshape/Transpose/Expand/Slice/Concat/Tile/Pad whose output is its input
bool slice_of_concat(Graph& g);           // Slice(Concat(a, b, c)) selecting exactly b -> b

// --- concat_simplify.cc ---
bool regroup_sliced_concat(Graph& g);          // Concat(Slice(x, 0:2), Slice(x, 85:87), ...) -> Reshape(Slice(Reshape(x)))
bool hoist_elementwise_over_concat(Graph& g);  // Concat(op(a, c1), op(b, c2)) -> op(Concat(a, b), [c1, c2])
bool slice_elementwise_of_concat(Graph& g);    // Slice(op(Concat(a, b), c)) selecting b -> op(b, c)

// --- conv_over_concat.cc ---
bool conv_over_upsampled_concat(Graph& g);  // Conv1x1(Concat(upsample(y_i))) -> sum of upsample(Conv1x1(y_i))

// --- algebra_simplify.cc ---
bool remove_neutral_elements(Graph& g);   // x*1, 1*x, x+0, 0+x, x-0, x/1, x^1 -> x (same type only)
bool remove_double_negation(Graph& g);    // Neg(Neg(x)) -> x
bool remove_identities(Graph& g);         // Identity(x) -> x
bool fold_constants(Graph& g);            // all-constant node whose outputs are no larger than its inputs
bool eliminate_common_subexpressions(Graph& g);  // equal constants merged, then identical nodes

// --- fold_into_linear.cc ---
bool fold_scale_into_linear(Graph& g);    // Conv/MatMul with constant weights followed by a constant
                                          // per-output-channel Mul: the scale moves into the weights
// MatMul(x, B1) (+ a per-column bias), through Reshapes that keep the last dim, read by a MatMul with
// constant [N, M] weights or a 1x1 Conv (channels-last, or channels-first through the Transpose
// that brings the last axis to axis 1, and a Reshape of the spatial dims): one MatMul(x, B1 B2)
// (+ bias B2-mapped), viewed back as the outer output, when that takes fewer multiply-adds
// (K*M < K*N + N*M). Exact in real arithmetic; the products are formed in double, rounded once.
bool fold_linear_into_linear(Graph& g);

}  // namespace korch
