// The NVIDIA driver API as the GPU runtime calls it: one table of entry points, resolved with
// dlsym from the driver probe_gpu() loaded (cuda_driver.h), never linked. Types and signatures
// come from the toolkit's cuda.h (a compile-time dependency only: KORCH_HAVE_CUDA_HEADERS), so a
// wrong signature is a compile error, not a crash on the GPU.
//
// Only the GPU runtime's own files include this header (cuda_gpu*.cc, cuda_library*.cc), inside
// #if KORCH_HAVE_CUDA_HEADERS (src/CMakeLists.txt sets it when the toolkit's headers are found).
#pragma once

#include <cuda.h>

#include <string>

namespace korch::cuda {

#define KORCH_STR2(x) #x
#define KORCH_STR(x) KORCH_STR2(x)  // the macro-expanded name: KORCH_STR(cuMemAlloc) = "cuMemAlloc_v2"

#define KORCH_DRIVER_ENTRY_POINTS(X)                                                                \
  X(cuGetErrorName) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetAttribute)                    \
  X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuMemAlloc) X(cuMemFree) X(cuMemGetInfo)         \
  X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemsetD8Async)                \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuModuleLoadDataEx)                \
  X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel) X(cuStreamBeginCapture)               \
  X(cuStreamEndCapture) X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphExecDestroy)               \
  X(cuGraphDestroy) X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime)  \
  X(cuEventDestroy)

struct DriverApi {
#define KORCH_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  KORCH_DRIVER_ENTRY_POINTS(KORCH_DRIVER_MEMBER)
#undef KORCH_DRIVER_MEMBER
};

// The driver's entry points (resolved once). Throws korch::Error (kUnsupported) with probe_gpu()'s
// reason when there is no usable GPU, or naming the entry point the driver lacks.
const DriverApi& driver();

// Throws korch::Error naming `call` and the driver's error name when rc is not CUDA_SUCCESS.
void cu_check(CUresult rc, const char* call);
// KORCH_CU(cuMemAlloc, &p, bytes): calls the driver's entry point, throws naming it on failure.
#define KORCH_CU(fn, ...) ::korch::cuda::cu_check(::korch::cuda::driver().fn(__VA_ARGS__), #fn)

}  // namespace korch::cuda
