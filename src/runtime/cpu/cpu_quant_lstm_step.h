// onnxruntime's com.microsoft DynamicQuantizeLSTM as a CPU step (codegen/rnn_match.h describes
// the JSON). It runs the reference op's own arithmetic (ir/ops/quant_lstm.h: the dynamic
// quantization of X and of every Ht-1, the scaling, the LSTM cell) and computes only the exact
// integer products its own way: W and R widened once into int16 with rows in pairs, so that one
// multiply-add instruction (vpmaddwd) takes two k for 8 columns, where the reference widens them
// every run and multiplies one k at a time. Same integer sums, same bits out. The two directions
// run side by side when there are two threads. Needs AVX2 (else it refuses and the node runs in
// the interpreter).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>

#include "runtime/cpu/cpu_linear_step.h"

namespace korch::cpu {

std::unique_ptr<LinearStep> create_quant_lstm_step(const nlohmann::json& desc);  // throws korch::Error

}  // namespace korch::cpu
