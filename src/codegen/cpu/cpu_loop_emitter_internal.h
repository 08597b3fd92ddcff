// Internal to the CPU loop emitter (cpu_loop_emitter*.cc): the printer of one stage.
//
// Each stage is one block: `#pragma omp parallel for` over its outer kept loops when it has
// enough work, plain loops inside, and the innermost loop under `#pragma omp simd` (with a
// `reduction(...)` clause when it is a reduce loop). Every expression node becomes one SSA
// temporary `const float t12 = ...;` placed at the outermost loop level it depends on, so a
// per-channel operand is loaded once per row and a value not depending on the reduce loops is
// computed once per output; div/mod/table index atoms are hoisted the same way.
// Schedules (cpu_loop_emitter_stage.cc): plain nests, the kept-inner reduction, loop
// unswitching on invariant selects; expression text in cpu_loop_emitter_expr.cc.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "codegen/loop_kernel.h"
#include "codegen/loop_kernel_c.h"
#include "codegen/loop_kernel_deps.h"
#include "support/code_writer.h"

namespace korch::cpu::detail {

using loop::ExprNode;
using loop::ExprOp;
using loop::Fn;
using loop::IndexNode;
using loop::IndexOp;
using loop::Stage;

// Element-ops above which a stage runs on all threads (a parallel region costs a few us).
constexpr int64_t kParallelWork = 1 << 15;
// The shortest innermost pointwise loop printed as a simd loop: a shorter one is unrolled, and the
// loop around it vectorized instead (an image read channels-last, [N, 224*224, 3]:
// bench/short_inner_loops.cc), which then stays out of the parallel loops when those around it
// have at least kShortInnerParallelIters iterations to share.
constexpr int64_t kShortestSimdLoop = 5;
constexpr int64_t kShortInnerParallelIters = 16;
// Most accumulators a kept-inner reduction holds on the stack (its row, or its partial rows): a
// channels-last column pool merges a whole image row with its channels ([13, 13, 512] pools rows
// of 6656).
constexpr int64_t kKeptRowMax = 16384;
// Parts of a reduction cut along its reduce loop (StagePrinter::reduce_split): a fixed number,
// not the thread count, so that the sums' order (and their bits) is the same on any machine.
constexpr int64_t kReduceParts = 8;
// ... and only from this many elements read: the parts' rows and the parallel region cost more
// than a second thread saves below (a [1, 49, 1152] -> [1, 1152] mean: 5.6 us whole, 8.0 us in
// parts; [1, 196, 672]: 12.0 -> 9.1 us; [1, 12544, 32]: 33.7 -> 19.1 us).
constexpr int64_t kReduceSplitElements = 1 << 16;

inline const char* ctype(DType t) { return loop::c_type(t); }
std::string float_literal(DType t, double v);
inline std::string int_literal(DType t, int64_t v) { return loop::c_int_literal(t, v); }
std::string literal(const ExprNode& n);
// The lowest / highest value of an integer or bool type as a literal.
inline std::string int_bound(DType t, bool highest) { return loop::c_int_bound(t, highest); }
// The libm function for `f` on `t` (expf for f32, exp for f64).
inline std::string math_fn(Fn f, DType t) { return loop::c_math_fn(f, t); }

class StagePrinter {
 public:
  StagePrinter(const LoopKernel& k, const Stage& st, CodeWriter& w);

  // Element-ops of the stage: iterations times expression nodes.
  int64_t work() const;

  // The whole stage as one block.
  void print();

  // The stage's body for one iteration of its first `depth` loops, which the caller has opened
  // as `i0`, `i1`, ... (row fusion: several stages share those loops).
  void print_row(int depth);

  struct Access {
    int buffer;
    std::string key;  // loop::canonical_index: comparable across stages
    int level;
  };
  std::vector<Access> loads() const;
  std::vector<Access> stores() const;
  const Stage& stage() const { return st_; }
  // How many leading loops print_row() can leave to a caller: kept loops only, and a pointwise
  // stage's innermost (simd) loop stays its own unless it is its only loop; fewer when the
  // kept-inner schedule moves loop K - 1 innermost; none under a transpose tiling.
  int max_row_depth() const;

 private:
  // Expressions reachable from `root` (loop_kernel_deps.h).
  std::vector<char> reachable(int root) const { return loop::reachable_exprs(st_, root); }

  void mark_needed();

  // Reductions over a short or strided reduce loop (pool windows, a middle axis) run with the
  // innermost kept loop inside the reduce loops, accumulating a row of outputs in a local array:
  //   for kh, kw: simd for ow: accv[ow] = max(accv[ow], x[...])
  // so the vector loop runs along the output row instead of along a 3-wide window.
  void choose_kept_inner();

  // Coefficient of loop `l` in index node `i` when it is affine in it; kNonAffine otherwise.
  static constexpr int64_t kNonAffine = loop::kNonAffine;
  int64_t coef(int i, int l) const { return loop::affine_coef(st_, imask_, i, l); }

  int depth_of(uint64_t mask) const;

  static bool is_atom(const IndexNode& n) { return loop::is_index_atom(n); }

  // Index atoms and expressions emitted at depth `lv` (acc: those of the accumulator), in id
  // (= dependency) order; `only`, when given, restricts the expressions to a subset.
  void emit_level(int lv, bool acc = false, const std::vector<char>* only = nullptr, bool with_stores = false);

  // Whether index atom `i` is used (directly or inside another index) by an expression in `set`.
  bool atom_used_by(int i, const std::vector<char>& set, bool with_stores) const;
  bool index_contains(int root, int i) const { return loop::index_contains(st_, root, i); }

  std::string var(int l) const { return fmt::format("i{}", l); }

  void open_loops(int from, int par, int L, int K);

  // The variables of a collapsed parallel loop `p`, innermost first: each is (p / the extents
  // before it) % its extent, the outermost without the mod, times `scale` (a block's first index).
  struct FlatPart {
    std::string name;
    int64_t extent = 1;
    int64_t scale = 1;
  };
  void unflatten(const std::vector<FlatPart>& parts);

  // `for (...)` over loop l: its whole extent, or one tile of it under the transpose tiling.
  std::string loop_header(int l) const;

  // The transpose tiling (loop::find_transpose_tile): one parallel loop over every tile (the
  // loops outside the tile and the two block loops, collapsed), then one tile (rows x cols) with
  // the columns innermost under `omp simd`.
  //   for p: i1b = p % 16 * 16, i0b = p / 16 * 64;
  //     for i0 in [i0b, i0b + 64): simd for i1 in [i1b, i1b + 16)
  void tiled_body();

  // Loop unswitching for selects whose condition does not change along the innermost loop (a
  // Concat along an outer axis, a Pad's border rows): one copy of the loop per outcome, each
  // computing only its branch, instead of computing every branch for every element.
  //   if (t7) { simd loop reading input 0 } else if (t3) { ... input 1 } else { ... input 2 }
  // At most kMaxInnerCopies copies: a Concat of n inputs is a chain of n - 1 selects and needs
  // n (densenet121's dense blocks concatenate up to 32), k independent conditions (a Pad's
  // borders) 2^k. Beyond the budget the remaining selects stay per element.
  static constexpr int kMaxInnerCopies = 64;
  void specialized_inner_loop(int l, std::map<int, bool>& assumed);

  // Expressions the stores reach when the selects on `assumed` conditions take that branch.
  std::vector<char> live_under(const std::map<int, bool>& assumed) const;

  // Inside loop `l` (just opened): its level's temporaries, then the loops inside it.
  void after_open(int l, int L, int K);

  // A reduction with the reduce loops innermost: a scalar accumulator per output.
  void reduction_body(int L, int K);
  void reduce_loops(int l, int L, bool arg);
  // The statement folding `v` into accumulator `acc` (sum, product, max, min).
  std::string combine(const std::string& acc, const std::string& v) const;
  // The combiner's identity in `t`.
  std::string identity(DType t) const;
  // The kept-inner schedule (choose_kept_inner).
  void kept_inner_body(int L, int K);
  // Parts the outermost reduce loop of a kept-inner reduction is cut into when no kept loop can
  // be shared out among the threads (a global pool: [1, 12544, 32] -> [1, 32]); 1: not cut.
  int reduce_split(int K) const;
  // One accumulation loop of the kept-inner schedule over outputs [from, to) of the row.
  void kept_inner_accumulate(int L, int K, int64_t from, int64_t to);

  // Interior of the kept-inner row: padded or clamped windows (a pool's pads, ceil_mode) clamp
  // their indices and mask their loads near the row's ends only. interior_of_row() finds the
  // widest run of outputs [p, q) around the middle of the row where every clamp (min/max) that
  // depends on the row loop resolves to the same operand and every range test holds, for every
  // value of the other loops; inside it the clamps print as their operand and the tests as
  // true, so the row loop reads plain affine (stride 1 or 2) addresses the compiler vectorises,
  // where a clamped address is a gather. Empty when the middle of the row does not resolve.
  struct RowInterior {
    int64_t from = 0, to = 0;
    std::vector<int> resolutions;  // resolutions_at() anywhere in [from, to)
  };
  RowInterior interior_of_row(int K);
  // Value range of index node `id` when the row loop (K - 1) is `j` and every other loop spans
  // its extent.
  std::pair<int64_t, int64_t> range_at(int id, int K, int64_t j) const;
  // How each clamp and range test resolves at row position j (-1: it does not resolve there).
  std::vector<int> resolutions_at(int K, int64_t j) const;

  void store(const loop::Store& s);

  // An index node as an operand: atoms by their temporary, the rest inline.
  std::string index_ref(int id) const;

  std::string index_def(int id) const;

  std::string operand(int e) const;

  std::string expr_def(int e) const;
  int negated_abs_of(int e) const;  // v where e is -|v| (so exp(e) is at most 1), else -1

  const LoopKernel& k_;
  const Stage& st_;
  CodeWriter& w_;
  bool kept_inner_ = false;
  int split_ = 1;  // reduce_split() of the stage being printed
  loop::TransposeTile tile_;
  // A pointwise stage whose innermost loop is shorter than kShortestSimdLoop: that loop is unrolled,
  // and the loop around it is the simd loop (open_loops) unless it is parallel or row-fused.
  bool short_inner_ = false;
  int inner_copies_ = 0, pending_copies_ = 0;  // specialized_inner_loop's budget
  std::map<int, int> alias_;  // select -> the branch it takes (inside an unswitched loop)
  std::map<int, int> index_alias_;  // clamp -> the operand it resolves to (interior of a row)
  std::vector<char> always_true_;   // range tests that hold (interior of a row)
  std::vector<int> row_clamps_, row_tests_;  // clamps / range tests that depend on the row loop
  std::vector<char> needed_e_, needed_i_, needed_value_, needed_result_, eacc_;
  std::vector<uint64_t> imask_, emask_;
  std::vector<int> depth_;  // loop -> nesting depth in the emitted code
};

}  // namespace korch::cpu::detail
