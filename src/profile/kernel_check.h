// The correctness gate: every generated kernel runs on its device on the values of one
// reference-interpreter run of the whole graph and is compared with them before its time is
// trusted (or, without a timer, before it goes into an artifact). Its inputs are the reference's
// values, so no per-kernel interpreter run and no implausible inputs.
#pragma once

#include <cstdint>
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

// One emitted kernel bound to device buffers holding its reference inputs (on a host-memory
// device, the reference tensors themselves) and buffers for its outputs.
class KernelProbe {
 public:
  KernelProbe(runtime::Device& device, runtime::DeviceKernel& kernel, const EmittedKernel& k, const Graph& g,
              const std::vector<Tensor>& values);
  ~KernelProbe();
  KernelProbe(const KernelProbe&) = delete;
  KernelProbe& operator=(const KernelProbe&) = delete;
  // Runs the kernel once and compares every output with the reference within `tolerance`
  // (relative L2, ir/tensor_compare.h). "" when all agree, else which output and how it differs.
  std::string check(double tolerance);
  // Runs the kernel once (for timing; the caller's timer synchronises).
  void run();

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
};

}  // namespace korch
