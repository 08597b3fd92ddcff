// Control flow, removed from an ONNX model before it is converted (onnx_loader.cc calls
// inline_control_flow on the ModelProto). Korch compiles one static graph, so control flow is
// supported only where it disappears at load time:
//
//   If    whose condition is a compile-time constant (an initializer, a Constant, an input bound
//         with LoadOptions::frozen_inputs / --bind, or anything computed from those, shapes of
//         statically shaped inputs included) is replaced by the branch it takes.
//   Loop  with a compile-time constant trip count, an absent or constant-true condition and a
//         body that passes its condition through unchanged (no data-dependent exit) is unrolled:
//         one copy of the body per iteration, loop-carried values threaded from copy to copy, the
//         iteration number a constant per copy, scan outputs stacked along a new axis 0.
//
// A spliced graph's own names (initializers, node outputs, Loop body inputs) are renamed to names
// used nowhere in the model, so they collide neither with outer names nor with other copies; its
// references to enclosing scopes are kept (after splicing they are names of the main graph);
// its initializers move to the main graph; the node's outputs become Identity nodes of the
// branch's (simplify.h removes them). Control flow nested in a branch or body is spliced in turn.
//
// Everything else holding a subgraph (Scan, If on a runtime condition, Loop with a runtime trip
// count or a data-dependent exit) is a kUnsupported korch::Error naming the node, its op and why.
// Nodes of other operators that hold subgraphs (SequenceMap...) are left for the loader to report.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "frontend/onnx_loader.h"

namespace onnx {
class ModelProto;
class NodeProto;
}  // namespace onnx

namespace korch {

// Unrolling stops here: Loop copies (body nodes times iterations, nested subgraphs' nodes counted)
// made in one model, all loops together.
constexpr int64_t kMaxUnrolledNodes = 10000;

// Converts a model without control flow to a typed Graph with constants folded (the loader's own
// conversion and infer_shapes_and_fold). Used on the small model that computes one condition or
// trip count: the value is constant when it folds to a constant there.
using FoldModel = std::function<Graph(const onnx::ModelProto&, const LoadOptions&)>;

// Rewrites `model` in place as described above; a model without control flow is left untouched.
// Errors do not name the model path (the loader adds it).
void inline_control_flow(onnx::ModelProto& model, const LoadOptions& options, const FoldModel& fold);

// Whether n is an If, Loop or Scan: a node inline_control_flow removes or rejects.
bool is_control_flow(const onnx::NodeProto& n);

// The control-flow operators the frontend removes this way (they are not in the op registry), for
// `korch ops`.
struct InlinedOp {
  const char* op_type;
  int min_opset, max_opset;
  std::string condition;  // when it is supported
};
const std::vector<InlinedOp>& inlined_control_flow_ops();

}  // namespace korch
