// Graph -> ONNX: writes a Graph back as a standard ONNX model (ir_version 8, the graph's
// default-domain opset), constants as initializers with raw data, every value's type as
// value_info. Used by `korch fold` (the model after the frontend) and, later, to write primitive
// graphs so onnxruntime can run them.
//
// Throws korch::Error when the serialized model would exceed protobuf's 2 GB limit.
#pragma once

#include <string>

#include "ir/graph.h"

namespace korch {

std::string save_onnx_bytes(const Graph& g);
void save_onnx(const Graph& g, const std::string& path);

}  // namespace korch
