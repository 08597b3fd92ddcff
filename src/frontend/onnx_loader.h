// ONNX frontend: the only code that touches protobuf.
//
// load_onnx(path) reads a .onnx file (external-data initializers included), splices If/Loop
// nodes into the main graph where their condition or trip count is a constant (control_flow.h),
// converts it to a Graph, fixes input shapes, then runs shape inference with constant folding (shape_inference.h)
// and simplification (simplify.h). After it returns, every value has a static dtype and shape,
// every node is a supported op, and the graph passes verify_graph().
//
// Errors (korch::Error) name the model path, and for node problems the node, op type and opset.
#pragma once

#include <map>
#include <string>

#include "ir/graph.h"

namespace korch {

struct LoadOptions {
  // Overrides / fixes input shapes: name -> shape (e.g. from --shape x=1x3x224x224). A name that is
  // not an input but a named dimension (dim_param, e.g. --shape batch=4) fixes every dimension of
  // that name; a dimension written as -1 is dynamic like a named one.
  std::map<std::string, Shape> input_shapes;
  // Inputs bound to fixed values: they become constants (and fold) instead of graph inputs.
  // For inputs that carry shapes or sizes (Resize scales, OneHot depth) in models that pass them
  // at run time; Korch compiles for static shapes, so such values must be known when loading.
  std::map<std::string, Tensor> frozen_inputs;
  bool simplify = true;  // Identity/Dropout removal + dead code elimination
  // When > 0, read the model as if it declared this default-domain opset. For the conformance
  // suite only: onnx 1.22 ships many operators' tests solely at opsets 23-27.
  int assume_opset = 0;
};

Graph load_onnx(const std::string& path, const LoadOptions& options = {});
// Same, from serialized ModelProto bytes; `path` is used for messages and external data.
Graph load_onnx_bytes(const std::string& bytes, const std::string& path, const LoadOptions& options = {});

// Reads a serialized ONNX TensorProto (.pb files of the ONNX backend tests).
Tensor load_onnx_tensor(const std::string& path);

// Names of the model's runtime inputs (graph inputs that are not initializers), in order.
std::vector<std::string> onnx_input_names(const std::string& path);

// Parses "1x3x224x224" (also "1,3,224,224"); throws on malformed text.
Shape parse_shape_text(const std::string& text);

}  // namespace korch
