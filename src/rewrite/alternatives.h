// Rewrite alternatives: rewrites that CAN lose, offered to the orchestrator instead of applied.
//
// Why alternatives rather than greedy application. The passes in rewrite.h never lose (they only
// remove or merge work), so simplify() applies them wherever they match. The rules here trade one
// kind of work for another: a ReduceSum becomes a MatMul with a ones operand (more FLOPs, but it
// can fuse into the linear kernel before it), a division moves across a MatMul (it then runs on
// the [M,N] output instead of the [M,K] operand: cheaper or dearer depending on K vs N, and it
// changes which kernels can fuse), a Transpose becomes an operand flag of a linear primitive (one
// less copy, but a possibly slower strided library call). Whether one wins depends on shapes, the
// kernels around it and the library, so no local rule can decide. A TASO-style optimizer would
// search over rewritten graphs with a cost model and keep the cheapest one; Korch instead keeps
// BOTH variants and lets the orchestrator (which measures candidate kernels) choose, so a rule is
// never applied on a guess here. find_alternatives() only reports; it never edits the graph.
//
// Applying: `apply` rewrites the graph it is given in place. It must be given a graph identical to
// the one the alternative was found on (typically a copy of it), or one where the matched nodes are
// untouched (another alternative applied elsewhere is fine). `apply` re-runs the rule's pattern
// match on the node it was found at (looked up by its first output's name) and KORCH_CHECK-fails
// when the pattern no longer matches the same nodes: applying to an unrelated graph is a bug in the
// caller. After rewriting it removes dead code (the replaced nodes, and any other dead code) and
// keeps the graph's function, input/output names and types, and invariants (verify_graph).
//
// Families (rule names in quotes); attention_rewrites.cc:
//   "reduce_sum_as_matmul"      ReduceSum over the last (or second-to-last) axis, keepdims ->
//                               MatMul with a ones[K,1] (ones[1,K]) operand
//   "scale_after_matmul"        a scalar / per-row (left operand) / per-column (right operand)
//                               Mul or Div of a MatMul operand moved onto the MatMul output
//   "scale_before_matmul"       the reverse: a scalar or per-row Mul/Div of a MatMul output moved
//                               onto its left operand
//   "transpose_into_einsum"     MatMul of operands transposed in their last two axes -> one Einsum
//                               with the transposes as its subscripts
//   "transpose_of_matmul"       Transpose(MatMul(a, b)) swapping the last two axes ->
//                               MatMul(Transpose(b), Transpose(a))
// sparse_matmul.cc:
//   "sparse_matmul_as_gathers"  MatMul with a constant operand of at most 4 nonzeros per output
//                               position (a linear or cubic Resize axis) -> that many Gathers of
//                               the other operand, scaled and added
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "rewrite/rewrite_util.h"

namespace korch {

struct Alternative {
  std::string rule;                 // the family's rule name (see above)
  std::vector<std::string> nodes;   // names of the nodes it replaces
  std::string description;          // one line: what becomes what, with shapes
  std::function<void(Graph&)> apply;  // see "Applying" above
};

// Every alternative of every family, in node order (several may overlap: they are choices).
std::vector<Alternative> find_alternatives(const Graph& g);

// --- for families -----------------------------------------------------------------------------

// One match of a rule at a node of `g`: the nodes it replaces (ids in `g`), a description, and the
// rewrite, valid only for `g` (it refers to ids of `g`).
struct AltMatch {
  std::vector<NodeId> nodes;
  std::string description;
  std::function<void(Graph&)> rewrite;
};
// A rule's matcher, anchored at node `n` of `g`.
using AltMatchFn = std::optional<AltMatch> (*)(const Graph& g, const UseInfo& uses, NodeId n);
struct AlternativeFamily {
  std::string rule;
  AltMatchFn match;
};

// attention_rewrites.cc
const std::vector<AlternativeFamily>& attention_alternative_families();
// sparse_matmul.cc
const std::vector<AlternativeFamily>& sparse_matmul_alternative_families();
// matvec_as_reduce.cc
const std::vector<AlternativeFamily>& matvec_alternative_families();

}  // namespace korch
