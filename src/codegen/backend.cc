#include "codegen/backend.h"

#include "codegen/cpu/cpu_backend.h"
#include "support/error.h"

namespace korch {

std::unique_ptr<Backend> make_backend(const std::string& target, const BackendOptions& options) {
  if (target == "cpu") return std::make_unique<cpu::CpuBackend>(options.cpu_threads);
  if (target == "cuda") fail_unsupported("the CUDA backend is not part of this build yet");
  fail_unsupported("unknown target '{}' (targets: cpu, cuda)", target);
}

}  // namespace korch
