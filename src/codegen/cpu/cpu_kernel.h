// A compiled CPU kernel: how to run it (the recipe, plain data) and a runnable object.
//
// Argument convention shared by generated code, the linear step, the profiler and the runtime:
// a kernel receives one array `void* const* args` holding, in order, its argument inputs
// (kernel_arg_inputs(), kernel_signature.h), its outputs (candidate outputs order), then its
// scratch buffers (recipe.scratch_bytes order). Generated loop code is one C function per kernel:
//     extern "C" void <symbol>(void* const* args);
// A kernel with a linear primitive first runs its linear step (oneDNN, cpu_linear.h), which reads
// and writes slots of the same array, then the loop function (if any) for the rest of the kernel.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/tensor.h"

namespace korch::cpu {

// Bumped whenever generated code or the linear step changes what or how fast it computes: part of
// every tuning-database key and compiled-kernel cache key.
constexpr int kCpuGeneratorVersion = 2;

struct CpuKernelRecipe {
  std::string symbol;                   // loop function in the kernel library; "" if none
  std::optional<nlohmann::json> linear; // the linear step's description (cpu_linear.h), if any
  std::vector<TensorType> inputs;       // argument inputs
  std::vector<TensorType> outputs;
  std::vector<int64_t> scratch_bytes;   // scratch buffers, after the outputs in `args`
  // An opaque primitive (TopK, LSTM, GridSample, ...) or an operator fission keeps whole has no
  // generated code: it runs in the reference interpreter. This is its one-node graph in the IR
  // text form (kernel_subgraph: graph inputs = argument inputs, outputs = kernel outputs), so a
  // model with such an op still compiles and runs, at reference speed for that op.
  std::string reference_graph;

  nlohmann::json to_json() const;
  static CpuKernelRecipe from_json(const nlohmann::json& j);  // throws korch::Error
};

class KernelLibrary;
class LinearStep;
struct ReferenceStep;

// A runnable kernel: resolves its symbol in `lib`, builds its linear step, owns its scratch.
class CpuKernel {
 public:
  // Throws korch::Error when the symbol is missing or the linear step cannot be built.
  CpuKernel(CpuKernelRecipe recipe, std::shared_ptr<KernelLibrary> lib);
  ~CpuKernel();
  CpuKernel(const CpuKernel&) = delete;
  CpuKernel& operator=(const CpuKernel&) = delete;

  // inputs: recipe.inputs.size() pointers; outputs: recipe.outputs.size() pointers.
  void run(const void* const* inputs, void* const* outputs);
  const CpuKernelRecipe& recipe() const { return recipe_; }
  // The linear step when the kernel is nothing else (no loop function, no reference op); else null.
  LinearStep* only_linear_step() const { return fn_ || reference_ ? nullptr : linear_.get(); }

 private:
  using LoopFn = void (*)(void* const*);
  CpuKernelRecipe recipe_;
  std::shared_ptr<KernelLibrary> lib_;
  LoopFn fn_ = nullptr;
  std::unique_ptr<LinearStep> linear_;
  std::unique_ptr<ReferenceStep> reference_;
  struct FreeDeleter { void operator()(void* p) const; };
  std::vector<std::unique_ptr<void, FreeDeleter>> scratch_;
  std::vector<void*> args_;
};

}  // namespace korch::cpu
