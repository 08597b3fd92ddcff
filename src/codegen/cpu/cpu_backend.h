// The CPU backend's entry point: one candidate kernel -> generated code + a recipe to run it.
//
// A kernel with a linear primitive becomes a oneDNN step (cpu_linear.h: the linear op and the
// epilogue it absorbs as post-ops) followed, when primitives remain, by a loop function over the
// step's result; a kernel without one is a loop function (loop_kernel.h, cpu_loop_emitter.h).
// Argument slots follow cpu_kernel.h: argument inputs, outputs, then scratch (the linear result
// when it is not a kernel output comes first, then the loop kernel's temporaries).
// A candidate the backend cannot emit comes back with ok = false and the reason; the measured
// cost provider turns that into an infinite cost, so the orchestrator never selects it.
#pragma once

#include <string>
#include <vector>

#include "codegen/cpu/cpu_kernel.h"
#include "ir/graph.h"
#include "orchestrate/kernel_candidate.h"

namespace korch::cpu {

struct EmittedKernel {
  bool ok = false;
  std::string reason;           // when !ok
  std::string signature;        // kernel_signature(): canonical text
  std::string hash;             // content_hash(signature)
  std::string function_source;  // the loop function ("" when the kernel is a linear step only)
  CpuKernelRecipe recipe;
  std::vector<ValueId> arg_inputs;  // graph values bound to recipe.inputs
  std::vector<ValueId> outputs;     // graph values bound to recipe.outputs
};

EmittedKernel emit_cpu_kernel(const Graph& g, const KernelCandidate& c);

// One translation unit: the prelude once, then each distinct kernel function.
std::string cpu_translation_unit(const std::vector<const EmittedKernel*>& kernels);

}  // namespace korch::cpu
