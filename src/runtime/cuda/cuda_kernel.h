// A CUDA kernel's recipe: what the GPU runtime (and the host emulator) runs for one planned
// kernel. Mirror of runtime/cpu/cpu_kernel.h.
//
// JSON: runtime/kernel_recipe.h's fields plus
//   launches   the generated functions in order (cuda_launch.h), all over the same argument slots
// `linear` is a library call: cuBLASLt/cuDNN on a GPU (the CUDA runtime, not built yet), oneDNN
// on the host emulator.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/cuda/cuda_launch.h"
#include "runtime/kernel_recipe.h"

namespace korch::cuda {

// Bumped whenever generated CUDA changes what or how fast it computes (tuning and cache keys).
constexpr int kCudaGeneratorVersion = 6;

struct CudaKernelRecipe : runtime::KernelRecipeBase {
  std::vector<CudaLaunch> launches;

  nlohmann::json to_json() const;
  // Whether `recipe` runs generated functions (else a library call or a reference op alone): what
  // every CUDA device's uses_module() answers.
  static bool has_launches(const nlohmann::json& recipe) {
    return recipe.is_object() && recipe.contains("launches") && !recipe.at("launches").empty();
  }
  static CudaKernelRecipe from_json(const nlohmann::json& j);  // throws korch::Error
};

}  // namespace korch::cuda
