// What a target can fuse, as data: read by the candidate enumeration (which prunes with it), by
// the analytic cost model and by the backend's emitter. Each backend states its own rules
// (codegen/<target>/<target>_backend.cc); the orchestrator needs no backend code to apply them.
//
// Loop kernels (elementwise, broadcast, layout and reduction primitives) fuse freely on every
// target; the rules are about the primitives a generated kernel cannot contain:
//   * linear primitives run as library calls (oneDNN, cuBLASLt/cuDNN): one per kernel, joined
//     only by what the library applies as an epilogue, downstream of the linear
//     primitive (`linear_epilogue`), or by primitives computed from constants alone that the
//     library reads as an operand (`linear_constant_operands`: an Expand of a bias);
//   * opaque primitives (TopK, LSTM, ...) and operators fission keeps whole run alone.
// Example: with the CPU's and the CUDA backend's rules {Conv, Add(bias), Relu} is one kernel; so
// is {Conv, Add(bias), Sigmoid} on CUDA, where cuDNN applies the bias and generated code the
// Sigmoid after it (`linear_library`: the post-ops a library call cannot apply stay generated code).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ir/graph.h"
#include "ir/primitive.h"

namespace korch {

struct KernelCandidate;

struct FusionRules {
  std::string name = "library epilogues";  // for messages: what the rules describe
  std::vector<PrimitiveKind> linear_epilogue = {PrimitiveKind::kElementwise, PrimitiveKind::kBroadcast};
  std::vector<PrimitiveKind> linear_constant_operands = {PrimitiveKind::kElementwise, PrimitiveKind::kBroadcast,
                                                         PrimitiveKind::kLayout};
  // LSTM, GRU and RNN nodes run as a library call (codegen/rnn_match.h) where it can express
  // them, instead of in the reference interpreter.
  bool library_rnn = false;
  // Which linear-step descriptions (codegen/linear_match.h) the backend's library runs: "" or why
  // not. The linear matcher stops its post-ops before the node whose post-ops this refuses, and
  // the rest of the kernel runs as generated code. Empty: every post-op oneDNN expresses.
  std::function<std::string(const nlohmann::json& desc)> linear_library;
};

// "" when a kernel of c's nodes is allowed under `rules`, else why not. Closed under convex
// supersets: a set it rejects stays rejected when it grows, so the enumeration may stop growing it.
std::string unfusable_reason(const Graph& g, const KernelCandidate& c, const FusionRules& rules);

}  // namespace korch
