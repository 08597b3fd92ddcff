#if KORCH_HAVE_CUDA_HEADERS

#include "runtime/cuda/cuda_api.h"

#include <dlfcn.h>

#include "runtime/cuda/cuda_driver.h"
#include "support/error.h"

namespace korch::cuda {

namespace {

DriverApi resolve() {
  const GpuInfo& gpu = probe_gpu();
  if (!gpu.available) fail_unsupported("the CUDA runtime needs an NVIDIA GPU, but {}", gpu.why);
  void* h = driver_library();
  DriverApi api;
  // cuda.h maps each name to its current version (cuMemAlloc -> cuMemAlloc_v2): the symbol looked
  // up is the one the header's signature belongs to.
#define KORCH_DRIVER_RESOLVE(name)                                                              \
  api.name = reinterpret_cast<decltype(&::name)>(dlsym(h, KORCH_STR(name)));                    \
  if (!api.name) fail_unsupported("the NVIDIA driver lacks {} (needed by the CUDA runtime): driver too old", KORCH_STR(name));
  KORCH_DRIVER_ENTRY_POINTS(KORCH_DRIVER_RESOLVE)
#undef KORCH_DRIVER_RESOLVE
  return api;
}

}  // namespace

const DriverApi& driver() {
  static const DriverApi api = resolve();
  return api;
}

void cu_check(CUresult rc, const char* call) {
  if (rc == CUDA_SUCCESS) return;
  const char* name = nullptr;
  if (driver().cuGetErrorName(rc, &name) != CUDA_SUCCESS || !name) name = "unknown error";
  fail("CUDA driver call failed: {} returned {} ({})", call, static_cast<int>(rc), name);
}

}  // namespace korch::cuda

#endif  // KORCH_HAVE_CUDA_HEADERS
