// Internal to the CUDA loop emitter (cuda_loop_emitter*.cc): the printer of one stage under one
// thread mapping, and the launch plan of a kernel.
//
// Each expression node becomes one SSA temporary `const float t12 = ...;` placed at the depth of
// the innermost loop it depends on (as on the CPU), where a depth is a point of the generated
// code at which a set of loop variables becomes known: a grid-stride loop defines all the loops
// it flattens at once, a serial reduce loop one. So a per-row operand is loaded once per row and
// a value not depending on the reduce loops once per output; div/mod/table index atoms likewise.
// Text of literals, index and expression nodes: cuda_loop_emitter_expr.cc; mappings:
// cuda_loop_emitter_stage.cc; the kernel (tables, launches, row kernels): cuda_loop_emitter.cc.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_loop_emitter.h"
#include "codegen/loop_kernel.h"
#include "codegen/loop_kernel_c.h"
#include "codegen/loop_kernel_deps.h"
#include "support/code_writer.h"

namespace korch::cuda::detail {

using loop::ExprNode;
using loop::ExprOp;
using loop::Fn;
using loop::IndexNode;
using loop::IndexOp;
using loop::Stage;

constexpr int kSmCount = 132;  // H200 (sm_90): what grid sizes are scaled to

// Blocks a grid-stride launch of `block` threads needs for `work` items (one per thread),
// capped at two waves of full occupancy; the grid-stride loop covers the rest.
int64_t grid_for(int64_t work, int block);

inline const char* ctype(DType t) { return loop::c_type(t); }
std::string float_literal(DType t, double v);
inline std::string int_literal(DType t, int64_t v) { return loop::c_int_literal(t, v); }
std::string literal(const ExprNode& n);
inline std::string int_bound(DType t, bool highest) { return loop::c_int_bound(t, highest); }  // lowest / highest value of an integer or bool type
inline std::string math_fn(Fn f, DType t) { return loop::c_math_fn(f, t); }            // libm name: expf for f32, exp for f64
std::string table_name(const std::string& symbol, int table);

// How a reduction stage's outputs map onto threads.
enum class ReduceMap { kThread, kWarp, kBlock, kTwoPass };

// The threads that cooperate on one output of a reduction or one row of a row kernel: the
// variable holding a thread's rank in the group, the group's size (text) and its combine calls.
struct Group {
  bool block = false;     // a whole block (shared memory + __syncthreads) or one warp (shuffles)
  std::string tid, size;  // "threadIdx.x", "blockDim.x" / "lane", "32"
};

class CudaStage {
 public:
  CudaStage(const LoopKernel& k, const Stage& st, const std::string& symbol);
  const Stage& stage() const { return st_; }
  int num_loops() const { return static_cast<int>(st_.loops.size()); }
  int64_t kept_iterations() const;  // outputs of a reduction, elements of a pointwise stage
  int64_t reduce_length() const;    // product of the reduce loops (1 without any)
  int64_t per_row() const;          // iterations of loops 1.. (row kernels)
  bool is_arg() const;

  // Whether every index value (and intermediate sum), loop count and flat counter fits in int32.
  bool fits_i32() const;
  // "" when the float4 mapping applies, else why not.
  std::string vec4_reason() const;
  // Reads strided along the innermost reduce loop but contiguous along the innermost kept loop
  // (a middle axis, pool windows): consecutive threads on consecutive outputs coalesce.
  bool strided_reduce() const;
  // The mapping kAuto picks for this reduction as a stand-alone launch.
  ReduceMap auto_reduce(int block) const;
  // Two-pass chunks per output.
  int64_t two_pass_chunks(int block) const;

  struct Access {
    int buffer;
    std::string key;  // canonical index text (comparable across stages)
    int level;
  };
  std::vector<Access> loads() const;
  std::vector<Access> stores() const;
  // Buffers the stage reads / writes (for the function's pointer declarations): all of them, or
  // those of the two-pass partials (the value's loads) or fold (the result's loads, the stores).
  enum class Part { kAll, kValue, kResult };
  void buffers_used(std::set<int>* read, std::set<int>* written, Part part = Part::kAll) const;
  // Shared-memory arrays the group combines need: "<type>" names, arg position arrays included.
  void shared_needs(std::set<std::string>* types) const;

  // --- printers; `wide` selects 64-bit index arithmetic ---
  void set_wide(bool wide) { wide_ = wide; }
  // Grid-stride over all loops (vector: float4 along the innermost loop).
  void print_pointwise(CodeWriter& w, bool vector);
  // A reduction as its own launch.
  void print_thread_reduce(CodeWriter& w);
  void print_group_reduce(CodeWriter& w, bool block);
  // Two-pass: partial results of chunks (pass 1, a block per chunk), then the fold per output.
  void print_two_pass_partials(CodeWriter& w, int64_t chunks, int value_slot, int pos_slot);
  void print_two_pass_fold(CodeWriter& w, int64_t chunks, int value_slot, int pos_slot);
  // Inside a row kernel whose caller has defined `i0`: the stage's work for that row, spread
  // over the group (a reduction's result stored by the group's rank 0).
  void print_row_part(CodeWriter& w, const Group& g);

 private:
  static constexpr int64_t kNonAffine = loop::kNonAffine;
  void mark_needed();
  std::vector<char> reachable(int root) const { return loop::reachable_exprs(st_, root); }
  std::vector<char> index_needs(const std::vector<char>& exprs, bool with_stores) const;
  // coefficient of loop l in index i; kNonAffine if not affine
  int64_t coef(int i, int l) const { return loop::affine_coef(st_, imask_, i, l); }
  int depth_of(uint64_t mask) const;
  static bool is_atom(const IndexNode& n) { return loop::is_index_atom(n); }
  bool is_vec_load(int e) const;

  // Temporaries of depth `d` among `only` (nullptr: every needed one); acc: the accumulator's.
  void emit_level(CodeWriter& w, int d, const std::vector<char>* only, bool with_stores, bool acc = false);
  // Defines loop variables first..last (by name) from the flat counter `flat` (< their product).
  void decompose(CodeWriter& w, const std::string& flat, const std::vector<int>& loops,
                 const std::vector<int64_t>& extents, const std::vector<std::string>& names);
  std::vector<int> loop_range(int from, int to) const;

  // Accumulator declaration, fold of one value, the group combine.
  void acc_init(CodeWriter& w) const;
  void fold(CodeWriter& w, const std::string& pos) const;
  void combine(CodeWriter& w, const Group& g) const;
  std::string identity() const;
  std::string op_struct() const;  // korch_op_sum ...
  std::string arg_params() const;  // "true, false" (max, last)
  void stores(CodeWriter& w);
  // The flat reduce loop `for (r = first; r < end; r += step)` with its body and the fold.
  void flat_reduce_loop(CodeWriter& w, const std::string& first, const std::string& end, const std::string& step,
                        const std::vector<char>* only);

  std::string it() const { return wide_ ? "int64_t" : "int32_t"; }
  std::string ilit(int64_t v) const;
  std::string var(int l) const;
  std::string index_ref(int id) const;
  std::string index_def(int id) const;
  std::string operand(int e) const;
  std::string expr_def(int e) const;

  const LoopKernel& k_;
  const Stage& st_;
  std::string symbol_;
  bool wide_ = true;
  std::vector<char> needed_e_, needed_i_, needed_value_, needed_result_, eacc_;
  std::vector<uint64_t> imask_, emask_;
  std::vector<int> depth_;                  // loop -> depth in the code being printed
  std::map<int, std::string> var_name_;     // loop -> name override (the vector base)
  std::map<int, std::string> vec_;          // load expression -> the float4 holding it
  int lane_ = -1;                           // vector lane being printed (0..3)
};

// One launch of the kernel: a stand-alone stage, a row kernel over stages [first, last], or one
// of the two passes of a two-pass reduction.
struct LaunchPlan {
  enum class Kind { kPointwise, kReduce, kRow, kPartials, kFold } kind = Kind::kPointwise;
  int first = 0, last = 0;
  ReduceMap map = ReduceMap::kThread;  // kReduce
  bool vector = false;                 // kPointwise
  int64_t chunks = 0;                  // kPartials / kFold
  int value_slot = -1, pos_slot = -1;  // two-pass partial buffers (argument slots)
};

// The launches of k under `s`, or "" + reason when the schedule does not apply. extra_scratch
// receives the two-pass partial buffers' sizes.
std::vector<LaunchPlan> plan_launches(const std::vector<CudaStage>& stages, const CudaSchedule& s,
                                      int first_extra_slot, std::vector<int64_t>* extra_scratch, std::string* reason);

}  // namespace korch::cuda::detail
