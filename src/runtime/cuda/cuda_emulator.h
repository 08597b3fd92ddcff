// Runs CUDA translation units on the host, so the CUDA printer's output is checked on machines
// without a GPU (CI runs whole models through it).
//
// A translation unit (cuda_prelude() + kernels) is compiled by the system C++ compiler with
// emulation_header() in front, which maps the CUDA dialect the printer uses onto host C++:
// __global__ functions become plain extern "C" functions, threadIdx / blockIdx / blockDim /
// gridDim read the running thread's context, __shared__ is per block, __syncthreads /
// __syncwarp / the warp shuffles call back into the scheduler here.
//
// Scheduling. Blocks are spread over the OpenMP threads. A launch without barriers runs each
// block thread by thread as plain calls. A launch with barriers runs the threads of a block as
// fibers (Boost.Context fcontext: a switch costs ~4 ns, where ucontext's swapcontext makes a
// signal-mask syscall and costs ~160 ns): each runs until it reaches a barrier, and a barrier
// opens when every thread of its scope (the warp, or the whole block) waits at it. When the
// threads of a block can make no progress otherwise (some wait at __syncthreads while others
// have exited or wait at a warp barrier) the launch throws instead of hanging. Fiber stacks are
// small (64 KiB with a guard page), pooled per OpenMP thread and reused.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_launch.h"

namespace korch {
class SharedLibrary;
}

namespace korch::cuda {

// Prepended to a CUDA translation unit so the host compiler accepts it; defines
// KORCH_CUDA_EMULATION (the prelude then takes the integer types from <stdint.h>).
const std::string& emulation_header();

class EmulatedModule {
 public:
  // Compiles the CUDA translation unit for the host (g++ -O2, C++17, via compile_libraries
  // (support/host_compiler.h) with the emulation header prepended, cached by content hash under
  // $KORCH_CACHE_DIR/cuda_emu or ~/.cache/korch/cuda_emu) and loads it. Throws korch::Error naming the source path and the
  // compiler's message.
  static std::shared_ptr<EmulatedModule> compile(const std::string& cuda_source);
  // Several translation units at once (one compiler per core).
  static std::vector<std::shared_ptr<EmulatedModule>> compile_all(const std::vector<std::string>& cuda_sources);

  bool has(const std::string& function) const;
  const std::string& source_path() const { return source_path_; }

  // Runs one launch to completion over host pointers args[0..num_args). Throws korch::Error for
  // an unknown function, num_args > kMaxKernelArgs, a block size outside [1, 1024] (or not a
  // multiple of 32 with barriers), a barrier in a launch that says it has none, a barrier
  // deadlock (divergent __syncthreads) or a misaligned float4 access.
  void launch(const CudaLaunch& l, void* const* args, int num_args) const;

 private:
  EmulatedModule() = default;
  static std::shared_ptr<EmulatedModule> load(std::shared_ptr<SharedLibrary> lib, const std::string& source_path);
  void* function(const std::string& name) const;

  std::shared_ptr<SharedLibrary> lib_;
  std::string source_path_;
  void* call_ = nullptr;   // korch_emu_call
  void* plain_ = nullptr;  // korch_emu_run_plain
};

}  // namespace korch::cuda
