#include "codegen/backend.h"

#include "codegen/cpu/cpu_backend.h"
#include "codegen/cuda/cuda_backend.h"
#include "support/error.h"

namespace korch {

std::unique_ptr<Backend> make_backend(const std::string& target, const BackendOptions& options) {
  if (target == "cpu") return std::make_unique<cpu::CpuBackend>(options.cpu_threads, options.flush_denormals);
  if (target == "cuda") return std::make_unique<cuda::CudaBackend>();
  fail_unsupported("unknown target '{}' (targets: cpu, cuda)", target);
}

}  // namespace korch
