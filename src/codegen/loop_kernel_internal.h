// Internal to the loop-kernel builder (loop_kernel*.cc): the stage builder that turns "the value
// of graph value v at index idx" into index and expression nodes of one stage.
//
// Index nodes are kept in a normal form so equal indices get equal ids (that is what makes the
// (value, index) memo and the expression CSE work across reshapes):
//   * sums are flattened (terms sorted by node id, coefficients merged, constants folded), and a
//     sum that is a single atom with coefficient 1 is that atom;
//   * floor div / mod by k split a sum into the part that is a multiple of k and a remainder R;
//     when R's range lies in [0, k) the div/mod disappears (what turns reshape(reshape(x)) back
//     into one flat index);
//   * k*(x div k) + (x mod k) recombines into x.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/loop_kernel.h"
#include "ir/primitive.h"

namespace korch::loop {

// Thrown inside the builder for anything it cannot describe; build_loop_kernel turns it into a
// LoopKernelBuild::reason.
struct Unsupported {
  std::string reason;
};
[[noreturn]] void unsupported(std::string reason);

// "Resize (node 'x')".
std::string node_ref(const Node& n);

// Kernel-wide state shared by the stage builders.
struct KernelContext {
  const Graph& g;
  LoopKernel& k;
  std::map<ValueId, NodeId> producer;   // values computed inside the kernel
  std::map<ValueId, int> buffer_of;     // argument inputs and materialised values -> buffer
  std::map<ValueId, int> table_of;      // baked non-scalar constants -> table (filled lazily)
  // Loop extents that the stages built next take where their dims group so at no more index
  // cost (after a value written ahead of a reduction: the stages reading it back then share the
  // writer's loops, which the CPU printer's row fusion needs). Empty: none.
  std::vector<int64_t> prefer_loops;
  int add_table(DType dtype, std::vector<int64_t> values);
};

class StageBuilder {
 public:
  StageBuilder(KernelContext& kc, Stage& st) : kc_(kc), st_(st) {}
  Stage& stage() { return st_; }

  // --- index nodes (loop_kernel_index.cc) ---
  int ix_const(int64_t c);
  int ix_var(int loop);
  int ix_add(int a, int b);
  int ix_add_const(int a, int64_t c);
  int ix_mul(int a, int64_t c);
  int ix_div(int a, int64_t k);  // floor division, k >= 1
  int ix_mod(int a, int64_t k);  // k >= 1
  int ix_min(int a, int b);
  int ix_max(int a, int b);
  int ix_clamp(int a, int64_t lo, int64_t hi) { return ix_max(ix_min(a, ix_const(hi)), ix_const(lo)); }
  int ix_table(int table, int a);
  // Row-major flat offset of multi-index `idx` in `shape` and its inverse.
  int flat_index(const std::vector<int>& idx, const Shape& shape);
  std::vector<int> unflatten(int flat, const Shape& shape);
  const IndexNode& ix(int id) const { return st_.index[static_cast<size_t>(id)]; }

  // --- expression nodes (loop_kernel_expr.cc) ---
  int e_load(int buffer, int index);
  int e_table(int table, int index);
  int e_const(DType t, double v);  // any dtype; integers/bools from the (integral) value
  int e_iconst(DType t, int64_t v);
  int e_index_value(DType t, int index);
  int e_in_range(int index, int64_t lo, int64_t hi);  // bool lo <= index < hi
  int e_acc(DType t);
  int e_unary(Fn f, int a);
  int e_binary(Fn f, int a, int b);
  int e_select(int c, int a, int b);
  int e_cast(DType t, int a);
  const ExprNode& expr(int id) const { return st_.exprs[static_cast<size_t>(id)]; }
  DType dtype_of(int e) const { return expr(e).dtype; }
  bool is_const(int e) const { return expr(e).op == ExprOp::kConst; }

  // --- values (loop_kernel_values.cc / loop_kernel_elementwise.cc) ---
  // The expression for element `idx` (one index node per dim of v's shape) of graph value v.
  int value_at(ValueId v, const std::vector<int>& idx);

 private:
  int intern_index(IndexNode n);
  int intern_expr(ExprNode n);
  int make_sum(std::map<int, int64_t> terms, int64_t c);
  int64_t gcd_split(const std::map<int, int64_t>& terms, int64_t c, int64_t k, int* big, int* small);
  void expand(int a, int64_t coef, std::map<int, int64_t>& terms, int64_t& c) const;
  int compute_value(ValueId v, const std::vector<int>& idx);
  int layout_value(const Node& n, int out_pos, const std::vector<int>& idx);
  int elementwise_value(const Node& n, const std::vector<int>& idx);

  KernelContext& kc_;
  Stage& st_;
  std::unordered_map<std::string, int> index_ids_, expr_ids_;
  std::map<std::pair<ValueId, std::vector<int>>, int> memo_;
};

// Index-set splitting (loop_kernel_split.cc): the positions of a stage's innermost loop variable
// (inside (0, extent), ascending) where one of its index tests, clamps, min/max or mod/div changes
// form; and how many such nodes depend on the innermost loop (what splitting there removes).
std::vector<int64_t> inner_split_points(const Stage& st);
int64_t inner_irregularity(const Stage& st);

// Element type names the builder accepts (storage); f16/bf16/strings are refused.
bool loop_dtype_supported(DType t);

}  // namespace korch::loop
