// The CUDA printer of a LoopKernel: the prelude, the kernel's tables and functions (one per
// launch), the launch plan with row kernels, and the schedule space.
#include "codegen/cuda/cuda_loop_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>

#include "codegen/cuda/cuda_loop_emitter_internal.h"
#include "support/error.h"

namespace korch::cuda {

using detail::CudaStage;
using detail::LaunchPlan;
using detail::ReduceMap;
using loop::Stage;

namespace {

const char* reduce_name(CudaSchedule::Reduce r) {
  switch (r) {
    case CudaSchedule::Reduce::kAuto: return "auto";
    case CudaSchedule::Reduce::kThread: return "thread";
    case CudaSchedule::Reduce::kWarp: return "warp";
    case CudaSchedule::Reduce::kBlock: return "block";
    case CudaSchedule::Reduce::kTwoPass: return "twopass";
  }
  return "?";
}

// A row's elements must stay few enough that a block (or warp) sweeps them a few times quickly;
// longer rows are better served by stand-alone (two-pass) reductions.
constexpr int64_t kMaxRow = 1 << 14;

// Row fusion (the CPU's shares_rows is the model, one loop deep): stages [i, j] run in one
// launch, a block or a warp per iteration of their common first loop, when stage j reads what an
// earlier stage of them wrote only at elements that stage writes for the same row: a per-row
// value (a reduction's result read back per row: softmax, layer / group / instance norm) or the
// whole row, read at the same index over loops of the same extents (an exponential written as an
// output, then summed); the barrier between stages makes the row's writes visible to the group.
// Reductions inside must keep only the row loop and read contiguously, so the group's threads
// split the row between them.
bool row_fusable(const std::vector<CudaStage>& p, size_t i, size_t j) {
  const Stage& first = p[i].stage();
  const Stage& next = p[j].stage();
  if (first.loops.empty() || next.loops.empty() || first.loops[0].reduce || next.loops[0].reduce) return false;
  if (next.loops[0].extent != first.loops[0].extent) return false;
  for (size_t s : {i, j}) {
    const Stage& st = p[s].stage();
    if (st.is_reduction && (st.num_kept() != 1 || p[s].strided_reduce())) return false;
    if (p[s].per_row() > kMaxRow) return false;
  }
  for (const auto& ld : p[j].loads()) {
    for (size_t s = i; s < j; ++s) {
      for (const auto& st : p[s].stores()) {
        if (st.buffer != ld.buffer) continue;
        if (st.key != ld.key) return false;
        const Stage& writer = p[s].stage();
        for (int l = 1; l <= ld.level; ++l)  // a whole row: the same loops under the row loop
          if (static_cast<size_t>(l) >= writer.loops.size() || static_cast<size_t>(l) >= next.loops.size() ||
              writer.loops[static_cast<size_t>(l)].extent != next.loops[static_cast<size_t>(l)].extent)
            return false;
      }
    }
  }
  return true;
}

std::string table_values(const loop::Table& tb) {
  std::string vals;
  const bool is64 = tb.dtype == DType::kInt64 || tb.dtype == DType::kUInt64;
  for (size_t i = 0; i < tb.values.size(); ++i) {
    if (i) vals += i % 32 == 0 ? ",\n    " : ",";
    const int64_t v = tb.values[i];
    if (tb.dtype == DType::kBool) vals += v ? "true" : "false";
    else if (v == std::numeric_limits<int64_t>::min()) vals += fmt::format("({})INT64_MIN", detail::ctype(tb.dtype));
    else if (is64 || v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      vals += fmt::format("({}){}LL", detail::ctype(tb.dtype), v);  // explicit: no narrowing in a brace list
    else vals += fmt::format("({}){}", detail::ctype(tb.dtype), v);
  }
  return vals.empty() ? "0" : vals;
}

struct Slots {
  const std::vector<int>& in;
  const std::vector<int>& out;
  int scratch;
};

int slot_of(const loop::Buffer& b, const Slots& s) {
  return b.kind == loop::BufferKind::kInput    ? s.in[static_cast<size_t>(b.slot)]
         : b.kind == loop::BufferKind::kOutput ? s.out[static_cast<size_t>(b.slot)]
                                               : s.scratch + b.slot;
}

// One __global__ function for plan `p`.
CudaLaunch print_function(const LoopKernel& k, std::vector<CudaStage>& stages, const LaunchPlan& p,
                          const std::string& name, const Slots& slots, const CudaSchedule& s, CodeWriter& out) {
  bool wide = s.index64;
  std::set<int> read, written;
  std::set<std::string> shared;
  const CudaStage::Part part = p.kind == LaunchPlan::Kind::kPartials ? CudaStage::Part::kValue
                               : p.kind == LaunchPlan::Kind::kFold   ? CudaStage::Part::kResult
                                                                     : CudaStage::Part::kAll;
  for (int i = p.first; i <= p.last; ++i) {
    wide |= !stages[static_cast<size_t>(i)].fits_i32();
    stages[static_cast<size_t>(i)].buffers_used(&read, &written, part);
  }
  if (p.kind == LaunchPlan::Kind::kPartials)
    wide |= stages[static_cast<size_t>(p.first)].kept_iterations() * p.chunks > (int64_t{1} << 30);
  const std::string it = wide ? "int64_t" : "int32_t";
  for (int i = p.first; i <= p.last; ++i) stages[static_cast<size_t>(i)].set_wide(wide);

  const bool row = p.kind == LaunchPlan::Kind::kRow;
  const bool warp_rows = row && s.rows_per_block > 1;
  const bool block_group = (row && !warp_rows) || p.kind == LaunchPlan::Kind::kPartials ||
                           (p.kind == LaunchPlan::Kind::kReduce && p.map == ReduceMap::kBlock);
  CudaLaunch l;
  l.function = name;
  l.block = warp_rows ? 32 * s.rows_per_block : s.block;
  CodeWriter b;
  std::set<int> declared = read;
  declared.insert(written.begin(), written.end());
  for (int bi : declared) {
    const loop::Buffer& buf = k.buffers[static_cast<size_t>(bi)];
    const bool ro = !written.count(bi);
    b.line(fmt::format("{0}{1}* __restrict__ b{2} = ({0}{1}*)a.p[{3}];", ro ? "const " : "", detail::ctype(buf.dtype), bi,
                       slot_of(buf, slots)));
  }
  if (block_group) {
    b.line(fmt::format("const {0} tid = ({0})threadIdx.x;", it));
    b.line(fmt::format("const {0} nthreads = ({0})blockDim.x;", it));
    for (int i = p.first; i <= p.last; ++i) stages[static_cast<size_t>(i)].shared_needs(&shared);
  } else if (warp_rows) {
    b.line(fmt::format("const {0} lane = ({0})(threadIdx.x & 31);", it));
    b.line(fmt::format("const {0} warp = ({0})(threadIdx.x >> 5);", it));
  } else if (wide) {
    b.line("const int64_t gtid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;");
    b.line("const int64_t gsize = (int64_t)gridDim.x * blockDim.x;");
  } else {
    b.line("const int32_t gtid = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);");
    b.line("const int32_t gsize = (int32_t)(gridDim.x * blockDim.x);");
  }
  CudaStage& st = stages[static_cast<size_t>(p.first)];
  switch (p.kind) {
    case LaunchPlan::Kind::kPointwise:
      st.print_pointwise(b, p.vector);
      l.grid = detail::grid_for(st.kept_iterations() / (p.vector ? 4 : 1), l.block);
      break;
    case LaunchPlan::Kind::kReduce:
      if (p.map == ReduceMap::kThread) {
        st.print_thread_reduce(b);
        l.grid = detail::grid_for(st.kept_iterations(), l.block);
      } else if (p.map == ReduceMap::kWarp) {
        st.print_group_reduce(b, false);
        l.grid = detail::grid_for(st.kept_iterations() * 32, l.block);
        l.barriers = true;
      } else {
        st.print_group_reduce(b, true);
        l.grid = std::min(st.kept_iterations(), detail::grid_for(int64_t{1} << 40, l.block));
        l.barriers = true;
      }
      break;
    case LaunchPlan::Kind::kPartials:
      st.print_two_pass_partials(b, p.chunks, p.value_slot, p.pos_slot);
      l.grid = std::min(st.kept_iterations() * p.chunks, detail::grid_for(int64_t{1} << 40, l.block));
      l.barriers = true;
      break;
    case LaunchPlan::Kind::kFold:
      st.print_two_pass_fold(b, p.chunks, p.value_slot, p.pos_slot);
      l.grid = detail::grid_for(st.kept_iterations(), l.block);
      break;
    case LaunchPlan::Kind::kRow: {
      const int64_t rows = st.stage().loops[0].extent;
      const int r = s.rows_per_block;
      b.line(fmt::format("// row kernel: {} stages, a {} per row", p.last - p.first + 1, warp_rows ? "warp" : "block"));
      if (warp_rows) {
        b.open(fmt::format("for ({0} row = ({0})blockIdx.x * {1} + warp; row < {2}; row += ({0})gridDim.x * {1})", it, r, rows));
        l.grid = std::min((rows + r - 1) / r, detail::grid_for(int64_t{1} << 40, l.block));
      } else {
        b.open(fmt::format("for ({0} row = ({0})blockIdx.x; row < {1}; row += ({0})gridDim.x)", it, rows));
        l.grid = std::min(rows, detail::grid_for(int64_t{1} << 40, l.block));
      }
      b.line(fmt::format("const {} i0 = row;", it));
      const detail::Group g = warp_rows ? detail::Group{false, "lane", "32"} : detail::Group{true, "tid", "nthreads"};
      for (int i = p.first; i <= p.last; ++i) {
        // The row's results are visible to the whole group after the barrier (global memory,
        // block / warp scope), so later stages read them back from where they were stored.
        if (i > p.first) b.line(warp_rows ? "__syncwarp();" : "__syncthreads();");
        stages[static_cast<size_t>(i)].print_row_part(b, g);
      }
      b.close();
      l.barriers = true;
      break;
    }
  }
  out.line(fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}(korch_args a)", l.block, name));
  out.open("");
  for (const std::string& t : shared) {
    if (t == "pos") out.line("__shared__ int64_t sm_pos[32];");
    else out.line(fmt::format("__shared__ {0} sm_{0}[32];", t));
  }
  out.raw(b.str());
  out.close();
  return l;
}

}  // namespace

std::string CudaSchedule::describe() const {
  return fmt::format("block{} vec{} rows{} {}{}", block, vector, rows_per_block, reduce_name(reduce), index64 ? " i64" : "");
}

namespace detail {

std::vector<LaunchPlan> plan_launches(const std::vector<CudaStage>& stages, const CudaSchedule& s,
                                      int first_extra_slot, std::vector<int64_t>* extra_scratch, std::string* reason) {
  using R = CudaSchedule::Reduce;
  std::vector<LaunchPlan> plans;
  bool any_pointwise = false, any_reduce = false, any_row = false;
  const bool fuse = s.reduce == R::kAuto || s.reduce == R::kWarp || s.reduce == R::kBlock;
  for (size_t i = 0; i < stages.size();) {
    if (fuse) {
      size_t j = i + 1;
      while (j < stages.size() && row_fusable(stages, i, j)) ++j;
      bool has_reduction = false;
      for (size_t q = i; q < j; ++q) has_reduction |= stages[q].stage().is_reduction;
      if (j - i >= 2 && has_reduction) {
        LaunchPlan p;
        p.kind = LaunchPlan::Kind::kRow;
        p.first = static_cast<int>(i);
        p.last = static_cast<int>(j - 1);
        plans.push_back(p);
        any_row = true;
        i = j;
        continue;
      }
    }
    const CudaStage& st = stages[i];
    LaunchPlan p;
    p.first = p.last = static_cast<int>(i);
    if (!st.stage().is_reduction) {
      p.kind = LaunchPlan::Kind::kPointwise;
      p.vector = s.vector == 4;
      if (p.vector) {
        if (std::string why = st.vec4_reason(); !why.empty()) {
          *reason = fmt::format("vector 4: stage {} ({}): {}", i, st.stage().comment, why);
          return {};
        }
      }
      any_pointwise = true;
      plans.push_back(p);
    } else {
      any_reduce = true;
      ReduceMap map = st.auto_reduce(s.block);
      switch (s.reduce) {
        case R::kThread: map = ReduceMap::kThread; break;
        case R::kWarp: map = ReduceMap::kWarp; break;
        case R::kBlock: map = ReduceMap::kBlock; break;
        case R::kTwoPass: map = ReduceMap::kTwoPass; break;
        case R::kAuto: break;
      }
      if (map == ReduceMap::kTwoPass) {
        p.chunks = st.two_pass_chunks(s.block);
        const int64_t parts = st.kept_iterations() * p.chunks;
        p.value_slot = first_extra_slot + static_cast<int>(extra_scratch->size());
        extra_scratch->push_back(parts * static_cast<int64_t>(dtype_size(st.stage().reduction.acc_dtype)));
        if (st.is_arg()) {
          p.pos_slot = first_extra_slot + static_cast<int>(extra_scratch->size());
          extra_scratch->push_back(parts * 8);
        }
        p.kind = LaunchPlan::Kind::kPartials;
        plans.push_back(p);
        p.kind = LaunchPlan::Kind::kFold;
        plans.push_back(p);
      } else {
        p.kind = LaunchPlan::Kind::kReduce;
        p.map = map;
        plans.push_back(p);
      }
    }
    ++i;
  }
  if (s.vector == 4 && !any_pointwise) *reason = "vector 4: no pointwise stage runs as its own launch";
  else if (s.rows_per_block > 1 && !any_row) *reason = fmt::format("rows_per_block {}: the kernel has no row kernel", s.rows_per_block);
  else if (s.reduce != R::kAuto && !any_reduce)
    *reason = fmt::format("reduce {}: no reduction stage runs as its own launch", reduce_name(s.reduce));
  if (!reason->empty()) return {};
  return plans;
}

}  // namespace detail

std::string cuda_prelude() {
  return R"KORCH(// ---- korch CUDA prelude ----
#ifndef KORCH_CUDA_EMULATION
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#define INT8_MIN (-128)
#define INT8_MAX 127
#define INT16_MIN (-32767 - 1)
#define INT16_MAX 32767
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define INT64_MIN (-9223372036854775807LL - 1)
#define INT64_MAX 9223372036854775807LL
#define UINT8_MAX 255
#define UINT16_MAX 65535
#define UINT32_MAX 4294967295U
#define UINT64_MAX 18446744073709551615ULL
#define KORCH_MAX_ARGS 128
struct korch_args { void* p[KORCH_MAX_ARGS]; };
__device__ __forceinline__ float4 korch_ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void korch_st4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
#endif
#define KORCH_INF_F __int_as_float(0x7f800000)
#define KORCH_NAN_F __int_as_float(0x7fc00000)
#define KORCH_INF_D __longlong_as_double(0x7ff0000000000000LL)
#define KORCH_NAN_D __longlong_as_double(0x7ff8000000000000LL)
__device__ __forceinline__ int32_t korch_floordiv(int32_t a, int32_t k) { int32_t q = a / k; return (a % k != 0 && a < 0) ? q - 1 : q; }
__device__ __forceinline__ int64_t korch_floordiv(int64_t a, int64_t k) { int64_t q = a / k; return (a % k != 0 && a < 0) ? q - 1 : q; }
__device__ __forceinline__ int32_t korch_floormod(int32_t a, int32_t k) { int32_t r = a % k; return r < 0 ? r + k : r; }
__device__ __forceinline__ int64_t korch_floormod(int64_t a, int64_t k) { int64_t r = a % k; return r < 0 ? r + k : r; }
__device__ __forceinline__ int32_t korch_imin(int32_t a, int32_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t korch_imin(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int32_t korch_imax(int32_t a, int32_t b) { return a > b ? a : b; }
__device__ __forceinline__ int64_t korch_imax(int64_t a, int64_t b) { return a > b ? a : b; }
// Full-warp butterfly exchange; types without a hardware shuffle go through int.
template <class T> __device__ __forceinline__ T korch_shfl_xor(T v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ bool korch_shfl_xor(bool v, int o) { return __shfl_xor_sync(0xffffffffu, (int)v, o) != 0; }
__device__ __forceinline__ int8_t korch_shfl_xor(int8_t v, int o) { return (int8_t)__shfl_xor_sync(0xffffffffu, (int)v, o); }
__device__ __forceinline__ uint8_t korch_shfl_xor(uint8_t v, int o) { return (uint8_t)__shfl_xor_sync(0xffffffffu, (int)v, o); }
__device__ __forceinline__ int16_t korch_shfl_xor(int16_t v, int o) { return (int16_t)__shfl_xor_sync(0xffffffffu, (int)v, o); }
__device__ __forceinline__ uint16_t korch_shfl_xor(uint16_t v, int o) { return (uint16_t)__shfl_xor_sync(0xffffffffu, (int)v, o); }
// Combiners, with the CPU's operand order (max: a new value replaces the accumulator only when greater).
struct korch_op_sum { template <class T> __device__ __forceinline__ static T f(T a, T b) { return (T)(a + b); } };
struct korch_op_prod { template <class T> __device__ __forceinline__ static T f(T a, T b) { return (T)(a * b); } };
struct korch_op_max { template <class T> __device__ __forceinline__ static T f(T a, T b) { return b > a ? b : a; } };
struct korch_op_min { template <class T> __device__ __forceinline__ static T f(T a, T b) { return b < a ? b : a; } };
// After the butterfly every lane holds the same value (each step combines a pair both ways).
template <class Op, class T> __device__ __forceinline__ T korch_warp_all(T v) {
  for (int o = 16; o > 0; o >>= 1) v = Op::f(v, korch_shfl_xor(v, o));
  return v;
}
// Every thread of the block gets the result; sm: 32 slots. Warps fold in warp order.
template <class Op, class T> __device__ __forceinline__ T korch_block_all(T v, T* sm) {
  v = korch_warp_all<Op>(v);
  const int w = (int)(threadIdx.x >> 5), nw = (int)(blockDim.x >> 5);
  if ((threadIdx.x & 31) == 0) sm[w] = v;
  __syncthreads();
  T r = sm[0];
  for (int i = 1; i < nw; ++i) r = Op::f(r, sm[i]);
  __syncthreads();
  return r;
}
// ArgMax / ArgMin as the serial scan decides it (the CPU and the reference): a NaN at position
// 0 is never replaced, any other NaN never wins, ties go to the first (or, LAST, the last)
// position. As an order on (value, position) pairs it is total, so partial results of any
// split of the positions combine to the serial answer. p < 0: nothing seen.
template <bool MAX, bool LAST, class T> __device__ __forceinline__ bool korch_arg_better(T v, int64_t p, T bv, int64_t bp) {
  if (p < 0) return false;
  if (bp < 0) return true;
  const bool vn = v != v, bn = bv != bv;
  if (bn && bp == 0) return false;
  if (vn) return p == 0;
  if (bn) return true;
  if (MAX ? v > bv : v < bv) return true;
  if (MAX ? v < bv : v > bv) return false;
  return LAST ? p > bp : p < bp;
}
template <bool MAX, bool LAST, class T> __device__ __forceinline__ void korch_warp_arg(T& bv, int64_t& bp) {
  for (int o = 16; o > 0; o >>= 1) {
    const T v = korch_shfl_xor(bv, o);
    const int64_t p = korch_shfl_xor(bp, o);
    if (korch_arg_better<MAX, LAST>(v, p, bv, bp)) { bv = v; bp = p; }
  }
}
template <bool MAX, bool LAST, class T> __device__ __forceinline__ void korch_block_arg(T& bv, int64_t& bp, T* sv, int64_t* sp) {
  korch_warp_arg<MAX, LAST>(bv, bp);
  const int w = (int)(threadIdx.x >> 5), nw = (int)(blockDim.x >> 5);
  if ((threadIdx.x & 31) == 0) { sv[w] = bv; sp[w] = bp; }
  __syncthreads();
  bv = sv[0];
  bp = sp[0];
  for (int i = 1; i < nw; ++i)
    if (korch_arg_better<MAX, LAST>(sv[i], sp[i], bv, bp)) { bv = sv[i]; bp = sp[i]; }
  __syncthreads();
}
// ---- end of prelude ----
)KORCH";
}

CudaLoopEmit emit_cuda_loop_kernel(const LoopKernel& k, const std::string& symbol, const std::vector<int>& input_slots,
                                   const std::vector<int>& output_slots, int first_scratch_slot,
                                   const CudaSchedule& schedule, CodeWriter& w) {
  KORCH_CHECK(static_cast<int>(input_slots.size()) == k.num_inputs && static_cast<int>(output_slots.size()) == k.num_outputs,
              "kernel {}: {} input / {} output slots for {} inputs and {} outputs", symbol, input_slots.size(),
              output_slots.size(), k.num_inputs, k.num_outputs);
  CudaLoopEmit r;
  const CudaSchedule& s = schedule;
  if (s.block < 32 || s.block > 1024 || s.block % 32 != 0)
    r.reason = fmt::format("block {}: needs a multiple of 32 in [32, 1024]", s.block);
  else if (s.vector != 1 && s.vector != 4)
    r.reason = fmt::format("vector {}: 1 or 4", s.vector);
  else if (s.rows_per_block < 1 || s.rows_per_block > 32)
    r.reason = fmt::format("rows_per_block {}: 1 to 32", s.rows_per_block);
  if (!r.reason.empty()) return r;
  std::vector<CudaStage> stages;
  stages.reserve(k.stages.size());
  for (const Stage& st : k.stages) stages.emplace_back(k, st, symbol);
  std::vector<LaunchPlan> plans = detail::plan_launches(stages, s, first_scratch_slot + k.num_scratch,
                                                         &r.extra_scratch_bytes, &r.reason);
  if (!r.reason.empty()) {
    r.extra_scratch_bytes.clear();
    return r;
  }
  CodeWriter out;
  for (size_t t = 0; t < k.tables.size(); ++t) {
    const loop::Table& tb = k.tables[t];
    out.line(fmt::format("__device__ const {} {}[] = {{{}}};", detail::ctype(tb.dtype),
                         detail::table_name(symbol, static_cast<int>(t)), table_values(tb)));
  }
  const Slots slots{input_slots, output_slots, first_scratch_slot};
  for (size_t i = 0; i < plans.size(); ++i)
    r.launches.push_back(print_function(k, stages, plans[i], fmt::format("{}_s{}", symbol, i), slots, s, out));
  w.raw(out.str());
  r.ok = true;
  return r;
}

namespace {

// Dry run of one schedule (canonical slots): the text, or "" when it does not apply.
std::string try_emit(const LoopKernel& k, const CudaSchedule& s) {
  std::vector<int> in, out;
  for (int i = 0; i < k.num_inputs; ++i) in.push_back(i);
  for (int i = 0; i < k.num_outputs; ++i) out.push_back(k.num_inputs + i);
  CodeWriter w;
  CudaLoopEmit e = emit_cuda_loop_kernel(k, "k", in, out, k.num_inputs + k.num_outputs, s, w);
  return e.ok ? w.take() : std::string();
}

}  // namespace

CudaSchedule default_cuda_schedule(const LoopKernel& k) {
  CudaSchedule s;
  std::vector<CudaStage> stages;
  stages.reserve(k.stages.size());
  for (const Stage& st : k.stages) stages.emplace_back(k, st, "k");
  std::vector<int64_t> extra;
  std::string reason;
  const std::vector<LaunchPlan> plans = detail::plan_launches(stages, s, 0, &extra, &reason);
  bool vec = false, all_vec = true;
  int64_t longest_row = 0;
  for (const LaunchPlan& p : plans) {
    const CudaStage& st = stages[static_cast<size_t>(p.first)];
    if (p.kind == LaunchPlan::Kind::kPointwise) {
      const bool can = st.vec4_reason().empty();
      all_vec &= can;
      vec |= can && st.kept_iterations() >= 4096;  // below that one wave covers it either way
    } else if (p.kind == LaunchPlan::Kind::kRow) {
      for (int i = p.first; i <= p.last; ++i) longest_row = std::max(longest_row, stages[static_cast<size_t>(i)].per_row());
    }
  }
  if (vec && all_vec) s.vector = 4;
  // Short rows (up to ~32 elements per lane): a warp per row, four rows per block, no shared
  // memory or block barriers; longer rows: the whole block on one row.
  if (longest_row > 0 && longest_row <= 1024) s.rows_per_block = 4;
  if (try_emit(k, s).empty()) s = CudaSchedule{};
  return s;
}

std::vector<CudaSchedule> cuda_schedule_space(const LoopKernel& k) {
  using R = CudaSchedule::Reduce;
  const CudaSchedule d = default_cuda_schedule(k);
  std::vector<CudaSchedule> cands{d};
  auto with = [&](auto f) {
    CudaSchedule s = d;
    f(s);
    cands.push_back(s);
  };
  with([](CudaSchedule& s) { s.block = 128; });
  with([](CudaSchedule& s) { s.block = 512; });
  with([](CudaSchedule& s) { s.vector = s.vector == 4 ? 1 : 4; });
  with([](CudaSchedule& s) { s.rows_per_block = s.rows_per_block == 1 ? 4 : 1; });
  with([](CudaSchedule& s) { s.rows_per_block = 8; });
  // Forced reduction mappings where they can pay off: a warp needs rows of a warp or more, a
  // block rows of a few hundred, two passes rows of thousands (a pool window is never split).
  int64_t longest = 0;
  for (const Stage& st : k.stages)
    if (st.is_reduction) longest = std::max(longest, CudaStage(k, st, "k").reduce_length());
  with([](CudaSchedule& s) { s.reduce = R::kThread; });
  if (longest >= 32) with([](CudaSchedule& s) { s.reduce = R::kWarp; });
  if (longest >= 256) with([](CudaSchedule& s) { s.reduce = R::kBlock; });
  if (longest >= 4096) with([](CudaSchedule& s) { s.reduce = R::kTwoPass; });
  std::vector<CudaSchedule> out;
  std::set<std::string> seen;
  for (const CudaSchedule& s : cands) {
    if (std::find(out.begin(), out.end(), s) != out.end()) continue;
    std::string text = try_emit(k, s);
    if (text.empty() || !seen.insert(std::move(text)).second) continue;
    out.push_back(s);
  }
  return out;
}

}  // namespace korch::cuda
