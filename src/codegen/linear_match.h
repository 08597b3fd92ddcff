// The linear part of a kernel as a library call: which primitive, its geometry, and the epilogue
// it absorbs as post-ops (the epilogue algebra oneDNN expresses; cuBLASLt/cuDNN epilogues are a
// subset). A backend accepts the post-ops its fusion rules allow: the CPU runs the description on
// oneDNN (runtime/cpu/cpu_linear_step.h), the CUDA backend on cuBLASLt/cuDNN with the epilogues
// they apply (runtime/cuda/cuda_library.h), the rest of its kernel as generated code.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"

namespace korch {

// Which part of a kernel runs as one oneDNN primitive.
struct LinearMatch {
  NodeId linear = -1;              // the Conv / MatMul node
  std::vector<NodeId> absorbed;    // kernel nodes executed inside the step (post-ops and the
                                   // Expand nodes that only feed a binary post-op)
  ValueId result = kNoValue;       // the value the step writes: the linear output or the last
                                   // absorbed node's output
  std::vector<ValueId> operands;   // values the step reads from outside the step, desc order
  // Serialisable description. Fields "operand_slots" (one per operand, -1) and "result_slot" (-1)
  // are filled in by the caller with args[] positions (cpu_kernel.h) before a device builds the step.
  nlohmann::json desc;
};

struct LinearMatchResult {
  bool ok = false;
  LinearMatch match;
  std::string reason;  // when !ok: why this kernel's linear part cannot be emitted
};

// `nodes`: the kernel's nodes (ascending), exactly one linear primitive among them;
// `outputs`: the kernel's outputs. An absorbed node's output may be a kernel output only if it is
// `result`. Constant operands (weights) may be read from g at this point (e.g. to check shapes).
// `library`: FusionRules::linear_library ("" when the backend's library runs a description); the
// chain of post-ops stops before a node whose post-ops it refuses.
LinearMatchResult match_linear(const Graph& g, const std::vector<NodeId>& nodes, const std::vector<ValueId>& outputs,
                               const std::function<std::string(const nlohmann::json&)>& library = {});

}  // namespace korch
