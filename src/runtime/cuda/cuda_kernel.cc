#include "runtime/cuda/cuda_kernel.h"

#include "runtime/kernel_recipe.h"
#include "support/error.h"

namespace korch::cuda {

nlohmann::json CudaKernelRecipe::to_json() const {
  nlohmann::json j;
  j["launches"] = nlohmann::json::array();
  for (const CudaLaunch& l : launches) j["launches"].push_back(l.to_json());
  write_json(j);
  return j;
}

CudaKernelRecipe CudaKernelRecipe::from_json(const nlohmann::json& j) {
  try {
    CudaKernelRecipe r;
    for (const auto& l : j.at("launches")) {
      r.launches.push_back(CudaLaunch::from_json(l));
      const CudaLaunch& x = r.launches.back();
      if (x.function.empty() || x.grid < 1 || x.block < 1 || x.block > 1024 || (x.barriers && x.block % kWarpSize))
        fail("kernel recipe: bad launch of '{}' (grid {}, block {})", x.function, x.grid, x.block);
    }
    r.read_json(j);
    if (r.inputs.size() + r.outputs.size() + r.scratch_bytes.size() > static_cast<size_t>(kMaxKernelArgs))
      fail("kernel recipe: {} arguments, more than the {} a CUDA kernel takes", r.inputs.size() + r.outputs.size() + r.scratch_bytes.size(),
           kMaxKernelArgs);
    return r;
  } catch (const nlohmann::json::exception& e) {
    fail("malformed CUDA kernel recipe: {}", e.what());
  }
}

}  // namespace korch::cuda
