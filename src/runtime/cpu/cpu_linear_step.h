// A linear primitive (Conv, ConvTranspose, MatMul) run as one oneDNN 2.6 primitive with its
// epilogue as post-ops, from the description codegen/linear_match.h writes.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "runtime/device.h"

namespace korch::cpu {

// The oneDNN primitive (created once; weights reordered on first run and kept, since weight
// arguments are constants whose pointer and contents never change).
class LinearStep {
 public:
  static std::unique_ptr<LinearStep> create(const nlohmann::json& desc);  // throws korch::Error
  virtual ~LinearStep() = default;
  virtual void run(void* const* args) = 0;
  // oneDNN's implementation name and the chosen layouts ("brg:avx512_core src 1x64x56x56
  // blocked 1:16 ..."), for logs, tests and the profiler's notes.
  virtual std::string implementation() const = 0;

  // Layout handoff (the CPU device decides, runtime/cpu/cpu_device.cc): when a step's result is
  // read only as the src of following steps whose primitives want the same layout, the producer
  // writes it in that layout and the consumers read it as is, skipping a reorder to plain and one
  // back. On mobilenet_v2 those reorders took more time than the convolutions (ONEDNN_VERBOSE).
  // Layouts are opaque keys ("" = plain row-major, no handoff possible).
  virtual std::string src_layout() const { return ""; }
  virtual std::string dst_layout() const { return ""; }
  virtual int64_t dst_layout_bytes() const { return 0; }  // buffer size of the result in dst_layout
  virtual int src_slot() const { return -1; }
  virtual int result_slot() const { return -1; }
  // Whether args[slot] is read as the src and nothing else (no bias, post-op or sum operand).
  virtual bool reads_only_as_src(int slot) const { (void)slot; return false; }
  // From now on args[src_slot()] holds the src in src_layout() / the result goes to
  // args[result_slot()] in dst_layout().
  virtual void set_src_in_layout(bool on) { (void)on; }
  // A residual read as a sum post-op: args[slot] read as that and nothing else; from now on it
  // holds the residual in dst_layout() (copied as is instead of reordered).
  virtual bool reads_only_as_sum(int slot) const { (void)slot; return false; }
  virtual void set_sum_in_layout(bool on) { (void)on; }
  virtual void set_dst_in_layout(bool on) { (void)on; }
  // Reorders each run makes now (after the handoffs above): activations and non-constant operands
  // whose layout differs from the primitive's, and a residual reordered into the dst layout.
  virtual runtime::ReorderStats reorders_per_run() const { return {}; }
  // The constant inputs it reordered into its own buffers (DeviceKernel::constant_copies).
  virtual std::vector<std::pair<const void*, int64_t>> constant_copies() const { return {}; }
};

// Whether oneDNN runs a typical convolution (3x3, 64 channels, 56x56) on NHWC activations with a
// jit kernel rather than its reference or im2col-gemm fallback: brgconv on AVX-512, jit:avx2 on
// AVX2 CPUs (whose own choice would be the blocked nChw8c). Asked once per process.
// Channels-last activations then beat NCHW with reorders around each convolution on both
// (bench/results/channels_last.md).
bool dnnl_runs_channels_last();

}  // namespace korch::cpu
