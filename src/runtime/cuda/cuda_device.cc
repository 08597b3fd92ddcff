#include "runtime/cuda/cuda_device.h"

#include "runtime/cuda/cuda_driver.h"
#include "support/error.h"

namespace korch::cuda {

std::unique_ptr<runtime::Device> open_cuda_device(const runtime::DeviceOptions& options) {
  if (options.emulate) return make_emulator_device();
  const GpuInfo& gpu = probe_gpu();
  if (!gpu.available)
    fail_unsupported("this is a CUDA artifact and needs an NVIDIA GPU, but {} (run it on the CPU's CUDA emulator "
                     "with --emulate)",
                     gpu.why);
  return make_gpu_device();
}

}  // namespace korch::cuda
