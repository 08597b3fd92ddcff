// The correctness gate: every generated kernel runs on its device on the values of one
// reference-interpreter run of the whole graph and is compared with them before its time is
// trusted (or, without a timer, before it goes into an artifact). Its inputs are the reference's
// values, so no per-kernel interpreter run and no implausible inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codegen/backend.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/device.h"

namespace korch {

// Every value of `g` (indexed by ValueId) on seeded random inputs (random_inputs(g, seed)):
// graph inputs, constants and every node output of one interpreter run.
std::vector<Tensor> reference_values(const Graph& g, uint64_t seed);

// The bytes of the constant inputs (weights) among a kernel's argument inputs (kernel_arg_inputs:
// baked constants are code, not inputs). At least Device::cold_constant_bytes() of them and the
// kernel is measured with them cold (MeasuredCost::measures_cold decides it: KernelProbe evicts
// them, and its tuning key says so).
int64_t constant_input_bytes(const Graph& g, const std::vector<ValueId>& arg_inputs);

// One emitted kernel bound to device buffers holding its reference inputs (on a host-memory
// device, the reference tensors themselves) and buffers for its outputs. `cold_constants`: its
// constant inputs are to be measured cold, as the caller decided (MeasuredCost::measures_cold, which
// also keys the record: one decision for both).
class KernelProbe {
 public:
  KernelProbe(runtime::Device& device, runtime::DeviceKernel& kernel, const EmittedKernel& k, const Graph& g,
              const std::vector<Tensor>& values, bool cold_constants = false);
  ~KernelProbe();
  KernelProbe(const KernelProbe&) = delete;
  KernelProbe& operator=(const KernelProbe&) = delete;
  // Runs the kernel once and compares every output with the reference within `tolerance`
  // (relative L2, ir/tensor_compare.h). "" when all agree, else which output and how it differs.
  std::string check(double tolerance);
  // The outputs of the last check().
  const std::vector<Tensor>& outputs() const { return host_out_; }
  // Runs the kernel once (for timing; the caller's timer synchronises).
  void run();
  // Whether its constant inputs are measured cold (as constructed, and it has some);
  // evict_constants() then evicts them and the kernel's copies of them
  // (DeviceKernel::constant_copies) from the caches: what the measuring driver does before each
  // timed call. No-op otherwise.
  bool cold_constants() const { return !constants_.empty(); }
  void evict_constants();

 private:
  runtime::Device& dev_;
  runtime::DeviceKernel& kernel_;
  const EmittedKernel& k_;
  const Graph& g_;
  const std::vector<Tensor>& values_;
  std::vector<const void*> in_;
  std::vector<void*> out_;
  std::vector<Tensor> host_out_;
  std::vector<void*> owned_;  // device buffers (devices without host memory)
  std::vector<std::pair<const void*, int64_t>> constants_;  // the constant inputs' buffers when measured cold
};

// Compiles emitted kernels for `device` in units of `per_unit` (Backend::compile); a unit that
// fails is split so one bad kernel costs only itself. Per kernel: the module it is in (null when
// it has no source or failed), the unit's source path, and the compiler's message if it failed.
struct CompiledKernels {
  std::vector<std::shared_ptr<runtime::KernelModule>> module;
  std::vector<std::string> source_path;
  std::vector<std::string> error;
  int64_t units_compiled = 0, units_cached = 0;
};
CompiledKernels compile_kernels(Backend& backend, runtime::Device& device, const std::vector<const EmittedKernel*>& kernels,
                                int per_unit, const std::function<void(bool cached)>& on_unit = {});

// The correctness gate on its own (no timing): every candidate emitted, compiled and checked on
// `device` against `values` (reference_values(g)). Per candidate: "" when it matches, else why not
// (it cannot be emitted, does not compile, or differs).
std::vector<std::string> check_candidates(Backend& backend, runtime::Device& device, const Graph& g,
                                          const std::vector<const KernelCandidate*>& candidates,
                                          const std::vector<Tensor>& values, double tolerance);

}  // namespace korch
