// How one candidate kernel splits into the parts every backend emits (target-independent):
//   * an opaque primitive or an operator kept whole: no generated code, the reference interpreter
//     runs its one-node graph (`reference_graph`; nothing else is set);
//   * a linear primitive: a library call (`linear`: the match_linear description with its
//     operand_slots / result_slot filled, codegen/linear_match.h), absorbing the epilogue the
//     backend's fusion rules allow;
//   * a Concat or a view whose inputs the memory plan writes in place (runtime/memory_plan.h):
//     nothing to run (`in_place`: each argument input's byte offset in the output);
//   * everything else (what the library call does not absorb): one loop kernel (`loop`,
//     codegen/loop_kernel.h) that the backend prints for its target, with its argument slots.
// Argument slots (runtime/device.h): argument inputs, outputs, then scratch: the linear result
// first when it is not a kernel output, then the loop kernel's temporaries.
// Example: {Conv, Add(bias), Relu, Mul} on the CPU: linear = Conv + add + relu post-ops writing
// scratch 0, loop = Mul reading scratch 0 and writing output 0.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/backend.h"
#include "codegen/loop_kernel.h"
#include "orchestrate/fusion_rules.h"
#include "orchestrate/kernel_candidate.h"
#include "runtime/kernel_recipe.h"

namespace korch {

struct KernelParts {
  std::string reason;  // non-empty: the candidate cannot be emitted (names the node and op)
  std::string reference_graph;
  std::optional<nlohmann::json> linear;
  std::shared_ptr<LoopKernel> loop;    // null when there is nothing left for a loop kernel
  std::vector<int> loop_input_slots, loop_output_slots;
  int loop_first_scratch = 0;          // loop scratch buffer k is at slot loop_first_scratch + k
  std::vector<int64_t> scratch_bytes;  // every scratch buffer, in slot order
  std::vector<int64_t> in_place;       // written in place: its argument inputs' byte offsets
};

// `arg_inputs`: kernel_arg_inputs(g, c). Never throws for a candidate it cannot split.
KernelParts split_kernel(const Graph& g, const KernelCandidate& c, const FusionRules& rules,
                         const std::vector<ValueId>& arg_inputs);

// True when split_kernel makes c one library call and nothing else: one linear primitive with
// every other node absorbed into its step (no loop kernel, no interpreter). Cheap where it is
// false: a kernel with loop work is refused before any loop kernel is built.
bool runs_library_call_alone(const Graph& g, const KernelCandidate& c, const FusionRules& rules);

// The device-neutral half of Backend::emit: fills k's signature, hash and argument binding and
// `recipe`'s common fields (types, scratch, linear call, reference op) from the split; the
// backend then prints parts.loop, if any. When the candidate cannot be split, k.reason says why.
KernelParts start_emit(const Graph& g, const KernelCandidate& c, const FusionRules& rules, EmittedKernel& k,
                       runtime::KernelRecipeBase& recipe);

}  // namespace korch
