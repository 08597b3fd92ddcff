// Linear primitives (Conv, MatMul) on the CPU through oneDNN 2.6, with epilogues as post-ops.
// OWNER: linear helper. See its brief for the full contract.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"

namespace korch::cpu {

// Which part of a kernel runs as one oneDNN primitive.
struct LinearMatch {
  NodeId linear = -1;              // the Conv / MatMul node
  std::vector<NodeId> absorbed;    // kernel nodes executed inside the step (post-ops and the
                                   // Expand nodes that only feed a binary post-op)
  ValueId result = kNoValue;       // the value the step writes: the linear output or the last
                                   // absorbed node's output
  std::vector<ValueId> operands;   // values the step reads from outside the step, desc order
  // Serialisable description. Fields "operand_slots" (one per operand, -1) and "result_slot" (-1)
  // are filled in by the caller with args[] positions (cpu_kernel.h) before LinearStep::create.
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
LinearMatchResult match_linear(const Graph& g, const std::vector<NodeId>& nodes,
                               const std::vector<ValueId>& outputs);

// The oneDNN primitive (created once; weights reordered on first run and kept, since weight
// arguments are constants whose pointer and contents never change).
class LinearStep {
 public:
  static std::unique_ptr<LinearStep> create(const nlohmann::json& desc);  // throws korch::Error
  virtual ~LinearStep() = default;
  virtual void run(void* const* args) = 0;
  // oneDNN's implementation name and the chosen layouts ("brg:avx512_core src 1x64x56x56
  // blocked 1:16 ..."), for logs, tests and the profiler's notes.
  virtual std::string implementation() const = 0;
};

}  // namespace korch::cpu
