// The target-independent description of a loop kernel (what the CPU and CUDA emitters share).
//
// A loop kernel computes a convex set of non-linear primitives (elementwise, broadcast, layout,
// reduce, windowed reduce) from argument buffers into output buffers. It is plain data:
//   * buffers: the kernel's argument inputs, its outputs and its scratch buffers (flat, row-major);
//     tables: small baked integer constants (Gather indices, window counts, integer constants);
//   * stages, run in order; each is one loop nest (loops outer to inner) with
//       - an index pool: int64 expressions over the nest's loop variables (affine sums, floor
//         div/mod by constants, min/max, table lookups), simplified and hash-consed, each with
//         its value range and the innermost loop it depends on;
//       - an expression DAG (hash-consed, so common subexpressions are shared): loads of buffers
//         and tables at an index, literals, scalar math, selects, casts, index predicates;
//       - pointwise stages store values at the innermost level; reduction stages fold `value`
//         over their reduce loops (the innermost ones) with a combiner from its identity, then
//         store `result` (an expression of the accumulator) at the innermost kept loop.
// A pointwise stage whose innermost loop picks between sources or clamps its index (Concat or Pad
// along the innermost axis) may be cut into one stage per interval of that loop, where those
// tests fold away (loop_kernel_split.cc): each piece copies one branch with plain addresses.
// Intermediate values are inlined into their consumers (recomputed at the index the consumer
// needs); only reduction results are materialised (in their output buffer or a scratch buffer),
// and a reduction's input that costs a transcendental per element when a later output of its
// shape reads it too: written ahead into that output's buffer, which the output's stage reads at
// the element it then overwrites (reductions over innermost dims, rows of at most 16384
// elements; build_loop_kernel checks that no other stage reads the buffer in between, else
// builds without it).
//
// Example: softmax over x:f32[2,8] (ReduceMax, Sub, Exp, ReduceSum, Div, with Expands) becomes
//   stage 0 (reduce)   i0<2, r1<8:  scratch0[i0] = max_r x[8*i0 + r1]
//   stage 1 (pointwise) i0<2, i1<8: out0[8*i0 + i1] = exp(x[8*i0 + i1] - scratch0[i0])
//   stage 2 (reduce)   i0<2, r1<8:  scratch1[i0] = sum_r out0[8*i0 + r1]
//   stage 3 (pointwise) i0<2, i1<8: out0[8*i0 + i1] = out0[8*i0 + i1] / scratch1[i0]
// (the CPU printer runs the four in one loop over rows: each row stays in L1 between them).
// Emitters (cpu/cpu_loop_emitter.h, cuda/cuda_loop_emitter.h) are thin printers of this description.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace korch {

namespace loop {

// ---- index expressions ------------------------------------------------------------------------

enum class IndexOp {
  kConst,  // value
  kVar,    // loop variable number `value` of the stage
  kSum,    // value + sum(coef * node) over terms (at least one term; not a lone 1*node)
  kDiv,    // floor(a / value), value > 1
  kMod,    // a mod value in [0, value), value > 1
  kMin,    // min(a, b)
  kMax,    // max(a, b)
  kTable,  // tables[value][a]
};

struct IndexNode {
  IndexOp op = IndexOp::kConst;
  int64_t value = 0;
  std::vector<std::pair<int, int64_t>> terms;  // kSum: (node, coefficient), nonzero coefficients
  int a = -1, b = -1;
  int64_t lo = 0, hi = 0;  // inclusive value range over the stage's loop domain
  int level = -1;          // innermost loop (position in Stage::loops) it depends on; -1: none
};

// ---- scalar expressions -----------------------------------------------------------------------

enum class ExprOp {
  kLoad,       // buffers[buffer][index]
  kTableLoad,  // tables[buffer][index]
  kConst,      // literal (fvalue for float dtypes, ivalue otherwise)
  kIndexValue, // the index expression `index` as a number of `dtype`
  kInRange,    // bool: ivalue <= index < ivalue2
  kAcc,        // the reduction accumulator (only in Reduction::result)
  kUnary,      // fn(args[0])
  kBinary,     // fn(args[0], args[1])
  kSelect,     // args[0] ? args[1] : args[2]
  kCast,       // (dtype) args[0]
};

// Scalar functions. Comparisons and logic produce bool. Float-only: kExp .. kRound.
enum class Fn {
  // unary
  kNeg, kAbs, kNot, kExp, kLog, kSqrt, kTanh, kErf, kSin, kCos, kTan, kFloor, kCeil, kRound,
  kLog1p, kExpm1, kAtan, kAsin, kAcos, kSinh, kCosh, kIsNaN,
  // binary
  kAdd, kSub, kMul, kDiv, kMax, kMin, kPow, kFMod, kLt, kLe, kGt, kGe, kEq, kAnd, kOr, kXor,
};
const char* fn_name(Fn f);
bool fn_is_unary(Fn f);

struct ExprNode {
  ExprOp op = ExprOp::kConst;
  Fn fn = Fn::kAdd;
  DType dtype = DType::kFloat32;
  std::vector<int> args;
  int buffer = -1;  // kLoad: buffer id; kTableLoad: table id
  int index = -1;   // kLoad / kTableLoad / kIndexValue / kInRange: index node
  double fvalue = 0;
  int64_t ivalue = 0, ivalue2 = 0;
};

// ---- stages -----------------------------------------------------------------------------------

struct Loop {
  int64_t extent = 1;
  bool reduce = false;  // reduce loops come after all kept loops
};

enum class Combiner { kSum, kProd, kMax, kMin, kArgMax, kArgMin };

struct Reduction {
  Combiner combiner = Combiner::kSum;
  DType acc_dtype = DType::kFloat32;  // accumulator type (ArgMax/ArgMin: the compared values' type)
  int value = -1;   // expression folded per reduce iteration
  int result = -1;  // expression of kAcc (ArgMax/ArgMin: kAcc is the winning position, int64)
  bool select_last = false;  // ArgMax/ArgMin: ties go to the last position
  // The accumulator starts at the combiner's identity in acc_dtype: 0 (sum), 1 (prod), the lowest
  // value (max: -inf for floats), the highest (min); ArgMax/ArgMin start from the first position.
};

struct Store {
  int buffer = -1;
  int index = -1;  // index node: flat element offset
  int value = -1;  // expression node
};

struct Stage {
  std::vector<Loop> loops;  // outer to inner
  std::vector<IndexNode> index;
  std::vector<ExprNode> exprs;  // topologically ordered (args before users)
  std::vector<Store> stores;    // pointwise: at the innermost level; reduction: exactly one, of result
  bool is_reduction = false;
  Reduction reduction;
  std::string comment;          // what the stage computes (node names), for readers of the code
  int num_kept() const;         // loops that are not reduce loops
};

enum class BufferKind { kInput, kOutput, kScratch };

struct Buffer {
  BufferKind kind = BufferKind::kInput;
  int slot = 0;  // position among the kernel's inputs / outputs / scratch buffers
  DType dtype = DType::kFloat32;
  int64_t numel = 0;
  bool read = false, written = false;
};

struct Table {
  DType dtype = DType::kInt64;
  std::vector<int64_t> values;  // integer or bool values
};

}  // namespace loop

struct LoopKernel {
  std::vector<loop::Buffer> buffers;
  std::vector<loop::Table> tables;
  std::vector<loop::Stage> stages;
  int num_inputs = 0, num_outputs = 0, num_scratch = 0;
};

// A readable dump of the description (for tests and debugging).
std::string describe_loop_kernel(const LoopKernel& k);

struct LoopKernelBuild {
  std::shared_ptr<LoopKernel> kernel;  // null when the set cannot be emitted
  std::string reason;                  // why not (names the node and op)
  std::vector<int64_t> scratch_bytes;  // temporaries the kernel needs (e.g. reduction results)
};

// Describes computing `outputs` from `inputs` with `nodes` (ascending ids, all of them non-linear
// primitives of g). `inputs` are the values read from outside the set that are passed as
// arguments, in argument order; baked constants (is_baked_constant) are read from g directly.
// Never throws for an unsupported op or dtype: it returns a reason instead.
LoopKernelBuild build_loop_kernel(const Graph& g, const std::vector<NodeId>& nodes,
                                  const std::vector<ValueId>& inputs,
                                  const std::vector<ValueId>& outputs);

// Whether build_loop_kernel can emit nodes of `op_type`. A loop primitive without an emitter
// (QuantizeLinear, the bitwise ops...) runs in the reference interpreter when alone in a kernel
// (split_kernel), like an opaque node.
bool has_loop_emitter(const std::string& op_type);

}  // namespace korch
