// A CPU kernel: how to run it (the recipe, plain data) and a runnable object.
//
// Argument convention shared by generated code, the linear step, the profiler and the runtime:
// a kernel receives one array `void* const* args` holding, in order, its argument inputs
// (kernel_arg_inputs(), codegen/kernel_signature.h), its outputs (candidate outputs order), then
// its scratch buffers (recipe.scratch_bytes order). Generated loop code is one C function per
// kernel:
//     extern "C" void <symbol>(void* const* args);
// A kernel with a linear primitive first runs its linear step (oneDNN, cpu_linear_step.h), which
// reads and writes slots of the same array, then the loop function (if any) for the rest of the
// kernel.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/tensor.h"
#include "runtime/device.h"
#include "runtime/kernel_recipe.h"

namespace korch {
class SharedLibrary;
}

namespace korch::cpu {

// JSON: runtime/kernel_recipe.h's fields plus "symbol": the loop function in the kernel library
// ("" if none). `linear` is a oneDNN step (cpu_linear_step.h).
struct CpuKernelRecipe : runtime::KernelRecipeBase {
  std::string symbol;

  nlohmann::json to_json() const;
  static CpuKernelRecipe from_json(const nlohmann::json& j);  // throws korch::Error
};

class LinearStep;

// A runnable kernel: resolves its symbol in `lib`, builds its linear step, owns its scratch.
class CpuKernel : public runtime::DeviceKernel {
 public:
  // Throws korch::Error when the symbol is missing or the linear step cannot be built.
  CpuKernel(CpuKernelRecipe recipe, std::shared_ptr<SharedLibrary> lib);
  ~CpuKernel() override;
  CpuKernel(const CpuKernel&) = delete;
  CpuKernel& operator=(const CpuKernel&) = delete;

  // inputs: recipe.inputs.size() pointers; outputs: recipe.outputs.size() pointers.
  void run(const void* const* inputs, void* const* outputs) override;
  const CpuKernelRecipe& recipe() const { return recipe_; }
  // The linear step when the kernel is nothing else (no loop function, no reference op); else null.
  LinearStep* only_linear_step() const { return fn_ || reference_ || in_place_ ? nullptr : linear_.get(); }
  runtime::ReorderStats reorders_per_run() const override;
  std::vector<std::pair<const void*, int64_t>> constant_copies() const override;

 private:
  using LoopFn = void (*)(void* const*);
  CpuKernelRecipe recipe_;
  std::shared_ptr<SharedLibrary> lib_;
  LoopFn fn_ = nullptr;
  std::unique_ptr<LinearStep> linear_;
  std::unique_ptr<runtime::ReferenceStep> reference_;
  std::unique_ptr<runtime::InPlaceStep> in_place_;
  struct FreeDeleter { void operator()(void* p) const; };
  std::vector<std::unique_ptr<void, FreeDeleter>> scratch_;
  std::vector<void*> args_;
};

}  // namespace korch::cpu
