// CUDA C++ for a LoopKernel (loop_kernel.h): one or more `__global__` functions run in order,
// following the kernel ABI of runtime/cuda/cuda_launch.h.
//
// The printer stays thin: the description decides what is computed, a CudaSchedule (a handful
// of knobs) decides how threads map onto it:
//   * pointwise / layout stages: grid-stride loops over the flattened loops, consecutive threads
//     on consecutive elements of the innermost (contiguous) loop; with vector = 4 each thread
//     moves a float4 when every access along the innermost loop is f32, unit-stride and 16-byte
//     aligned (argument buffers are at least 16-byte aligned: cudaMalloc gives 256);
//   * reductions: a thread, a warp or a block per output, or two passes (block partials into
//     extra scratch, then a fold) for few long rows;
//   * row kernels: consecutive stages that share their first loop and exchange values only per
//     row (softmax, layer / group / instance norm) run as one launch, a block (or a warp) per row.
// Index arithmetic is 32-bit when the description's value ranges allow it, 64-bit otherwise.
// Numerics follow the CPU printer exactly (integer division by zero gives 0, float -> int casts
// go through int64, max/min operand order as std::max/std::min, f32 sums accumulate in f64 as
// the description says); no fast-math intrinsics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/loop_kernel.h"
#include "runtime/cuda/cuda_launch.h"
#include "support/code_writer.h"

namespace korch::cuda {

// A small schedule space per kernel; the printer maps it onto every stage it applies to.
struct CudaSchedule {
  int block = 256;         // threads per block of pointwise and reduction launches
  int vector = 1;          // 1 or 4: f32 elements per thread per access in pointwise stages
  int rows_per_block = 1;  // row kernels: 1 = a block per row; > 1 = a warp per row, this many per block
  enum class Reduce { kAuto, kThread, kWarp, kBlock, kTwoPass } reduce = Reduce::kAuto;
  // kAuto picks per stage (cuda_loop_emitter_stage.cc) and fuses row kernels; kThread and
  // kTwoPass run every reduction stage as its own launch(es), kWarp / kBlock only change the
  // reductions that are not part of a row kernel.
  // 64-bit index arithmetic even where the value ranges allow 32 bits (tests exercise the 64-bit
  // code on small tensors with it; a kernel whose ranges need 64 bits gets them regardless).
  bool index64 = false;

  std::string describe() const;  // "block256 vec4 rows1 warp" (+ " i64")
  bool operator==(const CudaSchedule&) const = default;
};

struct CudaLoopEmit {
  bool ok = false;
  std::string reason;                         // why the schedule does not apply (when !ok)
  std::vector<CudaLaunch> launches;           // in order
  // Temporaries the schedule needs beyond the kernel's own scratch (two-pass partials), at
  // argument slots first_scratch_slot + k.num_scratch + i.
  std::vector<int64_t> extra_scratch_bytes;
};

// Text every CUDA translation unit starts with once: korch_args, the integer typedefs and limits
// (not under KORCH_CUDA_EMULATION, where <stdint.h> is used), INF/NAN helpers, floor div/mod,
// warp / block reduction helpers. Needs no CUDA header.
std::string cuda_prelude();

// Writes the kernel's tables and functions (symbol + "_s<i>" per launch, tables symbol + "_T<i>")
// and returns the launches. input_slots[i] / output_slots[i]: argument slot of the kernel's i-th
// input / output; scratch buffer k is at slot first_scratch_slot + k. When the schedule does not
// apply, nothing is written and the result says why. Deterministic: kernels with one signature
// print identically (no graph names; stage comments carry op names only).
CudaLoopEmit emit_cuda_loop_kernel(const LoopKernel& k, const std::string& symbol, const std::vector<int>& input_slots,
                                   const std::vector<int>& output_slots, int first_scratch_slot,
                                   const CudaSchedule& schedule, CodeWriter& w);

// The variants worth timing, the default (a heuristic for an H200) first; every one of them
// applies to k, and no two print the same code.
std::vector<CudaSchedule> cuda_schedule_space(const LoopKernel& k);

// The default alone (cuda_schedule_space(k).front(), without printing the others).
CudaSchedule default_cuda_schedule(const LoopKernel& k);

}  // namespace korch::cuda
