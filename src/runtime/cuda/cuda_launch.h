// One launch of a generated CUDA function: the contract between the CUDA printer
// (src/codegen/cuda), the host emulator (cuda_emulator.h) and, later, the GPU runtime.
//
// Kernel ABI. Every generated function is
//     extern "C" __global__ void __launch_bounds__(BLOCK) NAME(korch_args a)
// with `struct korch_args { void* p[KORCH_MAX_ARGS]; }` (defined once per translation unit by
// cuda_prelude()). a.p[i] is argument slot i, in the convention every backend shares
// (runtime/cpu/cpu_kernel.h): the kernel's argument inputs, its outputs, then its scratch buffers.
// Grids and blocks are one-dimensional. A loop kernel is one or more launches run in order on
// one stream (a stage boundary is a launch boundary unless stages are row-fused).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace korch::cuda {

constexpr int kMaxKernelArgs = 128;  // KORCH_MAX_ARGS: slots in korch_args
constexpr int kWarpSize = 32;

struct CudaLaunch {
  std::string function;  // the __global__ function's name in the translation unit
  int64_t grid = 1;      // blocks (gridDim.x)
  int block = 1;         // threads per block (blockDim.x); a multiple of 32 when `barriers`
  // Whether the function synchronises threads (__syncthreads, __syncwarp, warp shuffles): the
  // emulator runs such blocks as fibers, and every other block thread by thread.
  bool barriers = false;

  nlohmann::json to_json() const {
    return {{"function", function}, {"grid", grid}, {"block", block}, {"barriers", barriers}};
  }
  static CudaLaunch from_json(const nlohmann::json& j) {
    CudaLaunch l;
    l.function = j.at("function").get<std::string>();
    l.grid = j.at("grid").get<int64_t>();
    l.block = j.at("block").get<int>();
    l.barriers = j.at("barriers").get<bool>();
    return l;
  }
};

}  // namespace korch::cuda
