// Small models built into Korch (generated in code with seeded weights, never downloaded), so the
// main job and tests have an input on a fresh machine.
//   tiny_convnet:     Conv+BatchNorm+Relu, MaxPool, a residual block, GlobalAveragePool, Gemm, Softmax
//   tiny_transformer: one encoder block: LayerNormalization, MatMul/Add, Reshape/Transpose heads,
//                     scaled Softmax attention, Erf-GELU MLP, residuals
#pragma once

#include <string>
#include <vector>

namespace korch {

std::vector<std::string> builtin_model_names();
// Serialized ONNX ModelProto; throws korch::Error for unknown names.
std::string builtin_model_bytes(const std::string& name);

}  // namespace korch
