#include "runtime/device.h"

#include <chrono>

#include "runtime/cpu/cpu_device.h"
#include "runtime/cuda/cuda_device.h"
#include "support/error.h"

namespace korch::runtime {

double Device::synchronized_seconds() {
  synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::unique_ptr<Device> open_device(const std::string& tag, const DeviceOptions& options) {
  if (tag == "cpu") {
    if (options.emulate) fail_unsupported("--emulate is for CUDA artifacts; this one runs on the CPU as it is");
    return std::make_unique<cpu::CpuDevice>(options.cpu_threads, options.flush_denormals);
  }
  if (tag == "cuda") return cuda::open_cuda_device(options);
  fail_unsupported("unknown device '{}' (this korch runs cpu and cuda artifacts)", tag);
}

}  // namespace korch::runtime
